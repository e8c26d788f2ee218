"""``allocate`` action: gang minimum of every job (job order), then the remaining pods.

Mirrors Volcano's allocate: jobs that are invalid, in an unknown queue or
carry a network topology while the HyperNode tree is not ready are skipped with a reason;
jobs with hard topology or sub-groups go through the topology path (gradients of HyperNodes,
two-level gang), the rest through the flat per-pod path. A unit is tried as one Statement and
committed only if the job (or the SubJob, for increments) becomes ready.

Gang's job order puts not-ready jobs first, so the pods beyond a job's minimum are placed
after every other job's minimum, as Volcano's re-queued jobs are.

Queues (when a plugin registers queue functions: proportion, capacity): jobs are taken queue
by queue, one job at a time from the queue first in queue order (re-read after every job, as
shares move with each allocation); a queue found overused is left for the rest of the session;
every task must be ``allocatable`` in its queue (checked task by task, each counted before the
next, as Volcano's allocation events do). With ``enqueue`` configured, jobs still Pending (not
admitted to Inqueue) are not placed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from ..framework.session import Session
from ..model.explanation import Explanation
from ..model.jobs import JobInfo, TaskInfo
from ..placement.domain_search import Placer, record
from ..placement.exclusive_fences import Fences
from ..placement.gang_units import (
    Group,
    extension_units,
    gang_groups,
    gang_groups_around,
    job_skip_reason,
    not_enqueued_explanation,
    within_queue,
)
from ..placement.head_of_queue import Holder, settings

QUEUE_OVERUSED = "QueueOverused"


def _fail_tasks(ssn: Session, groups: list[Group], expl: Explanation | None, fallback: str) -> None:
    msg = expl.message() if expl is not None else fallback
    for g in groups:
        for t in g.tasks:
            ssn.task_reasons.setdefault(t.key, msg)


def in_queue_order(ssn: Session, jobs: list[JobInfo], skipped: list[JobInfo]) -> Iterator[JobInfo]:
    """``jobs`` (already in job order) queue by queue: the first queue in queue order gives its
    next job; an overused queue gives nothing more (its jobs go to ``skipped``). Without queue
    plugins, simply ``jobs``."""
    if not ssn.queued():
        yield from jobs
        return
    by_queue: dict[str, deque[JobInfo]] = {}
    for job in jobs:
        by_queue.setdefault(job.queue, deque()).append(job)
    qkey = ssn.queue_sort_key()
    while by_queue:
        q = min(by_queue, key=qkey)
        if ssn.overused(q):
            skipped.extend(by_queue.pop(q))
            continue
        todo = by_queue[q]
        job = todo.popleft()
        if not todo:
            del by_queue[q]
        yield job


def _overused_explanation(ssn: Session, job: JobInfo) -> Explanation:
    return Explanation(
        summary=f"queue {job.queue} is overused: it holds its deserved share, nothing more is placed this cycle",
        reason=QUEUE_OVERUSED,
    )


def allocate(ssn: Session) -> None:
    """Place every job's gang minimum in job order, then the remaining pods of ready jobs."""
    placer = Placer(ssn)
    jobs, held = _considered(ssn)
    holder = _hold_for_head(ssn, jobs)
    fences = Fences(ssn)  # exclusive domains (nothing to do without an exclusive job)
    _place_gang_minimums(ssn, placer, jobs, holder, fences)
    _place_the_rest(ssn, placer, jobs, fences)
    if held:
        held = _second_chance(ssn, placer, held, fences)
    fences.finish()
    holder.finish()
    for job in held:
        _explain_held(ssn, placer, job)


def _considered(ssn: Session) -> tuple[list[JobInfo], list[JobInfo]]:
    """The jobs allocate places, in job order, and those enqueue has not admitted (Volcano's
    allocate leaves Pending PodGroups to enqueue); every other job is told why it is skipped."""
    gated = "enqueue" in ssn.config.actions
    jobs: list[JobInfo] = []
    held: list[JobInfo] = []
    for job in ssn.snap.jobs.values():
        if job.tasks and ssn.job_ready_count(job) >= len(job.tasks):
            continue  # nothing pending (a PodGroup without pods is still checked for validity)
        skip = job_skip_reason(ssn, job)
        if skip is not None:
            ssn.explanations[job.key] = skip
            continue
        if gated and ssn.job_phase(job) == "Pending":
            ssn.explanations[job.key] = not_enqueued_explanation(ssn, job)
            held.append(job)
            continue
        jobs.append(job)
    jobs.sort(key=ssn.job_sort_key())
    return jobs, held


