"""Resource sums of jobs and queues that the queue plugins, enqueue and the queue status read.

Volcano's plugins walk every task of every job at session open. Here the per-job sums
(allocated, requested, minResources, elastic part) are computed once per :class:`JobInfo` and
reused by every session that sees the same job (the incremental cluster state keeps unchanged
jobs), so opening a session costs O(jobs), not O(pods). Per-task resources come from the
task's shape (a handful per cluster), converted once per snapshot.

Resources are in Volcano's units (:class:`~scheduler_plugin.model.resources.Res`); the ``pods``
slot every pod request carries here is left out of task requests, as Volcano's ``Resreq``
does not count it (node allocatable still names it, as Volcano's total resource does).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hyperplace.api.podgroup import Queue

from ..model.jobs import JobInfo, TaskInfo, pods_per_shape, written_phase
from ..model.memo import MemoKey, changed_entries
from ..model.resources import Res, exceeded_part
from ..model.snapshot import ClusterSnapshot
from .device_quota import class_totals, devices_res, pod_devices, used_devices

OPEN = "Open"
# Allocatable of the ready nodes, and the request of each pod shape: once per snapshot.
TOTAL: MemoKey[Res] = MemoKey("total resource")
SHAPE_REQUESTS: MemoKey[list[Res]] = MemoKey("shape requests")
# The DRA devices each pod shape claims (shape id -> its devices as a request), once per snapshot.
SHAPE_DEVICES: MemoKey[dict[int, Res]] = MemoKey("shape devices")
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


def res_of_vector(resources: list[str], vec: np.ndarray | list[int]) -> Res:
    """A snapshot resource vector (milli-units, memory included) as Volcano's Resource, without ``pods``."""
    values = vec.tolist() if isinstance(vec, np.ndarray) else vec
    return Res.from_milli({r: int(v) for r, v in zip(resources, values, strict=True) if v and r != "pods"})


def excess_on(future: Res, limit: Res | None, req: Res) -> Res | None:
    """What of ``future`` is above ``limit`` on the dimensions ``req`` asks for (the same
    dimensions and tolerance :meth:`Res.less_equal_on` judges), or None when nothing is: how
    much a queue must give back before ``req`` fits it. ``limit`` None limits nothing."""
    if limit is None:
        return None
    out = Res()
    if req.cpu > 0 and future.cpu > limit.cpu:
        out.cpu = future.cpu - limit.cpu
    if req.memory > 0 and future.memory > limit.memory:
        out.memory = future.memory - limit.memory
    if future.scalars is not None:
        for n, q in (req.scalars or {}).items():
            if n == "pods" or q <= 0:
                continue
            over = future.scalars.get(n, 0.0) - (limit.scalars or {}).get(n, 0.0)
            if over > 0:
                out.add_scalar(n, over)
    return None if out.is_empty() else out


def vector_of_res(resources: list[str], r: Res) -> np.ndarray:
    """A Resource as a snapshot resource vector (milli-units, memory included), rounded up:
    the inverse of :func:`res_of_vector`."""
    out = np.zeros(len(resources), dtype=np.int64)
    for i, name in enumerate(resources):
        if name == "pods":
            continue
        v = r.memory * 1000 if name == "memory" else r.get(name)
        if v > 0:
            out[i] = math.ceil(v - 1e-9)
    return out


def total_resource(snap: ClusterSnapshot) -> Res:
    """Allocatable of the ready nodes (Volcano's ``ssn.TotalResource``), once per snapshot."""
    return snap.memo.get_or_put(TOTAL, lambda: _total_resource(snap)).clone()


def column_sums(m: np.ndarray) -> list[int]:
    """Exact per-column sums of a node matrix in milli-units. int64 is not enough: 10,240 nodes
    of 2 TiB hold 2.3e19 milli-bytes, past its 9.2e18, and the sum would wrap to a negative
    memory that refuses every job at admission."""
    return [sum(col) for col in m.T.tolist()]


