"""``capacity`` plugin: per-queue capability, deserved and guarantee (Volcano's ``capacity``).

Unlike ``proportion``, a queue's deserved share is written in its spec (``deserved``), not
computed from weights. Per queue: *real capability* = the cluster less every queue's
guarantee, plus the queue's own guarantee, capped by its ``capability``; *deserved* = the spec's,
capped by the real capability and raised to the guarantee.

* allocatable: a task may be allocated while the queue (and, hierarchically, every ancestor)
  stays within its real capability on the dimensions the task asks for;
* enqueueable: a PodGroup's minResources, plus what the queue holds and has admitted, less its
  elastic part, must fit the real capability of the queue and of every ancestor;
* queue order: higher priority first, then the smaller share ``allocated / deserved`` (a queue
  with no deserved is best effort: share 1, after queues that have one);
* preemptive: a queue's task may take room by preemption while the queue stays within real
  capability and is below deserved on some dimension the task asks for;
* reclaimable: a running task is a victim when its queue is above deserved on a dimension the
  task uses (or its deserved names none of them), never below its guarantee, never from a queue
  with ``reclaimable: false``, and only when it frees a dimension the reclaimer asks for.

With ``enableHierarchy`` queues form a tree through ``spec.parent`` (unset: the ``root``
queue, made up when the cluster has none, without limits). Ancestors carry the sums of their
subtree; a child's unset capability dimensions are inherited from its parent, and its real
capability is carved from the parent's. Jobs belong in leaf queues: a job of a queue with
children is refused with that reason (Volcano stops the whole plugin instead), as are jobs of
a queue whose parent chain is broken or cyclic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hyperplace.api.podgroup import Queue

from ..algorithms.queue_sums import (
    OPEN,
    excess_on,
    fmt_res,
    job_sums,
    queue_priority,
    queue_state,
    task_res,
    tasks_res,
    total_resource,
)
from ..config.arguments import get_int
from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import (
    ALLOCATABLE,
    ALLOCATABLE_REASON,
    PERMIT,
    PREEMPTIVE,
    QUEUE_EXCESS,
    QUEUE_LIMITS,
    QUEUE_ORDER,
    RECLAIMABLE,
    REJECT,
)
from ..framework.session import Session
from ..model.jobs import JobInfo, TaskInfo
from ..model.resources import Missing, Res, exceeded_part, res_max, share
from .queue_ledger import QueueLedger, job_inqueue, reclaim_walk, register_ledger

ROOT = "root"


@dataclass
class CapacityAttr:
    """One queue's attributes (Volcano's capacity ``queueAttr``)."""

    name: str
    deserved: Res
    capability: Res
    guarantee: Res
    real_capability: Res = field(default_factory=Res)
    allocated: Res = field(default_factory=Res)
    request: Res = field(default_factory=Res)
    inqueue: Res = field(default_factory=Res)
    elastic: Res = field(default_factory=Res)
    ancestors: list[str] = field(default_factory=list)  # root first
    children: list[str] = field(default_factory=list)
    share: float = 0.0

    def update_share(self) -> None:
        """Dominant ``allocated / deserved``; 1 for a queue without deserved (best effort)."""
        if self.deserved.is_empty():
            self.share = 1.0
            return
        self.share = max(
            (share(self.allocated.get(n), self.deserved.get(n)) for n in self.deserved.names()), default=0.0
        )


def _spec_res(rl: dict[str, Any] | None) -> Res:
    return Res.from_list(rl) if rl else Res()


def _guarantee(q: Queue) -> Res:
    return _spec_res((q.spec.guarantee or {}).get("resource"))


def _below_deserved(a: CapacityAttr, req: Res) -> bool:
    """With ``req`` on top, the queue stays within deserved on some dimension ``req`` asks for
    (one it has a deserved share of)."""
    future = a.allocated.clone().add(req)
    return any(future.get(n) <= a.deserved.get(n) for n in _dims(req) if a.deserved.get(n) > 0)


def _dims(r: Res) -> set[str]:
    return {n for n in r.names() if n != "pods"}


class Capacity(QueueLedger):
    """The capacity plugin's per-queue state for one session."""

    def __init__(self, ssn: Session, hierarchy: bool) -> None:
        self.ssn = ssn
        self.hierarchy = hierarchy
        # Volcano's ancestorReclaimLevel (with hierarchy): ancestors a victim's queue must be over too.
        self.ancestor_level = 0
        self.total = total_resource(ssn.snap)
        self.attrs: dict[str, CapacityAttr] = {}
        self.broken: dict[str, str] = {}  # queue -> why its jobs are refused
        if hierarchy:
            self._build_tree()
        else:
            self._build_flat()
        for a in self.attrs.values():
            a.update_share()

    # ------------------------------------------------------------------ build
    def _new_attr(self, q: Queue) -> CapacityAttr:
        return CapacityAttr(
            name=q.name,
            deserved=_spec_res(q.spec.deserved),
            capability=_spec_res(q.spec.capability),
            guarantee=_guarantee(q),
        )

    def _add_jobs(self, with_ancestors: bool) -> None:
        snap = self.ssn.snap
        for job in snap.jobs.values():
            a = self.attrs.get(job.queue)
            if a is None:
                continue
            sums = job_sums(snap, job)
            inq = job_inqueue(self.ssn, job)
            chain = [a, *(self.attrs[x] for x in a.ancestors)] if with_ancestors else [a]
            for x in chain:
                x.allocated.add(sums.allocated)
                x.request.add(sums.request)
                if inq is not None:
                    x.inqueue.add(inq)
                x.elastic.add(sums.elastic)

    def _build_flat(self) -> None:
        snap = self.ssn.snap
        total_guarantee = Res()
        for queue in snap.queues.values():
            total_guarantee.add(_guarantee(queue))
        for job in snap.jobs.values():
            q = snap.queues.get(job.queue)
            if q is None or job.queue in self.attrs:
                continue
            a = self._new_attr(q)
            cap = q.spec.capability
            real = exceeded_part(self.total.clone(), total_guarantee).add(a.guarantee)
            if cap:
                # An unset cpu or memory limit means none.
                if a.capability.cpu <= 0:
                    a.capability.cpu = math.inf
                if a.capability.memory <= 0:
                    a.capability.memory = math.inf
                real.min_dimension(a.capability, Missing.INFINITY)
            a.real_capability = real
            self.attrs[job.queue] = a
        self._add_jobs(with_ancestors=False)
        for a in self.attrs.values():
            a.deserved.min_dimension(a.real_capability, Missing.INFINITY)
            a.deserved = res_max(a.deserved, a.guarantee)

    def _build_tree(self) -> None:
        snap = self.ssn.snap
        queues = dict(snap.queues)
        if ROOT not in queues:
            queues[ROOT] = Queue.model_validate({"metadata": {"name": ROOT}})
        for q in queues.values():
            self.attrs[q.name] = self._new_attr(q)
        # Parent links; a queue on a broken or cyclic chain is set aside with the reason.
        for name in queues:
            if name == ROOT:
                continue
            chain: list[str] = []
            cur = name
            why = None
            while cur != ROOT:
                parent = queues[cur].spec.parent or ROOT
                if parent not in queues:
                    why = f"queue {cur} names parent queue {parent!r}, which does not exist"
                    break
                if parent in chain or parent == name:
                    why = f"queue {name} is in a cycle of parent queues"
                    break
                chain.append(parent)
                cur = parent
            if why is not None:
                self.broken[name] = why
                continue
            self.attrs[name].ancestors = list(reversed(chain))
        for name in self.attrs:
            if name != ROOT and name not in self.broken:
                parent = queues[name].spec.parent or ROOT
                self.attrs[parent].children.append(name)
        for name in self.broken:
            self.attrs.pop(name, None)
        self._add_jobs(with_ancestors=True)
        root = self.attrs[ROOT]
        if root.capability.is_empty():
            root.capability = Res(math.inf, math.inf, {k: math.inf for k in (self.total.scalars or {})})
        root.real_capability = root.capability.clone()
        self._check(root)

    def _check(self, a: CapacityAttr) -> None:
        """Volcano's ``checkHierarchicalQueue``: children's deserved, inherited capability and
        real capability, depth first."""
        total_guarantee, total_deserved = Res(), Res()
        kids = [self.attrs[c] for c in a.children]
        for c in kids:
            c.deserved = res_max(c.deserved, c.guarantee)
            total_deserved.add(c.deserved)
            total_guarantee.add(c.guarantee)
            if c.capability.cpu <= 0:
                c.capability.cpu = a.capability.cpu
            if c.capability.memory <= 0:
                c.capability.memory = a.capability.memory
            if a.capability.scalars is not None:
                if c.capability.scalars is None:
                    c.capability.scalars = {}
                for k, v in a.capability.scalars.items():
                    c.capability.scalars.setdefault(k, v)
        if a.name == ROOT:
            a.guarantee, a.deserved = total_guarantee, total_deserved
        for c in kids:
            real = exceeded_part(a.real_capability.clone(), total_guarantee).add(c.guarantee)
            real.min_dimension(c.capability, Missing.INFINITY)
            c.real_capability = real
        if a.deserved.names() and not total_deserved.less_equal(a.deserved, Missing.ZERO):
            self.ssn.notes.append(
                f"plugin capacity: the children of queue {a.name} deserve more ({fmt_res(total_deserved)}) "
                f"than it does ({fmt_res(a.deserved)})"
            )
        for c in kids:
            self._check(c)

    # ------------------------------------------------------------------ helpers
    def chain(self, queue: str) -> list[CapacityAttr]:
        """The queue, then its ancestors from the nearest (Volcano checks leaf to root)."""
        a = self.attrs.get(queue)
        if a is None:
            return []
        return [a, *(self.attrs[x] for x in reversed(a.ancestors))]

    def _leaf_problem(self, queue: str) -> str | None:
        if queue in self.broken:
            return self.broken[queue]
        a = self.attrs.get(queue)
        if self.hierarchy and a is not None and a.children:
            return f"queue {queue} has child queues ({', '.join(sorted(a.children))}): jobs belong in leaf queues"
        return None

    def limits(self) -> dict[str, tuple[Res, Res | None]]:
        """Each queue's deserved share and real capability, for its status."""
        return {q: (a.deserved.clone(), a.real_capability.clone()) for q, a in self.attrs.items()}

    # ------------------------------------------------------------------ callbacks
    def queue_order(self, queue: str) -> tuple[int, float, bool]:
        """Higher priority, then the smaller share, then queues with a deserved share first."""
        a = self.attrs.get(queue)
        prio = -queue_priority(self.ssn.snap.queues.get(queue))
        if a is None:
            return (prio, 1.0, True)
        return (prio, a.share, a.deserved.is_empty())

    def _allocatable_res(self, queue: str, req: Res) -> tuple[bool, str | None]:
        if queue_state(self.ssn.snap.queues.get(queue)) != OPEN:
            return False, f"queue {queue} is not Open"
        problem = self._leaf_problem(queue)
        if problem:
            return False, problem
        for a in self.chain(queue):
            ok, short = a.allocated.clone().add(req).less_equal_on(a.real_capability, req)
            if not ok:
                return False, (
                    f"queue {a.name} would exceed its capability in {', '.join(short)} "
                    f"(capability {fmt_res(a.real_capability)}; allocated {fmt_res(a.allocated)})"
                )
        return True, None

    def allocatable(self, queue: str, task: TaskInfo) -> bool:
        """Within real capability, queue and ancestors, with this task."""
        return self._allocatable_res(queue, task_res(self.ssn.snap, task))[0]

    def why_not_allocatable(self, queue: str, tasks: list[TaskInfo]) -> str | None:
        """Why ``tasks`` do not fit the queue's capability, or None."""
        return self._allocatable_res(queue, tasks_res(self.ssn.snap, tasks))[1]

    def excess(self, queue: str, tasks: list[TaskInfo]) -> Res | None:
        """What the queue must give back before ``tasks`` fit its real capability and every
        ancestor's (the most any of them asks, per dimension), or None."""
        req = tasks_res(self.ssn.snap, tasks)
        out: Res | None = None
        for a in self.chain(queue):
            got = excess_on(a.allocated.clone().add(req), a.real_capability, req)
            if got is None:
                continue
            out = got if out is None else res_max(out, got)
        return out

    def job_enqueueable(self, job: JobInfo) -> int:
        """REJECT a job whose minResources do not fit its queue's (or an ancestor's) real capability."""
        ssn = self.ssn
        state = queue_state(ssn.snap.queues.get(job.queue))
        if state != OPEN:
            ssn.enqueue_reasons.setdefault(job.key, f"queue {job.queue} is {state}, not Open")
            return REJECT
        problem = self._leaf_problem(job.queue)
        if problem:
            ssn.enqueue_reasons.setdefault(job.key, problem)
            return REJECT
        mr = job_sums(ssn.snap, job).admission
        if mr is None or job.queue not in self.attrs:
            return PERMIT
        for a in self.chain(job.queue):
            want = mr.clone().add(a.allocated).add(a.inqueue).sub(a.elastic)
            ok, short = want.less_equal_on(a.real_capability, mr)
            if not ok:
                ssn.enqueue_reasons.setdefault(
                    job.key,
                    f"queue resource quota insufficient: insufficient {', '.join(short)} "
                    f"(capacity: queue {a.name}, capability {fmt_res(a.real_capability)})",
                )
                return REJECT
        return PERMIT

    def preemptive(self, queue: str, task: TaskInfo) -> bool:
        """Within real capability, and below deserved on some dimension the task asks for; with
        ``ancestorReclaimLevel`` an ancestor that many levels up (root left out) below its own
        deserved will do when the queue is not (Volcano's ancestor reclaim)."""
        if queue_state(self.ssn.snap.queues.get(queue)) != OPEN:
            return False
        a = self.attrs.get(queue)
        if a is None:
            return False
        req = task_res(self.ssn.snap, task)
        ok, _ = a.allocated.clone().add(req).less_equal_on(a.real_capability, req)
        if not ok:
            return False
        if _below_deserved(a, req):
            return True
        if not self.hierarchy:
            return False
        for level in range(1, self.ancestor_level + 1):
            anc = self._ancestor(a, level)
            if (
                anc is not None
                and anc != ROOT
                and anc in self.attrs
                and _below_deserved(self.attrs[anc], req)
            ):
                return True
        return False

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        """Victims of queues above deserved (see the module docstring)."""
        want = _dims(task_res(self.ssn.snap, reclaimer))

        def may_take(a: CapacityAttr, allocated: Res, req: Res) -> bool:
            have = _dims(req)
            if not (have & want):
                return False  # frees nothing the reclaimer asks for
            if not a.guarantee.less_equal(allocated.clone().sub(req), Missing.ZERO):
                return False  # the queue would drop below its guarantee
            deserved_dims = _dims(a.deserved)
            return not (have & deserved_dims) or any(
                allocated.get(n) > a.deserved.get(n) for n in have if n in deserved_dims
            )

        if not self.hierarchy or self.ancestor_level <= 0:
            return reclaim_walk(self.ssn, self.attrs, reclaimees, may_take)
        return self._reclaim_with_ancestors(reclaimer, reclaimees, may_take)

    def _ancestor(self, a: CapacityAttr | None, level: int) -> str | None:
        """``a``'s ancestor ``level`` steps up (1: its parent), or None."""
        if a is None or level > len(a.ancestors):
            return None
        return a.ancestors[len(a.ancestors) - level]

    def _reclaim_with_ancestors(
        self,
        reclaimer: TaskInfo,
        reclaimees: list[TaskInfo],
        may_take: Callable[[CapacityAttr, Res, Res], bool],
    ) -> list[TaskInfo]:
        """Volcano's ``ancestorReclaimLevel``: a victim must also come from ancestors (up to
        that many levels, root and the ancestors the reclaimer shares left out) that hold more
        than they deserve on a dimension it uses, so a queue under a parent within its own share
        is not reclaimed from just because its leaf is over; and a leaf with no deserved for what
        it uses is not reclaimed from by a sibling with none either."""
        snap, level = self.ssn.snap, self.ancestor_level
        me_job = snap.jobs.get(reclaimer.job)
        me = self.attrs.get(me_job.queue) if me_job is not None else None
        want = _dims(task_res(snap, reclaimer))
        mine = {self._ancestor(me, lv) for lv in range(1, level + 1)} - {None, ROOT}
        allocations: dict[str, Res] = {}
        out: list[TaskInfo] = []
        for t in reclaimees:
            job = snap.jobs.get(t.job)
            a = self.attrs.get(job.queue) if job is not None else None
            q = snap.queues.get(job.queue) if job is not None else None
            if a is None or (q is not None and q.spec.reclaimable is False):
                continue
            req = task_res(snap, t)
            allocated = allocations.setdefault(a.name, a.allocated.clone())
            if not may_take(a, allocated, req):
                continue
            have = _dims(req)
            theirs = {self._ancestor(a, lv) for lv in range(1, level + 1)} - {None, ROOT}
            if (
                not (have & _dims(a.deserved))
                and mine & theirs
                and me is not None
                and not (want & _dims(me.deserved))
            ):
                continue  # no real contention under a shared ancestor
            checked: list[Res] = []
            ok = True
            for lv in range(1, level + 1):
                anc = self._ancestor(a, lv)
                if anc is None or anc == ROOT or anc == self._ancestor(me, lv):
                    continue
                aa = self.attrs.get(anc)
                if aa is None:
                    ok = False
                    break
                anc_alloc = allocations.setdefault(anc, aa.allocated.clone())
                checked.append(anc_alloc)
                dims = have & _dims(aa.deserved)
                if dims and not any(anc_alloc.get(n) > aa.deserved.get(n) for n in dims):
                    ok = False
                    break
            if not ok:
                continue
            allocated.sub(req)
            for x in checked:
                x.sub(req)
            out.append(t)
        return out


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> Capacity:
    """Build the queue attributes and register capacity's callbacks."""
    # enableHierarchy is off unless written true (Volcano's *bool, nil = off).
    c = Capacity(ssn, bool(opt.explicit.get("enableHierarchy", False)))
    warnings: list[str] = []
    level = get_int(args, "ancestorReclaimLevel", 0, warnings)
    if level < 0:
        warnings.append(f"ancestorReclaimLevel should be non-negative, got {level}. Falling back to 0.")
        level = 0
    c.ancestor_level = level
    for w in warnings:
        ssn.note(f"plugin capacity: {w}")
    ssn.register(QUEUE_ORDER, c.queue_order)
    ssn.register(ALLOCATABLE, c.allocatable)
    ssn.register(ALLOCATABLE_REASON, c.why_not_allocatable)
    ssn.register(QUEUE_EXCESS, c.excess)
    ssn.register(PREEMPTIVE, c.preemptive)
    ssn.register(RECLAIMABLE, c.reclaimable)
    ssn.register(QUEUE_LIMITS, c.limits)
    register_ledger(ssn, c)
    return c