def _place_gang_minimums(
    ssn: Session, placer: Placer, jobs: list[JobInfo], holder: Holder, fences: Fences
) -> None:
    """Each job's gang minimum, queue by queue, committed only when the job becomes ready."""
    skipped: list[JobInfo] = []
    for job in in_queue_order(ssn, jobs, skipped):
        if ssn.job_ready(job):
            continue
        groups = gang_groups(ssn, job)
        if isinstance(groups, str):
            ssn.explanations[job.key] = Explanation(summary=groups, reason="NotEnoughPods")
            continue
        if not _place_gang(ssn, placer, job, groups, fences, holder):
            # A pod of the minimum no node takes: try the minimum with the job's other pods.
            alt = gang_groups_around(ssn, job, groups)
            if alt is not None:
                _place_gang(ssn, placer, job, alt, fences, holder)
    for job in skipped:
        if not ssn.job_ready(job):
            ssn.explanations[job.key] = _overused_explanation(ssn, job)


def _place_gang(
    ssn: Session, placer: Placer, job: JobInfo, groups: list[Group], fences: Fences, holder: Holder | None
) -> bool:
    """Place a job's gang minimum within what its queue may take, committed only when the job
    becomes ready; else the job and its pods are told why (with the holds that kept it out,
    when ``holder`` holds domains). True when placed."""
    _, why = within_queue(ssn, job, groups)
    holds = holder is not None and holder.before(job)  # a gang holding a domain is tried without its own hold
    fences.before(job)
    tasks = [t for g in groups for t in g.tasks]
    if holder is not None and not holds:
        # EASY backfill: held room whose gang starts after this job's time limit is open to it.
        with holder.backfill(job, tasks) as opened:
            res, stmt = placer.place(job, groups)
    else:
        opened, (res, stmt) = [], placer.place(job, groups)
    placed = why is None and res.ok and ssn.job_ready(job)
    if holds:
        assert holder is not None
        holder.after(job, placed, tasks)
    fences.after(job, placed)
    if placed:
        stmt.commit()
        record(ssn, job, res)
        if opened:
            assert holder is not None
            holder.backfilled(job, opened, tasks)
        ssn.explanations.pop(job.key, None)
        return True
    stmt.discard()
    if why is not None and res.ok:
        # The cluster has the room but the queue may not take it (gang groups are atomic: the
        # whole minimum or nothing). When the room is missing too, that is the reason given.
        expl = Explanation(summary=why, reason=QUEUE_OVERUSED)
    else:
        expl = res.explanation or Explanation(summary="gang minimum not reached")
        if holder is not None:
            for line in _held_lines(ssn, placer, job, groups, holder, fences):
                expl.add_detail(line)
    ssn.explanations[job.key] = expl
    _fail_tasks(ssn, groups, expl, expl.summary)
    return False


def _place_the_rest(ssn: Session, placer: Placer, jobs: list[JobInfo], fences: Fences) -> None:
    """The pods beyond each ready job's minimum (after every job's minimum, as Volcano's
    re-queued jobs are): each incomplete SubJob whole, then as many pods as fit."""
    skipped: list[JobInfo] = []
    for job in in_queue_order(ssn, sorted(jobs, key=ssn.job_sort_key()), skipped):
        if ssn.job_ready_count(job) >= len(job.tasks) or not ssn.job_ready(job):
            continue
        for unit in extension_units(ssn, job):
            _place_extension(ssn, placer, job, unit, fences)
    for job in skipped:
        if ssn.job_ready_count(job) < len(job.tasks):
            msg = _overused_explanation(ssn, job).summary
            for t in job.pending:
                if t.key not in ssn.placed:
                    ssn.task_reasons.setdefault(t.key, msg)


def _place_extension(ssn: Session, placer: Placer, job: JobInfo, unit: list[Group], fences: Fences) -> None:
    """One unit of pods beyond the minimum, within what the job's queue may take."""
    while True:
        full = unit
        unit, why = within_queue(ssn, job, unit)
        if why is not None:
            kept = {t.key for g in unit for t in g.tasks}
            for g in full:
                for t in g.tasks:
                    if t.key not in kept:
                        ssn.task_reasons.setdefault(t.key, why)
        if not unit:
            return
        fences.before(job)
        res, stmt = placer.place(job, unit)
        fences.after(job, res.ok)
        if not res.ok:
            stmt.discard()
            _fail_tasks(ssn, unit, res.explanation, "no room within the job's allowed HyperNode")
            return
        stmt.commit()
        record(ssn, job, res)
        if all(g.atomic for g in unit):
            return
        # "As many as fit" groups: like Volcano's re-queued job, try the rest again (each
        # attempt starts from the lowest tier around the allocated HyperNode).
        unit = [Group(g.subjob, [t for t in g.tasks if t.key not in ssn.placed], g.atomic) for g in unit]
        unit = [g for g in unit if g.tasks]
        if not unit:
            return


