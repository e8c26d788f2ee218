"""``drf`` plugin: dominant-resource fairness between jobs (Volcano's ``drf``).

A job's share is its dominant share: the largest, over the cluster's resources, of what the
job holds divided by the cluster total. Jobs with the smaller share go first (job order), and
preemption may take a task only from a job whose share, without that task, stays at or above
the preemptor's share with its new task (the preemptable filter). Shares move with every
allocation of the session (event handlers), as in Volcano. With ``enableHierarchy: true``
drf also orders queues and allows reclaim by hierarchical DRF over the queues'
``volcano.sh/hierarchy`` paths (:mod:`.hdrf`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..algorithms.hdrf import HIERARCHY_ANNOTATION, WEIGHTS_ANNOTATION, Hierarchy, QueueRank, parse_path
from ..algorithms.queue_sums import job_sums, sums_by, task_res, total_resource
from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import (
    JOB_ORDER,
    ON_ALLOCATE,
    ON_DEALLOCATE,
    PREEMPTABLE,
    QUEUE_ORDER,
    RECLAIMABLE,
)
from ..framework.session import Session
from ..model.jobs import JobInfo, TaskInfo
from ..model.memo import MemoKey, changed_entries
from ..model.resources import Res, share
from ..model.snapshot import ClusterSnapshot

SHARE_DELTA = 0.000001
# Per-job dominant shares and allocations at open (without hierarchy): per snapshot, and
# carried between snapshots (patched by the jobs that changed since).
DRF_BASE: MemoKey[tuple[dict[str, float], dict[str, Res]]] = MemoKey("drf shares")


@dataclass
class _ShareFold:
    jobs: Mapping[str, JobInfo]
    resources: tuple[str, ...]
    total: Res
    shares: dict[str, float]
    allocated: dict[str, Res]


_SHARE_FOLD: MemoKey[_ShareFold] = MemoKey("drf shares, carried")


def dominant_share(allocated: Res, total: Res, names: list[str]) -> float:
    """The largest, over ``names``, of ``allocated`` against ``total``."""
    return max((share(allocated.get(n), total.get(n)) for n in names), default=0.0)


def job_shares(snap: ClusterSnapshot, *, carried: bool = True) -> tuple[dict[str, float], dict[str, Res]]:
    """Every job's dominant share at open, and what it holds (jobs holding something), read
    only. ``carried``: the previous snapshot's, patched for the jobs that changed since (a job's
    values depend on the job and the cluster total alone); else computed afresh, which
    ``--verify-state`` holds the carried ones against."""
    if carried:
        got = snap.memo.get(DRF_BASE)
        if got is not None:
            return got
    total = total_resource(snap)
    names = total.names()
    columns = tuple(snap.resources)
    fold = snap.carry.get(_SHARE_FOLD) if carried else None
    if fold is None or fold.total != total or fold.resources != columns:
        fold = _ShareFold({}, columns, total, {}, {})
    changed, gone = changed_entries(fold.jobs, snap.jobs)
    shares, allocated = dict(fold.shares), dict(fold.allocated)
    for key in gone:
        shares.pop(key, None)
        allocated.pop(key, None)
    for key, job in changed:
        a = job_sums(snap, job).allocated
        shares[key] = dominant_share(a, total, names)
        if a.is_empty():
            allocated.pop(key, None)
        else:
            allocated[key] = a  # shared: sessions clone on first change
    if carried:
        snap.carry.put(_SHARE_FOLD, _ShareFold(snap.jobs, columns, total, shares, allocated))
        snap.memo.put(DRF_BASE, (shares, allocated))
    return shares, allocated


class Drf:
    """Per-job allocated resources and dominant shares of one session."""

    def __init__(self, ssn: Session, hierarchy: bool = False) -> None:
        self.ssn = ssn
        self.total = total_resource(ssn.snap)
        self.names = self.total.names()
        self.allocated: dict[str, Res] = {}
        self.shares: dict[str, float] = {}
        self.hierarchy = Hierarchy(self.total) if hierarchy else None
        if not hierarchy:
            shares, allocated = job_shares(ssn.snap)
            self.shares, self.allocated = dict(shares), dict(allocated)
            return
        assert self.hierarchy is not None
        queues = ssn.snap.queues
        for job in ssn.snap.jobs.values():
            sums = job_sums(ssn.snap, job)
            a = sums.allocated
            self.shares[job.key] = self.share_of(a)
            if not a.is_empty():
                self.allocated[job.key] = a  # shared: cloned on first change
            q = queues.get(job.queue)
            if q is not None:
                ann = q.metadata.annotations or {}
                path = parse_path(ann.get(HIERARCHY_ANNOTATION, ""), ann.get(WEIGHTS_ANNOTATION, ""))
                self.hierarchy.add_job(job.key, job.queue, path, a, sums.request)
        self.hierarchy.update()

    def queue_order(self, queue: str) -> QueueRank:
        """Hierarchical DRF: the queue whose path stands lower goes first."""
        assert self.hierarchy is not None
        return self.hierarchy.queue_key(queue)

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        """Hierarchical DRF: tasks whose leaving keeps the reclaimer's queue ahead of theirs."""
        assert self.hierarchy is not None
        snap = self.ssn.snap
        me = snap.jobs.get(reclaimer.job)
        if me is None or me.queue not in snap.queues:
            return []
        cands = [
            (i, t.job, snap.jobs[t.job].queue, task_res(snap, t))
            for i, t in enumerate(reclaimees)
            if t.job in snap.jobs and snap.jobs[t.job].queue in snap.queues
        ]
        keep = self.hierarchy.reclaimable((me.key, me.queue, task_res(snap, reclaimer)), cands)
        return [reclaimees[i] for i in keep]

    def share_of(self, allocated: Res) -> float:
        """Dominant share of ``allocated`` against the cluster total."""
        return dominant_share(allocated, self.total, self.names)

    def job_order(self, job: JobInfo) -> float:
        """The smaller dominant share first."""
        return self.shares.get(job.key, 0.0)

    def _alloc(self, key: str) -> Res:
        return self.allocated.get(key) or Res()

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> list[TaskInfo]:
        """Victims whose job keeps a share >= the preemptor job's share after the move."""
        snap = self.ssn.snap
        ls = self.share_of(self._alloc(preemptor.job).clone().add(task_res(snap, preemptor)))
        allocations: dict[str, Res] = {}
        out: list[TaskInfo] = []
        for t in preemptees:
            a = allocations.get(t.job)
            if a is None:
                a = allocations[t.job] = self._alloc(t.job).clone()
            a.sub(task_res(snap, t))
            rs = self.share_of(a)
            if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                out.append(t)
        return out

    def _move(self, tasks: list[TaskInfo], sign: int) -> None:
        moved = sums_by(self.ssn.snap, tasks, lambda t: t.job)
        if self.hierarchy is not None:
            self.hierarchy.move(moved, sign)
        for job, r in moved.items():
            a = self._alloc(job).clone()
            if sign > 0:
                a.add(r)
            else:
                a.sub(r)
            self.allocated[job] = a
            self.shares[job] = self.share_of(a)

    def on_allocate(self, tasks: list[TaskInfo]) -> None:
        """The job holds more."""
        self._move(tasks, +1)

    def on_deallocate(self, tasks: list[TaskInfo]) -> None:
        """The job holds less."""
        self._move(tasks, -1)


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> Drf:
    """Register drf's job order, preemptable filter and event handlers, and with
    ``enableHierarchy`` its queue order and reclaim filter."""
    # enableHierarchy is off unless written true (Volcano's *bool, nil = off).
    hierarchy = bool(opt.explicit.get("enableHierarchy", False))
    d = Drf(ssn, hierarchy)
    if hierarchy:
        ssn.register(QUEUE_ORDER, d.queue_order)
        ssn.register(RECLAIMABLE, d.reclaimable)
    ssn.register(PREEMPTABLE, d.preemptable)
    ssn.register(JOB_ORDER, d.job_order)
    ssn.register(ON_ALLOCATE, d.on_allocate)
    ssn.register(ON_DEALLOCATE, d.on_deallocate)
    return d
