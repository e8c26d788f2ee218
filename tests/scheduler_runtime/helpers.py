"""A cluster in the fake API server, a scheduler driving it, and the checks every test shares."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from hyperplace.kube import milli_value
from hyperplace.runtime.api import EVENTS, HYPERNODES, NODES, PODGROUPS, PODS, QUEUES, Obj, Resource, meta
from hyperplace.runtime.fakeapi import FakeApi
from scheduler_plugin.runtime.config_source import ConfigSource
from scheduler_plugin.runtime.scheduler import Scheduler, SchedulerOptions
from tests.scheduler.builders import hypernode, job_pods, node, podgroup

NS = "default"


class ClusterApi(FakeApi):
    """The fake API server, also checking on every bind that no node is over-committed
    (the invariant a double-booking scheduler would break) and able to hold binds."""

    def __init__(self) -> None:
        super().__init__()
        self.violations: list[str] = []
        self.bound: list[tuple[str, str]] = []  # (pod, node) in bind order
        # Set to make binds wait (after landing, before answering: "the response was lost").
        self.hold_after_bind: asyncio.Event | None = None
        self.held = 0
        # Set to make binds wait before they land (a slow API server).
        self.hold_before_bind: asyncio.Event | None = None
        self.waiting = 0

    def _bind(self, binding: Mapping[str, Any], namespace: str | None) -> Obj:
        out = super()._bind(binding, namespace)
        node_name = str((binding.get("target") or {}).get("name"))
        self.bound.append((str(meta(binding).get("name")), node_name))
        problem = overcommit(self, node_name)
        if problem:
            self.violations.append(problem)
        return out

    async def create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        if subresource == "binding" and self.hold_before_bind is not None:
            self.waiting += 1
            await self.hold_before_bind.wait()
        out = await super().create(res, obj, namespace, subresource=subresource)
        if subresource == "binding" and self.hold_after_bind is not None:
            self.held += 1
            await self.hold_after_bind.wait()
        return out


def overcommit(api: FakeApi, node_name: str) -> str | None:
    """A description of how ``node_name`` is over-committed, or None."""
    n = api.peek(NODES, node_name)
    if n is None:
        return None
    alloc = n["status"]["allocatable"]
    used: dict[str, int] = {}
    count = 0
    for p in api.objects.get("pods", {}).values():
        if p.get("spec", {}).get("nodeName") != node_name or p.get("status", {}).get("phase") in (
            "Succeeded",
            "Failed",
        ):
            continue
        count += 1
        for c in p["spec"].get("containers", []):
            for r, q in (c.get("resources", {}).get("requests") or {}).items():
                used[r] = used.get(r, 0) + milli_value(q)
    for r, v in used.items():
        if v > milli_value(alloc.get(r, "0")):
            return f"{node_name}: {r} used {v} > allocatable {alloc.get(r)}"
    if count > int(alloc.get("pods", 110)):
        return f"{node_name}: {count} pods"
    return None


def seed_racks(api: FakeApi, racks: int = 2, per_rack: int = 4, cpu: int = 4) -> list[str]:
    """``racks`` tier-1 HyperNodes of ``per_rack`` nodes under one tier-2 root."""
    names: list[str] = []
    children: list[str] = []
    for r in range(racks):
        members = [f"n{r}-{i}" for i in range(per_rack)]
        for m in members:
            api.seed(NODES, node(m, cpu=cpu))
        names += members
        api.seed(HYPERNODES, hypernode(f"rack{r}", 1, nodes=members).to_dict())
        children.append(f"rack{r}")
    api.seed(HYPERNODES, hypernode("root", 2, children=children).to_dict())
    api.seed(
        QUEUES,
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}},
    )
    return names


def seed_gang(
    api: FakeApi,
    name: str,
    replicas: int,
    *,
    cpu: int = 2,
    min_member: int | None = None,
    tier: int | None = 1,
) -> list[str]:
    """A PodGroup and its pods (as the Job controller would create them)."""
    topology = {"mode": "hard", "highestTierAllowed": tier} if tier is not None else None
    pg = podgroup(name, replicas if min_member is None else min_member, topology=topology).to_dict()
    api.seed(PODGROUPS, pg)
    pods = job_pods(name, replicas, cpu=cpu)
    for p in pods:
        api.seed(PODS, p)
    return [f"{NS}/{p['metadata']['name']}" for p in pods]


def pod(api: FakeApi, key: str) -> Obj:
    ns, name = key.split("/", 1)
    obj = api.peek(PODS, f"{ns}/{name}")
    assert obj is not None, key
    return obj


def node_of(api: FakeApi, key: str) -> str | None:
    return pod(api, key).get("spec", {}).get("nodeName")


def condition(obj: Obj, ctype: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None
    )


def events_for(api: FakeApi, name: str, reason: str | None = None) -> list[Obj]:
    return [
        e
        for e in api.objects.get(EVENTS.plural, {}).values()
        if e["involvedObject"].get("name") == name and (reason is None or e["reason"] == reason)
    ]


def rack_of(node_name: str | None) -> str:
    assert node_name is not None
    return "rack" + node_name.split("-")[0][1:]  # n<r>-<i> lives in rack<r>


async def eventually(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> None:
    """Wait until ``cond()`` is truthy (a generous deadline: a hang fails, slowness does not)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def cycles_pass(sched: Scheduler, n: int) -> None:
    """Wait for ``n`` more completed scheduling cycles."""
    target = sched.cycles + n
    await eventually(lambda: sched.cycles >= target, what=f"{n} cycles")


def options(**kw: Any) -> SchedulerOptions:
    """Fast cycles for tests; everything else as in production unless given."""
    kw.setdefault("schedule_period", 0.02)
    kw.setdefault("identity", "test-scheduler")
    # No kubelet marks pods running here: a PodGroup's Running is written without waiting.
    kw.setdefault("podgroup_settle", 0.0)
    return SchedulerOptions(**kw)


@contextlib.asynccontextmanager
async def running(
    api: FakeApi, source: ConfigSource | None = None, **kw: Any
) -> AsyncIterator[tuple[Scheduler, asyncio.Task[None]]]:
    """A scheduler (informers + loop, no leader election) for the duration of the block."""
    sched = Scheduler(api, options(**kw), source)
    task = asyncio.create_task(sched.run())
    try:
        yield sched, task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
