"""The Grafana dashboard shows data: every query names a series one of the components exports
(a renamed metric breaks this test rather than a panel)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from controller.kube_io import Metrics as ControllerMetrics
from scheduler_plugin.runtime.scheduler import Scheduler
from tests.scheduler_runtime.helpers import ClusterApi, eventually, options
from tests.scheduler_runtime.test_fragmentation_metrics import seed_gpu_racks
from webhooks.server import WebhookMetrics

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
SERIES = re.compile(r"\b((?:hyperplace|volcano)_[a-zA-Z0-9_]+)\b")


async def scheduler_registry() -> CollectorRegistry:
    """A scheduler after one cycle on GPU racks (the per-tier series exist only after one)."""
    api = ClusterApi()
    seed_gpu_racks(api)
    sched = Scheduler(api, options())
    tasks = await sched.start_informers()
    try:
        await eventually(sched.synced, what="sync")
        await sched.run_cycle()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return sched.registry


def exported() -> set[str]:
    """Every sample name the three components can serve, histogram and counter suffixes included."""
    regs = [CollectorRegistry(), CollectorRegistry()]
    WebhookMetrics(regs[0])
    ControllerMetrics(regs[1])
    regs.append(asyncio.run(scheduler_registry()))
    names: set[str] = set()
    for reg in regs:
        for fam in reg.collect():
            suffixes = {
                "histogram": ("_bucket", "_sum", "_count"),
                "counter": ("_total", ""),
                "summary": ("_sum", "_count"),
            }.get(fam.type, ("",))
            names |= {fam.name + s for s in suffixes}
            names |= {s.name for s in fam.samples}
    return names


def queries(dashboard: dict) -> list[tuple[str, str]]:
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"]))
    return out


def test_every_query_names_an_exported_series():
    known = exported()
    files = sorted(DASHBOARDS.glob("*.json"))
    assert files, "no dashboard"
    for path in files:
        board = json.loads(path.read_text())
        qs = queries(board)
        assert len(qs) >= 20, f"{path.name}: only {len(qs)} queries"
        for title, expr in qs:
            names = SERIES.findall(expr)
            assert names, f"{path.name} / {title}: {expr!r} names no hyperplace or volcano series"
            unknown = [n for n in names if n not in known]
            assert unknown == [], f"{path.name} / {title}: {unknown} are not exported"


def test_the_dashboard_covers_what_operators_watch():
    board = json.loads((DASHBOARDS / "hyperplace.json").read_text())
    text = " ".join(expr for _, expr in queries(board))
    for series in (
        "hyperplace_scheduler_session_duration_seconds_bucket",
        "hyperplace_scheduler_cycle_duration_seconds_bucket",
        "hyperplace_scheduler_binds_total",
        "hyperplace_scheduler_tier_free_hypernodes",
        "volcano_unschedule_task_count",
        "volcano_queue_allocated_milli_cpu",
        "hyperplace_webhook_request_duration_seconds_bucket",
        "hyperplace_webhook_requests_total",
        "hyperplace_webhook_cert_expiry_seconds",
    ):
        assert series in text, series
    # Panels do not overlap on Grafana's 24-column grid.
    cells: set[tuple[int, int]] = set()
    for p in board["panels"]:
        g = p["gridPos"]
        here = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not here & cells, p["title"]
        assert g["x"] + g["w"] <= 24
        cells |= here
