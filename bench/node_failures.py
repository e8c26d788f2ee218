"""Nodes failing under running gangs: how soon each gang runs whole again, and where.

    python bench/node_failures.py                 # 1,024 nodes; kill 1, 4 and 16 nodes
    python bench/node_failures.py --kills 4 --trials 1 --modes spares   # a quick look

A 1,024-node cluster of 8-GPU nodes (32 leaves of 32 nodes, 4 spines of 8 leaves) runs one
1,024-pod training gang (1 GPU a pod, ``networkTopology: hard, highestTierAllowed: 2``: one
spine) and eight 128-pod gangs (1 GPU a pod, ``highestTierAllowed: 1``: one leaf), each a
Volcano Job with no policy of its own for evictions (a lost pod is made again: its
*replacement*), at priority ``training``; then
preemptable batch Jobs (``volcano.sh/preemptable: "true"``, 4 pods of 8 GPUs, priority
``batch``) fill every node left. Then ``k`` nodes running gang pods fail at once: each gets
the ``node.kubernetes.io/unreachable:NoExecute`` taint and ``Ready=Unknown``, and its kubelet
stops answering (its pods stay Terminating until force-deleted). Everything runs in one process
on the in-memory API server, in real time: hyperplace-controller (``--force-delete-unreachable-
after=0s``, so a lost pod's object is gone once its grace period, 5 s here, ends) and
hyperplace-scheduler, with a fake kubelet that starts bound pods and finishes deleted ones on
live nodes.

Per mode, for each affected gang: the time from the failure signal (the taint) until it runs
whole again (p50/p99 over the gangs of all trials), the share of replacement pods bound in the
leaf their lost pod ran in, whole-job restarts (``RestartJob``), and the GPUs held idle as spares
(GPU-hours a day). Modes:

* ``wait``: the scheduler's repair step off and no spares, as Volcano's default actions behave
  (the replacement waits for room in its domain; bounded here by ``--timeout``);
* ``repair``: the defaults: the repair step evicts preemptable batch pods in the gang's leaf;
* ``spares``: one spare node per leaf (``hyperplace.io/spare-nodes: "1"`` on the spines).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.chaos.world import hypernode_obj
from controller.manager import ControllerManager, ManagerConfig
from hyperplace.api.constants import REPLACES_NODE_ANNOTATION
from hyperplace.api.spares import SPARE_NODES_ANNOTATION
from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import (
    HYPERNODES,
    JOBS,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
)
from hyperplace.runtime.fakeapi import FakeApi
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT
from scheduler_plugin.runtime.config_source import ConfigSource
from scheduler_plugin.runtime.scheduler import Scheduler, SchedulerOptions

NS = "bench"
GPU = "nvidia.com/gpu"
LEAF_NODES = 32
LEAVES_PER_SPINE = 8
GPUS_PER_NODE = 8
GRACE = 5  # the pods' terminationGracePeriodSeconds
MODES = ("wait", "repair", "spares")


@dataclass
class Case:
    """One run's figures."""

    mode: str
    kills: int
    recovered: dict[str, float] = field(default_factory=dict)  # gang -> seconds to whole again
    stuck: list[str] = field(default_factory=list)  # gangs not whole by the timeout
    replacements: int = 0
    in_leaf: int = 0
    restarts: int = 0
    spare_gpus: int = 0
    evicted: int = 0
    detail: list[str] = field(default_factory=list)  # per replacement: lost leaf -> new leaf


def node_name(i: int) -> str:
    return f"n{i:04d}"


def leaf_of(i: int) -> int:
    return i // LEAF_NODES


def seed_cluster(api: FakeApi, nodes: int, spares: int) -> None:
    for i in range(nodes):
        alloc = {"cpu": "128", "memory": "1Ti", "pods": "110", GPU: str(GPUS_PER_NODE)}
        n = node_name(i)
        api.seed(
            NODES,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
                "spec": {},
                "status": {
                    "allocatable": alloc,
                    "capacity": alloc,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )
    leaves = nodes // LEAF_NODES
    for leaf in range(leaves):
        members = [node_name(i) for i in range(leaf * LEAF_NODES, (leaf + 1) * LEAF_NODES)]
        api.seed(HYPERNODES, hypernode_obj(f"leaf{leaf}", 1, "Node", members))
    for spine in range(leaves // LEAVES_PER_SPINE):
        members = [f"leaf{x}" for x in range(spine * LEAVES_PER_SPINE, (spine + 1) * LEAVES_PER_SPINE)]
        hn = hypernode_obj(f"spine{spine}", 2, "HyperNode", members)
        if spares:
            hn["metadata"]["annotations"] = {SPARE_NODES_ANNOTATION: str(spares)}
        api.seed(HYPERNODES, hn)
    for name, value in (("training", 1000), ("batch", 10)):
        api.seed(
            PRIORITY_CLASSES,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )
    api.seed(
        QUEUES,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        },
    )


def volcano_job(
    name: str, replicas: int, gpus: int, *, priority: str, tier: int | None, preemptable: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {"volcano.sh/preemptable": "true"}} if preemptable else {}
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": "default",
        "priorityClassName": priority,
        "minAvailable": replicas,
        "tasks": [
            {
                "name": "worker",
                "replicas": replicas,
                "template": {
                    "metadata": meta,
                    "spec": {
                        "terminationGracePeriodSeconds": GRACE,
                        "containers": [
                            {
                                "name": "c",
                                "image": "trainer",
                                "resources": {"requests": {"cpu": "1", "memory": "4Gi", GPU: str(gpus)}},
                            }
                        ],
                    },
                },
            }
        ],
    }
    if tier is not None:
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": spec,
    }


