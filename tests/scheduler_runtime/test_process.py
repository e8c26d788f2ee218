"""The process around the loop: leader election, configuration reload, probes, flags, and
objects that do not parse."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.aiohttp import make_aiohttp_handler as handler

from hyperplace.runtime.api import CONFIGMAPS, LEASES, PODGROUPS, Obj, Resource
from hyperplace.runtime.leader import LeaderElector
from hyperplace.runtime.serving import MetricsServer, MetricsServing
from scheduler_plugin.__main__ import health_app, parse_args, run
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT
from scheduler_plugin.runtime.config_source import ConfigSource
from scheduler_plugin.runtime.scheduler import Scheduler

from .helpers import (
    NS,
    ClusterApi,
    cycles_pass,
    events_for,
    eventually,
    node_of,
    options,
    running,
    seed_gang,
    seed_racks,
)

SYSTEM = "hyperplace-system"
ENQUEUE_ONLY = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n'


class Client:
    """One process's connection to the shared fake API server, recording its binds."""

    def __init__(self, api: ClusterApi, who: str) -> None:
        self._api, self.who = api, who
        self.binds: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    async def create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        if subresource == "binding":
            self.binds.append(str(obj["metadata"]["name"]))
        return await self._api.create(res, obj, namespace, subresource=subresource)


def holder(api: ClusterApi) -> str | None:
    lease = api.peek(LEASES, f"{SYSTEM}/hyperplace-scheduler")
    return None if lease is None else lease["spec"].get("holderIdentity")


async def test_only_the_leader_binds_and_a_standby_takes_over_after_a_release() -> None:
    api = ClusterApi()
    seed_racks(api)
    common = [
        "--health-port",
        "0",
        "--metrics-bind-address",
        "0",
        "--schedule-period",
        "0.02",
        "--lease-namespace",
        SYSTEM,
        "--leader-elect",
    ]
    a, b = Client(api, "a"), Client(api, "b")
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    task_a = asyncio.create_task(run(parse_args([*common, "--identity", "a"]), a, stop_a))
    await eventually(lambda: holder(api) == "a", what="a leads")
    task_b = asyncio.create_task(run(parse_args([*common, "--identity", "b"]), b, stop_b))
    try:
        first = seed_gang(api, "first", 8)
        await eventually(lambda: all(node_of(api, k) for k in first), what="first gang bound")
        await asyncio.sleep(0.2)  # b's informers have seen it all; it must still not act
        assert sorted(a.binds) == sorted(k.split("/")[1] for k in first) and b.binds == []

        stop_a.set()  # SIGTERM: a stops scheduling and releases the Lease
        await task_a
        assert holder(api) == ""
        await eventually(lambda: holder(api) == "b", what="b takes over")
        second = seed_gang(api, "second", 8)
        await eventually(lambda: all(node_of(api, k) for k in second), what="second gang bound")
        assert sorted(b.binds) == sorted(k.split("/")[1] for k in second)
        assert api.violations == []
    finally:
        stop_a.set()
        stop_b.set()
        await asyncio.gather(task_a, task_b, return_exceptions=True)
    assert holder(api) == ""  # b released on its way out too


async def test_the_configmap_is_reloaded_and_a_bad_one_keeps_the_last_good_configuration() -> None:
    api = ClusterApi()
    seed_racks(api)
    cm: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "sched-conf", "namespace": SYSTEM},
        "data": {"volcano-scheduler.conf": ENQUEUE_ONLY},
    }
    api.seed(CONFIGMAPS, cm)
    source = ConfigSource.parse(f"{SYSTEM}/sched-conf")
    assert source.configmap == (SYSTEM, "sched-conf")
    keys = seed_gang(api, "g", 8)
    async with running(api, source) as (sched, _):
        await eventually(lambda: sched.config.actions == ["enqueue"], what="ConfigMap loaded")
        await cycles_pass(sched, 5)
        assert not any(node_of(api, k) for k in keys)  # no allocate action configured

        await api.patch(
            CONFIGMAPS, "sched-conf", {"data": {"volcano-scheduler.conf": DEFAULT_CONFIG_TEXT}}, SYSTEM
        )
        await eventually(lambda: all(node_of(api, k) for k in keys), what="bound after the reload")
        generation = sched.conf.generation

        await api.patch(
            CONFIGMAPS, "sched-conf", {"data": {"volcano-scheduler.conf": "actions: [oops\n"}}, SYSTEM
        )
        await eventually(lambda: sched.conf.error is not None, what="bad config seen")
        assert "invalid YAML" in str(sched.conf.error) and sched.conf.generation == generation
        assert sched.config.actions == ["enqueue", "allocate", "backfill"]
        await eventually(lambda: events_for(api, "sched-conf", "InvalidConfiguration"), what="event")
        # Still scheduling with the last good configuration.
        more = seed_gang(api, "h", 8)
        await eventually(lambda: all(node_of(api, k) for k in more), what="second gang bound")
    (event,) = events_for(api, "sched-conf", "InvalidConfiguration")
    assert event["type"] == "Warning" and "kept the previous configuration" in event["message"]
    assert "line" in event["message"]  # names where the error is


