"""The benchmark's cluster: Ready fake nodes of GPUS_PER_NODE GPUs under a leaf/spine/core
HyperNode tree, created with many creates in flight (a failed create is tried again)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bench.live import say
from hyperplace.api.constants import TOPOLOGY_GROUP, TOPOLOGY_VERSION
from hyperplace.localup.cluster import LOCAL_UP_LABEL, fake_node
from hyperplace.localup.fakekubelet import node_ready_status
from hyperplace.runtime.api import HYPERNODES, NODES, ApiError, Obj
from hyperplace.runtime.kube import connect
from hyperplace.runtime.parallel import run_bounded

GPUS_PER_NODE = 8
NODES_PER_LEAF = 16
LEAVES_PER_SPINE = 16
CREATE_CONCURRENCY = 64


def topology(names: list[str]) -> list[Obj]:
    """Leaves of NODES_PER_LEAF nodes (tier 1), spines of LEAVES_PER_SPINE leaves (tier 2), one core."""

    def hn(name: str, tier: int, kind: str, members: list[str]) -> Obj:
        return {
            "apiVersion": f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}",
            "kind": "HyperNode",
            "metadata": {"name": name, "labels": {LOCAL_UP_LABEL: "true"}},
            "spec": {
                "tier": tier,
                "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
            },
        }

    leaves = [names[i : i + NODES_PER_LEAF] for i in range(0, len(names), NODES_PER_LEAF)]
    leaf_names = [f"leaf-{i}" for i in range(len(leaves))]
    spines = [leaf_names[i : i + LEAVES_PER_SPINE] for i in range(0, len(leaf_names), LEAVES_PER_SPINE)]
    spine_names = [f"spine-{i}" for i in range(len(spines))]
    out = [hn(n, 1, "Node", m) for n, m in zip(leaf_names, leaves, strict=True)]
    out += [hn(n, 2, "HyperNode", m) for n, m in zip(spine_names, spines, strict=True)]
    out.append(hn("core", 3, "HyperNode", spine_names))
    return out


async def create_all(api: Any, res: Any, objs: list[Obj], limit: int = CREATE_CONCURRENCY) -> None:
    """Create ``objs``, ``limit`` at a time; a failed create (a webhook call that timed out on
    a loaded machine) is tried again, twice at most."""
    failed: list[Obj] = []

    async def one(obj: Obj) -> None:
        try:
            await api.create(res, obj)
        except ApiError as exc:
            if not exc.already_exists:
                failed.append(obj)
                raise

    left = list(objs)
    for attempt in range(5):
        failed.clear()
        errors = await run_bounded(left, one, limit)
        if not errors:
            return
        say(f"{len(errors)} {res.plural} creates failed (attempt {attempt + 1}), first: {errors[0]}")
        left = list(failed)
        await asyncio.sleep(2.0)
    raise RuntimeError(f"{len(left)} {res.plural} could not be created")


async def create_cluster(kubeconfig: Path, nodes: int) -> tuple[float, float]:
    """Nodes (Ready) and the HyperNode tree, CREATE_CONCURRENCY creates in flight; their seconds."""
    api, raw = await connect(str(kubeconfig))
    try:
        width = len(str(nodes - 1))
        names = [f"node-{i:0{width}d}" for i in range(nodes)]
        # The HyperNodes first, tier by tier: the validating webhook judges each against the
        # whole tree, and while 10k node events are still reaching its cache it answers
        # slowly (its 5 s timeout then fails creates on a loaded machine).
        t = time.perf_counter()
        tree = topology(names)
        for tier in (1, 2, 3):
            await create_all(api, HYPERNODES, [h for h in tree if h["spec"]["tier"] == tier], limit=8)
        t_hn = time.perf_counter() - t
        objs = []
        for n in names:
            node = fake_node(n, GPUS_PER_NODE)
            node["status"].update(node_ready_status(node))
            objs.append(node)
        t = time.perf_counter()
        await create_all(api, NODES, objs)
        t_nodes = time.perf_counter() - t
        return t_nodes, t_hn
    finally:
        await raw.close()
