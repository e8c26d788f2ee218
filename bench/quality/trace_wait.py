"""Why a large job waited: one trace seed through ours and the Volcano algorithm, the jobs of at
least 256 GPUs by their wait under ours, and for the one at ours' p95 what started meanwhile.

    python -m bench.quality.trace_wait                  # seed 1, the limit trace, full sizes
    python -m bench.quality.trace_wait --seed 3 --trace plain --quick

The traced example behind the large-job p95 rows of ``results/results.md``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

import numpy as np

from .__main__ import FULL, QUICK, sim_trace
from .generators import clos_cluster
from .ours import HyperplaceScheduler
from .schedulers import VolcanoScheduler
from .sim import JobRecord, simulate

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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality.trace_wait", description=__doc__)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trace", choices=("limits", "plain"), default="limits")
    ap.add_argument("--quick", action="store_true", help="the --quick sizes of python -m bench.quality")
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    state = clos_cluster(*sizes.sim_fanout)
    trace = sim_trace(sizes, state, args.seed, args.trace)
    ours, volcano = HyperplaceScheduler(seed=0), VolcanoScheduler(seed=0)
    runs = {
        s.name: {j.name: j for j in simulate(s, state, trace, tick=sizes.sim_tick_s).jobs}
        for s in (ours, volcano)
    }
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
