"""What ``hyperplace simulate`` itself costs at 1,024 and 10,240 nodes, and how it grows.

    python bench/simulate_scale.py                 # 1,024 and 10,240 nodes, 5 repetitions
    python bench/simulate_scale.py --reps 3 --sizes 1024,4096
    python bench/simulate_scale.py --profile 10240 # cProfile of one in-process run, the top functions

Input (``examples/gen_large.py``'s tree): N nodes of 8 GPUs in tier-1 leaves of 16 nodes, each
leaf selecting its nodes with a regexMatch on the name prefix (640 leaves at 10,240 nodes),
grouped 4 at a time up to one root; one Volcano Job, a gang of N/2 whole-node pods (5,120 at
10,240 nodes), soft topology. The Job controller creates every pod through admission, so the
run is dominated by reading the input, admission, the controllers and the output.

Three figures per size, each repeated (the machine may be busy: min and median are shown):

* "command": ``hyperplace simulate DIR --output json > /dev/null`` in a fresh process, wall
  clock and CPU (user + system), as a user times it: the interpreter's start and the imports
  (about 0.8 s) are in it. The bar is set on this figure: 10,240 nodes under 5 s, and the ratio
  10,240 / 1,024 under 6x (what it was before admission scanned every input object per pod);
* "in-process": the same command run in this process after a warm-up (imports paid), from
  reading the YAML to the JSON, so the growth of the work alone shows;
* "engine": ``simulator.engine.simulate`` alone on inputs already read.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.engine import simulate  # noqa: E402
from simulator.loader import load_paths  # noqa: E402

PER_LEAF = 16
FANOUT = 4
GPUS = 8


def _gen_large() -> Any:
    """examples/gen_large.py as a module (examples/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_large", ROOT / "examples" / "gen_large.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_input(directory: Path, nodes: int) -> Path:
    """The input described in the module docstring, as ``cluster.yaml`` and ``jobs.yaml``."""
    gen = _gen_large()
    args = argparse.Namespace(
        nodes=nodes,
        per_leaf=PER_LEAF,
        fanout=FANOUT,
        gpus=GPUS,
        cpu=96,
        jobs=0,
        prefix="gpu",
        namespace="training",
    )
    cluster, _ = gen.generate(args)
    gang = gen.job("gang", nodes // 2, GPUS, 96, "soft", 0, "training")
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "cluster.yaml").open("w") as f:
        yaml.safe_dump_all(cluster, f, sort_keys=False)
    with (directory / "jobs.yaml").open("w") as f:
        yaml.safe_dump_all([gang], f, sort_keys=False)
    return directory


def run_command(directory: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``hyperplace simulate DIR --output json`` in a new process."""
    # What the ``hyperplace`` script runs, with this checkout's code first on the path (so the
    # bench copied into another checkout measures that one).
    argv = [sys.executable, "-c", "from simulator.cli import main; main()"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(
        [*argv, "simulate", str(directory), "--output", "json"],
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_cli(directory: Path) -> tuple[float, str]:
    """Seconds of ``hyperplace simulate DIR --output json`` in-process, and its output."""
    from typer.testing import CliRunner

    from simulator.cli import app

    gc.collect()
    t = time.perf_counter()
    res = CliRunner().invoke(app, ["simulate", str(directory), "--output", "json"], catch_exceptions=False)
    seconds = time.perf_counter() - t
    if res.exit_code != 0:
        raise SystemExit(f"simulate failed: {res.stderr}")
    return seconds, res.stdout


def run_engine(directory: Path) -> float:
    """Seconds of the engine alone (inputs read beforehand)."""
    from hyperplace.runtime.gcpause import no_cyclic_gc

    inputs = load_paths([directory])
    gc.collect()
    with no_cyclic_gc():  # as the CLI runs it
        t = time.perf_counter()
        simulate(inputs)
        return time.perf_counter() - t


def profile(directory: Path, top: int) -> None:
    """cProfile of one CLI run; the functions with the most own time and the most calls."""
    prof = cProfile.Profile()
    prof.enable()
    run_cli(directory)
    prof.disable()
    for key in ("tottime", "ncalls"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(top)
        print(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1024,10240", help="comma-separated node counts (first: the base)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each measurement")
    ap.add_argument("--profile", type=int, metavar="NODES", help="profile one run at NODES instead")
    ap.add_argument("--top", type=int, default=25, help="rows of the profile")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="simulate-scale-") as tmp:
        if args.profile:
            profile(write_input(Path(tmp) / str(args.profile), args.profile), args.top)
            return
        sizes = [int(s) for s in args.sizes.split(",")]
        # Warm-up: the first run in this process imports the scheduler and numpy.
        run_cli(write_input(Path(tmp) / "warm-up", 128))
        figures: dict[tuple[str, int], list[float]] = {}
        bound: dict[int, int] = {}
        for n in sizes:
            d = write_input(Path(tmp) / str(n), n)
            for _ in range(args.reps):
                wall, cpu = run_command(d)
                figures.setdefault(("command", n), []).append(wall)
                figures.setdefault(("command cpu", n), []).append(cpu)
                seconds, out = run_cli(d)
                figures.setdefault(("in-process", n), []).append(seconds)
                figures.setdefault(("engine", n), []).append(run_engine(d))
            bound[n] = sum(1 for k in json.loads(out)["bindings"] if k.startswith("training/gang-"))
            print(f"  done {n} nodes", file=sys.stderr)
    what = ["command", "command cpu", "in-process", "engine"]
    print(
        f"{'nodes':>6} {'leaves':>6} {'gang bound':>10}  " + "  ".join(f"{w + ' min/p50':>22}" for w in what)
    )
    for n in sizes:
        cells = [f"{min(figures[w, n]):.2f} / {statistics.median(figures[w, n]):.2f} s" for w in what]
        print(
            f"{n:>6} {n // PER_LEAF:>6} {f'{bound[n]}/{n // 2}':>10}  " + "  ".join(f"{c:>22}" for c in cells)
        )
    base = sizes[0]
    for n in sizes[1:]:
        ratios = [
            f"{w} {statistics.median(figures[w, n]) / statistics.median(figures[w, base]):.2f}x" for w in what
        ]
        print(f"ratio {n} / {base} nodes (medians): " + ", ".join(ratios))
    print(
        f"\nNotes: {args.reps} repetitions of each figure. 'command' is a fresh process (interpreter start"
        "\nand imports included); 'in-process' and 'engine' run after a warm-up in this process."
        "\nBar: the command at 10,240 nodes under 5 s, its ratio 10,240 / 1,024 under 6x."
    )


if __name__ == "__main__":
    main()
