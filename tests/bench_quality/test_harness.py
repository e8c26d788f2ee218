"""Tiny runs of each harness component (sizes small; nothing timed)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench.quality.exact import run_exact
from bench.quality.generators import clos_cluster, trace_jobs, with_limits
from bench.quality.ours import HyperplaceScheduler
from bench.quality.report import exact_table, plot_scale, plot_sim, scale_table, sim_table
from bench.quality.scale import run_scale
from bench.quality.schedulers import BlindScheduler, VolcanoScheduler
from bench.quality.sim import simulate, summarize


def test_exact_harness_tallies() -> None:
    res = run_exact([VolcanoScheduler(), BlindScheduler()], n_cases=6, max_nodes=48)
    vol, blind = res.tallies["volcano-algorithm"], res.tallies["topology-blind"]
    assert vol.cases == blind.cases == 6
    assert vol.feasible == blind.feasible  # the oracle's verdict, not the scheduler's
    assert vol.invalid == 0 and vol.infeasible_placed == 0
    assert vol.job_tier_ok <= vol.placed_feasible <= vol.feasible
    assert "optimal job tier" in exact_table(res)


def test_sim_runs_and_frees_everything(tmp_path: Path) -> None:
    state = clos_cluster(4, 2, 2)
    trace = trace_jobs(5, 40, state, max_job_fraction=0.25)
    results = [simulate(s, state, trace, tick=60.0) for s in (BlindScheduler(), VolcanoScheduler())]
    for res in results:
        summary = summarize(res)
        assert summary["started"] == len(trace)  # a small, light trace drains completely
        assert all(j.end is not None for j in res.jobs)
        assert 0.0 < summary["gpu_util"] <= 1.0
        assert 0.0 <= summary["stranded_frac"] <= 1.0
        for j in res.started():
            assert j.tier is not None and 1 <= j.tier <= state.topo.root_tier
            assert j.leaves is not None and j.min_leaves is not None and j.leaves >= j.min_leaves
            # A ring visiting L leaves changes leaf at least L - 1 times, and at most once per pair.
            assert j.ring is not None and j.leaves - 1 <= j.ring <= max(0, j.pods - 1)
        assert summary["ring_crossings_mean"] >= 0.0
        # A job's wait weighs by its GPUs: one large job starved for hours shows here.
        waited = sum(((j.start or 0.0) - j.arrival) * j.gpus for j in res.jobs) / 3600.0
        assert summary["gpu_hours_waited"] == pytest.approx(waited)
        assert summary["last_start_s"] == max(j.start or 0.0 for j in res.jobs)
    assert "queueing delay p95" in sim_table(results)
    assert "ring crossings per job" in sim_table(results)
    assert all(p.exists() for p in plot_sim(results, tmp_path))


def test_scale_sweep_caps_the_baseline(tmp_path: Path) -> None:
    points = run_scale([512], [8, 64], volcano_budget_s=0.0, run_ours=False)
    assert [(p.nodes, p.pods, p.two_level) for p in points] == [
        (512, 8, False),
        (512, 64, False),
        (512, 8, True),
        (512, 64, True),
    ]
    assert all(p.volcano_capped for p in points)
    assert "> 0 s" in scale_table(points, 0.0)
    assert all(p.exists() for p in plot_scale(points, tmp_path))


def test_scale_sweep_with_ours() -> None:
    try:
        from bench.quality.ours import contract

        contract()
    except ImportError as exc:
        pytest.skip(f"scheduler core not importable: {exc}")
    points = run_scale([512], [8], volcano_budget_s=30.0)
    for p in points:
        assert p.ours_session_s is not None and not math.isnan(p.ours_session_s)
        assert p.ours_tier == 1 and p.volcano_tier == 1, p.note


def test_main_writes_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.quality.__main__ import main

    assert main(["--quick", "--parts", "exact", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "results.md").read_text()
    assert "## 1. Exact optimum on small cases" in text
    assert "## 2." not in text  # only the requested part ran
    assert "optimal job tier" in capsys.readouterr().out
    # Every number of the tables is also in summary.json, NaN as null.
    import json

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["mode"] == "quick" and "sim" not in summary
    exact = summary["exact"]
    assert exact["cases"] > 0 and set(exact["schedulers"]) >= {"hyperplace", "volcano-algorithm"}
    assert exact["schedulers"]["hyperplace"]["job_tier_ok"] <= exact["schedulers"]["hyperplace"]["feasible"]


def test_seed_table_gives_mean_and_spread() -> None:
    from bench.quality.report import seeds_table

    keys = ("leaf_at_min_share", "ring_crossings_mean", "gpu_util", "wait_p95_s", "wait_p99_s")
    keys += ("big_wait_p95_s", "big_wait_mean_s", "wait_max_s", "gpu_hours_waited", "last_start_s")
    keys += ("cycle_cpu_mean_ms",)
    a = {"s": dict.fromkeys(keys, 1.0) | {"gpu_util": 0.8, "big_jobs": 3.0, "gpu_hours_waited": 1500.0}}
    b = {"s": dict.fromkeys(keys, 1.0) | {"gpu_util": 0.6, "big_jobs": 5.0, "gpu_hours_waited": 2500.0}}
    b["s"]["last_start_s"] = 7200.0
    table = seeds_table([a, b])
    assert "| GPU allocation (time-avg) | 70.0 ± 10.0 % |" in table
    assert "| GPU-hours spent queueing | 2,000 ± 500 |" in table
    assert "| last job started at | 1.0 ± 1.0 h |" in table
    assert "| jobs >= 256 GPUs started, per seed | 3, 5 |" in table


def test_sim_with_time_limits_drains_with_ours_and_no_partial_gang() -> None:
    state = clos_cluster(4, 2, 2)
    trace = with_limits(5, trace_jobs(5, 40, state, max_job_fraction=0.25))
    assert any("limit_s" in tj.spec.meta for tj in trace)
    res = simulate(HyperplaceScheduler(), state, trace, tick=60.0)
    assert summarize(res)["started"] == len(trace)
    assert not res.anomalies


def test_main_runs_the_trace_with_and_without_time_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dataclasses
    import json

    import bench.quality.__main__ as cli

    tiny = dataclasses.replace(cli.QUICK, sim_fanout=(4, 2, 2), sim_jobs=30, sim_tick_s=60.0)
    monkeypatch.setattr(cli, "QUICK", tiny)
    assert cli.main(["--quick", "--parts", "sim", "--sim-seeds", "1", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "results.md").read_text()
    assert "## 2. Trace-driven simulation, with time limits" in text
    assert "## 2b. Trace-driven simulation, without time limits" in text
    assert text.count("Holds of ours over all seeds") == 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["sim"]["trace"] == "limits" and summary["sim_plain"]["trace"] == "plain"
    assert set(summary["sim"]["holds"]) == {
        "hyperplace",
        "hyperplace-cpu-mem-binpack",
        "hyperplace-learned-runtimes",
        "hyperplace-10m-holds",
    }
    assert "threshold 2 h" in text
    with pytest.raises(SystemExit):
        cli.main(["--quick", "--parts", "sim", "--sim-traces", "none", "--out", str(tmp_path)])
    capsys.readouterr()


def test_a_gang_enqueue_admitted_stays_inqueue_in_the_next_cycle_as_the_runtime_writes_it() -> None:
    # The scheduler writes Inqueue to an admitted PodGroup and reads it back next cycle; the
    # simulation must too, or a gang admitted when the queue had room would fall back to Pending
    # (and out of the head-of-queue reservation) the moment the queue fills up.
    from bench.quality.model import JobSpec, NetTopology, Task

    state = clos_cluster(4, 2, 2)  # 16 nodes of 8 GPUs, 4 per leaf
    gpu_pod = (8_000, 64 * 1024, 8)
    # 8 whole-node pods that must share one leaf of 4 nodes: admitted, never placed.
    stuck = JobSpec("stuck", (Task("t", gpu_pod, 8),), NetTopology("hard", 1))
    sched = HyperplaceScheduler()
    sched.set_created(stuck, 0.0)
    sched.set_now(0.0)
    assert sched.place_batch(state, [stuck]) == {}
    assert sched._pending[stuck][1].status.phase == "Inqueue"
    # A job of the same queue starts on 12 of the 16 nodes: a new admission of 64 GPUs would now
    # be refused (96 + 64 > 128 GPUs).
    filler = JobSpec("filler", (Task("t", gpu_pod, 12),))
    on = np.arange(12, dtype=np.int64)
    state.apply(filler.req, on)
    sched.set_created(filler, 5.0)
    sched.on_start(state, filler, on)
    sched.set_now(10.0)
    assert sched.place_batch(state, [stuck]) == {}
    assert sched._pending[stuck][1].status.phase == "Inqueue"


def test_cpu_per_cycle_counts_the_schedulers_own_work_when_its_adapter_reports_it() -> None:
    # Ours' adapter builds pods and PodGroups of the simulated cluster and reads bindings back:
    # the harness's work. The cycle's CPU is the scheduler's (watch events, snapshot, session).
    state = clos_cluster(4, 2, 2)
    trace = trace_jobs(5, 20, state, max_job_fraction=0.25)

    class Reporting(VolcanoScheduler):
        def decision_cpu(self) -> float:
            return 0.5

    assert set(simulate(Reporting(), state, trace, tick=60.0).cycle_cpu_s) == {0.5}
    ours = HyperplaceScheduler()
    res = simulate(ours, state, trace, tick=60.0)
    assert res.cycle_cpu_s[-1] == ours.timing.build_s + ours.timing.session_s > 0
