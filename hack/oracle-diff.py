#!/usr/bin/env python3
"""Our filters and scores against the real kube-scheduler on many random cases (issue 34, item 6).

    python hack/oracle-diff.py --cases 1000 --seed 1 [--features pod-affinity,volumes] [--show 3]

Starts a throw-away etcd + kube-apiserver and kube-scheduler (built by hack/kube-bin.sh, or the
directory in $HYPERPLACE_KUBE_BIN), runs the cases of tests/oracle/cases.py one after the other
(tests/oracle/differential.py: the same code as tests/oracle/test_differential.py), and prints the
number of cases and pods, agreements, disagreements, refusals and by-design differences, and the
score figures (pods compared, kube-scheduler's choice among our best nodes or not, its logged
scores the same as ours or not), with the first disagreements of each kind in full. Exits 1 when
a pod got different feasible nodes, or kube-scheduler chose a node ours does not score best, or
logged scores other than ours (the finer check: a wrong score need not change the best node). SIGTERM or Ctrl-C
stops it cleanly (the processes it started are stopped) and prints the figures so far. Run it
with the project's .venv active.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hyperplace.localup.controlplane import control_plane, kube_bin_dir
from tests.oracle.cases import DEFAULT_FEATURES, FEATURES, generate
from tests.oracle.differential import Differential, Tally
from tests.oracle.kube_scheduler import KubeSchedulerOracle
from tests.oracle.rest import Rest


def features_arg(text: str) -> frozenset[str]:
    """``default``, ``all``, or flags separated by commas (``default,volumes`` adds to today's)."""
    out: set[str] = set()
    for word in filter(None, (w.strip() for w in text.split(","))):
        if word == "default":
            out |= DEFAULT_FEATURES
        elif word == "all":
            out |= set(FEATURES)
        elif word in FEATURES:
            out.add(word)
        else:
            raise argparse.ArgumentTypeError(
                f"unknown feature {word!r}; known: default, all, {', '.join(FEATURES)}"
            )
    return frozenset(out)


async def run(args: argparse.Namespace, bin_dir: Path, tally: Tally) -> None:
    """Run the cases into ``tally``; a SIGTERM cancels the run, which stops every process."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    started = time.monotonic()
    with control_plane(bin_dir) as cp, tempfile.TemporaryDirectory(prefix="hyperplace-oracle-") as tmp:
        pki = cp.pki
        async with (
            Rest(cp.server, pki.ca_crt, pki.admin_crt, pki.admin_key) as api,
            KubeSchedulerOracle(cp, api, Path(tmp)) as oracle,
        ):
            diff = Differential(api, oracle)
            for k in range(args.cases):
                tally.add(await diff.run(generate(args.seed, args.start + k, args.features)))
                if (k + 1) % 100 == 0:
                    o = tally.outcomes
                    print(
                        f"... {k + 1} cases, {tally.pods} pods, {o['disagree']} disagreements, "
                        f"{tally.scores_compared} pods' scores compared, {tally.scores['score disagree']} "
                        f"score disagreements ({time.monotonic() - started:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="oracle-diff.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=200, help="how many cases (default 200)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0, help="index of the first case (default 0)")
    p.add_argument(
        "--features",
        type=features_arg,
        default=DEFAULT_FEATURES,
        help=f"default (what our filters judge today: {sorted(DEFAULT_FEATURES) or 'none of the flags'}), "
        f"all, or a comma-separated list of: {', '.join(FEATURES)}",
    )
    p.add_argument("--show", type=int, default=3, help="disagreements to print in full (default 3)")
    p.add_argument("--bin-dir", type=Path, help="directory with etcd, kube-apiserver, kube-scheduler")
    args = p.parse_args(argv)
    bin_dir = args.bin_dir or kube_bin_dir()
    started = time.monotonic()
    tally = Tally()
    try:
        asyncio.run(run(args, bin_dir, tally))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print(f"stopped after {tally.cases} cases", file=sys.stderr)
    for r in tally.disagreements[: args.show]:
        print(r.describe(), end="\n\n")
    for r in tally.score_disagreements[: args.show]:
        print(r.describe(), end="\n\n")
    for r in [r for r in tally.score_map_diffs if r not in tally.score_disagreements][: args.show]:
        print(r.describe(), end="\n\n")
    print(
        f"seed {args.seed}, cases {args.start}..{args.start + tally.cases - 1}, "
        f"features {sorted(args.features) or ['(none of the flags)']}, {time.monotonic() - started:.0f} s"
    )
    print(tally.summary())
    return 1 if tally.disagreements or tally.score_disagreements or tally.score_map_diffs else 0


if __name__ == "__main__":
    sys.exit(main())
