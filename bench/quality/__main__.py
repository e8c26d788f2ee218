"""``python -m bench.quality [--quick]``: regenerate every table and plot of bench/quality.

Prints the markdown tables and writes ``results.md`` plus PNG plots to ``--out``
(default ``bench/quality/results``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .exact import run_exact
from .generators import LIMIT_FACTOR, LIMIT_SHARE, clos_cluster, trace_jobs, with_limits
from .ours import (
    HyperplaceScheduler,
    contract,
    cpu_memory_binpack_config,
    default_reservation_wait,
    reservation_wait_config,
)
from .report import exact_misses, exact_table, plot_scale, plot_sim, scale_table, seeds_table, sim_table
from .scale import run_scale
from .schedulers import BlindScheduler, Scheduler, VolcanoConfig, VolcanoScheduler
from .sim import simulate, summarize


@dataclass(frozen=True)
class Sizes:
    exact_cases: int
    exact_max_nodes: int
    sim_fanout: tuple[int, int, int]  # nodes per leaf, leaves per spine, spines
    sim_jobs: int
    sim_max_job_fraction: float
    sim_load: float
    sim_tick_s: float
    scale_nodes: tuple[int, ...]
    scale_pods: tuple[int, ...]
    scale_budget_s: float


QUICK = Sizes(30, 128, (16, 8, 2), 800, 0.25, 1.1, 10.0, (1024, 2048), (8, 64, 512), 2.0)
FULL = Sizes(
    200,
    256,
    (32, 16, 4),
    3000,
    0.5,
    1.1,
    10.0,
    (1024, 2048, 5120, 10240, 20480),
    (8, 64, 512, 1000, 5000),
    20.0,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes, under 2 minutes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: results/, or results/quick/ with --quick, which git ignores)",
    )
    ap.add_argument(
        "--parts", default="exact,sim,scale,queues", help="comma-separated subset of exact,sim,scale,queues"
    )
    ap.add_argument(
        "--sim-seeds",
        type=int,
        default=None,
        help="trace seeds for the mean and spread of the trace simulation (default 5; 2 with --quick)",
    )
    ap.add_argument(
        "--sim-traces",
        default="limits,plain",
        help="traces of the simulation, first one plotted: limits (70 %% of jobs declare a time "
        "limit) and/or plain (no limits, the trace before issue 24)",
    )
    args = ap.parse_args(argv)
    traces = [t for t in args.sim_traces.split(",") if t]
    if not traces or any(t not in ("limits", "plain") for t in traces):
        ap.error(f"--sim-traces: expected limits and/or plain, got {args.sim_traces!r}")
    sizes = QUICK if args.quick else FULL
    sim_seeds = args.sim_seeds if args.sim_seeds is not None else (2 if args.quick else 5)
    summary: dict[str, Any] = {"mode": "quick" if args.quick else "full", "seed": args.seed}
    if args.out is None:
        # A quick check before a commit must not overwrite the committed full-run results.
        args.out = Path(__file__).parent / "results" / ("quick" if args.quick else "")
    parts = set(args.parts.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()

    try:
        contract()
        ours_note = ""
    except ImportError as exc:
        ours_note = f"our scheduler unavailable ({exc}); its columns are missing."
        print(f"warning: {ours_note}", file=sys.stderr)
    have_ours = not ours_note

    sections: list[str] = [
        "# bench/quality results",
        "",
        f"Mode: {'quick' if args.quick else 'full'}, seed {args.seed}; Python {platform.python_version()}, "
        f"{platform.machine()}. Regenerate with `python -m bench.quality{' --quick' if args.quick else ''}`.",
    ]
    if ours_note:
        sections += ["", f"**Note:** {ours_note}"]
    plots: list[Path] = []

    if "exact" in parts:
        t0 = time.time()
        scheds: list[Scheduler] = [VolcanoScheduler(seed=args.seed)]
        if have_ours:
            scheds.insert(0, HyperplaceScheduler(seed=args.seed))
        res = run_exact(scheds, sizes.exact_cases, seed0=args.seed * 100_000, max_nodes=sizes.exact_max_nodes)
        summary["exact"] = {
            "cases": len(res.seeds),
            "oracle_timeouts": res.oracle_timeouts,
            "schedulers": {
                name: {k: v for k, v in asdict(t).items() if k not in ("misses", "cpu_s")}
                for name, t in res.tallies.items()
            },
        }
        sections += [
            "",
            "## 1. Exact optimum on small cases",
            "",
            f"{sizes.exact_cases} seeded clusters (<= {sizes.exact_max_nodes} nodes, 2-3 tiers, random "
            "background load), one gang of <= 64 pods of 1-3 shapes, with/without partitions, hard/soft "
            "bounds. Optimum: MILP (HiGHS), lexicographic (job tier, sum of partition tiers, leaves).",
            "",
            exact_table(res),
            "",
            "Non-optimal or failed cases (seed reproduces with `bench.quality.generators.small_case(seed)`):",
            "",
            exact_misses(res),
            "",
            f"_Part 1: {time.time() - t0:.0f} s wall._",
        ]
        print("\n".join(sections[-12:]), flush=True)

    if "sim" in parts:
        t0 = time.time()
        npl, lps, spines = sizes.sim_fanout
        state = clos_cluster(npl, lps, spines)
        scheds = [
            BlindScheduler(),
            VolcanoScheduler(seed=args.seed),
            VolcanoScheduler(VolcanoConfig.gpu_binpack(), seed=args.seed, name="volcano-alg.+gpu-binpack"),
        ]
        if have_ours:
            scheds[:0] = [
                HyperplaceScheduler(seed=args.seed),
                HyperplaceScheduler(
                    seed=args.seed, config=cpu_memory_binpack_config(), name="hyperplace-cpu-mem-binpack"
                ),
                HyperplaceScheduler(seed=args.seed, learns_runtimes=True, name="hyperplace-learned-runtimes"),
                HyperplaceScheduler(
                    seed=args.seed, config=reservation_wait_config("10m"), name="hyperplace-10m-holds"
                ),
            ]
        gpus = int(state.alloc[:, 2].sum())
        seeds = [args.seed + 1 + k for k in range(sim_seeds)]
        for kind in traces:

            def trace_of(seed: int, kind: str = kind) -> list[Any]:
                return sim_trace(sizes, state, seed, kind)

            per_seed = []
            results: list[Any] = []
            holds: dict[str, dict[str, int]] = {}
            for seed in seeds:
                fresh = _fresh(scheds, args.seed)
                runs = [simulate(s, state, trace_of(seed), tick=sizes.sim_tick_s) for s in fresh]
                results = results or runs
                per_seed.append({r.scheduler: summarize(r) for r in runs})
                for s in fresh:
                    if isinstance(s, HyperplaceScheduler):
                        got = holds.setdefault(s.name, dict.fromkeys(s.holds, 0))
                        for k, v in s.holds.items():
                            got[k] += v
            key = "sim" if kind == traces[0] else f"sim_{kind}"
            summary[key] = {"trace": kind, "seeds": seeds, "per_seed": per_seed, "holds": holds}
            if kind == traces[0]:
                plots += plot_sim(results, args.out)
            anomalies = [a for r in results for a in r.anomalies]
            threshold = f"{default_reservation_wait() / 3600:g} h" if have_ours else "not run"
            title = (
                f"with time limits ({int(LIMIT_SHARE * 100)} % of jobs set `activeDeadlineSeconds` "
                f"to {LIMIT_FACTOR[0]:g}-{LIMIT_FACTOR[1]:g}x their run time; the baselines ignore them)"
                if kind == "limits"
                else "without time limits"
            )
            sections += [
                "",
                f"## 2{'' if kind == traces[0] else 'b'}. Trace-driven simulation, {title}",
                "",
                f"3-tier Clos: {npl} nodes/leaf x {lps} leaves/spine x {spines} spines = {state.topo.n_nodes} "
                f"nodes, {gpus} GPUs. {sizes.sim_jobs} jobs (seed {seeds[0]}), Poisson arrivals at "
                f"{int(sizes.sim_load * 100)} % expected offered load (the demand row shows what the trace "
                "realised in the window: the largest jobs outlast it), sizes/durations from the trace-shaped "
                f"generator (largest job clamped to {int(sizes.sim_max_job_fraction * 100)} % of the GPUs); tick "
                f"{sizes.sim_tick_s:.0f} s; for the baselines a job waiting > 4 h reserves the queue head (harness "
                "rule); ours runs the scheduler's own head-of-queue reservation (threshold "
                f"{threshold}; the held "
                "domain is the one where the gang fits earliest as the running pods' time limits end), with "
                "EASY backfill of held room by jobs whose time limit ends before the held gang's estimated start. "
                "Tier/span over multi-pod "
                "jobs; utilisation, demand and stranding time-averaged from 20 % of the arrival window to the "
                "last arrival. `hyperplace` is our default configuration, whose bin-pack scores weigh "
                "`nvidia.com/gpu` too; `hyperplace-cpu-mem-binpack` has Volcano's default bin-pack arguments "
                "(CPU and memory only), as our default had before; `hyperplace-learned-runtimes` is our default "
                "with the trace's queue annotated `hyperplace.io/runtime-estimate: history` (holds also expect "
                "pods without a limit to end as the queue's earlier runs of their size did); "
                "`hyperplace-10m-holds` is our default holding room after 10 minutes instead (the default "
                "before; holds and backfill then act far more often); "
                "`volcano-alg.+gpu-binpack` gives the Volcano "
                "algorithm the GPU arguments of ours, `volcano-algorithm` Volcano's defaults.",
                "",
                sim_table(results),
                "",
                f"Across {sim_seeds} trace seeds ({', '.join(str(x) for x in seeds)}): "
                "mean ± standard deviation of the per-seed values; the jobs >= 256 GPUs rows rest on the "
                "count given.",
                "",
                seeds_table(per_seed),
                "",
                "Holds of ours over all seeds (cycles with a domain held; of those, with the held gang's "
                "estimated start known; jobs backfilled into held room): "
                + "; ".join(
                    f"{name}: {h['held']} held, {h['estimated']} with an estimate, {h['backfilled']} backfilled"
                    for name, h in holds.items()
                )
                + ".",
            ]
            if kind == traces[0]:
                sections += [
                    "",
                    "![job LCA tiers](sim_tiers.png) ![queueing delay](sim_wait_cdf.png) "
                    "![GPU allocation](sim_gpu_alloc.png)",
                ]
            if anomalies:
                sections += ["", "Anomalies: " + "; ".join(anomalies[:10])]
            print("\n".join(sections[-6:]), flush=True)
        sections += ["", f"_Part 2: {time.time() - t0:.0f} s wall._"]

    if "scale" in parts:
        t0 = time.time()
        points = run_scale(
            list(sizes.scale_nodes),
            list(sizes.scale_pods),
            sizes.scale_budget_s,
            seed=args.seed,
            run_ours=have_ours,
        )
        plots += plot_scale(points, args.out)
        summary["scale"] = [asdict(p) | {"ratio": p.ratio} for p in points]
        sections += [
            "",
            "## 3. Decision latency sweep",
            "",
            "CPU time of one decision for one pending gang of 8-GPU pods on a 3-tier Clos (32 nodes/leaf, "
            "16 leaves/spine) with 25 % of nodes partly loaded; soft job topology, two-level adds partitions "
            f"of 8 pods hard at tier 1. Volcano-algorithm baseline capped at {sizes.scale_budget_s:.0f} s CPU.",
            "",
            scale_table(points, sizes.scale_budget_s),
            "",
            "![latency](scale_latency.png)",
            "",
            f"_Part 3: {time.time() - t0:.0f} s wall._",
        ]
        print("\n".join(sections[-7:]), flush=True)

    if "queues" in parts and have_ours:
        from .queues import run_queue_part

        t0 = time.time()
        table, summary["queues"] = run_queue_part(args.seed, args.quick)
        sections += [
            "",
            "## 4. Shared cluster: two queues, two priorities, preemption and reclaim",
            "",
            "Team a floods the cluster with low-priority gangs, team b (same weight) arrives at 30 % of "
            "the window, and from 50 % a quarter of the jobs are high priority; gangs are 1-8 whole "
            "8-GPU nodes, multi-pod ones hard at tier 1 (`bench/quality/queues.py` says how both "
            "schedulers are driven and what the Volcano baseline simplifies). Shares are time-averaged "
            "GPU shares while both teams have work; an evicted gang restarts from scratch.",
            "",
            table,
            "",
            f"_Part 4: {time.time() - t0:.0f} s wall._",
        ]
        print("\n".join(sections[-5:]), flush=True)

    sections += ["", f"_Total: {time.time() - started:.0f} s wall._", ""]
    (args.out / "results.md").write_text("\n".join(sections))
    (args.out / "summary.json").write_text(
        json.dumps(_clean(summary), indent=1, sort_keys=True, allow_nan=False)
    )
    print(f"\nwrote {args.out / 'results.md'}, summary.json and {len(plots)} plots", file=sys.stderr)
    return 0


def sim_trace(sizes: Sizes, state: Any, seed: int, kind: str) -> list[Any]:
    """The simulation's trace of ``seed`` on ``state``: ``plain`` (no time limits) or ``limits``
    (the same jobs, a share of them declaring a time limit)."""
    plain = trace_jobs(
        seed, sizes.sim_jobs, state, load=sizes.sim_load, max_job_fraction=sizes.sim_max_job_fraction
    )
    return with_limits(seed, plain) if kind == "limits" else plain


def _fresh(scheds: list[Any], seed: int) -> list[Any]:
    """New instances of the same schedulers (a run keeps state: caches, reservations)."""
    out: list[Any] = []
    for s in scheds:
        if isinstance(s, HyperplaceScheduler):
            out.append(
                HyperplaceScheduler(
                    seed=seed, config=s.config, name=s.name, learns_runtimes=s.learns_runtimes
                )
            )
        elif isinstance(s, VolcanoScheduler):
            out.append(VolcanoScheduler(s.config, seed=seed, name=s.name))
        else:
            out.append(type(s)())
    return out


def _clean(v: Any) -> Any:
    """JSON-safe: NaN (a measure with no data) as null, numpy scalars as Python numbers."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


if __name__ == "__main__":
    sys.exit(main())
