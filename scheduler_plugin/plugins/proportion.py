"""``proportion`` plugin: queue shares by weight (Volcano's ``proportion``).

At session open every queue with jobs gets its *deserved* share by water-filling
(:func:`~scheduler_plugin.algorithms.queue_shares.compute_shares`) from its weight, capability, guarantee
and demand. The plugin then orders queues (priority, then the smaller dominant share
``allocated / deserved``), reports a queue *overused* once its allocation reaches deserved,
lets a task be allocated only while its queue stays within deserved on the dimensions the task
asks for, admits a PodGroup to Inqueue only while its minResources fit the queue's real
capability, and lets reclaim take tasks of queues above their deserved share, never below it and
never of a queue with ``reclaimable: false``. Allocations made during the session move the queue's share at
once (allocate/deallocate event handlers), as in Volcano.
"""

from __future__ import annotations

import copy
from typing import Any

from ..algorithms.queue_shares import QueueDemand, QueueShare, compute_shares, queue_order_key
from ..algorithms.queue_shares import allocatable as share_allocatable
from ..algorithms.queue_shares import enqueueable as share_enqueueable
from ..algorithms.queue_shares import overused as share_overused
from ..algorithms.queue_sums import (
    OPEN,
    excess_on,
    fmt_res,
    job_sums,
    queue_job_sums,
    queue_priority,
    queue_state,
    queue_weight,
    task_res,
    tasks_res,
    total_resource,
)
from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import (
    ALLOCATABLE,
    ALLOCATABLE_REASON,
    OVERUSED,
    PERMIT,
    QUEUE_EXCESS,
    QUEUE_LIMITS,
    QUEUE_ORDER,
    RECLAIMABLE,
    REJECT,
)
from ..framework.session import Session
from ..model.jobs import JobInfo, TaskInfo
from ..model.memo import MemoKey
from ..model.resources import Missing, Res
from .queue_ledger import QueueLedger, reclaim_walk, register_ledger

# The deserved shares of the queues at open, once per snapshot (sessions move copies).
SHARES: MemoKey[dict[str, QueueShare]] = MemoKey("proportion shares")


