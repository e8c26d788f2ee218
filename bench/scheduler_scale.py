"""Scheduler decision latency at 1k / 10k / 20k nodes, with a Volcano-algorithm baseline.

    python bench/scheduler_scale.py            # 1k, 10k, 20k nodes; 5 repetitions; baseline budget 60 s
    python bench/scheduler_scale.py --quick    # 1k and 10k; 3 repetitions; baseline budget 10 s

Workloads (synthetic 4-tier clusters, see bench/scheduler_synthetic.py; 35% of nodes carry a
background pod of 1..8 GPUs):

* gang: min(5000, N/2) pods x 8 GPUs, soft topology (lowest feasible tier upward);
* two-level: min(625, N/16) partitions x 8 pods x 2 GPUs, partitions hard tier 1, job hard
  tier 3 (a partition is 16 GPUs, two nodes; 625 of them fit one 2,048-node superspine).

"decision" is ``run_session`` on a built snapshot, measured cold (the per-signature predicate
masks cached on the snapshot are dropped before each run); snapshot building is reported
separately. The baseline (bench/volcano_baseline.py) runs in the same process on the same
snapshot; when its time budget is hit the table shows ">= budget" and the ratio is a lower bound.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scheduler_synthetic import cluster, gang, partitioned
from bench.volcano_baseline import VolcanoBaseline
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import run_session
from scheduler_plugin.model.snapshot import ClusterSnapshot


def decide(snap: ClusterSnapshot, reps: int) -> tuple[list[float], Any]:
    times = []
    result = None
    for _ in range(reps):
        snap._sig_masks.clear()
        snap.memo.clear()
        for sh in snap.shapes:
            sh._mask = None
        gc.collect()
        t = time.perf_counter()
        result = run_session(snap)
        times.append(time.perf_counter() - t)
    return times, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="1k and 10k nodes, 3 repetitions, 10 s baseline budget"
    )
    ap.add_argument("--sizes", type=str, default=None, help="comma-separated node counts")
    ap.add_argument("--budget", type=float, default=None, help="baseline wall-clock budget per run (s)")
    ap.add_argument("--no-freeze", action="store_true", help="leave the snapshot under the cyclic GC")
    args = ap.parse_args()
    sizes = [1000, 10000] if args.quick else [1000, 10000, 20000]
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    reps = 3 if args.quick else 5
    budget = args.budget if args.budget is not None else (10.0 if args.quick else 60.0)

    rows = []
    p50: dict[tuple[str, int], float] = {}
    for n in sizes:
        nodes, busy, hns = cluster(n)
        for wl in ("gang", "two-level"):
            if wl == "gang":
                pods, pg = gang("g", min(5000, n // 2), 8, {"mode": "soft"})
                what = f"{len(pods)} x 8 GPU, soft"
            else:
                parts = min(625, n // 16)
                pods, pg = partitioned("p", parts, 8, 2, part_tier=1, job_tier=3)
                what = f"{parts} x 8 pods x 2 GPU, part<=1 job<=3"
            t = time.perf_counter()
            snap = build_snapshot(nodes=nodes, pods=busy + pods, hypernodes=hns, podgroups=[pg])
            build = time.perf_counter() - t
            gc.collect()
            if not args.no_freeze:
                gc.freeze()  # the snapshot is long-lived: keep the cyclic GC off it, as a scheduler would
            times, result = decide(snap, reps)
            med = statistics.median(times)
            p50[(wl, n)] = med
            job = result.jobs[pg.key]
            base = VolcanoBaseline(snap, budget_s=budget).run(snap.jobs[pg.key])
            base_txt = f"{base.seconds:8.2f}" if base.complete else f">={base.seconds:6.1f}"
            ratio = base.seconds / med
            rows.append(
                (
                    n,
                    len(snap.tree),
                    wl,
                    what,
                    build,
                    med * 1000,
                    max(times) * 1000,
                    f"{len(result.bindings)}/{len(pods)}",
                    job.allocated_hypernode or "-",
                    base_txt,
                    f"{'' if base.complete else '>='}{ratio:,.0f}x",
                    f"{base.node_evals / 1e6:.1f}M",
                )
            )
            gc.unfreeze()
            print(f"  done {wl} at {n} nodes", file=sys.stderr)

    head = (
        "nodes",
        "HNs",
        "workload",
        "shape",
        "build s",
        "p50 ms",
        "max ms",
        "placed",
        "job domain",
        "volcano s",
        "ratio",
        "node evals",
    )
    fmt = "{:>6} {:>5} {:<10} {:<34} {:>7} {:>7} {:>7} {:>10} {:<24} {:>9} {:>9} {:>10}"
    print(fmt.format(*head))
    for r in rows:
        print(fmt.format(r[0], r[1], r[2], r[3], f"{r[4]:.2f}", f"{r[5]:.1f}", f"{r[6]:.1f}", *r[7:]))
    print()
    for wl in ("gang", "two-level"):
        xs = [n for n in sizes if (wl, n) in p50]
        pairs = list(itertools.pairwise(xs))
        if len(xs) > 2:
            pairs.append((xs[0], xs[-1]))
        for a, b in pairs:
            growth = p50[(wl, b)] / p50[(wl, a)]
            per_doubling = growth ** (1 / math.log2(b / a))
            print(f"{wl}: p50 growth {a} -> {b} nodes = {growth:.2f}x, {per_doubling:.2f}x per doubling")
    print(
        "\nNotes: decision time excludes snapshot building. The gang workload is scaled to N/2 pods and the"
        "\ntwo-level one to N/16 partitions below 10k nodes, so growth from 1k mixes cluster and job growth;"
        "\nfrom 10k to 20k the job is the same."
        f"\nBaseline: Volcano's per-HyperNode dry run (pure Python per node), budget {budget:.0f} s per run;"
        "\n'>=' marks a run stopped by the budget (its time and ratio are lower bounds)."
    )


if __name__ == "__main__":
    main()
