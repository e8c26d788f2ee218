"""``nodegroup`` plugin: a Queue's node-group affinity (Volcano's ``nodegroup``).

Nodes are put in groups by the label ``volcano.sh/nodegroup-name``; a Queue's ``spec.affinity``
names the groups its jobs must or prefer to use (``nodeGroupAffinity``) and must or prefer not to
(``nodeGroupAntiAffinity``), each ``requiredDuringSchedulingIgnoredDuringExecution`` and
``preferredDuringSchedulingIgnoredDuringExecution``. As Volcano's plugin defines it:

* a node of group g passes for the queue when g is in its required or preferred affinity, or in
  its preferred anti-affinity, and not in its required anti-affinity;
* a node of a group, for a queue with no affinity at all, does not pass;
* a node with no group passes only for a queue with no affinity, and only with ``strict: false``
  (the default, ``strict: true``, keeps every job off nodes without a group);
* scores: +100 for a required group, +50 for a preferred one (with ``enablePreferredOrder``,
  50 x (n - i) / n for the i-th of n preferred groups), -1 for a preferred anti-affinity group;
* with ``enableHierarchy: true`` a queue without affinity takes its nearest ancestor's
  (``spec.parent``; ``root`` at the top).

The nodes a queue may not use are fenced around each try of its jobs (``placement/exclusive_fences.py``),
by allocate, backfill and the eviction actions alike, so a queue's pods never land, nor are
nominated, outside its groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.api.podgroup import Queue

from ..config.arguments import get_bool
from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import NODE_FENCE, NODE_ORDER
from ..framework.session import Session
from ..model.jobs import JobInfo, SubJobInfo, TaskInfo

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
GROUP_LABEL = "volcano.sh/nodegroup-name"
BASE_SCORE = 100.0


@dataclass
class Affinity:
    """A queue's node-group affinity."""

    required: set[str] = field(default_factory=set)
    preferred: list[str] = field(default_factory=list)
    anti_required: set[str] = field(default_factory=set)
    anti_preferred: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, q: Queue) -> Affinity | None:
        aff = q.spec.affinity
        if aff is None:
            return None
        out = cls()
        if aff.node_group_affinity is not None:
            out.required = set(
                aff.node_group_affinity.required_during_scheduling_ignored_during_execution or []
            )
            out.preferred = list(
                aff.node_group_affinity.preferred_during_scheduling_ignored_during_execution or []
            )
        if aff.node_group_anti_affinity is not None:
            anti = aff.node_group_anti_affinity
            out.anti_required = set(anti.required_during_scheduling_ignored_during_execution or [])
            out.anti_preferred = set(anti.preferred_during_scheduling_ignored_during_execution or [])
        return out

    def empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)

    def allows(self, group: str) -> bool:
        """Volcano's ``queueGroupAffinity.predicate``."""
        ok = group in self.required or group in self.preferred
        if group in self.anti_required:
            ok = False
        if group in self.anti_preferred:
            ok = True
        return ok

    def score(self, group: str, ordered: bool) -> float:
        """Volcano's ``queueGroupAffinity.score``."""
        s = BASE_SCORE if group in self.required else 0.0
        if group in self.preferred:
            if ordered:
                n = len(self.preferred)
                s += 0.5 * BASE_SCORE * (n - self.preferred.index(group)) / n
            else:
                s += 0.5 * BASE_SCORE
        if group in self.anti_preferred:
            s = -1.0
        return s

    def describe(self) -> str:
        parts = []
        if self.required or self.preferred:
            parts.append("node groups " + ", ".join(sorted(self.required | set(self.preferred))))
        if self.anti_required:
            parts.append("never " + ", ".join(sorted(self.anti_required)))
        return "; ".join(parts) or "no node group"


class NodeGroup:
    """The plugin's per-queue view of the nodes for one session."""

    def __init__(self, ssn: Session, strict: bool, ordered: bool, hierarchy: bool) -> None:
        self.ssn = ssn
        self.strict = strict
        self.ordered = ordered
        snap = ssn.snap
        self.groups = [st.labels.get(GROUP_LABEL) for st in snap.node_static]
        self.affinity: dict[str, Affinity | None] = {name: Affinity.of(q) for name, q in snap.queues.items()}
        if hierarchy:
            for name in list(self.affinity):
                if self.affinity[name] is None:
                    self.affinity[name] = self._inherited(name)
        self._fenced: dict[str, tuple[I64, str] | None] = {}

    def _inherited(self, name: str) -> Affinity | None:
        queues = self.ssn.snap.queues
        seen = {name}
        cur = queues.get(name)
        while cur is not None and cur.name != "root":
            parent = cur.spec.parent or "root"
            if parent in seen:
                return None  # a cycle of parents: Volcano skips building the chain
            seen.add(parent)
            got = Affinity.of(queues[parent]) if parent in queues else None
            if got is not None:
                return got
            cur = queues.get(parent)
        return None

    def _passes(self, aff: Affinity | None, group: str | None) -> bool:
        unset = aff is None or aff.empty()
        if group is None:
            return not self.strict and unset
        if unset:
            return False
        assert aff is not None
        return aff.allows(group)

    def fence(self, job: JobInfo) -> tuple[I64, str] | None:
        """The nodes ``job``'s queue may not use (once per queue and session), and why."""
        q = job.queue
        if q not in self._fenced:
            aff = self.affinity.get(q)
            bad = np.array([i for i, g in enumerate(self.groups) if not self._passes(aff, g)], dtype=np.int64)
            what = aff.describe() if aff is not None else "no node-group affinity"
            why = f"nodegroup: queue {q} may use {what} ({len(self.groups) - len(bad)} of {len(self.groups)} nodes)"
            self._fenced[q] = (bad, why) if len(bad) else None
        return self._fenced[q]

    def node_order(self, task: TaskInfo, sj: SubJobInfo, nodes: I64) -> F64:
        """Volcano's node scores for the task's queue."""
        job = self.ssn.snap.jobs.get(task.job)
        aff = self.affinity.get(job.queue) if job is not None else None
        out = np.zeros(len(nodes), dtype=np.float64)
        if aff is None:
            return out
        for k, n in enumerate(nodes.tolist()):
            g = self.groups[n]
            if g is not None:
                out[k] = aff.score(g, self.ordered)
        return out


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> NodeGroup:
    """Read ``strict`` (default true), ``enablePreferredOrder`` and ``enableHierarchy``, and
    register the fence and the node scores."""
    warnings: list[str] = []
    strict = get_bool(args, "strict", True, warnings)
    ordered = get_bool(args, "enablePreferredOrder", False, warnings)
    ssn.notes.extend(f"plugin nodegroup: {w}" for w in warnings)
    ng = NodeGroup(ssn, strict, ordered, bool(opt.explicit.get("enableHierarchy", False)))
    ssn.register(NODE_FENCE, ng.fence)
    ssn.register(NODE_ORDER, ng.node_order)
    return ng
