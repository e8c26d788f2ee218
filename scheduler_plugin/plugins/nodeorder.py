"""``nodeorder`` plugin: kube-scheduler's resource scores (least/most requested, balanced), its
NodeAffinity (preferred node affinity) and TaintToleration (PreferNoSchedule) scores, and the
scores of its InterPodAffinity (preferred terms) and PodTopologySpread (ScheduleAnyway).

Arguments as in Volcano: ``leastrequested.weight`` (1), ``mostrequested.weight`` (0),
``balancedresource.weight`` (1), ``nodeaffinity.weight`` (2), ``tainttoleration.weight`` (3),
``podaffinity.weight`` (2), ``podtopologyspread.weight`` (2). Image locality is not scored (the
scheduler does not read the nodes' image lists): an ``imagelocality.weight`` given is said to be
without effect.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..config.scheduler_conf import PluginOption
from ..filters.node_affinity import preferred_node_affinity_score
from ..filters.plugin import MAX_NODE_SCORE, default_normalize_score
from ..filters.taint_toleration import intolerable_prefer_no_schedule
from ..framework.extension_points import NODE_ORDER
from ..framework.session import Session
from ..model.jobs import SubJobInfo, TaskInfo
from ..model.snapshot import Shape


def _weight(args: dict[str, Any], key: str, default: int) -> int:
    v = args.get(key, default)
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


class NodeOrder:
    """Vectorised LeastAllocated / MostAllocated / BalancedAllocation over cpu and memory, plus
    the InterPodAffinity and PodTopologySpread scores."""

    def __init__(self, ssn: Session, args: dict[str, Any]) -> None:
        self.ssn = ssn
        self.least = _weight(args, "leastrequested.weight", 1)
        self.most = _weight(args, "mostrequested.weight", 0)
        self.balanced = _weight(args, "balancedresource.weight", 1)
        self.node_affinity = _weight(args, "nodeaffinity.weight", 2)
        self.taints = _weight(args, "tainttoleration.weight", 3)
        if _weight(args, "imagelocality.weight", 0):
            ssn.note(
                "nodeorder: imagelocality.weight is accepted without effect (node image lists are not read)"
            )
        # Per shape id, NodeAffinity's raw score per node, -1 until asked (nodes' facts only).
        self._affinity_raw: dict[int, npt.NDArray[np.int64]] = {}
        # The scores the filters' plugins compute from their counts, by plugin name.
        self.term_weights = {
            "InterPodAffinity": _weight(args, "podaffinity.weight", 2),
            "PodTopologySpread": _weight(args, "podtopologyspread.weight", 2),
        }
        self.cols = [i for i, r in enumerate(ssn.snap.resources) if r in ("cpu", "memory")]

    def node_order(
        self, task: TaskInfo, sj: SubJobInfo, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """Weighted least/most-requested, balanced-resource and inter-pod term scores (x100)."""
        st = self.ssn.state
        c = self.cols
        alloc = st.alloc[nodes][:, c].astype(np.float64)
        req = (st.used[nodes][:, c] + task.requests[c]).astype(np.float64)
        safe = np.where(alloc > 0, alloc, 1.0)
        frac = np.where(alloc > 0, np.minimum(req / safe, 1.0), 1.0)
        score = np.zeros(len(nodes))
        if self.least:
            score += self.least * (1.0 - frac).mean(axis=1) * MAX_NODE_SCORE
        if self.most:
            score += self.most * frac.mean(axis=1) * MAX_NODE_SCORE
        if self.balanced:
            score += self.balanced * (1.0 - frac.std(axis=1)) * MAX_NODE_SCORE
        shape = self.ssn.snap.shapes[task.shape]
        if self.node_affinity and shape.constraints.preferred_node_terms:
            score += self.node_affinity * default_normalize_score(
                self._node_affinity(shape, nodes), reverse=False
            )
        if self.taints and len(self.ssn.snap.prefer_no_schedule):
            score += self.taints * default_normalize_score(self._intolerable(shape, nodes), reverse=True)
        for name, s in st.scores(shape, nodes).items():
            w = self.term_weights.get(name, 0)
            if w:
                score += w * s
        return score

    def _node_affinity(self, shape: Shape, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """NodeAffinity's raw scores of ``nodes``, each node's computed the first time asked."""
        snap = self.ssn.snap
        raw = self._affinity_raw.get(shape.id)
        if raw is None:
            raw = self._affinity_raw[shape.id] = np.full(snap.num_nodes, -1, dtype=np.int64)
        terms = shape.constraints.preferred_node_terms
        for i in nodes[raw[nodes] < 0].tolist():
            raw[i] = preferred_node_affinity_score(terms, snap.node_static[i])
        out: npt.NDArray[np.int64] = raw[nodes]
        return out

    def _intolerable(self, shape: Shape, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """TaintToleration's raw scores of ``nodes`` (only nodes with a PreferNoSchedule taint
        can have one)."""
        snap = self.ssn.snap
        out = np.zeros(len(nodes), dtype=np.int64)
        tainted = np.flatnonzero(np.isin(nodes, snap.prefer_no_schedule))
        tol = shape.constraints.tolerations
        for j in tainted.tolist():
            out[j] = intolerable_prefer_no_schedule(snap.node_static[int(nodes[j])], tol)
        return out


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> NodeOrder:
    """Register the node order function."""
    n = NodeOrder(ssn, args)
    ssn.register(NODE_ORDER, n.node_order)
    if opt.is_enabled("enableNodeOrder"):
        ssn.state.score_with({name for name, w in n.term_weights.items() if w})
    else:
        n.term_weights = {}  # scores nothing: the session's notes say so
    return n
