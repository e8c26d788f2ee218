"""``preempt`` and ``reclaim`` actions (Volcano's, domain first), and Volcano v1.15's
``gangpreempt`` and ``gangreclaim``, which run the same way with their ``maxDomains`` and
``allowWholeBundle`` arguments; and the ``repair`` step every session runs after the configured
actions (at the end of this module), which evicts the same way for gangs that lost pods.

* ``preempt``: a starving gang takes room from lower-priority pods of its own queue (victims
  as ``ssn.preemptable`` allows: priority, gang, conformance; lower priority whatever the
  tiers hand on). When its queue is at its limit, the victims must also give the queue back
  what the gang needs of it (Volcano's preempt evicts until its queue is Allocatable again);
  without such victims the gang waits and says so.
* ``reclaim``: a starving gang of a queue that is not overused, and within its own limit,
  takes room from pods of other queues whose Queue is reclaimable (victims as
  ``ssn.reclaimable`` allows; the queue must be ``ssn.preemptive``).

Every victim also passes the session's guards (cdp's cooldown, pdb's budgets), and no gang is
nominated into a domain fenced for another job (exclusive domains, a queue's node groups). A
gang whose pods have ``preemptionPolicy: Never`` evicts nobody (Volcano skips such pods in both
actions).

For each starving gang (queue order, then job order) the victims are planned domain first by
:func:`~scheduler_plugin.placement.victim_search.plan_victims` (fewest and least disruptive victims
in the lowest tier of the gang's gradient where it can fit), then the gang is placed exactly
by the same :class:`~.placement.Placer` allocate uses, on the state without its victims; if
that fails the next domain is tried, and nothing is evicted for a gang that cannot fit.
Pods marked ``volcano.sh/preemptable: "false"`` (on the pod, else on its PodGroup; annotation
before label) and pods of critical priority are never candidates, whatever the plugins say.

Evictions go to ``ssn.ledger``, and the freed room is nominated to the preemptor: its pods stay
allocated in the session but are not bound until the victims are gone; the nomination is
carried to the next cycle (``cycle/nominations.py``), where the pods are bound once their nodes
have room.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..algorithms.demand import Demand
from ..algorithms.queue_sums import vector_of_res
from ..algorithms.victim_units import job_victims
from ..config.arguments import get_bool, get_int
from ..framework.evictions import Eviction, Nomination
from ..framework.session import Session
from ..framework.statement import Statement
from ..model.explanation import Explanation
from ..model.gang_damage import replacements
from ..model.jobs import PREEMPTABLE_KEY, JobInfo, TaskInfo, task_preemptable
from ..model.memo import MemoKey
from ..model.resources import Missing, Res
from ..model.snapshot import ClusterSnapshot
from ..placement.domain_search import Placer, record
from ..placement.exclusive_fences import Fences
from ..placement.gang_units import Group, gang_groups, job_skip_reason, within_queue
from ..placement.victim_search import MAX_DOMAINS_PER_TIER, Outcome, Plan, plan_victims

# Exact placements tried, best plan first, before a gang gives up for this cycle.
MAX_EXACT_TRIES = 3


@dataclass(frozen=True)
class Mode:
    """How one eviction action runs: its kind (``preempt`` or ``reclaim``), the name it was
    configured under, and the domain search's bounds."""

    kind: str
    name: str
    max_domains: int = MAX_DOMAINS_PER_TIER
    whole_gangs: bool = True


# Volcano v1.15's gang actions and their arguments (configurations[].arguments).
ARG_MAX_DOMAINS = "maxDomains"
ARG_WHOLE_BUNDLE = "allowWholeBundle"
GANG_MAX_DOMAINS = 8
GANG_ACTIONS = {"gangpreempt": "preempt", "gangreclaim": "reclaim"}


def gang_mode(ssn: Session, name: str) -> Mode:
    """The arguments of ``gangpreempt`` or ``gangreclaim``: ``maxDomains`` (default 8; an
    invalid or non-positive value falls back to it, with a note) and ``allowWholeBundle``
    (default true), read as Volcano reads them."""
    args = ssn.config.action_arguments(name)
    warnings: list[str] = []
    most = get_int(args, ARG_MAX_DOMAINS, GANG_MAX_DOMAINS, warnings)
    if most <= 0:
        warnings.append(
            f"Invalid {ARG_MAX_DOMAINS} value {most} for action {name}, falling back to default 8"
        )
        most = GANG_MAX_DOMAINS
    whole = get_bool(args, ARG_WHOLE_BUNDLE, True, warnings)
    for w in warnings:
        ssn.note(f"configurations[{name}].arguments: {w}")
    return Mode(GANG_ACTIONS[name], name, most, whole)


