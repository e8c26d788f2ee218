"""A team moving from Volcano keeps its dashboards: the scheduler serves Volcano's series, with
Volcano's names, labels and units, beside its own."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.parser import text_string_to_metric_families

from hyperplace.runtime.api import PODGROUPS, PODS
from scheduler_plugin.runtime.scheduler import Scheduler
from scheduler_plugin.runtime.volcano_metrics import EXPORTED, VolcanoMetrics, exponential_buckets_range
from tests.scheduler.builders import job_pods, podgroup

from .helpers import ClusterApi, eventually, options
from .test_fragmentation_metrics import seed_gpu_racks

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(body: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(body)
        for s in fam.samples
    }


def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus' histogram_quantile over cumulative ``{le: count}`` (linear within a bucket)."""
    bounds = sorted(buckets)
    total = buckets[math.inf]
    if total == 0:
        return math.nan
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for b in bounds:
        if buckets[b] >= rank:
            if b == math.inf:
                return prev_bound
            return prev_bound + (b - prev_bound) * (rank - prev_count) / (buckets[b] - prev_count)
        prev_bound, prev_count = b, buckets[b]
    return math.nan


def e2e_p95(before: Samples, after: Samples) -> float:
    """Volcano's dashboard panel, evaluated over two scrapes:
    histogram_quantile(0.95, sum(rate(volcano_e2e_scheduling_latency_milliseconds_bucket[5m])) by (le))."""
    name = "volcano_e2e_scheduling_latency_milliseconds_bucket"
    rate: dict[float, float] = {}
    for (n, labels), v in after.items():
        if n == name:
            le = float(dict(labels)["le"])
            rate[le] = rate.get(le, 0.0) + v - before.get((n, labels), 0.0)
    return histogram_quantile(0.95, rate)


class Served:
    def __init__(self, sched: Scheduler, client: TestClient) -> None:
        self.sched, self.client = sched, client

    async def scrape(self) -> Samples:
        return samples(await (await self.client.get("/metrics")).text())


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    api = ClusterApi()
    seed_gpu_racks(api)  # two racks of two 8-GPU nodes (64 cpu each)
    api.seed(PODGROUPS, podgroup("train", 3).to_dict())
    for p in job_pods("train", 3, cpu=8, gpu=4):
        api.seed(PODS, p)
    api.seed(PODGROUPS, podgroup("huge", 10).to_dict())  # 10 x 8 GPUs: more than the cluster has
    for p in job_pods("huge", 10, cpu=8, gpu=8):
        api.seed(PODS, p)
    sched = Scheduler(api, options())
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(sched.registry))
    client = TestClient(TestServer(app))
    await client.start_server()
    tasks = await sched.start_informers()
    await eventually(sched.synced, what="sync")
    try:
        yield Served(sched, client)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await sched.binder.drain(5)
        await client.close()


async def test_volcano_dashboard_e2e_latency_query_has_data(served: Served) -> None:
    before = await served.scrape()
    for _ in range(3):
        await served.sched.run_cycle()
    after = await served.scrape()
    assert after[("volcano_e2e_scheduling_latency_milliseconds_count", ())] == 3
    assert after[("volcano_e2e_scheduling_latency_milliseconds_sum", ())] > 0
    p95 = e2e_p95(before, after)
    assert 0 < p95 <= 5000  # milliseconds, within Volcano's buckets
    # The same cycles as our own histogram, in seconds.
    assert after[("hyperplace_scheduler_cycle_duration_seconds_count", ())] == 3


async def test_session_actions_attempts_and_gangs_in_volcanos_words(served: Served) -> None:
    await served.sched.run_cycle()
    m = await served.scrape()
    assert m[("volcano_open_session_duration_milliseconds_count", ())] == 1
    assert m[("volcano_action_scheduling_latency_milliseconds_count", (("action", "allocate"),))] == 1
    assert m[("volcano_schedule_attempts_total", (("result", "scheduled"),))] == 3
    assert m[("volcano_schedule_attempts_total", (("result", "unschedulable"),))] == 10
    # gang: 10 of huge's 10 are missing, none of train's; one job could not be scheduled.
    assert m[("volcano_unschedule_task_count", (("job_id", "huge"),))] == 10
    assert m[("volcano_unschedule_task_count", (("job_id", "train"),))] == 0
    assert m[("volcano_unschedule_job_count", ())] == 1
    # train's last pending pod was assumed: its creation-to-placed time, per job and in the histogram.
    key = (("job_name", "train"), ("job_namespace", "default"), ("queue", "default"))
    assert m[("volcano_e2e_job_scheduling_duration", key)] >= 0
    assert m[("volcano_e2e_job_scheduling_latency_milliseconds_count", ())] == 1
    assert ("volcano_e2e_job_scheduling_start_time", key) in m
    # The assumed stage of each of train's pods.
    assert m[("volcano_task_scheduling_latency_milliseconds_count", (("stage", "Assumed"),))] == 3
    # A cycle with nothing new skips the session: it counts for e2e latency only.
    await served.sched.run_cycle()
    again = await served.scrape()
    assert again[("volcano_e2e_scheduling_latency_milliseconds_count", ())] == 2
    assert again[("volcano_open_session_duration_milliseconds_count", ())] <= 2