def _total_resource(snap: ClusterSnapshot) -> Res:
    ready = np.array([st.ready for st in snap.node_static], dtype=bool)
    sums = column_sums(snap.allocatable[ready]) if len(ready) else [0] * len(snap.resources)
    out = Res.from_milli({r: v for r, v in zip(snap.resources, sums, strict=True) if v})
    if snap.dra.classes:
        up = [st for st in snap.node_static if st.ready]
        # Carried while the slices and classes stay (the view of the next claim change too).
        totals = snap.dra.derive(
            "class totals", tuple(st.name for st in up), lambda: class_totals(snap.dra, up)
        )
        out.add(devices_res(totals))
    return out


def used_resource(snap: ClusterSnapshot) -> Res:
    """What the bound pods of the cluster use (Volcano sums ``node.Used``), without ``pods``,
    and the DRA devices allocated claims hold."""
    out = res_of_vector(
        snap.resources, column_sums(snap.used) if snap.num_nodes else [0] * len(snap.resources)
    )
    if snap.dra.claims:
        out.add(devices_res(used_devices(snap.dra)))
    return out


def shape_devices(snap: ClusterSnapshot) -> dict[int, Res]:
    """The DRA devices of each pod shape that claims any (see :mod:`.device_quota`)."""
    return snap.memo.get_or_put(SHAPE_DEVICES, lambda: _shape_devices(snap))


def _shape_devices(snap: ClusterSnapshot) -> dict[int, Res]:
    out: dict[int, Res] = {}
    if snap.dra.empty:
        return out
    # The pods of one template are a shape each, with one claims signature: counted once.
    by_sig: dict[Any, Res | None] = {}
    for s in snap.shapes:
        claims = s.constraints.claims
        if not claims.refs:
            continue
        sig = claims.signature
        if sig not in by_sig:
            r = devices_res(pod_devices(claims, snap.dra))
            by_sig[sig] = None if r.is_empty() else r
        got = by_sig[sig]
        if got is not None:
            out[s.id] = got
    return out


SUMS_KEY: MemoKey[tuple[Any, ...]] = MemoKey("sums key")


def sums_key(snap: ClusterSnapshot) -> tuple[Any, ...]:
    """What per-job sums depend on besides the job: the resource columns, and the devices of
    the shapes that claim any (they change when a claim template arrives). Once per snapshot."""

    def make() -> tuple[Any, ...]:
        dev = shape_devices(snap)
        return (tuple(snap.resources), tuple((k, repr(v)) for k, v in sorted(dev.items())))

    return snap.memo.get_or_put(SUMS_KEY, make)


# (resource columns, the request vectors, their Res): what _shape_requests carries.
_SHAPE_REQUESTS_CARRIED: MemoKey[tuple[tuple[str, ...], list[Any], list[Res]]] = MemoKey(
    "shape requests, carried"
)


def task_res(snap: ClusterSnapshot, t: TaskInfo) -> Res:
    """A task's request (shared object: clone before changing it)."""
    return task_res_of_shape(snap, t.shape)


def task_res_of_shape(snap: ClusterSnapshot, shape: int) -> Res:
    """The request of a pod shape (shared object: clone before changing it)."""
    by_shape = snap.memo.get_or_put(SHAPE_REQUESTS, lambda: _shape_requests(snap))
    return by_shape[shape]


def _shape_requests(snap: ClusterSnapshot) -> list[Res]:
    """Every shape's request, carried from the previous snapshot of the same cache for the
    shapes it had (a shape keeps its id and its request vector while the layout holds: a
    cluster of thousands of shapes converts only the new ones)."""
    prev = snap.carry.get(_SHAPE_REQUESTS_CARRIED)
    shapes = snap.shapes
    done: list[Res] = []
    if prev is not None and prev[0] == tuple(snap.resources):
        vecs, res = prev[1], prev[2]
        k = 0
        while k < min(len(vecs), len(shapes)) and shapes[k].requests is vecs[k]:
            k += 1
        done = res[:k]
    out = done + [res_of_vector(snap.resources, s.requests) for s in shapes[len(done) :]]
    snap.carry.put(_SHAPE_REQUESTS_CARRIED, (tuple(snap.resources), [s.requests for s in shapes], out))
    dev = shape_devices(snap)
    if dev:  # the carried list stays without devices: they follow the claims, not the shape
        out = [r.clone().add(dev[i]) if i in dev else r for i, r in enumerate(out)]
    return out


