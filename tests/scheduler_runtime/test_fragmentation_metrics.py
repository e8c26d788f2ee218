"""The scheduler exports how much whole-domain room each tier has left, every cycle."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.parser import text_string_to_metric_families

from hyperplace.runtime.api import HYPERNODES, NODES, PODGROUPS, PODS, QUEUES
from scheduler_plugin.__main__ import parse_args
from scheduler_plugin.algorithms.fragmentation import FragmentationConfig
from scheduler_plugin.runtime.scheduler import Scheduler
from tests.scheduler.builders import hypernode, job_pods, node, podgroup

from .helpers import ClusterApi, eventually, options


def seed_gpu_racks(api: ClusterApi) -> None:
    """Two racks of two 8-GPU nodes (64 cpu, 512Gi) under one spine."""
    for r in range(2):
        members = [f"g{r}-{i}" for i in range(2)]
        for m in members:
            api.seed(NODES, node(m, cpu=64, memory="512Gi", gpu=8))
        api.seed(HYPERNODES, hypernode(f"rack{r}", 1, nodes=members).to_dict())
    api.seed(HYPERNODES, hypernode("spine", 2, children=["rack0", "rack1"]).to_dict())
    api.seed(
        QUEUES,
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}},
    )


def gauges(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_fragmentation_gauges_follow_the_cycle_that_just_decided() -> None:
    api = ClusterApi()
    seed_gpu_racks(api)
    # A 3-pod gang of 4 GPUs each within one rack: rack0 gets 12 of its 16 GPUs taken.
    topology = {"mode": "hard", "highestTierAllowed": 1}
    api.seed(PODGROUPS, podgroup("train", 3, topology=topology).to_dict())
    for p in job_pods("train", 3, cpu=8, gpu=4):
        api.seed(PODS, p)
    sched = Scheduler(api, options())
    # /metrics as the process serves it (hyperplace.runtime.serving): the scheduler's registry.
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(sched.registry))
    client = TestClient(TestServer(app))
    await client.start_server()
    tasks = await sched.start_informers()
    try:
        await eventually(sched.synced, what="sync")
        body = await (await client.get("/metrics")).text()
        assert "hyperplace_scheduler_tier_free_hypernodes" not in body  # nothing before a cycle
        result = await sched.run_cycle()
        assert len(result.bindings) == 3
        g = gauges(await (await client.get("/metrics")).text())

        def val(name: str, **labels: str) -> float:
            return g[(f"hyperplace_scheduler_{name}", tuple(sorted(labels.items())))]

        assert val("tier_hypernodes", tier="1") == 2 and val("tier_hypernodes", tier="2") == 1
        # The bindings of this very cycle count: one rack is no longer free, nor the spine.
        assert val("tier_free_hypernodes", tier="1") == 1
        assert val("tier_free_hypernodes", tier="2") == 0
        # 32 GPUs - 12 taken = 20 free; 8-GPU pods: only the two nodes of the free rack.
        assert val("tier_shape_fit_pods", tier="1", shape="1xnvidia.com/gpu") == 20
        assert val("tier_shape_fit_pods", tier="1", shape="8xnvidia.com/gpu") == 2
        assert val("tier_shape_best_domain_fit_pods", tier="1", shape="8xnvidia.com/gpu") == 2
        assert val("tier_shape_best_domain_fit_pods", tier="1", shape="4xnvidia.com/gpu") == 4
        assert val("tier_shape_best_domain_fit_pods", tier="2", shape="4xnvidia.com/gpu") == 5
        assert val("fragmentation_duration_seconds") >= 0
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()


async def test_configured_shapes_name_the_series() -> None:
    api = ClusterApi()
    seed_gpu_racks(api)
    sched = Scheduler(api, options(fragmentation=FragmentationConfig(shapes=(2, 16))))
    tasks = await sched.start_informers()
    try:
        await eventually(sched.synced, what="sync")
        await sched.run_cycle()
        report = sched.fragmentation.report
        assert report is not None
        assert [s.name for s in report.shapes] == ["2xnvidia.com/gpu", "16xnvidia.com/gpu"]
        # No node has 16 GPUs: such a pod fits nowhere, whatever the room.
        assert all(t.fit["16xnvidia.com/gpu"] == 0 for t in report.tiers)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_fragmentation_flags() -> None:
    args = parse_args([])
    assert args.fragmentation == FragmentationConfig()
    args = parse_args(["--fragmentation-shapes", "2,8", "--fragmentation-resource", "example.com/npu"])
    assert args.fragmentation.shapes == (2, 8) and args.fragmentation.accelerator == "example.com/npu"
    for bad in (["--fragmentation-shapes", "2,eight"], ["--fragmentation-share", "2"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


async def test_a_failing_figure_never_stops_the_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    api = ClusterApi()
    seed_gpu_racks(api)
    api.seed(PODGROUPS, podgroup("train", 1).to_dict())
    for p in job_pods("train", 1, cpu=8, gpu=4):
        api.seed(PODS, p)
    sched = Scheduler(api, options())

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("scheduler_plugin.runtime.fragmentation_metrics.snapshot_fragmentation", broken)
    tasks = await sched.start_informers()
    try:
        await eventually(sched.synced, what="sync")
        result = await sched.run_cycle()
        assert len(result.bindings) == 1  # decided and bound all the same
        assert sched.fragmentation.report is None
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
