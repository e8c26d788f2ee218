"""Synthetic 4-tier GPU clusters and workloads for the scheduler benchmarks.

Tree: 32 nodes per leaf (tier 1), 8 leaves per spine (tier 2), 8 spines per superspine
(tier 3); the scheduler adds the virtual root (tier 4). Nodes have 8 GPUs, 96 cpu, 1Ti memory.
Background load: a seeded fraction of nodes runs one pod using 1..8 GPUs.
"""

from __future__ import annotations

import random
from typing import Any

from hyperplace.api import HyperNode, PodGroup
from hyperplace.api.constants import GROUP_NAME_ANNOTATION, PARTITION_ID_KEY, TASK_INDEX_KEY, TASK_SPEC_KEY

NODES_PER_LEAF = 32
LEAVES_PER_SPINE = 8
SPINES_PER_SUPER = 8
GPUS = 8


def cluster(
    n_nodes: int, load: float = 0.35, seed: int = 1
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[HyperNode]]:
    """Nodes, background pods and HyperNodes of a synthetic cluster."""
    rng = random.Random(seed)
    nodes, busy = [], []
    names = [f"node-{i:05d}" for i in range(n_nodes)]
    for nm in names:
        alloc = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(GPUS)}
        nodes.append(
            {
                "metadata": {"name": nm, "labels": {"kubernetes.io/hostname": nm}},
                "spec": {},
                "status": {
                    "allocatable": alloc,
                    "capacity": alloc,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
        if rng.random() < load:
            g = rng.randint(1, GPUS)
            busy.append(
                {
                    "metadata": {"name": f"bg-{nm}", "namespace": "bg"},
                    "spec": {
                        "nodeName": nm,
                        "schedulerName": "default-scheduler",
                        "containers": [
                            {
                                "name": "c",
                                "resources": {"requests": {"cpu": str(g * 4), "nvidia.com/gpu": str(g)}},
                            }
                        ],
                    },
                    "status": {"phase": "Running"},
                }
            )
    hns: list[HyperNode] = []
    leaves = [names[i : i + NODES_PER_LEAF] for i in range(0, n_nodes, NODES_PER_LEAF)]
    leaf_names = []
    for li, members in enumerate(leaves):
        nm = f"leaf-{li:04d}"
        leaf_names.append(nm)
        hns.append(_hn(nm, 1, [("Node", m) for m in members]))
    spine_names = []
    for si in range(0, len(leaf_names), LEAVES_PER_SPINE):
        nm = f"spine-{si // LEAVES_PER_SPINE:03d}"
        spine_names.append(nm)
        hns.append(_hn(nm, 2, [("HyperNode", c) for c in leaf_names[si : si + LEAVES_PER_SPINE]]))
    for ui in range(0, len(spine_names), SPINES_PER_SUPER):
        nm = f"super-{ui // SPINES_PER_SUPER:02d}"
        hns.append(_hn(nm, 3, [("HyperNode", c) for c in spine_names[ui : ui + SPINES_PER_SUPER]]))
    return nodes, busy, hns


def _hn(name: str, tier: int, members: list[tuple[str, str]]) -> HyperNode:
    return HyperNode.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "tier": tier,
                "members": [{"type": t, "selector": {"exactMatch": {"name": m}}} for t, m in members],
            },
        }
    )


def gang(
    name: str, pods: int, gpus: int, topology: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], PodGroup]:
    """A one-task gang of ``pods`` pods with ``gpus`` GPUs each."""
    return _pods(name, pods, gpus, None), _pg(name, pods, topology, None)


def partitioned(
    name: str, partitions: int, size: int, gpus: int, part_tier: int, job_tier: int
) -> tuple[list[dict[str, Any]], PodGroup]:
    """A two-level gang: ``partitions`` x ``size`` pods, partitions hard ``part_tier``, job hard ``job_tier``."""
    policy = {
        "name": "worker",
        "subGroupSize": size,
        "labelSelector": {"matchLabels": {TASK_SPEC_KEY: "worker"}},
        "matchLabelKeys": [PARTITION_ID_KEY],
        "networkTopology": {"mode": "hard", "highestTierAllowed": part_tier},
    }
    return (
        _pods(name, partitions * size, gpus, size),
        _pg(name, partitions * size, {"mode": "hard", "highestTierAllowed": job_tier}, [policy]),
    )


def _pods(name: str, n: int, gpus: int, psize: int | None) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        labels = {TASK_SPEC_KEY: "worker", TASK_INDEX_KEY: str(i)}
        if psize:
            labels[PARTITION_ID_KEY] = str(i // psize)
        out.append(
            {
                "metadata": {
                    "name": f"{name}-worker-{i}",
                    "namespace": "default",
                    "labels": labels,
                    "annotations": {GROUP_NAME_ANNOTATION: name},
                    "uid": f"{name}-{i}",
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [
                        {
                            "name": "c",
                            "resources": {"requests": {"cpu": str(gpus * 4), "nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                },
                "status": {"phase": "Pending"},
            }
        )
    return out


def _pg(
    name: str, min_member: int, topology: dict[str, Any] | None, policies: list[dict[str, Any]] | None
) -> PodGroup:
    spec: dict[str, Any] = {"minMember": min_member}
    if topology:
        spec["networkTopology"] = topology
    if policies:
        spec["subGroupPolicy"] = policies
    return PodGroup.model_validate({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
