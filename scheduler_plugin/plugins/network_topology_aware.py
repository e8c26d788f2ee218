"""``network-topology-aware`` plugin: gradient, HyperNode order, node order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..algorithms.scoring import (
    hypernode_binpack,
    lca_node_scores,
    normal_pod_scores,
    tier_representatives,
)
from ..config.arguments import ResourceWeights, get_bool, get_float, get_int, resource_weights
from ..config.scheduler_conf import PluginOption
from ..filters.plugin import MAX_NODE_SCORE
from ..framework.extension_points import HYPERNODE_GRADIENT, HYPERNODE_ORDER, NODE_ORDER
from ..framework.session import Session
from ..model.jobs import SubJobInfo, TaskInfo, TopologyConstraint

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass
class NetworkTopologyArgs:
    """Arguments of the ``network-topology-aware`` plugin after Volcano's defaulting."""

    weight: int = 1
    binpack: ResourceWeights = field(default_factory=ResourceWeights)
    normal_pod_enable: bool = True
    normal_pod_fading: float = 0.8
    evict_max_hypernodes: int = 8
    warnings: tuple[str, ...] = field(default=(), compare=False)


def network_topology_args(arguments: Mapping[str, Any] | None) -> NetworkTopologyArgs:
    """Volcano's ``getPriorityWeight``, ``getNormalPodConfig`` and
    ``getMaxHyperNodesForEviction`` for the network-topology-aware plugin."""
    args = arguments or {}
    w: list[str] = []
    weight = get_int(args, "weight", 1, w)
    binpack = resource_weights(args, "hypernode.binpack", w)
    enable = get_bool(args, "hypernode.binpack.normal-pod.enable", True, w)
    fading = get_float(args, "hypernode.binpack.normal-pod.fading", 0.8, w)
    max_hn = get_int(args, "hypernode.gradient.evict.max-hypernodes", 8, w)
    return NetworkTopologyArgs(
        weight=1 if weight < 0 else weight,
        binpack=binpack,
        normal_pod_enable=enable,
        # 0 is allowed: only tier-1 hypernodes then count for normal pods.
        normal_pod_fading=0.8 if fading < 0 else fading,
        evict_max_hypernodes=8 if max_hn <= 0 else max_hn,
        warnings=tuple(w),
    )


class NetworkTopologyAware:
    """HyperNode bin-packing, LCA-tier node score, tier-fading normal-pod score and tier gradients."""

    def __init__(self, ssn: Session, args: NetworkTopologyArgs) -> None:
        self.ssn = ssn
        self.args = args
        res = ssn.snap.resources
        self.weights = np.array(
            [0.0 if r == "pods" else float(args.binpack.of(r) or 0) for r in res], dtype=np.float64
        )
        self.reps = tier_representatives(ssn.snap.tree)

    # -------------------------------------------------------------- gradient
    def gradient(
        self, topology: TopologyConstraint | None, allocated: int, root: int
    ) -> list[list[int]] | str:
        """Candidates grouped by tier ascending; hard mode only, else ``[[root]]``.

        With an allocated HyperNode the search root is its highest ancestor within the limit,
        intersected with ``root`` (the smaller if nested, an error if disjoint).
        """
        if topology is None or topology.mode != "hard" or topology.limit is None:
            return [[root]]
        tree = self.ssn.snap.tree
        limit = topology.limit
        search = root
        if allocated >= 0:
            if tree.tiers[allocated] > limit:
                return (
                    f"allocated HyperNode {tree.names[allocated]} (tier {int(tree.tiers[allocated])}) "
                    f"is above highestTierAllowed {limit}"
                )
            top = allocated
            while tree.parent[top] != -1 and tree.tiers[tree.parent[top]] <= limit:
                top = int(tree.parent[top])
            if tree.is_ancestor(root, top):
                search = top
            elif tree.is_ancestor(top, root):
                search = root
            else:
                return f"allocated HyperNode {tree.names[allocated]} is outside {tree.names[root]}"
        levels = [ids.tolist() for t, ids in self.ssn.subtree_by_tier(search).items() if t <= limit]
        return levels

    # -------------------------------------------------------------- hypernode order
    def _tasks_on(self, sj: SubJobInfo, hns: I64) -> F64:
        tree = self.ssn.snap.tree
        nodes = [t.node if t.running else self.ssn.placed.get(t.key, -1) for t in sj.tasks]
        nodes = [n for n in nodes if n >= 0]
        out = np.zeros(len(hns), dtype=np.float64)
        if not nodes or not sj.tasks:
            return out
        for i, h in enumerate(hns.tolist()):
            s = tree.node_sets[h]
            pos = np.searchsorted(s, nodes)
            pos = np.minimum(pos, len(s) - 1) if len(s) else pos
            out[i] = np.count_nonzero(s[pos] == nodes) if len(s) else 0
        return out / len(sj.tasks)

    def hypernode_order(self, sj: SubJobInfo | None, request: I64, cands: I64) -> F64:
        """HyperNode bin-packing score; ties get the SubJob's task share (x100 x weight)."""
        st = self.ssn.state
        s = hypernode_binpack(st.hn_used[cands], st.hn_alloc[cands], request, self.weights)
        if sj is not None and len(s) > 1:
            top = s == s.max()
            if top.sum() > 1:
                s = s + np.where(top, self._tasks_on(sj, cands), 0.0)
        return s * MAX_NODE_SCORE * self.args.weight

    # -------------------------------------------------------------- node order
    def node_order(self, task: TaskInfo, sj: SubJobInfo, nodes: I64) -> F64:
        """LCA-tier score for network-aware pods, tier-fading bin-packing for the others."""
        st = self.ssn.state
        tree = self.ssn.snap.tree
        if sj.topology is not None:
            allocated = self.ssn.subjob_hn.get(sj.id, -1)
            s = lca_node_scores(tree, nodes, allocated)
            if len(s) > 1 and allocated >= 0:
                top = s == s.max()
                if top.sum() > 1:
                    leaves = tree.leaf_of[nodes]
                    uniq = np.unique(leaves[top & (leaves >= 0)])
                    if len(uniq):
                        extra = self._tasks_on(sj, uniq)
                        for leaf, e in zip(uniq.tolist(), extra.tolist(), strict=True):
                            s[top & (leaves == leaf)] += e
            return s * MAX_NODE_SCORE * self.args.weight
        if not self.args.normal_pod_enable:
            return np.zeros(len(nodes))
        s = normal_pod_scores(
            tree,
            self.reps,
            st.hn_used,
            st.hn_alloc,
            task.requests,
            self.weights,
            self.args.normal_pod_fading,
            nodes,
        )
        return s * MAX_NODE_SCORE * self.args.weight


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> NetworkTopologyAware:
    """Register gradient, HyperNode order and node order functions."""
    p = NetworkTopologyAware(ssn, network_topology_args(args))
    ssn.register(HYPERNODE_GRADIENT, p.gradient)
    ssn.register(HYPERNODE_ORDER, p.hypernode_order)
    ssn.register(NODE_ORDER, p.node_order)
    return p
