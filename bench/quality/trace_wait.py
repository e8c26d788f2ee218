"""Why a large job waited: one trace seed through ours and the Volcano algorithm, the jobs of at
least 256 GPUs by their wait under ours, and for the one at ours' p95 what started meanwhile,
how full each cluster was, and which jobs ours was running that the Volcano algorithm had not started.

    python -m bench.quality.trace_wait                  # seed 1, the limit trace, full sizes
    python -m bench.quality.trace_wait --seed 3 --trace plain --quick
    python -m bench.quality.trace_wait --seed 4 --defer-largest

``--defer-largest`` runs ours a second time with the trace's largest job arriving only when the
Volcano algorithm started it (its wait still counted from its real arrival): what ours' rows would
be had it made that job wait as the Volcano algorithm does, instead of starting it when it fits.

The traced example behind the large-job p95 and p99 rows of ``results/results.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Mapping, Sequence

import numpy as np

from .__main__ import FULL, QUICK, sim_trace
from .generators import clos_cluster
from .model import GPU
from .ours import HyperplaceScheduler
from .schedulers import VolcanoScheduler
from .sim import JobRecord, SimResult, simulate, summarize

BIG = 256  # GPUs: the "large job" rows of the report


def _wait_min(j: JobRecord) -> float:
    return (j.start - j.arrival) / 60 if j.start is not None else float("inf")


def _meanwhile(recs: Mapping[str, JobRecord], j: JobRecord) -> str:
    """What started in ``recs`` while ``j`` waited there."""
    end = j.arrival + _wait_min(j) * 60
    started = [
        r for r in recs.values() if r.start is not None and r.name != j.name and j.arrival <= r.start <= end
    ]
    big = [r for r in started if r.gpus >= BIG]
    later = [r for r in big if r.arrival > j.arrival]
    shown = ", ".join(f"{r.name} ({r.gpus} GPUs) at +{(r.start or 0) - j.arrival:.0f} s" for r in later[:5])
    return (
        f"{len(started)} jobs started ({sum(r.gpus for r in started)} GPUs), {len(big)} of them >= {BIG} GPUs, "
        f"{len(later)} of those arrived after it{': ' + shown if shown else ''}"
    )


def _in_use(recs: Mapping[str, JobRecord], t: float) -> int:
    """GPUs of the jobs running at ``t`` in ``recs``."""
    return sum(r.gpus for r in recs.values() if r.start is not None and r.start <= t < (r.end or math.inf))


def _room(
    mine: Mapping[str, JobRecord], theirs: Mapping[str, JobRecord], j: JobRecord, total: int
) -> list[str]:
    """Why ``j`` waited under ours: how full each cluster was while it did, and which jobs ours
    ran meanwhile that the other had not started (the room ours gave away and the other kept)."""
    end = j.start if j.start is not None else math.inf
    cycles = [
        t for t in sorted({r.start for r in mine.values() if r.start is not None}) if j.arrival <= t < end
    ]
    ticks = cycles or [j.arrival]
    most_free = max(total - _in_use(mine, t) for t in ticks)
    out = [
        f"  at its arrival ({j.arrival / 3600:.2f} h): {_in_use(mine, j.arrival):,} of {total:,} GPUs in use under "
        f"ours, {_in_use(theirs, j.arrival):,} under the other; while it waited, never more than {most_free:,} "
        f"GPUs free under ours (it needs {j.gpus:,})"
    ]
    ahead = [
        r
        for r in mine.values()
        if r.start is not None
        and r.start <= j.arrival < (r.end or math.inf)
        and (theirs[r.name].start is None or (theirs[r.name].start or 0) > j.arrival)
    ]
    for r in sorted(ahead, key=lambda r: -r.gpus)[:3]:
        other = theirs[r.name].start
        out.append(
            f"  running under ours then, still waiting under the other: {r.name} ({r.gpus:,} GPUs, arrived at "
            f"{r.arrival / 3600:.2f} h, started at {(r.start or 0) / 3600:.2f} h under ours and "
            + (f"{other / 3600:.2f} h" if other is not None else "never")
            + " under the other)"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality.trace_wait", description=__doc__)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trace", choices=("limits", "plain"), default="limits")
    ap.add_argument("--quick", action="store_true", help="the --quick sizes of python -m bench.quality")
    ap.add_argument(
        "--defer-largest",
        action="store_true",
        help="also run ours with the largest job arriving when the Volcano algorithm started it",
    )
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    state = clos_cluster(*sizes.sim_fanout)
    trace = sim_trace(sizes, state, args.seed, args.trace)
    ours, volcano = HyperplaceScheduler(seed=0), VolcanoScheduler(seed=0)
    results = {s.name: simulate(s, state, trace, tick=sizes.sim_tick_s) for s in (ours, volcano)}
    runs = {name: {j.name: j for j in r.jobs} for name, r in results.items()}
    mine, theirs = runs[ours.name], runs[volcano.name]
    big = sorted((n for n, j in mine.items() if j.gpus >= BIG), key=lambda n: -_wait_min(mine[n]))
    if not big:
        print(f"no job of >= {BIG} GPUs in this trace")
        return 0
    w_mine = np.array([_wait_min(mine[n]) for n in big])
    w_theirs = np.array([_wait_min(theirs[n]) for n in big])
    print(f"seed {args.seed}, {args.trace} trace; holds of ours: {ours.holds}")
    print(
        f"jobs >= {BIG} GPUs: {len(big)}; wait p95 {np.percentile(w_mine, 95):.1f} min (ours) vs "
        f"{np.percentile(w_theirs, 95):.1f} min ({volcano.name})"
    )
    print("longest waits under ours: job, GPUs, arrival, wait ours, wait Volcano algorithm")
    for n in big[:6]:
        j = mine[n]
        print(
            f"  {n} {j.gpus} {j.arrival / 3600:.2f} h {_wait_min(j):.1f} min {_wait_min(theirs[n]):.1f} min"
        )
    at = mine[big[max(0, int(len(big) * 0.05) - 1)]]
    print(
        f"at ours' p95: {at.name} ({at.gpus} GPUs, {at.pods} pods) arrived at {at.arrival / 3600:.2f} h and "
        f"waited {_wait_min(at):.1f} min under ours, {_wait_min(theirs[at.name]):.1f} min under the other"
    )
    for name, recs in runs.items():
        print(f"  {name}, while it waited: {_meanwhile(recs, recs[at.name])}")
    print("\n".join(_room(mine, theirs, at, int(state.alloc[:, GPU].sum()))))
    if args.defer_largest:
        largest = max(trace, key=lambda t: (runs[ours.name][t.spec.name].gpus, -t.arrival))
        name = largest.spec.name
        started = runs[volcano.name][name].start
        if started is None:
            print(f"{name} never started under {volcano.name}: nothing to defer to")
            return 0
        moved = sorted(
            (dataclasses.replace(t, arrival=started) if t is largest else t for t in trace),
            key=lambda t: t.arrival,
        )
        deferred = simulate(HyperplaceScheduler(seed=0), state, moved, tick=sizes.sim_tick_s)
        for j in deferred.jobs:
            if j.name == name:
                j.arrival = largest.arrival  # its wait counts from when it really arrived
        results[f"{ours.name}, {name} deferred"] = deferred
        print(
            f"\n{name} ({runs[ours.name][name].gpus} GPUs) arrived at {largest.arrival / 3600:.2f} h, started at "
            f"{(runs[ours.name][name].start or 0) / 3600:.2f} h under ours and {started / 3600:.2f} h under "
            f"{volcano.name}; with it arriving only then, ours':"
        )
        print(_rows(results))
    return 0


def _rows(results: Mapping[str, SimResult]) -> str:
    """The wait rows of the report, one line per run."""
    out = [
        f"  {'run':<44} {'p99':>8} {'p95 >=256':>10} {'mean >=256':>11} {'longest':>9} {'GPU-h queueing':>15}"
    ]
    for name, r in results.items():
        m = summarize(r)
        out.append(
            f"  {name:<44} {m['wait_p99_s'] / 60:>6.2f} m {m['big_wait_p95_s'] / 60:>8.1f} m "
            f"{m['big_wait_mean_s'] / 60:>9.1f} m {m['wait_max_s'] / 60:>7.0f} m {m['gpu_hours_waited']:>15,.0f}"
        )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
