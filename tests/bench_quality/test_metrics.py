"""Metric functions on hand-made placements."""

from __future__ import annotations

import numpy as np

from bench.quality.metrics import (
    lca_tier,
    leaf_span,
    min_leaf_span,
    quality,
    stranded_gpus,
    violations,
)
from bench.quality.model import ClusterState, JobSpec, NetTopology, Task, uniform_tree

GPU8 = (32_000, 128 * 1024, 8)


def test_tree_layout() -> None:
    topo = uniform_tree([2, 2, 2])
    assert topo.n_nodes == 8
    assert topo.n_tiers == 2 and topo.root_tier == 3
    assert topo.anc[0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert topo.anc[1].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert topo.members[1][1].tolist() == [4, 5, 6, 7]
    assert topo.leaf_size == 2


def test_lca_tier_and_leaf_span() -> None:
    topo = uniform_tree([2, 2, 2])
    same_node = np.asarray([3, 3])
    same_leaf = np.asarray([2, 3])
    same_spine = np.asarray([0, 3])
    across = np.asarray([1, 4])
    assert lca_tier(topo, same_node) == 1
    assert lca_tier(topo, same_leaf) == 1
    assert lca_tier(topo, same_spine) == 2
    assert lca_tier(topo, across) == 3  # the virtual root
    assert leaf_span(topo, same_leaf) == 1
    assert leaf_span(topo, np.asarray([0, 2, 3, 6])) == 3
    assert min_leaf_span(5, 2) == 3
    assert min_leaf_span(4, 2) == 2
    assert min_leaf_span(0, 2) == 1


def test_quality_reports_partitions_in_order(two_by_two: ClusterState) -> None:
    job = JobSpec("j", (Task("w", GPU8, 4, partition_size=2, partition_topology=NetTopology("hard", 1)),))
    # Partition 0 on leaf 0, partition 1 split over leaves 2 and 3 (same spine).
    q = quality(two_by_two.topo, job, np.asarray([0, 1, 4, 6]))
    assert q.partition_tiers == (1, 2)
    assert q.job_tier == 3
    assert q.leaves == 3
    assert q.key() == (3, 3, 3)


def test_violations_catch_capacity_and_hard_bounds(two_by_two: ClusterState) -> None:
    job = JobSpec(
        "j",
        (Task("w", GPU8, 4, partition_size=2, partition_topology=NetTopology("hard", 1)),),
        NetTopology("hard", 2),
    )
    assert violations(two_by_two, job, np.asarray([0, 1, 2, 3])) == []
    over = violations(two_by_two, job, np.asarray([0, 0, 2, 3]))
    assert any("over capacity" in v for v in over)
    spread = violations(two_by_two, job, np.asarray([0, 2, 1, 3]))
    assert any("partition 0 tier 2" in v for v in spread)
    across = violations(two_by_two, job, np.asarray([0, 1, 4, 5]))
    assert any("job tier 3" in v for v in across)
    assert violations(two_by_two, job, None) == []


def test_stranded_gpus_counts_fragments() -> None:
    topo = uniform_tree([4, 1])
    alloc = np.tile(np.asarray([64_000, 256 * 1024, 8], dtype=np.int64), (4, 1))
    used = np.zeros_like(alloc)
    used[0, 2] = 5  # 3 free: useless for an 8-GPU pod, fine for 1-GPU pods
    used[1, 2] = 8  # full
    used[2, 0] = 64_000  # GPUs free but no CPU left: all 8 stranded
    state = ClusterState(topo, alloc, used)
    eight = np.asarray([8_000, 1024, 8])
    one = np.asarray([1_000, 1024, 1])
    four = np.asarray([1_000, 1024, 4])
    assert stranded_gpus(state, eight) == 3 + 8
    assert stranded_gpus(state, one) == 8  # only node 2 (no CPU)
    assert stranded_gpus(state, four) == 3 + 8  # node 0 has 3 < 4
    assert stranded_gpus(state, np.asarray([1_000, 1024, 0])) == 0


def test_leaf_capacity_uses_the_largest_leaf() -> None:
    from bench.quality.model import Topology
    from bench.quality.sim import leaf_capacity_pods

    topo = Topology.build([0, 1, 1, 1], [[0, 0]], ("leaf", "spine"))
    alloc = np.tile(np.asarray([64_000, 256 * 1024, 8], dtype=np.int64), (4, 1))
    state = ClusterState(topo, alloc, alloc.copy())  # full: capacity is about the empty cluster
    assert leaf_capacity_pods(state, JobSpec("j", (Task("w", GPU8, 1),))) == 3
    assert leaf_capacity_pods(state, JobSpec("j", (Task("w", (1_000, 1024, 2), 1),))) == 12