def shape_res_times(snap: ClusterSnapshot, shape: int, n: int) -> Res:
    """The request of ``n`` pods of one shape: a gang of thousands of identical pods costs one
    multiplication (for n == 1 the shared object: clone before changing it)."""
    r = task_res_of_shape(snap, shape)
    return r.clone().multi(n) if n != 1 else r


def tasks_res(snap: ClusterSnapshot, tasks: list[TaskInfo]) -> Res:
    """Sum of task requests: one addition per distinct shape."""
    out = Res()
    for shape, n in pods_per_shape(tasks).items():
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


# A job's sums with the resource columns they were made for; they name no node index.
JOB_SUMS: MemoKey[tuple[tuple[Any, ...], JobSums]] = MemoKey("job sums", node_free=True)


def job_sums(snap: ClusterSnapshot, job: JobInfo) -> JobSums:
    """The sums of ``job``, computed once per job (and resource columns)."""
    key = sums_key(snap)
    cached = job.memo.get(JOB_SUMS)
    if cached is not None and cached[0] == key:
        return cached[1]
    allocated, request, held = Res(), Res(), Res()
    n_alloc = 0
    dev = shape_devices(snap)
    # One addition per (shape, running) pair: the tasks of a job mostly share a few shapes.
    for (shape, running), n in Counter((t.shape, t.running) for t in job.tasks).items():
        r = shape_res_times(snap, shape, n)
        request.add(r)
        if running:
            allocated.add(r)
            n_alloc += n
            if shape in dev:
                held.add(dev[shape].clone().multi(n))  # the DRA devices its running pods hold
    mr = job.podgroup.spec.min_resources
    min_res = Res.from_list(mr) if mr is not None else None
    elastic = exceeded_part(allocated.clone(), min_res if min_res is not None else Res())
    admission = min_res if min_res is None or not n_alloc else exceeded_part(min_res, allocated)
    devices = _min_devices(snap, job)
    if devices is not None:
        # minResources names no DRA device (the PodGroup's pods claim them): the devices of
        # minMember pods are asked at admission too (Volcano's GetMinDRAResources), less what
        # the job's running pods hold already.
        devices = exceeded_part(devices, held)
        admission = devices if admission is None else admission.clone().add(devices)
    out = JobSums(allocated, request, n_alloc, min_res, elastic, admission)
    job.memo.put(JOB_SUMS, (key, out))
    return out


def _min_devices(snap: ClusterSnapshot, job: JobInfo) -> Res | None:
    """The DRA devices of the job's first minMember pods in task order (None: no pod of the job
    claims any)."""
    dev = shape_devices(snap)
    if not dev or not any(t.shape in dev for t in job.tasks):
        return None
    out = Res()
    for t in sorted(job.tasks, key=lambda t: t.order_key)[: max(job.min_member, 0)]:
        if t.shape in dev:
            out.add(dev[t.shape])
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


def inqueue_at_open(snap: ClusterSnapshot, job: JobInfo) -> Res | None:
    """What an admitted job keeps reserved before a session decides anything: the unallocated
    part of minResources of a Running job that has reached minMember (Volcano's rule; see
    :func:`~scheduler_plugin.plugins.queue_ledger.job_inqueue`)."""
    sums = job_sums(snap, job)
    if sums.min_resources is None:
        return None
    if written_phase(job) == "Running" and sums.n_allocated >= job.min_member:
        return inqueue_resource(job, sums.min_resources, sums.allocated)
    return None