class Proportion(QueueLedger):
    """Per-queue attributes of one session (Volcano's ``queueAttr``)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        snap = ssn.snap
        self.total = total_resource(snap)
        cached = snap.memo.get_or_put(SHARES, self._shares)
        # The session moves its copy as it allocates; the snapshot's stays as computed (it
        # depends on the snapshot alone: job sums and PodGroup phases as written).
        self.attrs: dict[str, QueueShare] = copy.deepcopy(cached)

    def _shares(self) -> dict[str, QueueShare]:
        snap = self.ssn.snap
        total_guarantee = Res()
        for queue in snap.queues.values():
            g = (queue.spec.guarantee or {}).get("resource")
            if g:
                total_guarantee.add(Res.from_list(g))
        demands: list[QueueDemand] = []
        # Per queue, its jobs' sums at open: carried from the previous snapshot and patched by
        # the jobs that changed, so opening a session costs what changed, not every job.
        for name, sums in queue_job_sums(snap).items():
            q = snap.queues[name]
            g = (q.spec.guarantee or {}).get("resource")
            demands.append(
                QueueDemand(
                    name=name,
                    weight=queue_weight(q),
                    priority=queue_priority(q),
                    state=queue_state(q),
                    capability=Res.from_list(q.spec.capability) if q.spec.capability else None,
                    guarantee=Res.from_list(g) if g else None,
                    # Read only here: compute_shares copies what it keeps.
                    allocated=sums.allocated,
                    request=sums.request,
                    inqueue=sums.inqueue,
                    elastic=sums.elastic,
                )
            )
        return compute_shares(self.total, demands, total_guarantee)

    # -- queue order / overused / allocatable
    def queue_order(self, queue: str) -> tuple[int, float]:
        """Higher queue priority first, then the smaller share."""
        a = self.attrs.get(queue)
        if a is None:
            return (-queue_priority(self.ssn.snap.queues.get(queue)), 0.0)
        return queue_order_key(a)

    def overused(self, queue: str) -> bool:
        """Allocation at or above deserved."""
        a = self.attrs.get(queue)
        return a is not None and share_overused(a)

    def allocatable(self, queue: str, task: TaskInfo) -> bool:
        """The queue stays within deserved with this task (Open queues only)."""
        a = self.attrs.get(queue)
        if a is None:
            return queue_state(self.ssn.snap.queues.get(queue)) == OPEN
        ok, _ = share_allocatable(a, task_res(self.ssn.snap, task))
        return ok

    def why_not_allocatable(self, queue: str, tasks: list[TaskInfo]) -> str | None:
        """The reason ``tasks`` do not fit the queue's deserved share, or None."""
        a = self.attrs.get(queue)
        if a is None:
            return None
        ok, short = share_allocatable(a, tasks_res(self.ssn.snap, tasks))
        if ok:
            return None
        return (
            f"queue {queue} would exceed its deserved share in {', '.join(short)} "
            f"(deserved {fmt_res(a.deserved)}; allocated {fmt_res(a.allocated)})"
        )

    def excess(self, queue: str, tasks: list[TaskInfo]) -> Res | None:
        """What the queue must give back before ``tasks`` fit its deserved share, or None."""
        a = self.attrs.get(queue)
        if a is None:
            return None
        req = tasks_res(self.ssn.snap, tasks)
        return excess_on(a.allocated.clone().add(req), a.deserved, req)

    # -- enqueue
    def job_enqueueable(self, job: JobInfo) -> int:
        """Volcano's vote: REJECT a job of a queue not Open, or whose minResources do not fit
        the queue's real capability with what it holds and has admitted."""
        a = self.attrs.get(job.queue)
        state = queue_state(self.ssn.snap.queues.get(job.queue))
        if state != OPEN:
            self.ssn.enqueue_reasons.setdefault(job.key, f"queue {job.queue} is {state}, not Open")
            return REJECT
        if a is None:
            return PERMIT
        ok, why = share_enqueueable(a, job_sums(self.ssn.snap, job).admission)
        if ok:
            return PERMIT
        self.ssn.enqueue_reasons.setdefault(job.key, f"{why} (proportion: queue {job.queue})")
        return REJECT

    # -- reclaim
    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        """Tasks of queues above their deserved share, in the order given, and never of a queue
        with ``reclaimable: false``: a task goes while its queue, less the victims taken before
        it, is still above deserved on some dimension (Volcano's ``!allocated.LessEqual(deserved)``).

        The last victim may take its queue below deserved. That queue cannot take the pod
        back: it held more than deserved with it, so asking for it again would take it past
        its share, which ``preemptive`` refuses; and the reclaimer, which stays within its own
        share, is no victim of anyone."""

        def may_take(a: QueueShare, allocated: Res, req: Res) -> bool:
            return not allocated.less_equal(a.deserved, Missing.ZERO)

        return reclaim_walk(self.ssn, self.attrs, reclaimees, may_take)

    def limits(self) -> dict[str, tuple[Res, Res | None]]:
        """Each queue's deserved share and capability, for its status."""
        return {q: (a.deserved.clone(), a.real_capability.clone()) for q, a in self.attrs.items()}

    def chain(self, queue: str) -> list[QueueShare]:
        """A job moves only its own queue's sums (no hierarchy here)."""
        a = self.attrs.get(queue)
        return [] if a is None else [a]


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> Proportion:
    """Compute the shares and register proportion's callbacks."""
    p = Proportion(ssn)
    ssn.register(QUEUE_ORDER, p.queue_order)
    ssn.register(RECLAIMABLE, p.reclaimable)
    ssn.register(OVERUSED, p.overused)
    ssn.register(ALLOCATABLE, p.allocatable)
    ssn.register(ALLOCATABLE_REASON, p.why_not_allocatable)
    ssn.register(QUEUE_EXCESS, p.excess)
    ssn.register(QUEUE_LIMITS, p.limits)
    register_ledger(ssn, p)
    return p
