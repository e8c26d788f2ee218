"""What the queue plugins (proportion, capacity, overcommit, drf) read of a session, computed once.

Volcano's plugins walk every task of every job at session open. Here the per-job sums
(allocated, requested, minResources, elastic part) are computed once per :class:`JobInfo` and
reused by every session that sees the same job (the incremental cluster state keeps unchanged
jobs), so opening a session costs O(jobs), not O(pods). Per-task resources come from the
task's shape (a handful per cluster), converted once per snapshot.

Resources are in Volcano's units (:class:`~scheduler_plugin.queue_share.Res`); the ``pods``
slot every pod request carries here is left out of task requests, as Volcano's ``Resreq``
does not count it (node allocatable still names it, as Volcano's total resource does).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hyperplace.api.podgroup import Queue

from ..algorithms.queue_shares import Missing, Res, exceeded_part
from ..model.jobs import JobInfo, TaskInfo
from .tiers import tier_list

if TYPE_CHECKING:
    from ..framework.session import Session
    from ..model.snapshot import ClusterSnapshot

OPEN = "Open"
# Resources Volcano's GetInqueueResource never reserves (not scalar resource names).
_NOT_SCALAR = frozenset({"ephemeral-storage", "storage"})


def queue_state(q: Queue | None) -> str:
    """A queue's state; a queue the queue controller has not seen yet (no status) is Open.

    Volcano reads an empty state as "not Open" until its controller writes one; with no
    controller (the simulator) every queue would then be closed, so an unset state is Open."""
    if q is None:
        return "Missing"
    st = q.status.state if q.status is not None else None
    return st or OPEN


def queue_weight(q: Queue) -> int:
    """Spec weight; Volcano's webhook defaults an unset weight to 1."""
    return q.spec.weight if q.spec.weight is not None else 1


def queue_priority(q: Queue | None) -> int:
    """Spec priority (0 when unset)."""
    return (q.spec.priority or 0) if q is not None else 0


def res_of_vector(resources: list[str], vec: np.ndarray) -> Res:
    """A snapshot resource vector (milli-units, memory included) as Volcano's Resource, without ``pods``."""
    return Res.from_milli(
        {r: int(v) for r, v in zip(resources, vec.tolist(), strict=True) if v and r != "pods"}
    )


def total_resource(snap: ClusterSnapshot) -> Res:
    """Allocatable of the ready nodes (Volcano's ``ssn.TotalResource``), once per snapshot."""
    got = snap.memo.get("queue_total")
    if got is None:
        ready = np.array([st.ready for st in snap.node_static], dtype=bool)
        vec = (
            snap.allocatable[ready].sum(axis=0)
            if len(ready)
            else np.zeros(len(snap.resources), dtype=np.int64)
        )
        got = Res.from_milli({r: int(v) for r, v in zip(snap.resources, vec.tolist(), strict=True) if v})
        snap.memo["queue_total"] = got
    assert isinstance(got, Res)
    return got.clone()


def used_resource(snap: ClusterSnapshot) -> Res:
    """What the bound pods of the cluster use (Volcano sums ``node.Used``), without ``pods``."""
    vec = snap.used.sum(axis=0) if snap.num_nodes else np.zeros(len(snap.resources), dtype=np.int64)
    return res_of_vector(snap.resources, vec)


def task_res(snap: ClusterSnapshot, t: TaskInfo) -> Res:
    """A task's request (shared object: clone before changing it)."""
    return task_res_of_shape(snap, t.shape)


def task_res_of_shape(snap: ClusterSnapshot, shape: int) -> Res:
    """The request of a pod shape (shared object: clone before changing it)."""
    by_shape = snap.memo.get("queue_shape_res")
    if by_shape is None:
        by_shape = snap.memo["queue_shape_res"] = [
            res_of_vector(snap.resources, s.requests) for s in snap.shapes
        ]
    assert isinstance(by_shape, list)
    r = by_shape[shape]
    assert isinstance(r, Res)
    return r


def shape_res_times(snap: ClusterSnapshot, shape: int, n: int) -> Res:
    """The request of ``n`` pods of one shape: a gang of thousands of identical pods costs one
    multiplication (for n == 1 the shared object: clone before changing it)."""
    r = task_res_of_shape(snap, shape)
    return r.clone().multi(n) if n != 1 else r


def tasks_res(snap: ClusterSnapshot, tasks: list[TaskInfo]) -> Res:
    """Sum of task requests: one addition per distinct shape."""
    out = Res()
    for shape, n in Counter(t.shape for t in tasks).items():
        out.add(shape_res_times(snap, shape, n))
    return out


def sums_by(snap: ClusterSnapshot, tasks: list[TaskInfo], key: Callable[[TaskInfo], str]) -> dict[str, Res]:
    """Requests of ``tasks`` summed per ``key`` (job, queue): one addition per distinct shape,
    so an event for a gang of thousands of identical pods costs a handful of operations."""
    if len(tasks) == 1:  # a rollback's per-task event: no counting
        t = tasks[0]
        return {key(t): task_res_of_shape(snap, t.shape)}
    counts: Counter[tuple[str, int]] = Counter((key(t), t.shape) for t in tasks)
    out: dict[str, Res] = {}
    for (k, shape), n in counts.items():
        out.setdefault(k, Res()).add(shape_res_times(snap, shape, n))
    return out