@dataclass
class QueueJobSums:
    """What one queue's jobs hold and ask for at session open (the sums Volcano's proportion
    and the queue status add up job by job)."""

    allocated: Res = field(default_factory=Res)
    request: Res = field(default_factory=Res)
    inqueue: Res = field(default_factory=Res)
    elastic: Res = field(default_factory=Res)
    jobs: int = 0

    def clone(self) -> QueueJobSums:
        return QueueJobSums(
            self.allocated.clone(),
            self.request.clone(),
            self.inqueue.clone(),
            self.elastic.clone(),
            self.jobs,
        )

    def move(self, sums: JobSums, inqueue: Res | None, sign: int) -> None:
        """Count one job in (``sign`` 1) or out (-1)."""
        op = Res.add if sign > 0 else Res.sub
        op(self.allocated, sums.allocated)
        op(self.request, sums.request)
        if inqueue is not None:
            op(self.inqueue, inqueue)
        op(self.elastic, sums.elastic)
        self.jobs += sign


@dataclass
class _QueueFold:
    """The per-queue sums of one snapshot's jobs and what they were made from."""

    jobs: Mapping[str, JobInfo]
    queues: Mapping[str, Queue]
    resources: tuple[Any, ...]  # sums_key
    parts: dict[str, tuple[str, JobSums, Res | None]]  # job key -> (queue, sums, inqueue)
    totals: dict[str, QueueJobSums]


# Per snapshot (what its sessions read) and carried between snapshots (patched by the jobs
# that changed since).
QUEUE_JOB_SUMS: MemoKey[dict[str, QueueJobSums]] = MemoKey("queue job sums")
_QUEUE_FOLD: MemoKey[_QueueFold] = MemoKey("queue job sums, carried")


def queue_job_sums(snap: ClusterSnapshot, *, carried: bool = True) -> dict[str, QueueJobSums]:
    """Per queue of the snapshot that has jobs, the sums of its jobs at session open (read
    only). Jobs of a queue the snapshot does not know are left out, as Volcano's cache drops
    them. The sums are integers in Volcano's units, so patching them job by job (``carried``:
    from the previous snapshot of the same cache, for the jobs that changed) gives exactly what
    adding them up afresh gives; ``carried=False`` adds them up afresh (what ``--verify-state``
    holds the carried sums against)."""
    if carried:
        got = snap.memo.get(QUEUE_JOB_SUMS)
        if got is not None:
            return got
    key = sums_key(snap)
    fold = snap.carry.get(_QUEUE_FOLD) if carried else None
    if fold is None or fold.queues is not snap.queues or fold.resources != key:
        fold = _QueueFold({}, snap.queues, key, {}, {})
    changed, gone = changed_entries(fold.jobs, snap.jobs)
    parts = dict(fold.parts)
    totals = dict(fold.totals)
    copied: set[str] = set()

    def total(queue: str) -> QueueJobSums:
        if queue not in copied:  # the earlier snapshot keeps its own
            copied.add(queue)
            old = totals.get(queue)
            totals[queue] = old.clone() if old is not None else QueueJobSums()
        return totals[queue]

    for jkey in gone + [k for k, _ in changed]:
        part = parts.pop(jkey, None)
        if part is not None:
            total(part[0]).move(part[1], part[2], -1)
    for jkey, job in changed:
        if job.queue not in snap.queues:
            continue
        part = parts[jkey] = (job.queue, job_sums(snap, job), inqueue_at_open(snap, job))
        total(job.queue).move(part[1], part[2], +1)
    for queue in copied:
        if totals[queue].jobs == 0:
            del totals[queue]
    out = dict(sorted(totals.items()))
    if carried:
        snap.carry.put(_QUEUE_FOLD, _QueueFold(snap.jobs, snap.queues, key, parts, totals))
        snap.memo.put(QUEUE_JOB_SUMS, out)
    return out


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
