"""What the fragmentation gauges and explain's candidate list add to a scheduling cycle.

    python bench/scheduler_frag_explain.py            # 10k nodes
    python bench/scheduler_frag_explain.py --quick    # 1k and 10k nodes, 3 repetitions
    python bench/scheduler_frag_explain.py --sizes 2000

The cluster and the first two scenarios are those of ``bench/scheduler_cycle.py`` (N nodes of 8
GPUs, 5 running 1-GPU pods per node, 400 leaves, spines and superspines of 8):

(a) steady state: a cycle with no change;
(b) churn: 1 % of the running pods finished, 10 new gangs of 10 pods (hard tier 1);
(c) a gang of min(400, N/25) 1-GPU pods, hard tier 2: no leaf holds it, so the search goes
    through every leaf (all listed as rejected candidates) to a spine.

Per cycle, in the same process and on the same snapshot:

* ``cycle``: the incremental view (``ClusterState.snapshot``) + ``run_session``, as the
  scheduler runs it; ``frag``: :func:`snapshot_fragmentation` on that snapshot and the
  session's bindings (what the scheduler adds per cycle for its gauges);
* ``decision off`` / ``on``: ``run_session`` alone, masks cold, without and with
  ``record_candidates`` (what ``explain`` asks); both must decide the same bindings (checked).
  The scheduler's own cycles run with recording off.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scheduler_cycle import World, cold, make_cluster, make_pg, make_pod, timed
from scheduler_plugin.algorithms.fragmentation import snapshot_fragmentation
from scheduler_plugin.cycle import run_session
from scheduler_plugin.model.snapshot import ClusterSnapshot


def measure_cycle(snap: ClusterSnapshot, view: float) -> tuple[float, float, dict[str, str]]:
    """The scheduler's cycle on ``snap`` (view + session) and the fragmentation it adds."""
    cycle, res = timed(lambda: run_session(snap))
    frag, _ = timed(lambda: snapshot_fragmentation(snap, bindings=res.bindings))
    return view + cycle, frag, res.bindings


def measure_decision(snap: ClusterSnapshot, bindings: dict[str, str], tries: int) -> tuple[float, float, int]:
    """``run_session`` alone, masks cold, without and with ``record_candidates``, alternating;
    the best of ``tries`` each (the machine is shared: the least disturbed run)."""
    offs, ons = [], []
    listed = 0
    for _ in range(tries):
        cold(snap)
        off, plain = timed(lambda: run_session(snap))
        cold(snap)
        on, rec = timed(lambda: run_session(snap, record_candidates=True))
        assert plain.bindings == rec.bindings == bindings, "recording candidates changed a decision"
        offs.append(off)
        ons.append(on)
        listed = sum(
            len(s.candidates()) for o in rec.jobs.values() if o.candidates for s in o.candidates.searches
        )
    return min(offs), min(ons), listed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1k and 10k nodes, 3 repetitions")
    ap.add_argument("--sizes", type=str, default=None, help="comma-separated node counts")
    args = ap.parse_args()
    sizes = [1000, 10000] if args.quick else [10000]
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    reps = 3 if args.quick else 5
    rows: list[tuple[int, str, list[tuple[float, float, dict[str, str]]], tuple[float, float, int]]] = []
    for n in sizes:
        nodes, hns = make_cluster(n)
        world = World(nodes, hns)
        st = world.state
        gc.collect()
        gc.freeze()

        # (a) the same snapshot cycle after cycle (its figures are computed once, then reused).
        cycles = []
        for _ in range(reps):
            view, snap = timed(st.snapshot)
            cycles.append(measure_cycle(snap, view))
        rows.append((n, "(a) no change", cycles, measure_decision(snap, cycles[-1][2], reps)))

        # (b) churn: a new snapshot every cycle, so the figures are computed afresh each time.
        cycles, decisions = [], []
        running = [
            k
            for k, p in world.pods.items()
            if p["spec"].get("nodeName") and p["status"]["phase"] == "Running"
        ]
        for rep in range(reps):
            world.churn(running[rep * len(running) // 100 : (rep + 1) * len(running) // 100], rep)
            view, snap = timed(st.snapshot)
            cycles.append(measure_cycle(snap, view))
            decisions.append(measure_decision(snap, cycles[-1][2], 2))
            world.bind(run_session(snap))
        off = min(d[0] for d in decisions)
        on = min(d[1] for d in decisions)
        rows.append((n, "(b) 1% done + 100 new", cycles, (off, on, decisions[-1][2])))

        # (c) a gang no leaf holds (hard tier 2): every leaf is a rejected candidate.
        size = min(400, n // 25)
        world.add_pg(make_pg("wide", size, {"mode": "hard", "highestTierAllowed": 2}))
        for i in range(size):
            world.put_pod(make_pod("wide", i, 1, None))
        cycles = []
        for _ in range(reps):
            view, snap = timed(st.snapshot)
            cycles.append(measure_cycle(snap, view))
        rows.append(
            (n, f"(c) gang {size} x 1 GPU, hard tier 2", cycles, measure_decision(snap, cycles[-1][2], reps))
        )
        gc.unfreeze()
        del world, st
        gc.collect()
        print(f"  done {n} nodes", file=sys.stderr)

    fmt = "{:>6} {:<32} {:>9} {:>8} {:>7} {:>13} {:>12} {:>7} {:>7}"
    print(
        fmt.format(
            "nodes",
            "scenario",
            "cycle ms",
            "frag ms",
            "+frag",
            "decision off",
            "decision on",
            "+rec",
            "listed",
        )
    )
    for n, what, xs, (off, on, listed) in rows:
        cyc = statistics.median(x[0] for x in xs) * 1000
        frag = statistics.median(x[1] for x in xs) * 1000
        print(
            fmt.format(
                n,
                what,
                f"{cyc:.1f}",
                f"{frag:.2f}",
                f"{100 * frag / cyc:.1f}%",
                f"{off * 1000:.1f}",
                f"{on * 1000:.1f}",
                f"{100 * (on - off) / off:+.1f}%",
                listed,
            )
        )
    print(
        "cycle = snapshot + run_session (the scheduler's cycle); frag = the fragmentation figures "
        "the scheduler adds per cycle; decision off/on = run_session alone (masks cold) without / with "
        "record_candidates (explain); listed = candidates recorded"
    )


if __name__ == "__main__":
    main()
