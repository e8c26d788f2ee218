"""``binpack`` plugin: node-level bin-packing score (Volcano ``BinPackingScore``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..algorithms.scoring import MAX_NODE_SCORE, node_binpack_scores
from ..config.scheduler_conf import BinpackArgs, binpack_args
from ..model.jobs import SubJobInfo, TaskInfo
from .gang import _enabled

if TYPE_CHECKING:
    from ..framework.session import Session


class Binpack:
    """Prefers nodes whose weighted utilisation after placement is highest."""

    def __init__(self, ssn: Session, args: BinpackArgs) -> None:
        self.ssn = ssn
        self.args = args
        w = [args.resource_weight(r) for r in ssn.snap.resources]
        self.weights = np.array(
            [
                0.0 if x is None or r == "pods" else float(x)
                for x, r in zip(w, ssn.snap.resources, strict=True)
            ]
        )

    def node_order(
        self, task: TaskInfo, sj: SubJobInfo, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """Binpack score of each node after placing the task (x100 x weight)."""
        if self.args.weight == 0:
            return np.zeros(len(nodes))
        st = self.ssn.state
        s = node_binpack_scores(st.used[nodes], st.alloc[nodes], task.requests, self.weights)
        return s * MAX_NODE_SCORE * self.args.weight


def register(ssn: Session, args: dict[str, Any], opt: Any) -> Binpack:
    """Register the node order function."""
    b = Binpack(ssn, binpack_args(args))
    if _enabled(opt, "enableNodeOrder"):
        ssn.node_order_fns.append(b.node_order)
    return b
