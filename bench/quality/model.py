"""Array model of a cluster, its HyperNode tree and a gang job, shared by every harness.

The schedulers under test see the cluster through different front doors (ours through
wire-format objects, the baselines through these arrays), but every placement is judged
on this one model so that all of them are measured by the same ruler.

Conventions:
* resources are integer columns ``RESOURCES`` = cpu (milli), memory (MiB), nvidia.com/gpu;
* real HyperNode tiers are ``1..T``; the virtual root (Volcano's ``<cluster-top-hypernode>``)
  is tier ``T + 1`` and holds every node;
* a node's domain at tier ``t`` is ``topo.anc[t - 1, node]``, a per-tier local index, so
  per-domain sums are one ``np.bincount`` per tier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

RESOURCES: tuple[str, str, str] = ("cpu", "memory", "nvidia.com/gpu")
CPU, MEM, GPU = 0, 1, 2


@dataclass(frozen=True)
class Topology:
    """A HyperNode tree over ``N`` nodes with ``T`` real tiers and the virtual root.

    ``anc`` has shape ``(T + 1, N)``; row ``T`` is all zeros (the root). ``parent[t - 1][d]``
    is the local index, at tier ``t + 1``, of domain ``d`` of tier ``t``.
    """

    node_names: tuple[str, ...]
    anc: IntArray
    domain_names: tuple[tuple[str, ...], ...]  # per tier 1..T+1
    parent: tuple[IntArray, ...]  # per tier 1..T

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_tiers(self) -> int:
        """Number of real tiers ``T`` (the root is tier ``T + 1``)."""
        return self.anc.shape[0] - 1

    @property
    def root_tier(self) -> int:
        return self.n_tiers + 1

    def n_domains(self, tier: int) -> int:
        return len(self.domain_names[tier - 1])

    @cached_property
    def members(self) -> tuple[tuple[IntArray, ...], ...]:
        """``members[t - 1][d]``: the node indices of domain ``d`` at tier ``t``."""
        out = []
        for t in range(self.root_tier):
            row = self.anc[t]
            order = np.argsort(row, kind="stable")
            bounds = np.searchsorted(row[order], np.arange(self.n_domains(t + 1) + 1))
            out.append(tuple(order[bounds[d] : bounds[d + 1]] for d in range(self.n_domains(t + 1))))
        return tuple(out)

    @cached_property
    def leaf_size(self) -> int:
        """Nodes in the largest tier-1 domain (the leaf capacity used by span lower bounds)."""
        return int(np.bincount(self.anc[0]).max())

    @classmethod
    def build(cls, leaf_of_node: list[int], parents: list[list[int]], prefix: tuple[str, ...]) -> Topology:
        """Build from ``leaf_of_node`` (tier-1 index per node) and, per tier ``t >= 1``,
        the parent index at tier ``t + 1`` of every tier-``t`` domain.

        ``prefix[t - 1]`` names the domains of tier ``t`` (``leaf`` -> ``leaf-3``); the root
        tier is added here.
        """
        n = len(leaf_of_node)
        rows = [np.asarray(leaf_of_node, dtype=np.int64)]
        for par in parents:
            rows.append(np.asarray(par, dtype=np.int64)[rows[-1]])
        rows.append(np.zeros(n, dtype=np.int64))
        counts = [max(leaf_of_node) + 1] + [max(p) + 1 for p in parents] + [1]
        names: list[tuple[str, ...]] = [
            tuple(f"{prefix[t]}-{d}" for d in range(counts[t])) for t in range(len(counts) - 1)
        ]
        names.append(("<cluster-top-hypernode>",))
        parent_arrays = [np.asarray(p, dtype=np.int64) for p in parents]
        parent_arrays.append(np.zeros(counts[-2], dtype=np.int64))
        width = len(str(max(n - 1, 1)))
        return cls(
            node_names=tuple(f"node-{i:0{width}d}" for i in range(n)),
            anc=np.vstack(rows),
            domain_names=tuple(names),
            parent=tuple(parent_arrays),
        )


def uniform_tree(fanouts: list[int], prefix: tuple[str, ...] = ("leaf", "spine", "core", "zone")) -> Topology:
    """A regular tree: ``fanouts[0]`` nodes per leaf, ``fanouts[1]`` leaves per tier-2, ...

    The last fan-out is the number of top-tier domains under the virtual root.
    """
    if len(fanouts) < 2:
        raise ValueError("need at least nodes-per-leaf and a top-level count")
    n_leaves = math.prod(fanouts[1:])
    leaf_of_node = [leaf for leaf in range(n_leaves) for _ in range(fanouts[0])]
    parents: list[list[int]] = []
    count = n_leaves
    for f in fanouts[1:-1]:
        parents.append([d // f for d in range(count)])
        count //= f
    return Topology.build(leaf_of_node, parents, prefix)


@dataclass
class ClusterState:
    """Allocatable and used resources per node, on a topology. ``used`` is mutated by
    simulations; ``copy()`` before a dry run."""

    topo: Topology
    alloc: IntArray  # (N, R)
    used: IntArray  # (N, R)

    @property
    def free(self) -> IntArray:
        return self.alloc - self.used

    def copy(self) -> ClusterState:
        return ClusterState(self.topo, self.alloc, self.used.copy())

    def apply(self, req: IntArray, placement: IntArray, sign: int = 1) -> None:
        """Add (``sign=1``) or remove (``-1``) the pods ``req[i]`` on nodes ``placement[i]``."""
        np.add.at(self.used, placement, sign * req)


TopologyMode = Literal["hard", "soft"]


@dataclass(frozen=True)
class NetTopology:
    """A ``networkTopology`` spec: hard with a tier bound, or soft (prefer low tiers)."""

    mode: TopologyMode
    highest_tier: int | None = None

    def limit(self, root_tier: int) -> int:
        """The highest tier a placement may use (soft and unbounded mean the root)."""
        if self.mode == "hard" and self.highest_tier is not None:
            return self.highest_tier
        return root_tier


@dataclass(frozen=True)
class Task:
    """One task of a job: ``replicas`` identical pods; optionally cut into partitions of
    ``partition_size`` consecutive indexes (a Volcano ``partitionPolicy``)."""

    name: str
    req: tuple[int, int, int]
    replicas: int
    partition_size: int | None = None
    partition_topology: NetTopology | None = None


@dataclass(frozen=True)
class JobSpec:
    """A gang job: every pod must be placed (``minMember`` = number of pods)."""

    name: str
    tasks: tuple[Task, ...]
    topology: NetTopology | None = None
    meta: dict[str, float] = field(default_factory=dict, compare=False, hash=False)

    @cached_property
    def req(self) -> IntArray:
        """``(P, R)`` requests, pods in task order then index order."""
        rows = [t.req for t in self.tasks for _ in range(t.replicas)]
        return np.asarray(rows, dtype=np.int64).reshape(-1, len(RESOURCES))

    @property
    def n_pods(self) -> int:
        return int(self.req.shape[0])

    @cached_property
    def pod_task(self) -> IntArray:
        return np.asarray([k for k, t in enumerate(self.tasks) for _ in range(t.replicas)], dtype=np.int64)

    @cached_property
    def pod_index(self) -> IntArray:
        """The pod's index within its task (``volcano.sh/task-index``)."""
        return np.asarray([i for t in self.tasks for i in range(t.replicas)], dtype=np.int64)

    @cached_property
    def partitions(self) -> tuple[tuple[int, int], ...]:
        """``(task index, partition id)`` of every partition, in pod order."""
        out: list[tuple[int, int]] = []
        for k, t in enumerate(self.tasks):
            if t.partition_size:
                out.extend((k, p) for p in range(math.ceil(t.replicas / t.partition_size)))
        return tuple(out)

    @cached_property
    def pod_partition(self) -> IntArray:
        """Global partition number of each pod (index into ``partitions``), -1 for none."""
        index = {key: i for i, key in enumerate(self.partitions)}
        out = []
        for k, i in zip(self.pod_task.tolist(), self.pod_index.tolist(), strict=True):
            size = self.tasks[k].partition_size
            out.append(index[(k, i // size)] if size else -1)
        return np.asarray(out, dtype=np.int64)

    def partition_topology(self, p: int) -> NetTopology | None:
        return self.tasks[self.partitions[p][0]].partition_topology

    @property
    def gpus(self) -> int:
        return int(self.req[:, 2].sum())
