"""Worked examples of the network-topology-aware plugin's scoring formulas."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler_plugin.algorithms.scoring import (
    hypernode_binpack,
    lca_node_scores,
    node_binpack_scores,
    normal_pod_scores,
    tier_representatives,
    tier_score,
)
from scheduler_plugin.model.hypernode_tree import HyperNodeTree

from .builders import seven_tree

RES = ["cpu", "memory", "pods", "nvidia.com/gpu"]


def test_hypernode_binpack_is_the_weighted_mean_of_used_plus_request_over_allocatable() -> None:
    # Per-resource (used + request) / allocatable, weighted mean; 0 if it overflows.
    w = np.array([5.0, 1.0, 0.0, 2.0])  # cpu, memory, pods (never weighed), gpu
    used = np.array([[8000, 0, 3000, 4000], [0, 0, 0, 0], [15000, 0, 0, 0]])
    alloc = np.array([[16000, 64 << 30, 110000, 16000]] * 3)
    req = np.array([4000, 0, 1000, 4000])
    s = hypernode_binpack(used, alloc, req, w)
    # Memory is not requested, pods has no weight: (5*12/16 + 2*8/16) / 7
    assert s[0] == pytest.approx((5 * 0.75 + 2 * 0.5) / 7)
    assert s[1] == pytest.approx((5 * 0.25 + 2 * 0.25) / 7)
    assert s[2] == 0.0  # cpu 15 + 4 > 16


def test_binpack_scores_a_node_without_a_requested_resource_as_volcano_does_a_hypernode_not() -> None:
    # A pod asks 3 cpu, 4Gi and 3 example.com/foo of a node with 4 cpu, 16Gi and no foo, under
    # weights cpu 2, memory 3, foo 8 (Volcano's binpack TestNode). Volcano's binpack plugin
    # counts foo as 0 with its weight, (2*3/4 + 3*4/16 + 8*0) / 13, and does not call it an
    # overflow; network-topology-aware's HyperNode bin-packing refuses the HyperNode.
    w = np.array([2.0, 3.0, 0.0, 8.0])  # cpu, memory, pods, example.com/foo
    used = np.zeros((1, 4), dtype=np.int64)
    alloc = np.array([[4000, 16 << 30, 10000, 0]])
    req = np.array([3000, 4 << 30, 1000, 3000])
    assert node_binpack_scores(used, alloc, req, w)[0] == pytest.approx((2 * 0.75 + 3 * 0.25) / 13)
    assert hypernode_binpack(used, alloc, req, w)[0] == 0.0
    # Where the node has some foo, too little of it is an overflow for both.
    alloc[0, 3] = 2000
    assert node_binpack_scores(used, alloc, req, w)[0] == 0.0


def test_tier_score_is_linear_between_the_lowest_and_the_highest_tier() -> None:
    assert tier_score(1, 1, 4) == 1.0
    assert tier_score(2, 1, 4) == pytest.approx(2 / 3)
    assert tier_score(4, 1, 4) == 0.0
    assert tier_score(5, 1, 4) == 0.0
    assert tier_score(3, 3, 3) == 1.0


def test_lca_score_prefers_nodes_closer_to_the_allocated_hypernode() -> None:
    # Allocated rack-0 (s0); rack-1 (s1) shares tor-0 (s4, tier 2); rack-2 only the spine.
    names = [f"node{i}" for i in range(8)]
    tree = HyperNodeTree.build(seven_tree(), names, {n: {} for n in names})
    s0 = tree.index["s0"]
    scores = lca_node_scores(tree, np.arange(8), s0)
    # Tiers 1..4 (virtual root 4): same leaf 1, LCA tier 2 -> 2/3, LCA tier 3 -> 1/3.
    assert scores.tolist() == pytest.approx([1, 1, 2 / 3, 2 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert lca_node_scores(tree, np.arange(8), -1).tolist() == [0.0] * 8  # first pod: no preference


def test_normal_pod_score_fades_by_tier_and_favours_fragmented_domains() -> None:
    names = [f"node{i}" for i in range(8)]
    tree = HyperNodeTree.build(seven_tree(), names, {n: {} for n in names})
    reps = tier_representatives(tree)
    w = np.array([1.0, 1.0, 0.0])  # cpu, memory, pods (never weighed)
    alloc_nodes = np.array([[4000, 0, 110000]] * 8)
    used_nodes = np.zeros((8, 3), dtype=np.int64)
    used_nodes[[0, 2, 4], 0] = 4000  # node0, node2, node4 busy
    hn_alloc = np.stack([alloc_nodes[s].sum(axis=0) for s in tree.node_sets])
    hn_used = np.stack([used_nodes[s].sum(axis=0) for s in tree.node_sets])
    req = np.array([4000, 0, 1000])
    scores = normal_pod_scores(tree, reps, hn_used, hn_alloc, req, w, 0.8, np.arange(8))
    weights = [1, 0.8, 0.64, 0.512]  # fading^(t-1), tiers 1..4
    node1 = [1.0, 3 / 4, 4 / 8, 4 / 8]  # s0 full, s4 3 of 4, s6 4 of 8, root 4 of 8
    node5 = [1.0, 2 / 4, 4 / 8, 4 / 8]
    node6 = [2 / 4, 2 / 4, 4 / 8, 4 / 8]
    for n, parts in ((1, node1), (5, node5), (6, node6)):
        assert scores[n] == pytest.approx(
            sum(a * b for a, b in zip(weights, parts, strict=True)) / sum(weights)
        )
    assert scores[1] == scores[3] > scores[5] > scores[6]
    # fading 0: only tier 1 counts (0^0 = 1).
    only1 = normal_pod_scores(tree, reps, hn_used, hn_alloc, req, w, 0.0, np.arange(8))
    assert only1[1] == only1[5] == 1.0 and only1[6] == 0.5
