"""What the queue plugins (proportion, capacity) share: per-queue sums kept in step with the
session's decisions, and the admission reservation of the jobs a session admits."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from ..algorithms.queue_sums import inqueue_at_open, job_sums, sums_by, task_res
from ..framework.extension_points import (
    JOB_ENQUEUEABLE,
    JOB_ENQUEUED,
    JOB_RELEASED,
    ON_ALLOCATE,
    ON_DEALLOCATE,
)
from ..framework.session import Session
from ..model.jobs import JobInfo, TaskInfo
from ..model.resources import Res


def job_inqueue(ssn: Session, job: JobInfo) -> Res | None:
    """What an admitted job keeps reserved at session open: the unallocated part of
    minResources of a Running job that has reached minMember (Volcano's rule).

    Volcano also reserves the minResources of every Inqueue job still unplaced; an Inqueue gang
    that its topology keeps from running (a hard tier-1 gang no rack can take now) then blocks
    admission for its whole queue, and jobs that would fit wait behind it for ever. Here such a
    job stays Inqueue and keeps its place in job order, but what each session admits is
    reserved within that session only (the ``job_enqueued`` callbacks), not carried over."""
    if job.key in ssn.enqueued:
        return None  # Inqueue as of this session, not Running
    return inqueue_at_open(ssn.snap, job)


class QueueSums(Protocol):
    """A queue's sums as a queue plugin keeps them (proportion's and capacity's attributes)."""

    allocated: Res
    inqueue: Res

    def update_share(self) -> None: ...


A = TypeVar("A", bound=QueueSums)


def reclaim_walk(
    ssn: Session,
    attrs: Mapping[str, A],
    reclaimees: list[TaskInfo],
    may_take: Callable[[A, Res, Res], bool],
) -> list[TaskInfo]:
    """The reclaimees, in the order given, whose queue may give them up: never of a queue the
    plugin does not track or one marked ``reclaimable: false``. ``may_take(attrs, allocated,
    request)`` judges a task against what its queue still holds once the victims taken before
    it have left, so a queue is never judged on a sum it no longer has."""
    snap = ssn.snap
    allocations: dict[str, Res] = {}
    out: list[TaskInfo] = []
    for t in reclaimees:
        job = snap.jobs.get(t.job)
        if job is None:
            continue
        q = snap.queues.get(job.queue)
        a = attrs.get(job.queue)
        if a is None or (q is not None and q.spec.reclaimable is False):
            continue
        req = task_res(snap, t)
        allocated = allocations.setdefault(job.queue, a.allocated.clone())
        if may_take(a, allocated, req):
            allocated.sub(req)
            out.append(t)
    return out


class QueueLedger:
    """What the ``proportion`` and ``capacity`` plugins share: per-queue ``allocated`` and
    ``inqueue`` kept in step with the session's decisions (allocations, evictions, admissions).

    A subclass says which queues a job of a queue moves (:meth:`chain`: the queue itself, and
    for hierarchical capacity its ancestors); the first of them has its share recomputed."""

    ssn: Session

    def chain(self, queue: str) -> Sequence[QueueSums]:
        """The sums a job of ``queue`` moves, the queue's own first (none: not tracked)."""
        raise NotImplementedError

    def job_enqueued(self, job: JobInfo) -> None:
        """An admitted job's admission request is reserved in its queue (and the ancestors)."""
        self._reserve(job, +1)

    def job_released(self, job: JobInfo) -> None:
        """An admitted job allocate could not place gives its reservation back (see allocate)."""
        self._reserve(job, -1)

    def _reserve(self, job: JobInfo, sign: int) -> None:
        req = job_sums(self.ssn.snap, job).admission
        if req is None:
            return
        for a in self.chain(job.queue):
            if sign > 0:
                a.inqueue.add(req)
            else:
                a.inqueue.sub(req)

    def _move(self, tasks: list[TaskInfo], sign: int) -> None:
        jobs = self.ssn.snap.jobs
        for queue, r in sums_by(self.ssn.snap, tasks, lambda t: jobs[t.job].queue).items():
            for i, a in enumerate(self.chain(queue)):
                if sign > 0:
                    a.allocated.add(r)
                else:
                    a.allocated.sub(r)
                if i == 0:
                    a.update_share()

    def on_allocate(self, tasks: list[TaskInfo]) -> None:
        """Allocated in the session: the queue holds more."""
        self._move(tasks, +1)

    def on_deallocate(self, tasks: list[TaskInfo]) -> None:
        """Allocation undone or task evicted: the queue holds less."""
        self._move(tasks, -1)

    def job_enqueueable(self, job: JobInfo) -> int:
        """The plugin's JobEnqueueable vote."""
        raise NotImplementedError


def register_ledger(ssn: Session, plugin: QueueLedger) -> None:
    """Register what every queue plugin registers: its enqueue vote, admission and release
    callbacks, and its allocate/deallocate handlers."""
    ssn.register(JOB_ENQUEUEABLE, plugin.job_enqueueable)
    ssn.register(JOB_ENQUEUED, plugin.job_enqueued)
    ssn.register(JOB_RELEASED, plugin.job_released)
    ssn.register(ON_ALLOCATE, plugin.on_allocate)
    ssn.register(ON_DEALLOCATE, plugin.on_deallocate)
