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
from ..model.memo import MemoKey
from ..model.resources import Res, share

SHARE_DELTA = 0.000001
# Per-job dominant shares and allocations at open (without hierarchy), once per snapshot.
DRF_BASE: MemoKey[tuple[dict[str, float], dict[str, Res]]] = MemoKey("drf shares")


class Drf:
    """Per-job allocated resources and dominant shares of one session."""

    def __init__(self, ssn: Session, hierarchy: bool = False) -> None:
        self.ssn = ssn
        self.total = total_resource(ssn.snap)
        self.names = self.total.names()
        self.allocated: dict[str, Res] = {}
        self.shares: dict[str, float] = {}
        self.hierarchy = Hierarchy(self.total) if hierarchy else None
        base = ssn.snap.memo.get(DRF_BASE) if not hierarchy else None
        if base is not None:
            # Same snapshot as an earlier session (nothing changed): its per-job sums stand.
            self.shares, self.allocated = dict(base[0]), dict(base[1])
            return
        queues = ssn.snap.queues
        for job in ssn.snap.jobs.values():
            sums = job_sums(ssn.snap, job)
            a = sums.allocated
            self.shares[job.key] = self.share_of(a)
            if not a.is_empty():
                self.allocated[job.key] = a  # shared: cloned on first change
            q = queues.get(job.queue)
            if self.hierarchy is not None and q is not None:
                ann = q.metadata.annotations or {}
                path = parse_path(ann.get(HIERARCHY_ANNOTATION, ""), ann.get(WEIGHTS_ANNOTATION, ""))
                self.hierarchy.add_job(job.key, job.queue, path, a, sums.request)
        if self.hierarchy is not None:
            self.hierarchy.update()
        else:
            ssn.snap.memo.put(DRF_BASE, (dict(self.shares), dict(self.allocated)))

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
        return max((share(allocated.get(n), self.total.get(n)) for n in self.names), default=0.0)

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
