"""A big GPU cluster in use, as simulator input, for the HTML page at cluster scale.

``gpu-l<L>-n<i>`` nodes with 8 GPUs each sit in tier-1 leaves of ``per_leaf`` nodes
(``leaf<L>``), grouped ``fanout`` at a time into higher tiers up to one root. Most of the
cluster is idle; what runs is placed by hand so that every kind of cell appears:

* ``training/whole-<j>``: gangs on whole nodes (8 GPUs per pod) filling leaves 0..2 and
  half of leaf 5;
* ``training/half-a`` and ``training/half-b``: 4-GPU pods sharing the nodes of one leaf
  in the middle of the tree (two jobs on one node);
* pods of no job in the input: ``kube-system/gpu-probe-<k>`` (1 GPU each) and one
  cpu-only ``kube-system/log-agent`` (busy node, no GPU in use);
* ``training/too-wide``: a Volcano Job of 40 whole-node pods held to one leaf (tier 1),
  which cannot fit and waits.

Leaf members are exactMatch Node lists, so building the tree stays cheap at 10,000 nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simulator.result import SimResult
from simulator.store import key_of

TIER_NAMES = ["leaf", "spine", "superspine", "zone", "region", "campus", "world"]


def _node(name: str, leaf: int, gpus: int) -> dict[str, Any]:
    res = {"cpu": "96", "memory": "768Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "leaf": f"leaf{leaf}"}},
        "status": {"allocatable": res, "capacity": dict(res)},
    }


def _hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": TIER_NAMES[min(tier, len(TIER_NAMES)) - 1], "members": members},
    }


def _pod(ns: str, name: str, node: str, gpus: int, cpu: int, group: str | None) -> dict[str, Any]:
    req = {"cpu": str(cpu)}
    if gpus:
        req["nvidia.com/gpu"] = str(gpus)
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "volcano",
            "nodeName": node,
            "containers": [{"name": "main", "image": "example.com/x", "resources": {"requests": req}}],
        },
        "status": {"phase": "Running"},
    }


def _podgroup(name: str, members: int, tier: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "training"},
        "spec": {"minMember": members, "networkTopology": {"mode": "hard", "highestTierAllowed": tier}},
        "status": {"phase": "Running"},
    }


def scale_cluster(nodes: int, per_leaf: int = 32, fanout: int = 4, gpus: int = 8) -> list[dict[str, Any]]:
    """The objects of the cluster described in the module docstring (``nodes`` >= 8 leaves' worth)."""
    leaves = (nodes + per_leaf - 1) // per_leaf
    assert leaves >= 8, "the placements below need at least 8 leaves"
    objs: list[dict[str, Any]] = []
    node_names: list[list[str]] = []
    hns: list[dict[str, Any]] = []
    level: list[str] = []
    for leaf in range(leaves):
        names = [f"gpu-l{leaf}-n{i}" for i in range(min(per_leaf, nodes - leaf * per_leaf))]
        node_names.append(names)
        objs.extend(_node(n, leaf, gpus) for n in names)
        members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in names]
        hns.append(_hypernode(f"leaf{leaf}", 1, members))
        level.append(f"leaf{leaf}")
    tier = 1
    while len(level) > 1:
        tier += 1
        upper: list[str] = []
        for g in range(0, len(level), fanout):
            name = f"t{tier}-{g // fanout}"
            hn_members = [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in level[g : g + fanout]
            ]
            hns.append(_hypernode(name, tier, hn_members))
            upper.append(name)
        level = upper
    objs.extend(hns)

    # Whole-node gangs: leaves 0, 1, 2 full (one gang each), half of leaf 5.
    placements = [(0, per_leaf), (1, per_leaf), (2, per_leaf), (5, per_leaf // 2)]
    for j, (leaf, count) in enumerate(placements):
        group = f"whole-{j}"
        objs.append(_podgroup(group, count, 1))
        objs.extend(
            _pod("training", f"{group}-{k}", node_names[leaf][k], gpus, 8, group) for k in range(count)
        )
    # Two jobs of half-node pods sharing the nodes of a leaf in the middle of the tree.
    mid = leaves // 2
    for group in ("half-a", "half-b"):
        objs.append(_podgroup(group, per_leaf // 2, 1))
        objs.extend(
            _pod("training", f"{group}-{k}", node_names[mid][k], gpus // 2, 8, group)
            for k in range(per_leaf // 2)
        )
    # Pods of no job: 1-GPU probes on a few nodes of leaf 7, a cpu-only agent in the last leaf.
    objs.extend(_pod("kube-system", f"gpu-probe-{k}", node_names[7][k], 1, 1, None) for k in range(3))
    objs.append(_pod("kube-system", "log-agent", node_names[-1][0], 0, 1, None))

    # A gang too wide for one leaf: it waits, with the scheduler's reason.
    req = {"cpu": "8", "nvidia.com/gpu": str(gpus)}
    objs.append(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "too-wide", "namespace": "training"},
            "spec": {
                "schedulerName": "volcano",
                "minAvailable": per_leaf + 8,
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": per_leaf + 8,
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "w", "image": "example.com/x", "resources": {"requests": req}}
                                ]
                            }
                        },
                    }
                ],
            },
        }
    )
    return objs


def write_scale_cluster(directory: Path, nodes: int) -> Path:
    """Write :func:`scale_cluster` as one YAML file in ``directory``; returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "cluster.yaml").open("w") as f:
        yaml.safe_dump_all(scale_cluster(nodes), f, sort_keys=False)
    return directory


if __name__ == "__main__":  # python -m tests.simulator.scale_cluster DIR NODES
    import sys

    write_scale_cluster(Path(sys.argv[1]), int(sys.argv[2]))


# The reason the scheduler gives for ``too-wide`` (from a real run of this cluster at 256 nodes).
TOO_WIDE_REASON = "cannot place 40 pods within tier <= 1; tier 1: best leaf3 fits 32 of 40 pods, short 64 nvidia.com/gpu on 8 nodes"


def scale_result(nodes: int, fanout: int = 4) -> SimResult:
    """:func:`scale_cluster` as a finished simulation would leave it, without running one
    (a simulation of 10,000 nodes takes a while): the running pods are bound already, and
    ``too-wide`` is a PodGroup whose 40 pods wait with :data:`TOO_WIDE_REASON`."""
    objs = [o for o in scale_cluster(nodes, fanout=fanout) if o["kind"] != "Job"]
    group = _podgroup("too-wide", 40, 1)
    group["status"] = {"phase": "Inqueue"}
    pending = []
    for k in range(40):
        pod = _pod("training", f"too-wide-worker-{k}", "", 8, 8, "too-wide")
        del pod["spec"]["nodeName"]
        pod["status"] = {"phase": "Pending"}
        pending.append(pod)
    objs += [group, *pending]
    return SimResult(
        objects={key_of(o): o for o in objs},
        bindings={},
        bound_in_cycle={},
        evictions=[],
        rejected=[],
        warnings=[],
        created=[],
        updated=[],
        outcomes={},
        unschedulable={f"training/{p['metadata']['name']}": TOO_WIDE_REASON for p in pending},
        cycles=1,
        scheduler_ran=True,
    )
