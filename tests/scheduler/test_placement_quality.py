"""Placement-quality regressions found by the exact-optimum benchmark (bench/quality).

Each test is a shrunk case where the optimum (MILP) is known by hand.
"""

from __future__ import annotations

from .builders import hypernode, job_pods, node, partition_policy, pod, podgroup, schedule


def gpu_node(name: str) -> dict:
    return node(name, cpu=64, memory="256Gi", gpu=8)


def test_partition_pods_are_placed_before_free_pods_that_would_take_their_room() -> None:
    # node-1 has 7 of 8 GPUs used; node-0 is empty. The 8-GPU partition pod fits only node-0,
    # the 1-GPU free pod fits either: placing the free pod first (on node-0) made the gang fail.
    nodes = [gpu_node("node-0"), gpu_node("node-1")]
    busy = pod("busy", None, cpu=4, gpu=7, memory="16Gi", node_name="node-1")
    w = job_pods("j", 1, cpu=32, gpu=8, memory="128Gi", task="w", partition_size=1)
    lone = job_pods("j", 1, cpu=4, gpu=1, memory="16Gi", task="l")
    pg = podgroup("j", 2, topology={"mode": "soft"}, sub_groups=[partition_policy("w", 1, tier=1)])
    result, _ = schedule(nodes, [busy, *w, *lone], [hypernode("leaf", 1, nodes=["node-0", "node-1"])], [pg])
    assert result.bindings == {"default/j-w-0": "node-0", "default/j-l-0": "node-1"}


def test_among_job_domains_of_one_tier_the_one_keeping_partitions_lowest_wins() -> None:
    # Two spines (tier 2). spine-0: two empty leaves of 2 nodes. spine-1: four leaves with one
    # empty and one full node each, so it bin-packs better but every 2-node partition would have
    # to straddle two leaves (partition tier 2 each) where spine-0 keeps each in one leaf (tier 1).
    nodes = [gpu_node(f"n{i}") for i in range(12)]
    busy = [pod(f"busy{i}", None, cpu=64, gpu=8, memory="256Gi", node_name=f"n{i}") for i in range(4, 12, 2)]
    leaves = [hypernode(f"leaf{j}", 1, nodes=[f"n{2 * j}", f"n{2 * j + 1}"]) for j in range(6)]
    tree = [
        *leaves,
        hypernode("spine-0", 2, children=["leaf0", "leaf1"]),
        hypernode("spine-1", 2, children=["leaf2", "leaf3", "leaf4", "leaf5"]),
    ]
    pods = job_pods("j", 4, cpu=32, gpu=8, memory="128Gi", task="w", partition_size=2)
    pg = podgroup(
        "j",
        4,
        topology={"mode": "hard", "highestTierAllowed": 2},
        sub_groups=[partition_policy("w", 2, tier=2)],
    )
    result, _ = schedule(nodes, [*busy, *pods], tree, [pg])
    assert result.jobs["default/j"].allocated_hypernode == "spine-0"
    assert sorted(result.jobs["default/j"].subgroups.values()) == ["leaf0", "leaf1"]


def test_a_soft_job_fills_its_own_leaves_before_opening_another_for_a_small_task() -> None:
    # Two 8-GPU workers take the empty nodes of leaf-a and leaf-b, so the job spans the spine and
    # every leaf under it has the same LCA score. n2 (leaf-c) has its GPUs and most CPU used:
    # bin-packing alone sends the CPU-only helper there, a third leaf, although the workers'
    # nodes still have 32 CPUs free.
    nodes = [gpu_node(f"n{i}") for i in range(3)]
    busy = pod("busy", None, cpu=56, gpu=8, memory="200Gi", node_name="n2")
    tree = [
        hypernode("leaf-a", 1, nodes=["n0"]),
        hypernode("leaf-b", 1, nodes=["n1"]),
        hypernode("leaf-c", 1, nodes=["n2"]),
        hypernode("spine", 2, children=["leaf-a", "leaf-b", "leaf-c"]),
    ]
    pods = [
        *job_pods("j", 2, cpu=32, gpu=8, memory="128Gi", task="t0"),
        *job_pods("j", 1, cpu=2, memory="4Gi", task="t1"),
    ]
    pg = podgroup("j", 3, topology={"mode": "soft"})
    result, _ = schedule(nodes, [busy, *pods], tree, [pg])
    assert len(result.bindings) == 3
    assert set(result.bindings.values()) == {"n0", "n1"}


def test_among_job_domains_of_one_tier_the_one_needing_fewer_leaves_wins() -> None:
    # No leaf holds the 4-pod gang. spine-0: two leaves of 2 empty nodes. spine-1: four leaves
    # with one empty and one full node each: better packed, but the gang would span four leaves.
    nodes = [gpu_node(f"n{i}") for i in range(12)]
    busy = [pod(f"busy{i}", None, cpu=64, gpu=8, memory="256Gi", node_name=f"n{i}") for i in range(4, 12, 2)]
    leaves = [hypernode(f"leaf{j}", 1, nodes=[f"n{2 * j}", f"n{2 * j + 1}"]) for j in range(6)]
    tree = [
        *leaves,
        hypernode("spine-0", 2, children=["leaf0", "leaf1"]),
        hypernode("spine-1", 2, children=["leaf2", "leaf3", "leaf4", "leaf5"]),
    ]
    pods = job_pods("j", 4, cpu=32, gpu=8, memory="128Gi", task="w")
    pg = podgroup("j", 4, topology={"mode": "hard", "highestTierAllowed": 2})
    result, _ = schedule(nodes, [*busy, *pods], tree, [pg])
    assert result.jobs["default/j"].allocated_hypernode == "spine-0"
    assert set(result.bindings.values()) == {"n0", "n1", "n2", "n3"}


def test_partitions_take_the_fewest_leaves_not_the_fullest_ones() -> None:
    # One spine of four 4-node leaves. leaf0 and leaf1 are empty; leaf2 and leaf3 have two busy
    # nodes each, so bin-packing scores them higher. Four 2-pod partitions (hard at the leaf)
    # fit in the two empty leaves; filling the fuller leaves first spread the job over all four
    # (the trace bench's 64-pod jobs on 3-5 leaves where 2 were free).
    nodes = [gpu_node(f"n{i}") for i in range(16)]
    busy = [pod(f"busy{i}", None, cpu=64, gpu=8, memory="256Gi", node_name=f"n{i}") for i in (8, 9, 12, 13)]
    leaves = [hypernode(f"leaf{j}", 1, nodes=[f"n{4 * j + i}" for i in range(4)]) for j in range(4)]
    tree = [*leaves, hypernode("spine", 2, children=[f"leaf{j}" for j in range(4)])]
    pods = job_pods("j", 8, cpu=32, gpu=8, memory="128Gi", task="w", partition_size=2)
    pg = podgroup(
        "j",
        8,
        topology={"mode": "hard", "highestTierAllowed": 2},
        sub_groups=[partition_policy("w", 2, tier=1)],
    )
    result, _ = schedule(nodes, [*busy, *pods], tree, [pg])
    assert len(result.bindings) == 8
    assert sorted(set(result.jobs["default/j"].subgroups.values())) == ["leaf0", "leaf1"]
