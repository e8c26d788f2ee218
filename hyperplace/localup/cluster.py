"""The fake nodes and the HyperNode tree ``hack/local-up.sh`` creates.

Nodes are created with their capacity and allocatable in ``status`` (the apiserver keeps a Node's
status on create); the fake kubelet then reports them Ready. The leaf/spine tree puts
``nodes_per_leaf`` nodes under each tier-1 leaf, ``leaves_per_spine`` leaves under each tier-2
spine and, when there is more than one spine, every spine under one tier-3 core.
"""

from __future__ import annotations

from typing import Any

from hyperplace.api.constants import TOPOLOGY_GROUP, TOPOLOGY_VERSION

LOCAL_UP_LABEL = "hyperplace.io/local-up"
GPU = "nvidia.com/gpu"


def fake_node(name: str, gpus: int, *, cpu: str = "64", memory: str = "512Gi") -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": "110", **({GPU: str(gpus)} if gpus else {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                LOCAL_UP_LABEL: "true",
            },
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def _hypernode(name: str, tier: int, tier_name: str, kind: str, members: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}",
        "kind": "HyperNode",
        "metadata": {"name": name, "labels": {LOCAL_UP_LABEL: "true"}},
        "spec": {
            "tier": tier,
            "tierName": tier_name,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def leaf_spine(
    nodes: list[str], *, nodes_per_leaf: int = 4, leaves_per_spine: int = 2
) -> list[dict[str, Any]]:
    """HyperNodes of a small leaf/spine network over ``nodes`` (see the module docstring)."""
    if not nodes:
        return []
    leaves = {f"leaf-{i}": chunk for i, chunk in enumerate(_chunks(nodes, max(1, nodes_per_leaf)))}
    spines = {f"spine-{i}": chunk for i, chunk in enumerate(_chunks(list(leaves), max(1, leaves_per_spine)))}
    out = [_hypernode(name, 1, "leaf", "Node", members) for name, members in leaves.items()]
    out += [_hypernode(name, 2, "spine", "HyperNode", members) for name, members in spines.items()]
    if len(spines) > 1:
        out.append(_hypernode("core", 3, "core", "HyperNode", list(spines)))
    return out


def cluster_objects(
    nodes: int,
    gpus_per_node: int,
    topology: str,
    *,
    nodes_per_leaf: int = 4,
    leaves_per_spine: int = 2,
) -> list[dict[str, Any]]:
    """``nodes`` fake Nodes named node-0..., and the HyperNodes of ``topology`` (leaf-spine or none)."""
    width = len(str(max(0, nodes - 1)))
    names = [f"node-{i:0{width}d}" for i in range(nodes)]
    objs = [fake_node(n, gpus_per_node) for n in names]
    if topology == "leaf-spine":
        objs += leaf_spine(names, nodes_per_leaf=nodes_per_leaf, leaves_per_spine=leaves_per_spine)
    elif topology != "none":
        raise ValueError(f"unknown topology {topology!r} (leaf-spine or none)")
    return objs