@dataclass
class JobSums:
    """One job's resource sums, as Volcano's plugins compute them at session open."""

    allocated: Res  # tasks bound or running
    request: Res  # allocated + pending
    n_allocated: int
    min_resources: Res | None  # the PodGroup's minResources, None when unset
    elastic: Res  # allocated beyond minResources (Volcano's GetElasticResources)
    # What admitting the job to Inqueue asks of its queue and of the cluster: minResources
    # less what the job's own pods already hold (None when minResources is unset). A gang
    # sent back to Pending after losing pods (a failed bind, an eviction, a crash between
    # binds) keeps its running pods; they are in the queue's allocated and the cluster's
    # used already. Volcano asks for the whole minimum again on top of them, so a half-bound
    # gang in a full queue is never admitted and holds its pods for nothing.
    admission: Res | None = None


def job_sums(snap: ClusterSnapshot, job: JobInfo) -> JobSums:
    """The sums of ``job``, computed once per job (and resource columns)."""
    key = tuple(snap.resources)
    cached = job.cache.get("queue_sums")
    if cached is not None and cached[0] == key:
        out = cached[1]
        assert isinstance(out, JobSums)
        return out
    allocated, request = Res(), Res()
    n_alloc = 0
    # One addition per (shape, running) pair: the tasks of a job mostly share a few shapes.
    for (shape, running), n in Counter((t.shape, t.running) for t in job.tasks).items():
        r = shape_res_times(snap, shape, n)
        request.add(r)
        if running:
            allocated.add(r)
            n_alloc += n
    mr = job.podgroup.spec.min_resources
    min_res = Res.from_list(mr) if mr is not None else None
    elastic = exceeded_part(allocated.clone(), min_res if min_res is not None else Res())
    admission = min_res if min_res is None or not n_alloc else exceeded_part(min_res, allocated)
    out = JobSums(allocated, request, n_alloc, min_res, elastic, admission)
    job.cache["queue_sums"] = (key, out)
    return out


def inqueue_resource(job: JobInfo, min_res: Res, allocated: Res) -> Res:
    """Volcano's ``GetInqueueResource``: what of minResources is still unallocated, per named dimension."""
    out = Res()
    for name in job.podgroup.spec.min_resources or {}:
        if name.startswith("count/") or name in _NOT_SCALAR:
            continue
        left = min_res.get(name) - allocated.get(name)
        if left <= 0:
            continue
        if name == "cpu":
            out.cpu = left
        elif name == "memory":
            out.memory = left
        else:
            out.add_scalar(name, left)
    return out


def job_inqueue(ssn: Session, job: JobInfo) -> Res | None:
    """What an admitted job keeps reserved at session open: the unallocated part of
    minResources of a Running job that has reached minMember (Volcano's rule).

    Volcano also reserves the minResources of every Inqueue job still unplaced; an Inqueue gang
    that its topology keeps from running (a hard tier-1 gang no rack can take now) then blocks
    admission for its whole queue, and jobs that would fit wait behind it for ever. Here such a
    job stays Inqueue and keeps its place in job order, but what each session admits is
    reserved within that session only (the ``job_enqueued`` callbacks), not carried over."""
    sums = job_sums(ssn.snap, job)
    if sums.min_resources is None:
        return None
    if ssn.job_phase(job) == "Running" and sums.n_allocated >= job.min_member:
        return inqueue_resource(job, sums.min_resources, sums.allocated)
    return None


class QueueSums(Protocol):
    """A queue's sums as a queue plugin keeps them (proportion's and capacity's attributes)."""

    allocated: Res
    inqueue: Res

    def update_share(self) -> None: ...


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


def register_enqueueable(ssn: Session, fn: Callable[[JobInfo], int]) -> None:
    """Register a JobEnqueueable vote in the configuration tier being built."""
    tier_list(ssn.job_enqueueable_fns, ssn).append(fn)


def register_ledger(ssn: Session, opt: Any, plugin: QueueLedger) -> None:
    """Register what every queue plugin registers: its enqueue vote and admission callback
    (``enableJobEnqueued``) and its allocate/deallocate handlers."""
    from .gang import _enabled

    if _enabled(opt, "enableJobEnqueued"):
        register_enqueueable(ssn, plugin.job_enqueueable)
        ssn.job_enqueued_fns.append(plugin.job_enqueued)
    ssn.allocate_handlers.append(plugin.on_allocate)
    ssn.deallocate_handlers.append(plugin.on_deallocate)


def fmt_res(r: Res) -> str:
    """A resource for people: ``cpu 4, memory 8Gi, nvidia.com/gpu 8`` (zero dimensions left out)."""
    parts: list[str] = []
    if r.cpu == math.inf:
        parts.append("cpu unlimited")
    elif r.cpu:
        parts.append(f"cpu {r.cpu / 1000:g}")
    if r.memory == math.inf:
        parts.append("memory unlimited")
    elif r.memory:
        parts.append(f"memory {r.memory / 2**30:.4g}Gi")
    for n, v in sorted((r.scalars or {}).items()):
        if n != "pods" and v:
            parts.append(f"{n} {'unlimited' if v == math.inf else f'{v / 1000:g}'}")
    return ", ".join(parts) or "nothing"


def fits(left: Res, right: Res | None, req: Res) -> tuple[bool, list[str]]:
    """``left <= right`` on the dimensions ``req`` asks for; the names of the short ones."""
    return left.less_equal_on(right, req)


__all__ = [
    "OPEN",
    "JobSums",
    "Missing",
    "QueueLedger",
    "QueueSums",
    "fits",
    "fmt_res",
    "inqueue_resource",
    "job_inqueue",
    "job_sums",
    "queue_priority",
    "queue_state",
    "queue_weight",
    "register_enqueueable",
    "register_ledger",
    "res_of_vector",
    "sums_by",
    "task_res",
    "tasks_res",
    "total_resource",
    "used_resource",
]