class Kubelets:
    """Every live node's kubelet: starts bound pods, finishes deleted ones. A dead node's says
    nothing (its pods stay as they were, or Terminating)."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api
        self.dead: set[str] = set()

    async def run(self) -> None:
        while True:
            for key, pod in list(self.api.objects.get("pods", {}).items()):
                node = (pod.get("spec") or {}).get("nodeName")
                if not node or node in self.dead:
                    continue
                ns, name = key.split("/", 1)
                if (pod.get("metadata") or {}).get("deletionTimestamp"):
                    with contextlib.suppress(Exception):
                        await self.api.delete(PODS, name, ns, grace_period_seconds=0)
                elif ((pod.get("status") or {}).get("phase") or "Pending") == "Pending":
                    with contextlib.suppress(Exception):
                        await self.api.patch(
                            PODS,
                            name,
                            {"status": {"phase": "Running", "startTime": rfc3339()}},
                            ns,
                            subresource="status",
                        )
            await asyncio.sleep(0.1)


def pods_of(api: FakeApi, job: str) -> list[dict[str, Any]]:
    return [
        p
        for p in api.objects.get("pods", {}).values()
        if (p.get("metadata") or {}).get("labels", {}).get("volcano.sh/job-name") == job
    ]


def running(p: dict[str, Any]) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and not (p.get("metadata") or {}).get(
        "deletionTimestamp"
    )


async def until(cond: Any, timeout: float, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await asyncio.sleep(step)
    return cond()


def _config_file(tmp: Path, repair: bool) -> ConfigSource:
    text = DEFAULT_CONFIG_TEXT
    if not repair:
        text += "configurations:\n- name: repair\n  arguments:\n    enabled: false\n"
    path = tmp / "volcano-scheduler.conf"
    path.write_text(text)
    return ConfigSource(path=str(path))


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        root.setLevel(level)


async def run_case(mode: str, kills: int, seed: int, nodes: int, timeout: float, mids: int) -> Case:
    case = Case(mode, kills)
    api = FakeApi()
    api.clock = rfc3339
    seed_cluster(api, nodes, spares=1 if mode == "spares" else 0)
    kubelets = Kubelets(api)
    tasks: list[asyncio.Task[Any]] = [asyncio.create_task(kubelets.run())]
    with tempfile.TemporaryDirectory() as tmp:
        conf = _config_file(Path(tmp), repair=mode != "wait")
        mgr = ControllerManager(
            api, ManagerConfig(workers=4, seed=seed, force_delete_unreachable_after=0.0), now=rfc3339
        )
        sched = Scheduler(api, SchedulerOptions(schedule_period=0.5), conf, now=rfc3339)
        tasks += [asyncio.create_task(mgr.run()), asyncio.create_task(sched.run())]
        try:
            gangs = {"big": 1024} | {f"mid{i}": 128 for i in range(mids)}
            await api.create(JOBS, volcano_job("big", 1024, 1, priority="training", tier=2), NS)
            for i in range(mids):
                await api.create(JOBS, volcano_job(f"mid{i}", 128, 1, priority="training", tier=1), NS)
            whole = lambda: all(sum(map(running, pods_of(api, g))) >= n for g, n in gangs.items())  # noqa: E731
            if not await until(whole, 300):
                raise RuntimeError("the gangs did not start")
            used = sum(gangs.values())  # one GPU a pod
            fillers = (nodes * GPUS_PER_NODE - used) // (4 * GPUS_PER_NODE)
            for i in range(fillers):
                await api.create(
                    JOBS,
                    volcano_job(f"batch{i}", 4, GPUS_PER_NODE, priority="batch", tier=None, preemptable=True),
                    NS,
                )
            await _settle(api)
            case.spare_gpus = sum(GPUS_PER_NODE for i in range(nodes) if not _pods_on(api, node_name(i)))
            # The failure: k nodes running gang pods.
            rng = random.Random(seed)
            gang_nodes = sorted(
                {
                    str(p["spec"]["nodeName"])
                    for g in gangs
                    for p in pods_of(api, g)
                    if p["spec"].get("nodeName")
                }
            )
            victims = rng.sample(gang_nodes, kills)
            lost = {
                p["metadata"]["name"]: int(str(p["spec"]["nodeName"])[1:])
                for g in gangs
                for p in pods_of(api, g)
                if p["spec"].get("nodeName") in victims
            }
            hit = {g for g in gangs for p in pods_of(api, g) if p["spec"].get("nodeName") in victims}
            retries0 = _retries(api, gangs)
            evicted0 = _batch_pods(api)
            t0 = time.monotonic()
            for v in victims:
                kubelets.dead.add(v)
                api.unreachable_nodes.add(v)
                await api.patch(
                    NODES,
                    v,
                    {"spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}},
                )
                await api.patch(
                    NODES,
                    v,
                    {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
                    subresource="status",
                )
            waiting = set(hit)

            def check() -> bool:
                for g in list(waiting):
                    mine = [p for p in pods_of(api, g) if running(p)]
                    if len(mine) >= gangs[g] and not any(p["spec"].get("nodeName") in victims for p in mine):
                        case.recovered[g] = time.monotonic() - t0
                        waiting.discard(g)
                return not waiting

            await until(check, timeout, step=0.05)
            case.stuck = sorted(waiting)
            for p in (p for g in gangs for p in pods_of(api, g)):
                name = p["metadata"]["name"]
                if name in lost and p["spec"].get("nodeName") and running(p):
                    case.replacements += 1
                    new_leaf = leaf_of(int(str(p["spec"]["nodeName"])[1:]))
                    case.in_leaf += new_leaf == leaf_of(lost[name])
                    hint = (p["metadata"].get("annotations") or {}).get(REPLACES_NODE_ANNOTATION)
                    case.detail.append(f"{name}: leaf{leaf_of(lost[name])} -> leaf{new_leaf} (hint {hint})")
            case.restarts = _retries(api, gangs) - retries0
            case.evicted = max(evicted0 - _batch_pods(api, running_only=True), 0)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return case


def _pods_on(api: FakeApi, node: str) -> bool:
    return any((p.get("spec") or {}).get("nodeName") == node for p in api.objects.get("pods", {}).values())


def _retries(api: FakeApi, gangs: dict[str, int]) -> int:
    jobs = api.objects.get("jobs", {})
    return sum(int(((jobs.get(f"{NS}/{g}") or {}).get("status") or {}).get("retryCount") or 0) for g in gangs)


def _batch_pods(api: FakeApi, running_only: bool = True) -> int:
    return sum(
        1
        for p in api.objects.get("pods", {}).values()
        if str(p["metadata"]["name"]).startswith("batch") and (running(p) or not running_only)
    )


async def _settle(api: FakeApi, quiet_for: float = 3.0, most: float = 120.0) -> None:
    """Until no pod is bound or started for ``quiet_for`` seconds."""
    end = time.monotonic() + most
    last, since = -1, time.monotonic()
    while time.monotonic() < end:
        n = sum(running(p) for p in api.objects.get("pods", {}).values())
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= quiet_for:
            return
        await asyncio.sleep(0.2)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    vs = sorted(values)
    return vs[min(len(vs) - 1, max(0, round(q * (len(vs) - 1))))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--nodes", type=int, default=1024)
    p.add_argument("--kills", type=int, action="append", help="nodes to kill (repeatable; default 1, 4, 16)")
    p.add_argument("--trials", type=int, default=2, help="runs per mode and kill count (different nodes)")
    p.add_argument("--modes", action="append", choices=MODES, help="default: all")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a gang may take to be whole again")
    p.add_argument("--mids", type=int, default=8, help="128-pod gangs beside the 1,024-pod one")
    args = p.parse_args(argv)
    kills = args.kills or [1, 4, 16]
    modes = args.modes or list(MODES)
    print(
        f"{args.nodes} nodes x {GPUS_PER_NODE} GPUs, leaves of {LEAF_NODES}; one 1,024-pod gang and "
        f"{args.mids} 128-pod gangs, batch fill; failure = NoExecute taint, grace {GRACE}s, {args.trials} trial(s)"
    )
    print(
        f"{'mode':8} {'kill':>4} {'gangs':>5} {'p50 s':>7} {'p99 s':>7} {'stuck':>5} {'in-leaf':>8} {'restarts':>8} "
        f"{'evicted':>7} {'spare GPUs':>10} {'GPU-h/day':>9}"
    )
    for mode in modes:
        for k in kills:
            cases: list[Case] = []
            for trial in range(args.trials):
                t = time.perf_counter()
                with quiet():
                    cases.append(
                        asyncio.run(run_case(mode, k, 1000 * k + trial, args.nodes, args.timeout, args.mids))
                    )
                print(f"  ({mode} kill {k} trial {trial}: {time.perf_counter() - t:.0f}s)", file=sys.stderr)
            times = [v for c in cases for v in c.recovered.values()]
            stuck = sum(len(c.stuck) for c in cases)
            reps = sum(c.replacements for c in cases)
            in_leaf = sum(c.in_leaf for c in cases)
            share = f"{100 * in_leaf / reps:.0f} %" if reps else "-"
            spare = max(c.spare_gpus for c in cases)
            print(
                f"{mode:8} {k:>4} {len(times) + stuck:>5} {pct(times, 0.5):>7.1f} {pct(times, 0.99):>7.1f} {stuck:>5} "
                f"{share:>8} {sum(c.restarts for c in cases):>8} {sum(c.evicted for c in cases):>7} {spare:>10} "
                f"{spare * 24:>9}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