def preempt(ssn: Session) -> None:
    """Higher-priority gangs evict lower-priority pods of the same queue."""
    _evict_for_starving_gangs(ssn, Mode("preempt", "preempt"))


def reclaim(ssn: Session) -> None:
    """Gangs of queues within their share take room back from other queues."""
    _evict_for_starving_gangs(ssn, Mode("reclaim", "reclaim"))


def gangpreempt(ssn: Session) -> None:
    """Volcano v1.15's ``gangpreempt``: our topology-first preempt, with its ``maxDomains`` and
    ``allowWholeBundle`` arguments."""
    _evict_for_starving_gangs(ssn, gang_mode(ssn, "gangpreempt"))


def gangreclaim(ssn: Session) -> None:
    """Volcano v1.15's ``gangreclaim``: our topology-first reclaim, with its ``maxDomains`` and
    ``allowWholeBundle`` arguments."""
    _evict_for_starving_gangs(ssn, gang_mode(ssn, "gangreclaim"))


def _plan(
    ssn: Session,
    job: JobInfo,
    groups: list[Group],
    allowed: list[TaskInfo],
    need: Res | None = None,
    mode: Mode | None = None,
) -> Outcome:
    """The victims of ``job``'s gang, in its gradient (the whole cluster for a job without hard
    topology or partitions); ``need``: what they must give back to the gang's queue first."""
    tree = ssn.snap.tree
    if job.with_hard_topology or job.has_policies:
        levels = ssn.gradient(job.topology, ssn.job_hn.get(job.key, -1), tree.root)
        if isinstance(levels, str):
            return Outcome(why=levels)
    else:
        levels = [[tree.root]]
    vec = vector_of_res(ssn.snap.resources, need) if need is not None else None
    mode = mode or Mode("preempt", "preempt")
    return plan_victims(
        ssn.snap,
        ssn.state,
        Demand.of(groups),
        levels,
        allowed,
        ssn.ledger.gone,
        vec,
        mode.max_domains,
        mode.whole_gangs,
        _victim_queue_rank(ssn, allowed) if mode.kind == "reclaim" else None,
    )


def _victim_queue_rank(ssn: Session, victims: list[TaskInfo]) -> dict[str, int]:
    """Per victim job, its queue's place in the queue order reversed: reclaim takes first from
    the queue the scheduler serves last (lowest priority, then largest share), as Volcano's
    victim queue order does by default."""
    jobs = ssn.snap.jobs
    queues = sorted({jobs[t.job].queue for t in victims}, key=ssn.queue_sort_key(), reverse=True)
    rank = {q: i for i, q in enumerate(queues)}
    return {t.job: rank[jobs[t.job].queue] for t in victims}


VictimFilter = Callable[[JobInfo, JobInfo], bool]  # (preemptor job, victim job) -> candidate?


def victim_job_order(ssn: Session) -> list[JobInfo]:
    """Jobs with running pods in the order their pods are offered as victims: lowest priority
    first, then the youngest (least running time lost), then the last by key (the job order
    reversed, as Volcano's victim queue), so the plugins that walk the candidates in order (a
    queue giving back down to its share) take the same pods every time, whatever order the
    cluster state keeps its jobs in."""
    jobs = [j for j in ssn.snap.jobs.values() if j.tasks and len(j.pending) < len(j.tasks)]
    jobs.sort(key=lambda j: j.key, reverse=True)
    jobs.sort(key=lambda j: j.creation, reverse=True)
    jobs.sort(key=lambda j: j.priority)
    return jobs


