"""Fragmentation figures: how much whole-domain room each tier still has, per pod shape."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_plugin.algorithms.fragmentation import (
    FragmentationConfig,
    ShapeSpecError,
    snapshot_fragmentation,
)
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import run_session

from .builders import hypernode, job_pods, node, pod, podgroup

GiB = 1024**3


def scattered_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """12 leaves of 2 nodes (8 GPUs, 64 cpu, 512Gi each) under one spine; every leaf has 2 to 5
    GPUs free (40 in all), so no leaf can take an 8-GPU pod."""
    nodes, pods, hns = [], [], []
    free_per_leaf = [4, 3, 3, 4, 3, 3, 4, 3, 3, 4, 3, 3]  # 40 free GPUs
    for leaf, free in enumerate(free_per_leaf):
        names = [f"n{leaf}-{i}" for i in range(2)]
        for n in names:
            nodes.append(node(n, cpu=64, memory="512Gi", gpu=8))
        # The leaf's free GPUs are split over its two nodes (at most 2 on any node).
        used_a = 8 - (free + 1) // 2
        used_b = 8 - free // 2
        pods.append(pod(f"busy-{leaf}-a", None, cpu=8, gpu=used_a, node_name=names[0]))
        pods.append(pod(f"busy-{leaf}-b", None, cpu=8, gpu=used_b, node_name=names[1]))
        hns.append(hypernode(f"leaf{leaf:02d}", 1, nodes=names))
    hns.append(hypernode("spine", 2, children=[f"leaf{i:02d}" for i in range(12)]))
    return nodes, pods, hns


def test_forty_free_gpus_over_twelve_leaves_fit_no_eight_gpu_pod_in_any_leaf() -> None:
    nodes, pods, hns = scattered_cluster()
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=hns)
    report = snapshot_fragmentation(snap)
    tier1 = next(t for t in report.tiers if t.tier == 1)
    assert tier1.hypernodes == 12 and tier1.free_hypernodes == 0
    assert tier1.fit["1xnvidia.com/gpu"] == 40
    assert tier1.best["1xnvidia.com/gpu"] == 4
    # No node has 8 free, and no leaf as a whole either: the figure a platform team needs.
    assert tier1.fit["8xnvidia.com/gpu"] == 0
    assert tier1.best["8xnvidia.com/gpu"] == 0
    assert tier1.best_hypernode["8xnvidia.com/gpu"] is None
    # 4-GPU pods fit only where one node has 4 free: none here (2+2 on each node of a 4-free leaf).
    assert tier1.best["4xnvidia.com/gpu"] == 0
    tier2 = next(t for t in report.tiers if t.tier == 2)
    assert tier2.hypernodes == 1 and tier2.fit["1xnvidia.com/gpu"] == 40
    assert tier2.best["1xnvidia.com/gpu"] == 40 and tier2.best_hypernode["1xnvidia.com/gpu"] == "spine"


def test_proportional_shapes_take_their_share_of_cpu_and_memory() -> None:
    nodes, pods, hns = scattered_cluster()
    report = snapshot_fragmentation(build_snapshot(nodes=nodes, pods=pods, hypernodes=hns))
    shapes = {s.name: dict(s.requests) for s in report.shapes}
    # 64 cpu and 512Gi per 8 GPUs: 8 cpu and 64Gi per GPU, of which 90% (room for DaemonSets).
    assert shapes["4xnvidia.com/gpu"] == {
        "nvidia.com/gpu": 4000,
        "cpu": 4 * 7200,
        "memory": 4 * int(64 * GiB * 1000 * 0.9),
    }
    full = FragmentationConfig(shapes=(8,), share=1.0)
    report = snapshot_fragmentation(build_snapshot(nodes=nodes, pods=pods, hypernodes=hns), full)
    assert dict(report.shapes[0].requests) == {
        "nvidia.com/gpu": 8000,
        "cpu": 64000,
        "memory": 512 * GiB * 1000,
    }


def test_an_empty_leaf_is_free_and_fits_whole_node_pods() -> None:
    nodes = [node(f"n{i}", cpu=64, memory="512Gi", gpu=8) for i in range(4)]
    hns = [
        hypernode("leaf-a", 1, nodes=["n0", "n1"]),
        hypernode("leaf-b", 1, nodes=["n2", "n3"]),
        hypernode("spine", 2, children=["leaf-a", "leaf-b"]),
    ]
    # "Free" is about the accelerator: a cpu-only pod leaves leaf-a free, a 1-GPU pod makes
    # leaf-b (and the spine) busy.
    pods = [pod("sidecar", None, cpu=1, node_name="n0"), pod("gpu-user", None, cpu=1, gpu=1, node_name="n2")]
    report = snapshot_fragmentation(build_snapshot(nodes=nodes, pods=pods, hypernodes=hns))
    t1 = report.tiers[0]
    assert (t1.tier, t1.hypernodes, t1.free_hypernodes) == (1, 2, 1)
    assert t1.best["8xnvidia.com/gpu"] == 2 and t1.best_hypernode["8xnvidia.com/gpu"] == "leaf-a"
    assert t1.fit["8xnvidia.com/gpu"] == 3
    assert report.tiers[1].free_hypernodes == 0


def test_unschedulable_nodes_count_for_nothing() -> None:
    nodes = [
        node("n0", cpu=64, memory="512Gi", gpu=8),
        node("n1", cpu=64, memory="512Gi", gpu=8, ready=False),
    ]
    hns = [hypernode("leaf", 1, nodes=["n0", "n1"])]
    report = snapshot_fragmentation(build_snapshot(nodes=nodes, pods=[], hypernodes=hns))
    t1 = report.tiers[0]
    assert t1.free_hypernodes == 0  # a NotReady node is not free room
    assert t1.fit["8xnvidia.com/gpu"] == 1


def test_a_sessions_bindings_are_counted_as_used() -> None:
    nodes = [node(f"n{i}", cpu=64, memory="512Gi", gpu=8) for i in range(2)]
    hns = [hypernode("leaf-a", 1, nodes=["n0"]), hypernode("leaf-b", 1, nodes=["n1"])]
    pods = job_pods("train", 1, cpu=8, gpu=8)
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=hns, podgroups=[podgroup("train", 1)])
    result = run_session(snap)
    assert len(result.bindings) == 1
    before = snapshot_fragmentation(snap)
    after = snapshot_fragmentation(snap, bindings=result.bindings)
    assert before.tiers[0].free_hypernodes == 2 and after.tiers[0].free_hypernodes == 1
    assert after.tiers[0].fit["8xnvidia.com/gpu"] == 1


def test_configured_shapes_and_accelerator() -> None:
    cfg = FragmentationConfig.parse(" 2, 16 ,2", "huawei.com/ascend-1980")
    assert cfg.shapes == (2, 16) and cfg.accelerator == "huawei.com/ascend-1980"
    nodes = [node("n0", cpu=64, memory="512Gi", gpu=8)]
    report = snapshot_fragmentation(build_snapshot(nodes=nodes, pods=[], hypernodes=[]), cfg)
    assert report.shapes == [] and "huawei.com/ascend-1980" in (report.note or "")


@pytest.mark.parametrize("text", ["", "4,x", "0", "-2", "99999", ",,"])
def test_bad_shape_lists_are_refused_with_the_reason(text: str) -> None:
    with pytest.raises(ShapeSpecError, match="fragmentation shapes"):
        FragmentationConfig.parse(text)


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ShapeSpecError, match="fragmentation share"):
        FragmentationConfig.parse("8", share=1.5)
