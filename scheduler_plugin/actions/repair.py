"""The repair step: a gang that ran and lost pods (a node failed under it, a pod was evicted) is
made whole again inside the domain its remainder runs in, taking room from pods that yield to it,
even when the configuration lists no ``preempt`` action.

A training gang short of its minimum makes no progress while its remainder holds hundreds of
GPUs, so waiting for room to free up by itself costs far more than evicting a few pods that
are allowed to go. The step runs after the configured actions in every session; it is turned
off with ``configurations: [{name: repair, arguments: {enabled: false}}]`` in
``volcano-scheduler.conf`` (Volcano ignores the entry).

For each *damaged* gang (:mod:`..model.gang_damage`: pods bound, replacements made after them)
still short of its minimum and not already nominated, in queue and job order:

* **victims** are running pods of other jobs of lower priority in the gang's queue (what
  ``preempt`` would take), and pods marked ``volcano.sh/preemptable: "true"`` (on the pod, else
  its PodGroup) in any queue whose Queue does not say ``reclaimable: false``: a pod that
  declared it may go. Never a critical pod or one marked ``"false"``, and every victim passes the
  session's guards (cdp's cooldown, pdb's budgets). The queue plugins' victim votes are not
  asked: the tiers would refuse a preemptable pod of equal priority, which is the pod a spare
  or a scavenger queue puts there for exactly this;
* **where**: the victim search and the exact placement of ``preempt``
  (:func:`.preempt.evict_and_place`), in the gang's gradient, which its remainder pins to the
  domain it runs in: nothing is evicted outside it, and a gang that cannot be made whole there
  evicts nobody (after its Job's own policy, or the controller's
  ``--damaged-gang-restart-after``, it restarts whole elsewhere);
* the gang's queue limit holds as in ``preempt``: victims of its own queue must give back what
  the replacements would take beyond it;
* where no victim is needed (room appeared in the gang's domain after allocate ran), the
  replacements are bound at once.
"""

from __future__ import annotations

from ..algorithms.victim_units import job_victims
from ..config.arguments import get_bool
from ..framework.session import Session
from ..model.gang_damage import replacements
from ..model.jobs import JobInfo, TaskInfo
from ..placement.domain_search import Placer
from ..placement.exclusive_fences import Fences
from ..placement.gang_units import gang_groups, job_skip_reason, within_queue
from .preempt import Mode, evict_and_place, note, victim_job_order

NAME = "repair"
ARG_ENABLED = "enabled"
MODE = Mode("repair", NAME)


def enabled(ssn: Session) -> bool:
    """Whether the step runs: ``configurations[repair].arguments.enabled`` (default true; a
    value Go's ParseBool refuses keeps the default, with a note)."""
    warnings: list[str] = []
    on = get_bool(ssn.config.action_arguments(NAME), ARG_ENABLED, True, warnings)
    for w in warnings:
        ssn.note(f"configurations[{NAME}].arguments: {w}")
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
    if not enabled(ssn):
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
            note(ssn, job, f"{NAME}: {over_why}, and no pod that yields to it runs in its domain")
            continue
        done = False
        fences.before(job)
        try:
            done = evict_and_place(
                ssn, placer, job, groups, allowed, need, MODE, lambda me, other: other.key != me.key, guarded
            )
        finally:
            fences.after(job, done)
    fences.finish()
