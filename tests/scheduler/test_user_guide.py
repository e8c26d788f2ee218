"""The network-topology user guide's scenarios (its three Jobs and its bin-packing examples),
each as a story a user would tell."""

from __future__ import annotations

from scheduler_plugin.config.scheduler_conf import load_scheduler_config

from .builders import (
    eight_nodes,
    guide_tree,
    job_pods,
    node,
    nodes_of,
    partition_policy,
    pod,
    podgroup,
    schedule,
    seven_tree,
)

GUIDE_HN0 = {f"node{i}" for i in range(4)}
GUIDE_HN1 = {f"node{i}" for i in range(4, 8)}


def test_331_hard_tier1_job_runs_four_pods_in_one_tier1_hypernode_and_leaves_four_pending() -> None:
    # Job: minAvailable 4, 8 replicas of a full-node pod, hard highestTierAllowed 1.
    pods = job_pods("network-topology-job", 8, cpu=4)
    pg = podgroup("network-topology-job", 4, topology={"mode": "hard", "highestTierAllowed": 1})
    result, _ = schedule(eight_nodes(), pods, guide_tree(), [pg])

    placed = set(result.bindings.values())
    assert len(result.bindings) == 4
    assert placed in (GUIDE_HN0, GUIDE_HN1)
    assert len(result.unschedulable) == 4
    job = result.jobs["default/network-topology-job"]
    assert job.phase == "Running"
    assert job.allocated_hypernode in ("hypernode0", "hypernode1")


def test_332_two_partitions_each_fill_their_own_tier1_hypernode_within_the_tier2_job() -> None:
    pods = job_pods("network-topology-job", 8, cpu=4, partition_size=4)
    pg = podgroup(
        "network-topology-job",
        4,
        topology={"mode": "hard", "highestTierAllowed": 2},
        sub_groups=[partition_policy("t0", 4, tier=1)],
    )
    result, _ = schedule(eight_nodes(), pods, guide_tree(), [pg])

    assert len(result.bindings) == 8, result.unschedulable
    part0 = {result.bindings[f"default/network-topology-job-t0-{i}"] for i in range(4)}
    part1 = {result.bindings[f"default/network-topology-job-t0-{i}"] for i in range(4, 8)}
    assert {frozenset(part0), frozenset(part1)} == {frozenset(GUIDE_HN0), frozenset(GUIDE_HN1)}
    job = result.jobs["default/network-topology-job"]
    assert job.allocated_hypernode == "hypernode2"
    assert sorted(job.subgroups.values()) == ["hypernode0", "hypernode1"]


def test_333_job_without_topology_puts_its_second_pod_next_to_the_first() -> None:
    pods = job_pods("network-topology-job", 2, cpu=4)
    result, _ = schedule(eight_nodes(), pods, guide_tree(), [podgroup("network-topology-job", 2)])

    placed = set(result.bindings.values())
    assert len(placed) == 2
    # Both in the same tier-1 HyperNode: the second prefers the busier HyperNode0/1.
    assert placed <= GUIDE_HN0 or placed <= GUIDE_HN1
    assert result.jobs["default/network-topology-job"].allocated_hypernode is None


def test_25_two_partitions_prefer_the_already_used_hypernode() -> None:
    # Two tier-1 HyperNodes of 4 nodes with 8 cpu each; HyperNode0 is partly used already.
    nodes = [node(f"node{i}", cpu=8) for i in range(8)]
    busy = [pod("other-0", None, cpu=4, node_name="node0"), pod("other-1", None, cpu=4, node_name="node1")]
    pods = job_pods("bp", 4, cpu=2, partition_size=2)
    pg = podgroup(
        "bp",
        4,
        topology={"mode": "hard", "highestTierAllowed": 2},
        sub_groups=[partition_policy("t0", 2, tier=1)],
    )
    result, _ = schedule(nodes, busy + pods, guide_tree(), [pg])

    assert len(nodes_of(result, "default/bp-")) == 4
    assert set(nodes_of(result, "default/bp-").values()) <= GUIDE_HN0
    assert sorted(result.jobs["default/bp"].subgroups.values()) == ["hypernode0", "hypernode0"]


def test_25_normal_pods_fill_the_fragmented_hypernodes_first() -> None:
    # 8 nodes, 7 HyperNodes; node0, node2 and node4 are busy. Two independent pods.
    busy = [pod(f"busy-{n}", None, cpu=4, node_name=f"node{n}") for n in (0, 2, 4)]
    pods = [pod("a-0", "a", cpu=4), pod("b-0", "b", cpu=4)]
    result, _ = schedule(eight_nodes(), busy + pods, seven_tree(), [podgroup("a", 1), podgroup("b", 1)])

    assert sorted(result.bindings.values()) == ["node1", "node3"]


def test_25_normal_pod_binpack_can_be_switched_off() -> None:
    conf = load_scheduler_config(
        """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: network-topology-aware
    arguments:
      hypernode.binpack.normal-pod.enable: false
"""
    )
    busy = [pod(f"busy-{n}", None, cpu=4, node_name=f"node{n}") for n in (0, 2, 4)]
    result, _ = schedule(
        eight_nodes(), [*busy, pod("a-0", "a", cpu=4)], seven_tree(), [podgroup("a", 1)], config=conf
    )
    # Without the HyperNode-level score every free node ties: the first by name wins.
    assert result.bindings == {"default/a-0": "node1"}


def test_e2e_tree_hard_tier2_job_stays_inside_s4_or_s5() -> None:
    # Volcano's e2e cluster: 8 nodes, s0..s3 / s4, s5 / s6. A 4-pod full-node job, hard tier 2.
    pods = job_pods("j", 4, cpu=4)
    result, _ = schedule(
        eight_nodes(),
        pods,
        seven_tree(),
        [podgroup("j", 4, topology={"mode": "hard", "highestTierAllowed": 2})],
    )
    placed = set(result.bindings.values())
    assert placed in ({"node0", "node1", "node2", "node3"}, {"node4", "node5", "node6", "node7"})
    assert result.jobs["default/j"].allocated_hypernode in ("s4", "s5")


def test_e2e_tree_hard_tier1_job_too_big_for_any_tier1_waits_with_per_tier_reason() -> None:
    pods = job_pods("j", 3, cpu=4)
    result, _ = schedule(
        eight_nodes(),
        pods,
        seven_tree(),
        [podgroup("j", 3, topology={"mode": "hard", "highestTierAllowed": 1})],
    )
    assert result.bindings == {}
    job = result.jobs["default/j"]
    assert job.phase == "Pending"
    assert job.explanation is not None
    lines = job.explanation.lines()
    assert any(line.startswith("tier 1: best s0 fits 2 of 3 pods") for line in lines), lines
    assert job.conditions[0]["type"] == "Unschedulable"
