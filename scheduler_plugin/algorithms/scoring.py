"""Volcano-compatible scores, vectorised (the network-topology-aware plugin's formulas).

* :func:`hypernode_binpack` — HyperNodeOrderFn: weighted mean of (used + request) / allocatable
  over the weighted, requested resources; 0 when the request does not fit the aggregate.
* :func:`lca_node_scores` — network-aware pods: tierScore of LCA(lowest-tier HyperNode of the
  node, the SubJob's allocated HyperNode); 1 when equal, 0 without an allocated HyperNode.
* :func:`normal_pod_scores` — pods without topology: tier-weighted fading of the per-tier
  HyperNode bin-packing score (``fading^(t-1)``, 0^0 = 1; nodes outside any HyperNode of a tier
  score 1 there).
* :func:`node_binpack_scores` — the ``binpack`` plugin's node score.

Scores are returned unscaled in [0, 1]; callers multiply by ``100 * weight`` (MaxNodeScore).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ..model.hypernode_tree import HyperNodeTree

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Num = npt.NDArray[Any]  # int64 per-node values or float64 HyperNode sums


def hypernode_binpack(used: Num, alloc: Num, request: I64, weights: F64) -> F64:
    """Bin-packing score of k domains (rows of ``used``/``alloc``) for a summed ``request``;
    0 where it overflows, a resource the domain has none of included."""
    return _binpack(used, alloc, request, weights, absent_overflows=True)


def _binpack(used: Num, alloc: Num, request: I64, weights: F64, *, absent_overflows: bool) -> F64:
    """Weighted mean over the requested, weighted resources of (used + request) / allocatable,
    0 for a row where the request overflows. A resource a row has none of counts 0 with its
    weight, or overflows (``absent_overflows``)."""
    sel = (request > 0) & (weights > 0)
    if not sel.any():
        return np.zeros(used.shape[0], dtype=np.float64)
    u = used[:, sel] + request[sel]
    a = alloc[:, sel]
    fits = ((u <= a) | (not absent_overflows and a == 0)).all(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(a > 0, u / np.where(a > 0, a, 1), 0.0)
    w = weights[sel]
    score = (ratio * w).sum(axis=1) / w.sum()
    return np.where(fits, score, 0.0)


def tier_score(tier: int | I64, min_tier: int, max_tier: int) -> F64:
    """(max - t) / (max - min) inside [min, max]; 1 when min == max; 0 outside."""
    t = np.asarray(tier, dtype=np.float64)
    if max_tier == min_tier:
        return np.where(t == min_tier, 1.0, 0.0)
    inside = (t >= min_tier) & (t <= max_tier)
    return np.where(inside, (max_tier - t) / (max_tier - min_tier), 0.0)


def lca_node_scores(tree: HyperNodeTree, nodes: I64, allocated: int) -> F64:
    """LCA-tier score of each node for a network-aware pod whose SubJob sits in ``allocated``."""
    out = np.zeros(len(nodes), dtype=np.float64)
    if allocated < 0 or not len(nodes):
        return out
    leaves = tree.leaf_of[nodes]
    uniq = np.unique(leaves[leaves >= 0])
    lo, hi = tree.sorted_tiers[0], tree.sorted_tiers[-1]
    per: dict[int, float] = {}
    for leaf in uniq.tolist():
        if leaf == allocated:
            per[leaf] = 1.0
        else:
            per[leaf] = float(tier_score(int(tree.tiers[tree.lca(leaf, allocated)]), lo, hi))
    for leaf, s in per.items():
        out[leaves == leaf] = s
    return out


def tier_representatives(tree: HyperNodeTree) -> dict[int, I64]:
    """For each tier: the first HyperNode (lowest id) at that tier containing each node, or -1."""
    anc = tree.ancestor_matrix()
    return {t: anc[i] for i, t in enumerate(tree.sorted_tiers)}


def normal_pod_scores(
    tree: HyperNodeTree,
    reps: Mapping[int, I64],
    hn_used: Num,
    hn_alloc: Num,
    request: I64,
    weights: F64,
    fading: float,
    nodes: I64,
) -> F64:
    """Tier-weighted fading HyperNode bin-packing score of each node in ``nodes``.

    Every HyperNode is scored once (one vectorised bin-packing over all of them) and each node
    gathers the scores of its representatives per tier; a node outside every HyperNode of a
    tier gets 1 there.
    """
    lo, hi = tree.sorted_tiers[0], tree.sorted_tiers[-1]
    h = len(tree)
    per_hn = np.empty(h + 1, dtype=np.float64)
    per_hn[:h] = hypernode_binpack(hn_used, hn_alloc, request, weights)
    per_hn[h] = 1.0  # slot for "no HyperNode at this tier"
    total = np.zeros(len(nodes), dtype=np.float64)
    wsum = 0.0
    for t in range(lo, hi + 1):
        wt = 1.0 if t - 1 == 0 else fading ** (t - 1)
        wsum += wt
        if wt == 0.0:
            continue
        rep = reps.get(t)
        if rep is None:
            total += wt  # no HyperNode at this tier contains any node: full score
            continue
        hs = rep[nodes]
        total += wt * per_hn[np.where(hs >= 0, hs, h)]
    return total / wsum if wsum > 0 else total


def node_binpack_scores(used: Num, alloc: Num, request: I64, weights: F64) -> F64:
    """Volcano ``binpack`` plugin: weighted (used + request) / allocatable; 0 if it overflows.
    A requested resource the node has none of scores 0 with its weight (Volcano's
    ``ResourceBinPackingScore`` for a zero capacity), unlike a HyperNode's, where it overflows."""
    return _binpack(used, alloc, request, weights, absent_overflows=False)
