"""``binpack`` plugin: node-level bin-packing score (Volcano ``BinPackingScore``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..algorithms.scoring import node_binpack_scores
from ..config.arguments import ResourceWeights, get_int, resource_weights
from ..config.scheduler_conf import PluginOption
from ..filters.plugin import MAX_NODE_SCORE
from ..framework.extension_points import NODE_ORDER
from ..framework.session import Session
from ..model.jobs import SubJobInfo, TaskInfo


@dataclass
class BinpackArgs:
    """Arguments of Volcano's node-level ``binpack`` plugin after defaulting."""

    weight: int = 1
    weights: ResourceWeights = field(default_factory=ResourceWeights)
    warnings: tuple[str, ...] = field(default=(), compare=False)


def binpack_args(arguments: Mapping[str, Any] | None) -> BinpackArgs:
    """Volcano binpack ``calculateWeight``: ``binpack.weight`` (default 1, taken as is;
    0 disables the plugin's node order), ``binpack.cpu`` / ``binpack.memory`` (default 1,
    < 0 -> 1), ``binpack.resources`` and ``binpack.resources.<name>`` (default 1, < 0 -> 1)."""
    args = arguments or {}
    w: list[str] = []
    weight = get_int(args, "binpack.weight", 1, w)
    weights = resource_weights(args, "binpack", w)
    return BinpackArgs(weight=weight, weights=weights, warnings=tuple(w))


class Binpack:
    """Prefers nodes whose weighted utilisation after placement is highest."""

    def __init__(self, ssn: Session, args: BinpackArgs) -> None:
        self.ssn = ssn
        self.args = args
        w = [args.weights.of(r) for r in ssn.snap.resources]
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


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> Binpack:
    """Register the node order function."""
    b = Binpack(ssn, binpack_args(args))
    ssn.register(NODE_ORDER, b.node_order)
    return b
