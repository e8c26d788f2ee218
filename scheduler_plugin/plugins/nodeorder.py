"""``nodeorder`` plugin: kube-scheduler's resource scores (least/most requested, balanced) and
the scores of its InterPodAffinity (preferred terms) and PodTopologySpread (ScheduleAnyway).

Arguments as in Volcano: ``leastrequested.weight`` (1), ``mostrequested.weight`` (0),
``balancedresource.weight`` (1), ``podaffinity.weight`` (2), ``podtopologyspread.weight`` (2).
Node affinity, taint and image-locality scores are not modelled.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..algorithms.scoring import MAX_NODE_SCORE
from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import NODE_ORDER
from ..framework.session import Session
from ..model.jobs import SubJobInfo, TaskInfo


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
        for name, s in st.scores(self.ssn.snap.shapes[task.shape], nodes).items():
            w = self.term_weights.get(name, 0)
            if w:
                score += w * s
        return score


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> NodeOrder:
    """Register the node order function."""
    n = NodeOrder(ssn, args)
    ssn.register(NODE_ORDER, n.node_order)
    if opt.is_enabled("enableNodeOrder"):
        ssn.state.score_with({name for name, w in n.term_weights.items() if w})
    else:
        n.term_weights = {}  # scores nothing: the session's notes say so
    return n
