"""Run the chaos campaign over many seeds and score it against broken schedulers.

    python -m bench.chaos [--seeds 1000] [--first-seed 0] [--mutation-seeds 50] [--workers 2]
                          [--only MUTATION] (--mutation-seeds 0: the baseline alone)

First the real controller and scheduler run ``--seeds`` seeds (the baseline: every invariant
must hold, so any violation here is a bug, printed with its seed). Then each deliberately
broken variant of ``bench/chaos/mutations.py`` runs ``--mutation-seeds`` seeds, each stopping
at its first violation a user would see (``USER_VISIBLE`` in ``outcome.py``: a process that
stops on its own is not a catch), with the scheduler's ``--verify-state`` off as in
production, so a variant is never "caught" by the debug cross-check stopping the scheduler;
its score is the share of seeds that caught it, with the invariant that did. The baseline
runs with ``--verify-state`` when ``HYPERPLACE_VERIFY_STATE=1`` (as the test suite sets it).
Exit status 1 when the baseline has a violation or a score is under 90 %.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from .campaign import run_parallel
from .mutations import MUTATIONS
from .outcome import describe
from .settings import Settings, mutation_settings


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n", 1)[0])
    p.add_argument("--seeds", type=int, default=1000, help="seeds of the unbroken baseline")
    p.add_argument("--mutation-seeds", type=int, default=50, help="seeds per broken variant")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2, help="processes")
    p.add_argument("--only", choices=sorted(MUTATIONS), action="append", help="score only these mutations")
    args = p.parse_args(argv)
    failed = False

    t0 = time.perf_counter()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    outs = run_parallel(seeds, Settings(), workers=args.workers)
    wall = time.perf_counter() - t0
    bad = [o for o in outs if not o.ok]
    per_invariant = Counter(v.invariant for o in outs for v in o.violations)
    jobs = sum(o.jobs for o in outs)
    events: Counter[str] = Counter()
    for o in outs:
        events.update(o.events)
    per = wall / max(1, len(outs))
    print(
        f"baseline: seeds {seeds.start}-{seeds.stop - 1}: {len(bad)} of {len(outs)} with violations, "
        f"{wall:.1f}s wall ({per:.2f}s/seed with {args.workers} workers)"
    )
    print(
        "  violations per invariant: "
        + (", ".join(f"{k} {v}" for k, v in per_invariant.most_common()) or "none")
    )
    print(
        f"  {jobs} jobs: {sum(o.placed for o in outs)} placed, {sum(o.explained for o in outs)} explained; "
        f"{sum(o.virtual_seconds for o in outs) / 3600:.1f} h of cluster time"
    )
    print("  " + ", ".join(f"{k} {v}" for k, v in sorted(events.items())))
    if outs:
        # How close a working scheduler came to the windows of ``partial`` and ``stuck``.
        print(
            f"  longest partly-bound gang {max(o.longest_partial for o in outs):.1f}s "
            f"(window {Settings().partial_window:g}s), longest idle waiting gang "
            f"{max(o.longest_idle for o in outs):.1f}s (window {Settings().idle_window:g}s)"
        )
        # Gangs hit by node deaths: how soon they ran whole again, and how close a working
        # controller and scheduler came to the window of ``recovered``.
        times = sorted(t for o in outs for t in o.recoveries)
        if times:
            print(
                f"  gangs hit by node deaths whole again: {len(times)}, death to whole p50 "
                f"{times[len(times) // 2]:.1f}s, p99 {times[min(len(times) - 1, len(times) * 99 // 100)]:.1f}s, "
                f"max {times[-1]:.1f}s; longest wait beside room past the release "
                f"{max(o.longest_unrecovered for o in outs):.1f}s (window {Settings().recover_window:g}s)"
            )
    for o in bad:
        print("  " + describe(o))
    failed |= bool(bad)

    if args.mutation_seeds <= 0:
        return 1 if failed else 0
    print(f"\nmutation scores ({args.mutation_seeds} seeds each, stopping at the first violation):")
    for name in args.only or sorted(MUTATIONS):
        t0 = time.perf_counter()
        mouts = run_parallel(
            range(args.first_seed, args.first_seed + args.mutation_seeds),
            mutation_settings(),
            name,
            workers=args.workers,
        )
        caught = [o for o in mouts if o.caught]
        by = Counter(o.caught[0].invariant for o in caught)
        missed = [o.seed for o in mouts if not o.caught]
        exited = sum(any(v.invariant == "exited" for v in o.violations) for o in mouts)
        score = len(caught) / len(mouts)
        detail = ", ".join(f"{k} {v}" for k, v in by.most_common())
        print(
            f"  {name:36s} caught {len(caught):4d}/{len(mouts)} = {score:6.1%}  "
            f"({detail or 'none'}; {time.perf_counter() - t0:.1f}s)"
            + (f"; a process stopped on its own in {exited} seeds (not counted)" if exited else "")
        )
        if missed:
            print(
                f"    missed in seeds {', '.join(map(str, missed[:20]))}{' ...' if len(missed) > 20 else ''}"
            )
        failed |= score < 0.9
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