def candidates(
    ssn: Session, job: JobInfo, eligible: VictimFilter, order: list[JobInfo] | None = None
) -> list[TaskInfo]:
    """Running pods of other jobs the action may consider (``order``: the jobs as
    :func:`victim_job_order` gives them): never a pod protected by ``volcano.sh/preemptable``
    (its own mark, else its PodGroup's) nor a critical one."""
    gone = ssn.ledger.gone
    r_dim = len(ssn.snap.resources)
    out: list[TaskInfo] = []
    for other in order if order is not None else victim_job_order(ssn):
        if other.key == job.key or not other.tasks or not eligible(job, other):
            continue
        vt = job_victims(other, r_dim).tasks
        out.extend(vt if not gone else [t for t in vt if t.key not in gone])
    return out


def _evict_for_starving_gangs(ssn: Session, mode: Mode) -> None:
    """The ``preempt`` or ``reclaim`` action: starving gangs take room from allowed victims."""
    snap = ssn.snap
    action = mode.name
    reclaim = mode.kind == "reclaim"
    queue_key = ssn.queue_sort_key()
    job_key = ssn.job_sort_key()
    jobs = [
        j
        for j in snap.jobs.values()
        if j.pending and j.key not in ssn.ledger.nominations
        if not ssn.job_ready(j) or (not reclaim and _waiting_best_effort(ssn, j))
        if job_skip_reason(ssn, j) is None
    ]
    jobs.sort(key=lambda j: (queue_key(j.queue), job_key(j)))
    placer = Placer(ssn)
    order = victim_job_order(ssn) if jobs else []
    fences = Fences(ssn)
    for job in jobs:
        groups: list[Group] | str
        if ssn.job_ready(job):
            # A best-effort pod counts as ready for its gang (Volcano's ReadyTaskNum) yet needs a
            # pod slot: when a node's slots are full it preempts too, one pod at a time.
            waiting = [] if reclaim else _waiting_best_effort(ssn, job)
            if not waiting:
                continue
            groups = [Group(job.subjobs[waiting[0].subjob], waiting[:1])]
        elif reclaim and ssn.overused(job.queue):
            note(ssn, job, f"reclaim: queue {job.queue!r} is overused, it cannot reclaim")
            continue
        else:
            groups = gang_groups(ssn, job)
        if isinstance(groups, str) or not groups:
            continue
        rep = groups[0].tasks[0]
        if job.preempt_never:
            note(
                ssn,
                job,
                f"{action}: PodGroup preemptionPolicy Never: the gang waits for room without evicting anyone",
            )
            continue
        if any(t.preempt_never for g in groups for t in g.tasks):
            # Volcano skips a preemptor pod whose preemptionPolicy is Never; a gang cannot start
            # without it, so the gang does not preempt.
            never = next(t for g in groups for t in g.tasks if t.preempt_never)
            cls = f" (PriorityClass {never.priority_class})" if never.priority_class else ""
            note(
                ssn,
                job,
                f"{action}: pod {never.name} has preemptionPolicy Never{cls}: the gang waits for room "
                "without evicting anyone",
            )
            continue
        # The queue's limit first (the one check every action asks): reclaim takes from other
        # queues, which cannot bring the gang's own queue back within its limit; preempt then
        # looks for lower-priority victims inside the queue, as Volcano's preempt evicts until
        # its queue is Allocatable again.
        _, over_why = within_queue(ssn, job, groups)
        gang_tasks = [t for g in groups for t in g.tasks]
        need = ssn.queue_excess(job.queue, gang_tasks) if over_why else None
        relieving: set[str] | None = None
        if reclaim and over_why is not None:
            # Only pods of queues that share the limit (with hierarchical capacity: under the
            # same full ancestor) give the gang's queue room back.
            relieving = _relieving_queues(
                ssn, job, gang_tasks, need, candidates(ssn, job, _other_queue, order)
            )
            if not relieving:
                note(ssn, job, f"reclaim: {over_why}; reclaiming from other queues cannot change that")
                continue
        if reclaim and not ssn.preemptive(job.queue, rep):
            note(ssn, job, f"reclaim: queue {job.queue!r} may not reclaim for this job")
            continue
        eligible: VictimFilter
        if reclaim:
            eligible = _reclaim_filter(snap, relieving)
            allowed = ssn.reclaimable(rep, candidates(ssn, job, eligible, order))
        else:
            eligible = _same_queue
            allowed = ssn.preemptable(rep, candidates(ssn, job, eligible, order))
        allowed, guarded = ssn.guard(rep, allowed)
        if over_why is not None and not allowed:
            note(
                ssn,
                job,
                f"{action}: {over_why}, and no lower-priority pod of queue {job.queue} may be evicted for it"
                + _protected(ssn, job, eligible, guarded, reclaim),
            )
            continue
        # Exclusive fences hold against eviction too: a domain held for another job is full
        # for the victim search and the exact placement, so no gang is nominated into it.
        done = False
        fences.before(job)
        try:
            done = evict_and_place(ssn, placer, job, groups, allowed, need, mode, eligible, guarded)
        finally:
            fences.after(job, done)
        if not done:
            held = fences.why(job)
            if held:
                note(ssn, job, f"{action}: {held}")
    fences.finish()


