"""Gang units: what an action considers of each job. Whether a job is considered at all this
cycle, the smallest set of pending pods that makes it ready (its gang minimum, two-level, as
:class:`Group` s of one SubJob each), the pods beyond that minimum, and whether its queue stays
within its limit. allocate, backfill, preempt and reclaim all ask here."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config.scheduler_conf import SchedulerConfig
from ..framework.extension_points import ALLOCATABLE
from ..framework.session import Session
from ..model.explanation import Explanation
from ..model.jobs import JobInfo, SubJobInfo, TaskInfo, pods_per_shape
from ..model.memo import MemoKey

NOT_ENQUEUED = "NotEnqueued"


@dataclass
class Group:
    """Tasks of one SubJob to place together (atomic) or as many as fit (not atomic)."""

    subjob: SubJobInfo
    tasks: list[TaskInfo]
    atomic: bool = True
    _demand: dict[int, int] | None = field(default=None, repr=False, compare=False)

    def demand(self) -> dict[int, int]:
        """Pods per shape (computed once; groups are not mutated after creation)."""
        if self._demand is None:
            self._demand = pods_per_shape(self.tasks)
        return self._demand


def job_skip_reason(ssn: Session, job: JobInfo) -> Explanation | None:
    """Why a job is not considered at all this cycle (None = consider it)."""
    if job.problems:
        return Explanation(summary="; ".join(job.problems), reason="InvalidNetworkTopology")
    queue = ssn.snap.queues.get(job.queue)
    if queue is None:
        return Explanation(summary=f"queue {job.queue!r} not found", reason="QueueNotFound")
    if queue.status is not None and queue.status.state in ("Closed", "Closing"):
        return Explanation(summary=f"queue {job.queue!r} is {queue.status.state}", reason="QueueClosed")
    invalid = ssn.job_valid(job)
    if invalid:
        return Explanation(summary=invalid, reason="NotEnoughPods")
    tree = ssn.snap.tree
    if job.with_topology and not tree.ready:
        return Explanation(
            summary="HyperNode tree not ready: " + "; ".join(tree.problems[:5]),
            reason="HyperNodeTreeNotReady",
        )
    return None


def not_enqueued_explanation(ssn: Session, job: JobInfo) -> Explanation:
    """Why a Pending job is not considered by allocate."""
    why = ssn.enqueue_reasons.get(job.key)
    if why is None:
        return Explanation(
            summary="PodGroup is Pending: not admitted by enqueue this cycle", reason=NOT_ENQUEUED
        )
    return Explanation(summary=f"PodGroup is Pending, not admitted to Inqueue: {why}", reason=NOT_ENQUEUED)


# The gang minimum of a job none of whose pods is ready, with the configuration it was chosen
# under: it then depends on the job and the configured orders alone (every readiness the choice
# reads is zero), so a gang waiting cycle after cycle is not chosen again each time.
GANG_GROUPS: MemoKey[tuple[SchedulerConfig, list[Group] | str]] = MemoKey("gang groups, nothing ready")


def gang_groups(ssn: Session, job: JobInfo) -> list[Group] | str:
    """The smallest set of pending pods that makes the job ready (two-level gang)."""
    if ssn.job_ready_count(job):
        return _gang_groups(ssn, job)
    cached = job.memo.get(GANG_GROUPS)
    if cached is None or cached[0] is not ssn.config:
        cached = job.memo.put(GANG_GROUPS, (ssn.config, _gang_groups(ssn, job)))
    got = cached[1]
    return got if isinstance(got, str) else list(got)  # groups are never changed; the list may be


def gang_groups_around(ssn: Session, job: JobInfo, groups: list[Group]) -> list[Group] | None:
    """Volcano's allocate tries a job's pods in task order and passes over one that no node
    takes: when ``groups`` (the job's minimum) hold pods whose shape fits no node now, the
    minimum chosen with those pods last, or None when that is the same minimum."""
    shapes = ssn.snap.shapes
    nowhere = frozenset(
        t.shape for g in groups for t in g.tasks if not ssn.state.node_counts(shapes[t.shape]).any()
    )
    if not nowhere:
        return None
    alt = _gang_groups(ssn, job, last=nowhere)
    if isinstance(alt, str):
        return None
    if {t.key for g in alt for t in g.tasks} == {t.key for g in groups for t in g.tasks}:
        return None
    return alt


def _gang_groups(ssn: Session, job: JobInfo, last: frozenset[int] = frozenset()) -> list[Group] | str:
    """The gang minimum; pods whose shape is in ``last`` are chosen only when no other will do."""
    subjobs = sorted(job.subjobs.values(), key=ssn.subjob_sort_key())

    def pending(sj: SubJobInfo) -> list[TaskInfo]:
        tasks = ssn.pending_tasks(sj)
        return sorted(tasks, key=lambda t: t.shape in last) if last else tasks

    chosen: dict[str, list[TaskInfo]] = {}
    chosen_keys: set[str] = set()
    chosen_roles: dict[str, int] = {}

    def need_of(sj: SubJobInfo) -> int:
        return max(sj.min_available - ssn.subjob_ready_count(sj), 0)

    def add_subjob_min(sj: SubJobInfo) -> bool:
        if sj.id in chosen:
            return True
        pend = pending(sj)
        n = need_of(sj)
        if len(pend) < n:
            return False
        chosen[sj.id] = pend[:n]
        for t in pend[:n]:
            chosen_keys.add(t.key)
            chosen_roles[t.role] = chosen_roles.get(t.role, 0) + 1
        return True

    def add_task(t: TaskInfo) -> None:
        sj = job.subjobs[t.subjob]
        if not sj.is_default and sj.id not in chosen and need_of(sj) > 0 and not add_subjob_min(sj):
            return
        if t.key not in chosen_keys:
            chosen.setdefault(sj.id, []).append(t)
            chosen_keys.add(t.key)
            chosen_roles[t.role] = chosen_roles.get(t.role, 0) + 1

    # 1. Required SubJobs per sub-group (minSubGroups), in SubJob order.
    for gid, need in sorted(job.min_subjobs.items()):
        members = [sj for sj in subjobs if sj.gid == gid]
        have = sum(1 for sj in members if ssn.subjob_ready(sj))
        for sj in members:
            if have >= need:
                break
            if not ssn.subjob_ready(sj) and add_subjob_min(sj):
                have += 1
        if have < need:
            return f"sub-group {gid}: only {have} of minSubGroups {need} partitions can become complete"

    def candidates() -> list[TaskInfo]:
        # Default SubJob first (plain pods), then SubJobs in order.
        ordered = sorted(subjobs, key=lambda s: not s.is_default)
        return [t for sj in ordered for t in pending(sj) if t.key not in chosen_keys]

    cands = candidates()  # computed once: the loops below walk it linearly
    ready_total = ssn.job_ready_count(job)

    # 2. Per-task-role minimums (minTaskMember).
    for role, need in sorted(job.enforced_min_task_member.items()):
        ready_role = ssn.role_ready_count(job, role)
        have = ready_role + chosen_roles.get(role, 0)
        role_cands = iter([t for t in cands if t.role == role])
        while have < need:
            nxt = next(role_cands, None)
            if nxt is None:
                return f"task {role!r}: {have} pods can run, minTaskMember {need}"
            if nxt.key in chosen_keys:
                continue
            add_task(nxt)
            have = ready_role + chosen_roles.get(role, 0)
    # 3. Job minimum (minMember): chosen tasks are all pending, so count them on top of the ready ones.
    pos = 0
    while ready_total + len(chosen_keys) < job.min_member:
        while pos < len(cands) and cands[pos].key in chosen_keys:
            pos += 1
        if pos >= len(cands):
            have = ready_total + len(chosen_keys)
            return f"{have} pods can run, minMember {job.min_member}"
        t = cands[pos]
        sj = job.subjobs[t.subjob]
        if sj.is_default or need_of(sj) == 0:
            # Plain pods: take the whole run of this SubJob's next candidates in one step.
            deficit = job.min_member - ready_total - len(chosen_keys)
            run: list[TaskInfo] = []
            while pos < len(cands) and len(run) < deficit and cands[pos].subjob == t.subjob:
                if cands[pos].key not in chosen_keys:
                    run.append(cands[pos])
                pos += 1
            chosen.setdefault(sj.id, []).extend(run)
            for x in run:
                chosen_keys.add(x.key)
                chosen_roles[x.role] = chosen_roles.get(x.role, 0) + 1
            continue
        add_task(t)
        pos += 1
    order = {sj.id: i for i, sj in enumerate(subjobs)}
    return [
        Group(job.subjobs[sid], tasks, atomic=True)
        for sid, tasks in sorted(chosen.items(), key=lambda kv: order[kv[0]])
        if tasks
    ]


def extension_units(ssn: Session, job: JobInfo) -> list[list[Group]]:
    """Pods beyond the gang minimum: each incomplete SubJob whole, then the rest as they fit."""
    units: list[list[Group]] = []
    for sj in sorted(job.subjobs.values(), key=ssn.subjob_sort_key()):
        pend = ssn.pending_tasks(sj)
        if not pend:
            continue
        need = max(sj.min_available - ssn.subjob_ready_count(sj), 0)
        if need:
            if len(pend) < need:
                continue
            units.append([Group(sj, pend[:need], atomic=True)])
            pend = pend[need:]
        if pend:
            units.append([Group(sj, pend, atomic=False)])
    return units


def within_queue(ssn: Session, job: JobInfo, groups: list[Group]) -> tuple[list[Group], str | None]:
    """The groups trimmed to what the job's queue may take (Volcano's per-task ``Allocatable``,
    each task counted before the next is asked); an atomic group that does not fit whole fails
    the unit, with the reason.

    The one answer to "does this queue stay within its limit": allocate, backfill, preempt and
    reclaim (and gangpreempt, gangreclaim) all ask it before a pod is placed or nominated, so
    no action can take a queue past its ``capability`` (proportion: its deserved share;
    capacity: its real capability and every ancestor's)."""
    if not ssn.fns(ALLOCATABLE):
        return groups, None
    flat = [t for g in groups for t in g.tasks]
    if ssn.judges_sums():
        # Fast path: every plugin that limits the queue can judge the whole unit at once, and it fits.
        if ssn.why_not_allocatable(job.queue, flat) is None:
            return groups, None
        k = _first_refused_by_sums(ssn, job.queue, flat)
    else:
        got = _first_refused_pod_by_pod(ssn, job.queue, flat)
        if got is None:
            return groups, None
        k = got
    # Asked with the queue as it was: the pods accepted before the refused one, and it.
    why = ssn.why_not_allocatable(job.queue, flat[: k + 1])
    return _kept(groups, k), why or f"queue {job.queue} may not take {k + 1} more pods"


def _first_refused_pod_by_pod(ssn: Session, queue: str, flat: list[TaskInfo]) -> int | None:
    """The first of ``flat`` the queue refuses, each pod asked after the ones before it are
    charged (Volcano's walk), or None when it takes them all; the charges are undone."""
    accepted: list[TaskInfo] = []
    try:
        for t in flat:
            if not ssn.allocatable(queue, t):
                return len(accepted)
            ssn.on_allocate([t])
            accepted.append(t)
        return None
    finally:
        if accepted:
            ssn.on_deallocate(accepted)


def _first_refused_by_sums(ssn: Session, queue: str, flat: list[TaskInfo]) -> int:
    """The first of ``flat`` the queue refuses when every limiting plugin judges sums and the
    whole of ``flat`` does not fit: found by bisection over the pods in order (a prefix's sum
    fits exactly when each of its pods fits after the ones before it), so a large gang in a
    full queue costs a few sum checks, not one vote and one charge per pod."""
    lo, hi = 0, len(flat) - 1  # the first refused pod is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if ssn.why_not_allocatable(queue, flat[: mid + 1]) is None:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _kept(groups: list[Group], refused: int) -> list[Group]:
    """What a unit keeps when its pod at position ``refused`` (in group order) is refused: the
    groups before it whole, and the part of its group before it when that group may be partial;
    nothing when that group is atomic (the unit fails)."""
    out: list[Group] = []
    seen = 0
    for g in groups:
        if seen + len(g.tasks) <= refused:
            out.append(g)
            seen += len(g.tasks)
            continue
        if g.atomic:
            return []
        keep = g.tasks[: refused - seen]
        if keep:
            out.append(Group(g.subjob, keep, g.atomic))
        break
    return out