async def test_binds_show_as_bound_and_bind_stages(served: Served) -> None:
    await served.sched.run_cycle()

    async def bound() -> bool:
        m = await served.scrape()
        return m.get(("volcano_task_scheduling_latency_milliseconds_count", (("stage", "Bound"),))) == 3

    for _ in range(100):
        if await bound():
            break
        await asyncio.sleep(0.05)
    m = await served.scrape()
    assert m[("volcano_task_scheduling_latency_milliseconds_count", (("stage", "Bound"),))] == 3
    assert m[("volcano_scheduling_stage_duration_milliseconds_count", (("stage", "Bind"),))] == 3


async def test_queue_series_in_volcanos_units(served: Served) -> None:
    await served.sched.run_cycle()
    m = await served.scrape()
    q = (("queue_name", "default"),)
    gpu = (("queue_name", "default"), ("resource", "nvidia.com/gpu"))
    # 3 pods x 4 GPUs and 8 cpu: milli-cpu, and scalar resources in milli-units as Volcano counts them.
    assert m[("volcano_queue_allocated_milli_cpu", q)] == 24000
    assert m[("volcano_queue_allocated_scalar_resources", gpu)] == 12000
    # Requests cover every pod of the queue's jobs, placed or not: 3x4 + 10x8 GPUs.
    assert m[("volcano_queue_request_scalar_resources", gpu)] == 92000
    assert m[("volcano_queue_request_milli_cpu", q)] == 13 * 8000
    assert m[("volcano_queue_weight", q)] == 1
    assert ("volcano_queue_deserved_milli_cpu", q) in m and ("volcano_queue_share", q) in m
    assert m[("volcano_queue_overused", q)] in (0.0, 1.0)


def test_podgroup_counts_per_queue_follow_the_phases():
    def pg(queue: str | None, phase: str | None) -> dict:
        return {"spec": {"queue": queue} if queue else {}, "status": {"phase": phase} if phase else {}}

    store = [
        pg(None, "Running"),
        pg("default", "Running"),
        pg("team-a", "Inqueue"),
        pg("team-a", "Completed"),
        pg("team-a", None),
    ]
    reg = CollectorRegistry()
    VolcanoMetrics(reg, podgroups=lambda: store)
    m = {(s.name, tuple(sorted(s.labels.items()))): s.value for fam in reg.collect() for s in fam.samples}
    assert m[("volcano_queue_pod_group_running_count", (("queue_name", "default"),))] == 2
    assert m[("volcano_queue_pod_group_inqueue_count", (("queue_name", "team-a"),))] == 1
    assert m[("volcano_queue_pod_group_completed_count", (("queue_name", "team-a"),))] == 1
    assert m[("volcano_queue_pod_group_pending_count", (("queue_name", "team-a"),))] == 0
    # A queue only ever appears while a PodGroup names it (no stale series for deleted ones).
    store.clear()
    assert not [
        s for fam in reg.collect() for s in fam.samples if s.name.startswith("volcano_queue_pod_group_")
    ]


async def test_every_listed_series_is_served(served: Served) -> None:
    await served.sched.run_cycle()
    body = await (await served.client.get("/metrics")).text()
    families = {f.name for f in text_string_to_metric_families(body)}
    # The parser drops a counter's _total suffix.
    missing = [n for n in EXPORTED if n not in families and n.removesuffix("_total") not in families]
    assert missing == []


def test_buckets_are_volcanos():
    # prometheus.ExponentialBucketsRange(1, 5000, 20): first 1, last 5000.
    b = exponential_buckets_range(1, 5000, 20)
    assert len(b) == 20 and b[0] == 1 and math.isclose(b[-1], 5000)


def test_preemption_counter_keeps_volcanos_name_without_total():
    reg = CollectorRegistry()
    VolcanoMetrics(reg)
    names = {s.name for fam in reg.collect() for s in fam.samples}
    assert "volcano_total_preemption_attempts" in names
    assert "volcano_total_preemption_attempts_total" not in names
