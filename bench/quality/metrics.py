"""Placement-quality metrics on the array model.

Every function is a pure function of a topology/state and a placement so that the
harnesses, the oracle and the tests share one definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .model import GPU, ClusterState, IntArray, JobSpec, Topology


def lca_tier(topo: Topology, nodes: IntArray) -> int:
    """Tier of the lowest HyperNode holding every node in ``nodes``.

    One node (or several in one leaf) gives tier 1: the leaf is the closest domain a
    HyperNode tree describes. The virtual root (tier ``T + 1``) holds everything.
    """
    if len(nodes) == 0:
        raise ValueError("no nodes")
    for t in range(topo.n_tiers):
        row = topo.anc[t, nodes]
        if (row == row[0]).all():
            return t + 1
    return topo.root_tier


def leaf_span(topo: Topology, nodes: IntArray) -> int:
    """Number of distinct tier-1 domains (leaf switches) the nodes touch."""
    return len(np.unique(topo.anc[0, nodes]))


def ring_crossings(topo: Topology, nodes: IntArray) -> int:
    """Consecutive pods (ranks, in the placement's task-then-index order) on different leaves."""
    leaves = topo.anc[0, nodes]
    return int((leaves[1:] != leaves[:-1]).sum())


def min_leaf_span(pods: int, leaf_capacity_pods: int) -> int:
    """Lower bound ``ceil(pods / leaf capacity)`` on the leaves a gang must span."""
    return max(1, math.ceil(pods / max(1, leaf_capacity_pods)))


@dataclass(frozen=True)
class Quality:
    """The lexicographic objective of a placement: job tier, partition tiers, leaves."""

    job_tier: int
    partition_tiers: tuple[int, ...]
    leaves: int

    @property
    def partition_tier_sum(self) -> int:
        return sum(self.partition_tiers)

    def key(self) -> tuple[int, int, int]:
        """Sort key: lower is better (lexicographic, as the oracle optimises it)."""
        return (self.job_tier, self.partition_tier_sum, self.leaves)


def quality(topo: Topology, job: JobSpec, placement: IntArray) -> Quality:
    """Job LCA tier, per-partition LCA tiers (in ``job.partitions`` order) and leaf span."""
    parts = tuple(lca_tier(topo, placement[job.pod_partition == p]) for p in range(len(job.partitions)))
    return Quality(lca_tier(topo, placement), parts, leaf_span(topo, placement))


def violations(state: ClusterState, job: JobSpec, placement: IntArray | None) -> list[str]:
    """Why ``placement`` is not a valid gang placement of ``job`` on ``state`` (empty: valid).

    Checks that every pod has a node, capacity on every resource, the job's hard tier
    bound and each partition's hard tier bound.
    """
    if placement is None:
        return []
    topo = state.topo
    out: list[str] = []
    if len(placement) != job.n_pods:
        return [f"{len(placement)} of {job.n_pods} pods placed"]
    used = state.used.copy()
    np.add.at(used, placement, job.req)
    over = np.argwhere(used > state.alloc)
    for n, r in over[:3]:
        out.append(f"node {topo.node_names[n]} over capacity on resource {r}")
    q = quality(topo, job, placement)
    if job.topology is not None and q.job_tier > job.topology.limit(topo.root_tier):
        out.append(f"job tier {q.job_tier} > hard limit {job.topology.highest_tier}")
    for p, tier in enumerate(q.partition_tiers):
        spec = job.partition_topology(p)
        if spec is not None and tier > spec.limit(topo.root_tier):
            out.append(f"partition {p} tier {tier} > hard limit {spec.highest_tier}")
    return out


def pods_fit_per_node(state: ClusterState, req: IntArray) -> IntArray:
    """How many pods of shape ``req`` fit on each node's free capacity."""
    free = state.free
    fit = np.full(free.shape[0], np.iinfo(np.int64).max // 4, dtype=np.int64)
    for r in np.flatnonzero(req > 0):
        fit = np.minimum(fit, free[:, r] // req[r])
    return np.maximum(fit, 0)


def stranded_gpus(state: ClusterState, req: IntArray) -> int:
    """Free GPUs that pods of shape ``req`` cannot use because of per-node fragmentation.

    A node with 3 free GPUs cannot host an 8-GPU pod: those 3 GPUs are stranded for a
    job of 8-GPU pods (and so are free GPUs on a node whose CPU or memory is exhausted).
    Counts ``sum(free_gpu) - gpu_per_pod * sum(pods that fit per node)``.
    """
    free_gpu = state.free[:, GPU]
    if req[GPU] <= 0:
        return 0
    usable = np.minimum(pods_fit_per_node(state, req) * req[GPU], free_gpu)
    return int(free_gpu.sum() - usable.sum())