def _hold_for_head(ssn: Session, jobs: list[JobInfo]) -> Holder:
    """Reservations for the first pending gangs (queue order, then job order) that waited past
    their threshold: their domains are held for the rest of the action (reservation.py)."""
    holder = Holder(ssn, ssn.previous_reservations)
    if ssn.now is None:
        return holder
    qkey = ssn.queue_sort_key() if ssn.queued() else None
    # Queue order first (a stable sort keeps job order within a queue).
    ordered = sorted(jobs, key=lambda j: qkey(j.queue)) if qkey is not None else list(jobs)
    pending = [j for j in ordered if not ssn.job_ready(j)]
    gangs: dict[str, list[TaskInfo]] = {}
    for job in pending[: max(settings(ssn.config).most, 0)]:
        groups = gang_groups(ssn, job)
        if not isinstance(groups, str):
            gangs[job.key] = [t for g in groups for t in g.tasks]
    holder.start(pending, gangs)
    return holder


def _held_lines(
    ssn: Session, placer: Placer, job: JobInfo, groups: list[Group], holder: Holder, fences: Fences
) -> list[str]:
    """The domains held for the head of the queue or exclusively, named to a job that could not
    be placed only when they are what kept it out: a dry run with every hold and fence lifted
    places it. (An exclusive job is always told what it needs.) The dry run costs one more
    placement per failed job, and only while something is held."""
    fenced, held = fences.why(job), holder.why(job)
    lines = [line for line in (fenced, held) if line]
    if not lines or job.key in fences.exclusive:
        return lines
    if fenced is None and not holder.may_be_kept_out(job, [t for g in groups for t in g.tasks]):
        return []  # no domain could take it with nothing held: the holds are not the reason
    with holder.lifted(), fences.lifted():
        res, stmt = placer.place(job, groups)
        stmt.discard()
    return lines if res.ok else []


def _second_chance(ssn: Session, placer: Placer, held: list[JobInfo], fences: Fences) -> list[JobInfo]:
    """Jobs enqueue admitted this cycle that allocate could not place (a hard-topology gang no
    domain can take now) give their reservations back, and the jobs enqueue held are asked
    again and, when admitted now, placed. Volcano keeps such reservations, so one unplaceable
    admitted gang holds its whole queue back while smaller jobs that would fit wait. Returns
    the jobs still held."""
    stuck = [ssn.snap.jobs[k] for k in sorted(ssn.enqueued) if not ssn.job_ready(ssn.snap.jobs[k])]
    if not stuck:
        return held
    for job in stuck:
        ssn.job_released(job)
    still: list[JobInfo] = []
    for job in sorted(held, key=ssn.job_sort_key()):
        ssn.enqueue_reasons.pop(job.key, None)
        if not ssn.job_enqueueable(job):
            still.append(job)
            why = ssn.enqueue_reasons.get(job.key)
            if why:
                ssn.explanations[job.key] = not_enqueued_explanation(ssn, job)
            continue
        ssn.job_enqueued(job)
        if ssn.queued() and ssn.overused(job.queue):
            ssn.job_released(job)
            ssn.explanations[job.key] = _overused_explanation(ssn, job)
            continue
        groups = gang_groups(ssn, job)
        if isinstance(groups, str):
            ssn.job_released(job)
            ssn.explanations[job.key] = Explanation(summary=groups, reason="NotEnoughPods")
            continue
        if not _place_gang(ssn, placer, job, groups, fences, None):
            # Admitted again but still not placeable: give the admission back at once, or it
            # would hold back the jobs asked after it (two large gangs no domain can take would
            # take turns keeping every smaller job out).
            ssn.job_released(job)
    return still


def _explain_held(ssn: Session, placer: Placer, job: JobInfo) -> None:
    """A job enqueue did not admit is not placed; a dry run says what placing it would meet
    now (the tier search), so the user sees both the admission reason and the room."""
    expl = ssn.explanations[job.key]
    groups = gang_groups(ssn, job)
    if isinstance(groups, str):
        expl.add_detail(groups)
        return
    res, stmt = placer.place(job, groups)
    stmt.discard()
    if res.ok:
        expl.add_detail("the cluster has room for its gang minimum now: admission alone holds it")
        return
    found = res.explanation
    if found is None:
        return
    expl.tiers = list(found.tiers)
    expl.predicates = found.predicates
    expl.add_detail(found.summary)
    for d in found.details:
        expl.add_detail(d)
