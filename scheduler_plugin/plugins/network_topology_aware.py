"""``network-topology-aware`` plugin (volcano_impl §4): gradient, HyperNode order, node order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..algorithms.scoring import (
    MAX_NODE_SCORE,
    hypernode_binpack,
    lca_node_scores,
    normal_pod_scores,
    tier_representatives,
)
from ..config.scheduler_conf import NetworkTopologyArgs, network_topology_args
from ..model.jobs import SubJobInfo, TaskInfo, Topology
from .gang import _enabled

if TYPE_CHECKING:
    from ..framework.session import Session

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class NetworkTopologyAware:
    """HyperNode bin-packing, LCA-tier node score, tier-fading normal-pod score and tier gradients."""

    def __init__(self, ssn: Session, args: NetworkTopologyArgs) -> None:
        self.ssn = ssn
        self.args = args
        res = ssn.snap.resources
        self.weights = np.array(
            [0.0 if r == "pods" else float(args.resource_weight(r) or 0) for r in res], dtype=np.float64
        )
        self.reps = tier_representatives(ssn.snap.tree)

    # -------------------------------------------------------------- gradient
    def gradient(self, topology: Topology | None, allocated: int, root: int) -> list[list[int]] | str:
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


def register(ssn: Session, args: dict[str, Any], opt: Any) -> NetworkTopologyAware:
    """Register gradient, HyperNode order and node order functions."""
    p = NetworkTopologyAware(ssn, network_topology_args(args))
    if _enabled(opt, "enabledHyperNodeGradient"):
        ssn.gradient_fns.append(p.gradient)
    if _enabled(opt, "enabledHyperNodeOrder"):
        ssn.hypernode_order_fns.append(p.hypernode_order)
    if _enabled(opt, "enableNodeOrder"):
        ssn.node_order_fns.append(p.node_order)
    return p