async def test_a_mounted_configuration_file_is_reloaded(tmp_path: Path) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(ENQUEUE_ONLY)
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "g", 8)
    async with running(api, ConfigSource.parse(str(conf))) as (sched, _):
        await cycles_pass(sched, 5)
        assert sched.config.actions == ["enqueue"] and not any(node_of(api, k) for k in keys)
        conf.write_text("tiers: 3\n")  # not a list: refused, the previous one stays
        await eventually(lambda: sched.conf.error is not None, what="bad file seen")
        assert sched.config.actions == ["enqueue"]
        conf.write_text(DEFAULT_CONFIG_TEXT)  # the kubelet swapped the file in
        await eventually(lambda: all(node_of(api, k) for k in keys), what="bound after the reload")
        assert sched.conf.error is None


async def test_objects_that_do_not_parse_are_skipped_by_name(caplog: pytest.LogCaptureFixture) -> None:
    api = ClusterApi()
    seed_racks(api)
    api.seed(PODGROUPS, {"metadata": {"name": "broken", "namespace": NS}, "spec": {"minMember": -1}})
    keys = seed_gang(api, "g", 8)
    with caplog.at_level(logging.WARNING):
        async with running(api) as (sched, _):
            await eventually(lambda: all(node_of(api, k) for k in keys), what="valid gang bound")
            await cycles_pass(sched, 2)
    assert sched.metrics.skipped._value.get() == 1
    warnings = [r.getMessage() for r in caplog.records if "does not parse" in r.getMessage()]
    assert len(warnings) == 1  # once per object version, not once per cycle
    assert "PodGroup default/broken" in warnings[0] and "minMember" in warnings[0]


async def test_probes_and_metrics() -> None:
    api = ClusterApi()
    seed_racks(api)
    sched = Scheduler(api, options())
    elector = LeaderElector(api, SYSTEM, "hyperplace-scheduler", "me")
    client = TestClient(TestServer(health_app(sched, elector)))
    await client.start_server()
    try:
        resp = await client.get("/readyz")
        assert resp.status == 503  # informers not synced yet
        tasks = await sched.start_informers()
        await eventually(sched.synced, what="sync")
        resp = await client.get("/readyz")
        assert resp.status == 200 and await resp.text() == "ok (standby)"
        assert (await client.get("/healthz")).status == 200
        await sched.run_cycle()
        assert (await client.get("/metrics")).status == 404  # metrics are served apart
        metrics = TestClient(
            TestServer(MetricsServer(MetricsServing("127.0.0.1", 1), handler(sched.registry)).app)
        )
        async with metrics:
            body = await (await metrics.get("/metrics")).text()
        assert "hyperplace_scheduler_cycle_duration_seconds_count 1.0" in body
        assert "hyperplace_scheduler_pending_jobs" in body
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await client.close()


def test_flags_default_from_the_deployment_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERPLACE_SCHEDULER_CONF", "/etc/hyperplace/scheduler/volcano-scheduler.conf")
    monkeypatch.setenv("HYPERPLACE_SCHEDULER_NAME", "volcano")
    monkeypatch.setenv("HYPERPLACE_LEADER_ELECTION_NAMESPACE", SYSTEM)
    monkeypatch.setenv("HYPERPLACE_LEADER_ELECTION_LEASE", "hyperplace-scheduler")
    monkeypatch.setenv("HYPERPLACE_LEADER_ELECT", "true")
    monkeypatch.setenv("HYPERPLACE_HEALTH_PORT", "8080")
    args = parse_args([])
    assert args.config_source.path == "/etc/hyperplace/scheduler/volcano-scheduler.conf"
    assert args.scheduler_name == ["volcano"] and args.leader_elect and args.lease_namespace == SYSTEM
    assert args.health_port == 8080 and args.schedule_period == 1.0
    assert MetricsServing.from_args(args) == MetricsServing("127.0.0.1", 9090)
    args = parse_args(
        ["--scheduler-name", "a", "--scheduler-name", "b", "--no-leader-elect", "--scheduler-conf", "ns/cm"]
    )
    assert (
        args.scheduler_name == ["a", "b"]
        and not args.leader_elect
        and args.config_source.configmap == ("ns", "cm")
    )
    with pytest.raises(SystemExit):
        parse_args(["--schedule-period", "0"])


class LeaseWatchingApi(ClusterApi):
    """Notes who held the Lease when each bind landed."""

    def __init__(self) -> None:
        super().__init__()
        self.holder_at_bind: list[str | None] = []

    def _bind(self, binding: Mapping[str, Any], namespace: str | None) -> Obj:
        self.holder_at_bind.append(holder(self))
        return super()._bind(binding, namespace)


async def test_shutdown_lets_binds_in_flight_land_drops_the_rest_then_releases_the_lease() -> None:
    api = LeaseWatchingApi()
    seed_racks(api)
    flags = [
        "--health-port",
        "0",
        "--metrics-bind-address",
        "0",
        "--schedule-period",
        "0.02",
        "--lease-namespace",
        SYSTEM,
        "--identity",
        "a",
    ]
    args = parse_args([*flags, "--bind-concurrency", "2"])
    stop = asyncio.Event()
    task = asyncio.create_task(run(args, api, stop))
    keys = seed_gang(api, "g", 8)
    api.hold_before_bind = asyncio.Event()
    await eventually(lambda: api.waiting == 2, what="two binds in flight")
    stop.set()  # SIGTERM
    await asyncio.sleep(0.1)
    assert not task.done() and holder(api) == "a"  # waiting for the binds in flight
    api.hold_before_bind.set()
    await task
    assert api.holder_at_bind == ["a", "a"]  # landed while the Lease was still held
    assert holder(api) == ""  # then released
    assert sum(1 for k in keys if node_of(api, k)) == 2
    assert sum(1 for c in api.calls if c[0] == "create/binding") == 2  # the other six never sent
