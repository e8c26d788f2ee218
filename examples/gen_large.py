#!/usr/bin/env python3
"""Generate a large simulator input: a regular HyperNode tree of GPU nodes and gang jobs.

    python examples/gen_large.py --nodes 2048 --per-leaf 32 --fanout 4 --jobs 6 --out /tmp/big
    hyperplace simulate /tmp/big --html /tmp/big.html

Leaves (tier 1) hold ``--per-leaf`` nodes; every higher tier groups ``--fanout``
HyperNodes of the tier below, up to a single root. Leaves select their nodes with a
regexMatch on the node-name prefix, so the YAML stays small. Jobs ask for whole
nodes (``--gpus`` GPUs per pod) with a hard tier-2 bound, sizes cycling through
half a leaf, a leaf and two leaves, so some share leaves and the last may wait.
Output is deterministic for given arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml


def node(name: str, gpus: int, cpu: int, labels: dict[str, str]) -> dict[str, Any]:
    res = {"cpu": str(cpu), "memory": f"{cpu * 8}Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": res, "capacity": dict(res)},
    }


def hypernode(name: str, tier: int, tier_name: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": tier_name, "members": members},
    }


def job(name: str, pods: int, gpus: int, cpu: int, mode: str, tier: int, namespace: str) -> dict[str, Any]:
    nt: dict[str, Any] = {"mode": mode}
    if mode == "hard":
        nt["highestTierAllowed"] = tier
    req = {"cpu": str(cpu), "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": pods,
            "networkTopology": nt,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": pods,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "example.com/trainer:latest",
                                    "resources": {"requests": req, "limits": req},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


def generate(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cluster objects, job objects)."""
    nodes: list[dict[str, Any]] = []
    hns: list[dict[str, Any]] = []
    leaves = (args.nodes + args.per_leaf - 1) // args.per_leaf
    level: list[str] = []
    for leaf in range(leaves):
        prefix = f"{args.prefix}-l{leaf}-"
        for i in range(args.per_leaf):
            if len(nodes) >= args.nodes:
                break
            nodes.append(
                node(f"{prefix}n{i}", args.gpus, args.cpu, {"example.hyperplace.io/leaf": f"l{leaf}"})
            )
        name = f"{args.prefix}-leaf{leaf}"
        hns.append(
            hypernode(
                name, 1, "leaf", [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^{prefix}"}}}]
            )
        )
        level.append(name)
    tier = 1
    while len(level) > 1:
        tier += 1
        nxt: list[str] = []
        for g in range(0, len(level), args.fanout):
            name = f"{args.prefix}-t{tier}-{g // args.fanout}"
            members = [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": c}}}
                for c in level[g : g + args.fanout]
            ]
            hns.append(hypernode(name, tier, "spine" if tier == 2 else f"tier{tier}", members))
            nxt.append(name)
        level = nxt
    sizes = [args.per_leaf // 2, args.per_leaf, args.per_leaf * 2]
    jobs = [
        job(f"train-{j}", max(1, sizes[j % len(sizes)]), args.gpus, args.cpu, "hard", 2, args.namespace)
        for j in range(args.jobs)
    ]
    return nodes + hns, jobs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1024)
    p.add_argument("--per-leaf", type=int, default=32)
    p.add_argument("--fanout", type=int, default=4)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--cpu", type=int, default=96)
    p.add_argument("--jobs", type=int, default=6)
    p.add_argument("--prefix", default="gpu")
    p.add_argument("--namespace", default="training")
    p.add_argument(
        "--out", type=Path, help="directory to write cluster.yaml and jobs.yaml into (default: stdout)"
    )
    args = p.parse_args(argv)
    cluster, jobs = generate(args)
    if args.out is None:
        yaml.safe_dump_all([*cluster, *jobs], sys.stdout, sort_keys=False)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "cluster.yaml").open("w") as f:
        yaml.safe_dump_all(cluster, f, sort_keys=False)
    with (args.out / "jobs.yaml").open("w") as f:
        yaml.safe_dump_all(jobs, f, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
