"""Markdown tables and PNG plots of the three harnesses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .exact import ExactResult
from .scale import ScalePoint
from .sim import SimResult, summarize

TARGETS = {"job_tier": 1.0, "partitions": 1.0, "leaves": 0.95}


def _pct(num: int, den: int) -> str:
    return f"{100.0 * num / den:.1f} % ({num}/{den})" if den else "n/a (0 cases)"


def exact_table(res: ExactResult) -> str:
    names = list(res.tallies)
    rows = [
        ("cases", lambda t: str(t.cases)),
        ("feasible (oracle)", lambda t: str(t.feasible)),
        ("optimal job tier (target 100 %)", lambda t: _pct(t.job_tier_ok, t.feasible)),
        ("every partition optimal (target 100 %)", lambda t: _pct(t.partitions_ok, t.with_partitions)),
        ("leaves <= optimum + 1 (target >= 95 %)", lambda t: _pct(t.leaves_ok, t.placed_feasible)),
        ("infeasible but placed (must be 0)", lambda t: str(t.infeasible_placed)),
        ("invalid placements (must be 0)", lambda t: str(t.invalid)),
        ("feasible but not placed", lambda t: str(t.feasible_missed)),
        ("errors", lambda t: str(t.errors)),
        ("CPU per decision, mean", lambda t: f"{1e3 * float(np.mean(t.cpu_s)):.1f} ms" if t.cpu_s else "n/a"),
    ]
    out = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, fn in rows:
        out.append(f"| {label} | " + " | ".join(fn(res.tallies[n]) for n in names) + " |")
    mix = ", ".join(f"{k}: {v}" for k, v in sorted(res.labels.items()))
    oracle = np.asarray(res.oracle_cpu_s)
    out.append("")
    out.append(
        f"Cases: seeds {res.seeds[0]}..{res.seeds[-1]} ({mix}). MILP oracle CPU: mean "
        f"{1e3 * oracle.mean():.0f} ms, max {1e3 * oracle.max():.0f} ms; cases not scored because the "
        f"MILP hit its time limit (no proven optimum): {res.oracle_timeouts}."
    )
    return "\n".join(out)


def exact_misses(res: ExactResult, limit: int = 40) -> str:
    """Every non-optimal case per scheduler, target-breaking kinds (upper case) first."""
    lines = []
    for name, tally in res.tallies.items():
        if not tally.misses:
            continue
        misses = sorted(tally.misses, key=lambda m: (not str(m["what"])[:3].isupper(), m["seed"]))
        lines.append(f"- **{name}** ({len(misses)}):")
        for miss in misses[:limit]:
            lines.append(f"  - seed {miss['seed']}: {miss['what']}")
        if len(misses) > limit:
            lines.append(f"  - ... {len(misses) - limit} more")
    return "\n".join(lines) if lines else "None."


def _fmt_s(v: float) -> str:
    if math.isnan(v):
        return "n/a"
    if v >= 3600:
        return f"{v / 3600:.1f} h"
    if v >= 60:
        return f"{v / 60:.1f} min"
    return f"{v:.0f} s"


def sim_table(results: Sequence[SimResult]) -> str:
    sums = [summarize(r) for r in results]
    names = [r.scheduler for r in results]
    rows: list[tuple[str, str, str]] = [
        ("jobs started / submitted", "started", "jobs"),
        ("multi-pod jobs started", "multi_pod_jobs", ""),
        ("job LCA tier, mean (multi-pod)", "tier_mean", ""),
        ("job LCA tier, p95 (multi-pod)", "tier_p95", ""),
        ("leaves spanned - minimum, mean", "leaf_excess_mean", ""),
        ("jobs at the minimum leaf span", "leaf_at_min_share", "%"),
        ("ring crossings per job, mean (multi-pod)", "ring_crossings_mean", ""),
        ("GPU demand (if every job started on arrival)", "demand", "%"),
        ("GPU allocation (time-avg)", "gpu_util", "%"),
        ("GPUs stranded for the head job (time-avg)", "stranded_frac", "%"),
        ("queueing delay mean", "wait_mean_s", "s"),
        ("queueing delay p50", "wait_p50_s", "s"),
        ("queueing delay p95", "wait_p95_s", "s"),
        ("queueing delay p99", "wait_p99_s", "s"),
        ("queueing delay p50, jobs >= 256 GPUs", "big_wait_p50_s", "s"),
        ("queueing delay p95, jobs >= 256 GPUs", "big_wait_p95_s", "s"),
        ("queueing delay mean, jobs >= 256 GPUs", "big_wait_mean_s", "s"),
        ("longest queueing delay (GPUs of that job)", "wait_max_s", "max"),
        ("GPU-hours spent queueing (wait x GPUs, all jobs)", "gpu_hours_waited", "gpuh"),
        ("last job started at", "last_start_s", "s"),
        ("scheduler CPU per cycle, mean", "cycle_cpu_mean_ms", "ms"),
        ("scheduler CPU per cycle, p95", "cycle_cpu_p95_ms", "ms"),
        ("scheduling cycles", "cycles", ""),
    ]
    out = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, key, unit in rows:
        cells = []
        for s in sums:
            v = s[key]
            if unit == "jobs":
                cells.append(f"{int(v)} / {int(s['jobs'])}")
            elif unit == "%":
                cells.append("n/a" if math.isnan(v) else f"{100 * v:.1f} %")
            elif unit == "s":
                cells.append(_fmt_s(v))
            elif unit == "max":
                cells.append(f"{_fmt_s(v)} ({int(s['wait_max_gpus'])})" if not math.isnan(v) else "n/a")
            elif unit == "ms":
                cells.append("n/a" if math.isnan(v) else f"{v:.1f} ms")
            elif unit == "gpuh":
                cells.append(f"{v:,.0f}")
            elif key in ("started", "multi_pod_jobs", "cycles"):
                cells.append(str(int(v)))
            else:
                cells.append("n/a" if math.isnan(v) else f"{v:.2f}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


SEED_ROWS: tuple[tuple[str, str, str], ...] = (
    ("jobs at the minimum leaf span", "leaf_at_min_share", "%"),
    ("ring crossings per job, mean (multi-pod)", "ring_crossings_mean", ""),
    ("GPU allocation (time-avg)", "gpu_util", "%"),
    ("queueing delay p95", "wait_p95_s", "s"),
    ("queueing delay p99", "wait_p99_s", "s"),
    ("queueing delay p95, jobs >= 256 GPUs", "big_wait_p95_s", "s"),
    ("queueing delay mean, jobs >= 256 GPUs", "big_wait_mean_s", "s"),
    ("longest queueing delay", "wait_max_s", "s"),
    ("GPU-hours spent queueing", "gpu_hours_waited", "gpuh"),
    ("last job started at", "last_start_s", "h"),
    ("scheduler CPU per cycle, mean", "cycle_cpu_mean_ms", "ms"),
)


def seeds_table(per_seed: Sequence[dict[str, dict[str, float]]]) -> str:
    """Mean ± standard deviation over seeds of the main trace rows, per scheduler."""
    names = list(per_seed[0]) if per_seed else []
    out = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]

    def fmt(v: float, unit: str) -> str:
        if unit == "%":
            return f"{100 * v:.1f}"
        if unit == "s":
            return f"{v / 60:.1f}"
        if unit == "h":
            return f"{v / 3600:.1f}"
        if unit == "gpuh":
            return f"{v:,.0f}"
        return f"{v:.2f}" if unit == "" else f"{v:.1f}"

    suffix = {"%": " %", "s": " min", "h": " h", "gpuh": "", "ms": " ms", "": ""}
    for label, key, unit in SEED_ROWS:
        cells = []
        for n in names:
            vals = np.asarray([s[n][key] for s in per_seed if n in s], dtype=float)
            vals = vals[~np.isnan(vals)]
            if not len(vals):
                cells.append("n/a")
                continue
            cells.append(f"{fmt(float(vals.mean()), unit)} ± {fmt(float(vals.std()), unit)}{suffix[unit]}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    counts = [", ".join(str(int(s[n].get("big_jobs", 0))) for s in per_seed if n in s) for n in names]
    out.append("| jobs >= 256 GPUs started, per seed | " + " | ".join(counts) + " |")
    return "\n".join(out)


def scale_table(points: Sequence[ScalePoint], budget: float) -> str:
    out = [
        "| nodes | pods | levels | ours build | ours session | ours total | ours tier | Volcano-alg. | Volcano tier | ratio | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:

        def ms(v: float | None) -> str:
            return "n/a" if v is None else f"{1e3 * v:.0f} ms"

        total = None if p.ours_session_s is None else (p.ours_build_s or 0.0) + p.ours_session_s
        vol = f"> {budget:.0f} s" if p.volcano_capped else ms(p.volcano_s)
        ratio = p.ratio
        rtxt = "n/a" if ratio is None else (f"> {ratio:.0f}x" if p.volcano_capped else f"{ratio:.1f}x")
        out.append(
            f"| {p.nodes} | {p.pods} | {'2' if p.two_level else '1'} | {ms(p.ours_build_s)} | "
            f"{ms(p.ours_session_s)} | {ms(total)} | {p.ours_tier or '-'} | {vol} | {p.volcano_tier or '-'} | "
            f"{rtxt} | {p.note.strip('; ')} |"
        )
    return "\n".join(out)


# ---- plots ------------------------------------------------------------------------------


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sim(results: Sequence[SimResult], out: Path) -> list[Path]:
    plt = _plt()
    paths = []
    # 1. Job LCA tier distribution (multi-pod jobs).
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=80)
    max_t = max((j.tier or 0) for r in results for j in r.jobs) or 1
    width = 0.8 / max(1, len(results))
    for k, r in enumerate(results):
        tiers = [j.tier for j in r.started() if j.pods > 1]
        counts = [sum(1 for t in tiers if t == v) for v in range(1, max_t + 1)]
        share = np.asarray(counts) / max(1, len(tiers))
        ax.bar(np.arange(1, max_t + 1) + k * width - 0.4 + width / 2, share, width, label=r.scheduler)
    ax.set_xlabel("job LCA tier (multi-pod jobs)")
    ax.set_ylabel("share of jobs")
    ax.set_xticks(range(1, max_t + 1))
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "sim_tiers.png")
    fig.savefig(paths[-1])
    plt.close(fig)
    # 2. Queueing delay CDF.
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=80)
    for r in results:
        waits = np.sort([(j.start or 0.0) - j.arrival for j in r.started()])
        waits = np.maximum(waits, 1.0)
        ax.step(waits, np.arange(1, len(waits) + 1) / max(1, len(r.jobs)), where="post", label=r.scheduler)
    ax.set_xscale("log")
    ax.set_xlabel("queueing delay (s, log)")
    ax.set_ylabel("share of submitted jobs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "sim_wait_cdf.png")
    fig.savefig(paths[-1])
    plt.close(fig)
    # 3. GPU allocation over time.
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=80)
    for r in results:
        t = np.asarray([p[0] for p in r.util_time]) / 3600.0
        u = np.asarray([p[1] for p in r.util_time])
        ax.step(t, u, where="post", label=r.scheduler, linewidth=0.8)
    ax.set_xlabel("simulated time (h)")
    ax.set_ylabel("allocated GPU share")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "sim_gpu_alloc.png")
    fig.savefig(paths[-1])
    plt.close(fig)
    return paths


def plot_scale(points: Sequence[ScalePoint], out: Path) -> list[Path]:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), dpi=80, sharey=True)
    for ax, two in zip(axes, (False, True), strict=True):
        pods_sizes = sorted({p.pods for p in points if p.two_level == two})
        for pods in pods_sizes:
            pts = sorted((p for p in points if p.two_level == two and p.pods == pods), key=lambda p: p.nodes)
            ours = [
                (p.nodes, (p.ours_build_s or 0) + p.ours_session_s)
                for p in pts
                if p.ours_session_s is not None
            ]
            if ours:
                line = ax.plot(*zip(*ours, strict=True), marker="o", label=f"ours {pods} pods")[0]
                color = line.get_color()
                # The session alone (the algorithm), without the snapshot build.
                session = [(p.nodes, p.ours_session_s) for p in pts if p.ours_session_s is not None]
                ax.plot(*zip(*session, strict=True), marker=".", linestyle=":", color=color, linewidth=0.8)
            else:
                color = None
            vol = [(p.nodes, p.volcano_s) for p in pts if p.volcano_s is not None]
            if vol:
                ax.plot(
                    *zip(*vol, strict=True),
                    marker="x",
                    linestyle="--",
                    color=color,
                    label=f"Volcano-alg. {pods}",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes")
        ax.set_title("two-level (partitions of 8)" if two else "single-level", fontsize=9)
    axes[0].set_ylabel("CPU s per decision (dotted: ours session only)")
    axes[1].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    path = out / "scale_latency.png"
    fig.savefig(path)
    plt.close(fig)
    return [path]