def evict_and_place(
    ssn: Session,
    placer: Placer,
    job: JobInfo,
    groups: list[Group],
    allowed: list[TaskInfo],
    need: Res | None,
    mode: Mode,
    eligible: VictimFilter,
    guarded: list[tuple[str, int]],
) -> bool:
    """Plan the victims of ``job``'s gang and place it exactly on the state without them, best
    plan first; the gang is nominated (or bound, when no victim was needed). False, with the
    reason noted, when no plan places it."""
    action, reclaim = mode.name, mode.kind == "reclaim"
    outcome = _plan(ssn, job, groups, allowed, need, mode)
    if not outcome.plans:
        note(ssn, job, f"{action}: {outcome.why}" + _protected(ssn, job, eligible, guarded, reclaim))
        return False
    last_why: str | None = None
    for plan in outcome.plans[:MAX_EXACT_TRIES]:
        placed, last_why = _try_plan(ssn, placer, job, groups, plan, mode, eligible, guarded)
        if placed:
            return True
    if last_why is not None:
        note(ssn, job, f"{action}: {last_why} even after evicting its victims")
    else:
        note(ssn, job, f"{action}: no domain passed exact placement after evicting its victims")
    return False


def _try_plan(
    ssn: Session,
    placer: Placer,
    job: JobInfo,
    groups: list[Group],
    plan: Plan,
    mode: Mode,
    eligible: VictimFilter,
    guarded: list[tuple[str, int]],
) -> tuple[bool, str | None]:
    """Place the gang exactly on the state without ``plan``'s victims; nominated (or bound,
    when no victim was needed) on success, else everything is put back. (placed, why the
    queue refused)."""
    victims = plan.victims
    ssn.state.apply([t.shape for t in victims], [t.node for t in victims], -1)
    # The queue plugins see the victims leave (Volcano's deallocate event) before the
    # gang's queue is asked again: no nomination takes a queue past its limit.
    if victims:
        ssn.on_deallocate(list(victims))
    _, why = within_queue(ssn, job, groups)
    if why is None:
        res, stmt = placer.place(job, groups)
        if res.ok and ssn.job_ready(job):
            record(ssn, job, res)
            if victims:
                spared = _protected(ssn, job, eligible, guarded, mode.kind == "reclaim")
                _nominate(ssn, job, plan, stmt, mode, spared)
            else:  # room without evicting anyone (allocate's exact placement missed it): bind
                stmt.commit()
                ssn.explanations.pop(job.key, None)
            return True, None
        stmt.discard()
    if victims:
        ssn.on_allocate(list(victims))
    ssn.state.apply([t.shape for t in victims], [t.node for t in victims], +1)
    return False, why


def _reclaim_filter(snap: ClusterSnapshot, relieving: set[str] | None) -> VictimFilter:
    """Reclaim's victims: pods of other queues (of ``relieving`` ones only, when given) whose
    Queue does not say ``reclaimable: false``."""

    def eligible(me: JobInfo, other: JobInfo) -> bool:
        if not _other_queue(me, other) or (relieving is not None and other.queue not in relieving):
            return False
        q = snap.queues.get(other.queue)
        return q is None or q.spec is None or q.spec.reclaimable is not False

    return eligible


def _waiting_best_effort(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """The job's best-effort pods no action has placed in this session, in task order."""
    return [t for t in job.pending if t.best_effort and t.key not in ssn.placed]


def _other_queue(me: JobInfo, other: JobInfo) -> bool:
    return other.queue != me.queue


def _relieving_queues(
    ssn: Session, job: JobInfo, tasks: list[TaskInfo], need: Res | None, cands: list[TaskInfo]
) -> set[str]:
    """The other queues whose pods, once gone, lessen what ``job``'s queue must give back
    before it may take ``tasks`` (``need``): each queue is asked once, with one of its pods
    leaving, as the queue plugins see an eviction."""
    if need is None:
        return set()
    out: set[str] = set()
    seen: set[str] = set()
    for t in cands:
        queue = ssn.snap.jobs[t.job].queue
        if queue in seen:
            continue
        seen.add(queue)
        ssn.on_deallocate([t])
        after = ssn.queue_excess(job.queue, tasks)
        ssn.on_allocate([t])
        if after is None or not need.less_equal(after, Missing.ZERO):
            out.add(queue)
    return out


def _same_queue(me: JobInfo, other: JobInfo) -> bool:
    # Lower priority only, whatever the tiers say: with Volcano's tiers a tier left without
    # candidates hands the decision on, and drf's victim function in tier 2 would then let a
    # job evict pods of higher priority (Volcano's gangpreempt checks the same thing itself).
    return other.queue == me.queue and other.priority < me.priority


def _protected(
    ssn: Session,
    job: JobInfo,
    eligible: VictimFilter,
    guarded: list[tuple[str, int]],
    reclaim: bool,
) -> str:
    """What protected the pods that might otherwise have gone, for a gang that found no room:
    pods marked ``volcano.sh/preemptable: "false"`` (of lower priority, for preempt) and what
    each protection plugin held back; "" when nothing was protected."""
    gone = ssn.ledger.gone
    marked = 0
    jobs = ssn.snap.jobs
    for other in jobs.values():
        if other.key == job.key or not eligible(job, other):
            continue
        tasks = other.memo.get(MARKED)
        if tasks is None:
            tasks = other.memo.put(MARKED, _marked(other))
        marked += sum(1 for t in tasks if t.key not in gone)
    parts = []
    whose = "of another queue" if reclaim else "of lower priority"
    if marked:
        parts.append(
            f"{_pods(marked)} {whose} {'is' if marked == 1 else 'are'} protected by {PREEMPTABLE_KEY}"
        )
    parts += [f"{_pods(n)} {whose} {'is' if n == 1 else 'are'} {what}" for what, n in guarded]
    return ("; " + "; ".join(parts)) if parts else ""


# A job's running pods marked volcano.sh/preemptable: "false" (theirs or their PodGroup's),
# once per JobInfo (the incremental state keeps unchanged ones from cycle to cycle).
MARKED: MemoKey[list[TaskInfo]] = MemoKey("pods protected by volcano.sh/preemptable")


def _marked(job: JobInfo) -> list[TaskInfo]:
    return [t for t in job.tasks if t.running and t.node >= 0 and not task_preemptable(t, job)]


def _pods(n: int) -> str:
    return f"{n} running pod" if n == 1 else f"{n} running pods"


def note(ssn: Session, job: JobInfo, text: str) -> None:
    expl = ssn.explanations.get(job.key)
    if expl is None:
        expl = ssn.explanations[job.key] = Explanation(summary="gang minimum not reached")
    expl.add_detail(text)
    for t in job.pending:
        reason = ssn.task_reasons.get(t.key)
        if reason is not None and text not in reason:
            ssn.task_reasons[t.key] = f"{reason}; {text}"


def where(ssn: Session, job: JobInfo, domain: int) -> str:
    """A domain as the user knows it: the HyperNode's name, or for the virtual root (a job
    without topology, or a cluster without HyperNodes) the cluster and the job's queue."""
    tree = ssn.snap.tree
    if domain == tree.root:
        return f"the cluster (queue {job.queue})"
    return tree.names[domain]


def _nominate(ssn: Session, job: JobInfo, plan: Plan, stmt: Statement, mode: Mode, spared: str = "") -> None:
    snap, tree = ssn.snap, ssn.snap.tree
    names = snap.node_names
    ledger = ssn.ledger
    place = where(ssn, job, plan.domain)
    why = (plan.describe(place) if plan.victims else f"tier {plan.tier}: {place} has room") + spared
    action = mode.kind
    by = f" ({mode.name})" if mode.name != mode.kind else ""
    for t in plan.victims:
        victim_job = snap.jobs[t.job]
        if action == "preempt":
            reason = (
                f"preempted{by} by {job.key} (priority {job.priority} > {victim_job.priority}) to place its gang "
                f"in {place}"
            )
        elif action == "repair":
            reason = f"evicted by the repair step for {job.key}, a gang that lost pods, to make it whole in {place}"
        else:
            reason = f"reclaimed{by} by queue {job.queue!r} for {job.key}, to place its gang in {place}"
        ledger.evictions.append(Eviction(t.key, names[t.node], t.job, job.key, action, reason))
        ledger.gone.add(t.key)
    hn = ssn.job_hn.get(job.key, -1)
    domain = tree.names[hn] if hn >= 0 and job.with_topology else None
    pods = {t.key: names[n] for t, n in stmt.ops}
    ledger.nominations[job.key] = Nomination(
        job.key, pods, tuple(t.key for t in plan.victims), action, domain, why
    )
    for t, n in stmt.ops:
        ssn.task_reasons[t.key] = (
            f"nominated to {names[n]} by {mode.name}; waiting for {len(plan.victims)} victim pod(s) to terminate"
        )
    stmt.closed = True  # allocated in the session state, bound once the victims are gone


# ---------------------------------------------------------------------------------- what if
# Pending jobs per session given a "preemption would help" line when preemption is off (each
# costs one victim search), and the most candidate victims such a search looks at: it runs every
# cycle a gang waits, so it is kept cheap on big clusters (the line is then left out).
WHAT_IF_JOBS = 1
WHAT_IF_MAX_CANDIDATES = 5000


def explain_without_preemption(ssn: Session) -> None:
    """Tell a waiting gang that evicting lower-priority pods of its queue would make room, when
    the configuration has no ``preempt`` action (so nothing will)."""
    if "preempt" in ssn.config.actions or "gangpreempt" in ssn.config.actions:
        return
    ledger = ssn.ledger
    waiting = [
        j
        for j in ssn.snap.jobs.values()
        if j.key in ssn.explanations
        and j.pending
        and j.key not in ledger.nominations
        and not ssn.job_ready(j)
    ]
    waiting.sort(key=ssn.job_sort_key())
    for job in waiting[:WHAT_IF_JOBS]:
        groups = gang_groups(ssn, job)
        if isinstance(groups, str) or not groups:
            continue
        cands = candidates(
            ssn, job, lambda me, other: other.queue == me.queue and other.priority < me.priority
        )
        if not cands or len(cands) > WHAT_IF_MAX_CANDIDATES:
            continue
        _, over_why = within_queue(ssn, job, groups)
        need = ssn.queue_excess(job.queue, [t for g in groups for t in g.tasks]) if over_why else None
        out = _plan(ssn, job, groups, cands, need)
        if out.plans and out.plans[0].victims:
            p = out.plans[0]
            note(
                ssn,
                job,
                f"tier {p.tier}: {where(ssn, job, p.domain)} would fit it after evicting {len(p.victims)} "
                f"lower-priority pods of queue {job.queue}; preemption is not enabled (no preempt action in "
                "the scheduler configuration)",
            )


# ---------------------------------------------------------------------------------- repair
# The repair step: a gang that ran and lost pods (a node failed under it, a pod was evicted) is
# made whole again inside the domain its remainder runs in, taking room from pods that yield to it,
# even when the configuration lists no ``preempt`` action.
#
# A training gang short of its minimum makes no progress while its remainder holds hundreds of
# GPUs, so waiting for room to free up by itself costs far more than evicting a few pods that
# are allowed to go. The step runs after the configured actions in every session; it is turned
# off with ``configurations: [{name: repair, arguments: {enabled: false}}]`` in
# ``volcano-scheduler.conf`` (Volcano ignores the entry).
#
# For each *damaged* gang (:mod:`..model.gang_damage`: pods bound, replacements made after them)
# still short of its minimum and not already nominated, in queue and job order:
#
# * **victims** are running pods of other jobs of lower priority in the gang's queue (what
#   ``preempt`` would take), and pods marked ``volcano.sh/preemptable: "true"`` (on the pod, else
#   its PodGroup) in any queue whose Queue does not say ``reclaimable: false``: a pod that
#   declared it may go. Never a critical pod or one marked ``"false"``, and every victim passes the
#   session's guards (cdp's cooldown, pdb's budgets). The queue plugins' victim votes are not
#   asked: the tiers would refuse a preemptable pod of equal priority, which is the pod a spare
#   or a scavenger queue puts there for exactly this;
# * **where**: the victim search and the exact placement of ``preempt``
#   (:func:`evict_and_place`), in the gang's gradient, which its remainder pins to the
#   domain it runs in: nothing is evicted outside it, and a gang that cannot be made whole there
#   evicts nobody (after its Job's own policy, or the controller's
#   ``--damaged-gang-restart-after``, it restarts whole elsewhere);
# * the gang's queue limit holds as in ``preempt``: victims of its own queue must give back what
#   the replacements would take beyond it;
# * where no victim is needed (room appeared in the gang's domain after allocate ran), the
#   replacements are bound at once.

REPAIR = "repair"
ARG_ENABLED = "enabled"
REPAIR_MODE = Mode("repair", REPAIR)


def repair_enabled(ssn: Session) -> bool:
    """Whether the step runs: ``configurations[repair].arguments.enabled`` (default true; a
    value Go's ParseBool refuses keeps the default, with a note)."""
    warnings: list[str] = []
    on = get_bool(ssn.config.action_arguments(REPAIR), ARG_ENABLED, True, warnings)
    for w in warnings:
        ssn.note(f"configurations[{REPAIR}].arguments: {w}")
    return on


def damaged_gangs(ssn: Session) -> list[JobInfo]:
    """The gangs that ran, lost pods and are still short of their minimum in this session, in
    queue order, then job order."""
    ledger = ssn.ledger
    jobs = [
        j
        for j in ssn.snap.jobs.values()
        if j.pending
        and j.key not in ledger.nominations
        and not ssn.job_ready(j)
        and replacements(j)
        and job_skip_reason(ssn, j) is None
    ]
    queue_key, job_key = ssn.queue_sort_key(), ssn.job_sort_key()
    jobs.sort(key=lambda j: (queue_key(j.queue), job_key(j)))
    return jobs


def _yields(ssn: Session, gang: JobInfo, other: JobInfo, t: TaskInfo) -> bool:
    """Whether ``t`` (a running pod of ``other``) may be evicted to repair ``gang``."""
    if other.queue == gang.queue and other.priority < gang.priority:
        return True
    if t.preemptable is True or (t.preemptable is None and other.preemptable is True):
        queue = ssn.snap.queues.get(other.queue)
        return queue is None or queue.spec is None or queue.spec.reclaimable is not False
    return False


def victims_for(ssn: Session, gang: JobInfo) -> list[TaskInfo]:
    """The running pods that may make room for ``gang``'s replacements, least disruptive jobs
    first (:func:`.preempt.victim_job_order`)."""
    gone = ssn.ledger.gone
    r_dim = len(ssn.snap.resources)
    out: list[TaskInfo] = []
    for other in victim_job_order(ssn):
        if other.key == gang.key:
            continue
        out.extend(
            t for t in job_victims(other, r_dim).tasks if t.key not in gone and _yields(ssn, gang, other, t)
        )
    return out


def repair(ssn: Session) -> None:
    """Make damaged gangs whole inside their domain, evicting pods that yield to them."""
    if not repair_enabled(ssn):
        return
    jobs = damaged_gangs(ssn)
    if not jobs:
        return
    placer = Placer(ssn)
    fences = Fences(ssn)
    for job in jobs:
        groups = gang_groups(ssn, job)
        if isinstance(groups, str) or not groups:
            continue
        if any(t.preempt_never for g in groups for t in g.tasks):
            continue  # preemptionPolicy Never: the gang waits for room, as in preempt
        rep = groups[0].tasks[0]
        _, over_why = within_queue(ssn, job, groups)
        need = ssn.queue_excess(job.queue, [t for g in groups for t in g.tasks]) if over_why else None
        allowed, guarded = ssn.guard(rep, victims_for(ssn, job))
        if over_why is not None and not allowed:
            note(ssn, job, f"{REPAIR}: {over_why}, and no pod that yields to it runs in its domain")
            continue
        done = False
        fences.before(job)
        try:
            done = evict_and_place(
                ssn,
                placer,
                job,
                groups,
                allowed,
                need,
                REPAIR_MODE,
                lambda me, other: other.key != me.key,
                guarded,
            )
        finally:
            fences.after(job, done)
    fences.finish()
