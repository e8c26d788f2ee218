"""``hyperplace``: simulate, validate, tree, explain (see docs: the CLI contract).

Exit status: 0 when the command ran (``validate``: every object accepted), 1 when
``validate`` refused something, 2 for unreadable or malformed input and usage errors.
Errors go to stderr, one short line naming the file and line where possible.
"""

from __future__ import annotations

import contextlib
import io
import random
import sys
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from hyperplace.api import HyperNode, format_validation_error
from hyperplace.api.times import parse_go_duration
from hyperplace.runtime.gcpause import no_cyclic_gc

from .engine import simulate as run_simulation
from .loader import CONTROLLER_CONF_KEY, InputError, Inputs, add_object, finish, load_paths
from .output import result_dict, to_json, to_yaml
from .render import render_simulation, topology_dict, topology_tree
from .result import SimResult, SimulationError
from .topology import TopologyView, build_topology, mark_reservations
from .views import find_job, job_names, job_views


class _Command(typer.core.TyperCommand):
    """Help as users know it from kubectl and friends: an argument is shown by its metavar
    (``PATH...``), never by a Python type (typer >= 0.29 appends ``<list[Path]>``)."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args: list[tuple[str, str]] = []
        opts: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            if getattr(param, "hidden", False):
                continue
            if isinstance(param, typer.core.TyperArgument):
                name = param.metavar or (param.name or "").upper()
                if param.nargs != 1:
                    name += "..."
                args.append((name, param.help or ""))
            else:
                record = param.get_help_record(ctx)
                if record is not None:
                    opts.append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


def _version(value: bool) -> None:
    if value:
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from hyperplace.runtime.flags import version

        sys.stdout.write(f"hyperplace {version()}\n")
        raise typer.Exit(0)


app = typer.Typer(
    name="hyperplace",
    help="Topology-aware gang scheduling for Kubernetes: simulate, validate and inspect inputs offline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """Topology-aware gang scheduling for Kubernetes: simulate, validate and inspect inputs offline."""


class OutputFormat(StrEnum):
    """Formats of ``simulate --output``."""

    table = "table"
    json = "json"
    yaml = "yaml"


class TreeFormat(StrEnum):
    """Formats of ``tree``/``explain --output``."""

    table = "table"
    json = "json"


def _fail(message: str, code: int = 2) -> NoReturn:
    Console(stderr=True, highlight=False, soft_wrap=True).print(Text(f"error: {message}", style="red"))
    raise typer.Exit(code)


@contextlib.contextmanager
def _stdout() -> Iterator[Console]:
    """The console for human output.

    On a terminal, rich draws directly. Piped, the output is plain text 140 columns wide
    (no colours) with the padding rich adds to table cells stripped from line ends, so
    it diffs and pastes cleanly.
    """
    if sys.stdout.isatty():
        yield Console(highlight=False)
        return
    buf = io.StringIO()
    yield Console(file=buf, highlight=False, width=140, color_system=None)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines()))


class _RichProgress:
    """The engine's progress sink, drawn on stderr and erased when done."""

    def __init__(self) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.task: Any = None

    def __enter__(self) -> _RichProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, description: str, total: int | None) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(description, total=total)

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)


def load_inputs(
    paths: list[Path] | None,
    *,
    live: bool = False,
    kubeconfig: Path | None = None,
    context: str | None = None,
) -> Inputs:
    """Files and directories, and/or the objects of a live cluster (read-only)."""
    if not paths and not live:
        _fail("give at least one FILE or DIRECTORY (or --kubeconfig/--cluster-snapshot for a live cluster)")
    try:
        if live:
            # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
            from .live import read_cluster

            inputs = read_cluster(kubeconfig=str(kubeconfig) if kubeconfig else None, context=context)
            if paths:
                extra = load_paths(paths, default_queue=False)

                for o in extra.objects:
                    add_object(inputs, o.obj, o.source)
                inputs.warnings += extra.warnings
                inputs.scheduler_conf = extra.scheduler_conf or inputs.scheduler_conf
                inputs.scheduler_conf_source = extra.scheduler_conf_source or inputs.scheduler_conf_source
                finish(inputs)
            return inputs
        return load_paths(paths or [])
    except InputError as exc:
        _fail(str(exc))


def _simulate(
    inputs: Inputs,
    *,
    scheduler_config: Path | None,
    cycles: int | None,
    seed: int,
    show_progress: bool,
    elapsed: float = 0.0,
    now: str | None = None,
) -> SimResult:
    conf_text = None
    if scheduler_config is not None:
        try:
            conf_text = scheduler_config.read_text(encoding="utf-8")
        except OSError as exc:
            _fail(f"{scheduler_config}: cannot read: {exc.strerror or exc}")
    try:
        if show_progress:
            with _RichProgress() as progress:
                return run_simulation(
                    inputs,
                    cycles=cycles,
                    seed=seed,
                    scheduler_conf=conf_text,
                    scheduler_conf_source=str(scheduler_config),
                    progress=progress,
                    elapsed=elapsed,
                    now=now,
                )
        return run_simulation(
            inputs,
            cycles=cycles,
            seed=seed,
            scheduler_conf=conf_text,
            scheduler_conf_source=str(scheduler_config),
            elapsed=elapsed,
            now=now,
        )
    except SimulationError as exc:
        _fail(str(exc))


def final_topology(result: SimResult) -> TopologyView:
    """The display tree of the cluster as the simulation left it."""
    hns = result.hypernodes
    if hns is None:
        hns = []
        for o in result.of_kind("HyperNode"):
            try:
                hns.append(HyperNode.model_validate(o))
            except ValidationError:
                continue  # the engine already warned about it (only live input can hold one)
    topo = build_topology(hns, result.of_kind("Node"), result.of_kind("Pod"))
    mark_reservations(topo, result.of_kind("PodGroup"))
    return topo


PathsArg = Annotated[
    list[Path] | None,
    typer.Argument(
        help="YAML files or directories (read recursively, *.yaml/*.yml, in name order).",
        show_default=False,
        metavar="PATH",
    ),
]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig", metavar="FILE", help="Read a live cluster (read-only) with this kubeconfig."
    ),
]
ContextOpt = Annotated[
    str | None, typer.Option("--context", metavar="NAME", help="kubeconfig context of the live cluster.")
]
# scheduler_plugin.algorithms.fragmentation's defaults, spelled here so that the CLI starts without numpy
# (a test checks that they agree).
DEFAULT_SHAPES_TEXT = "1,4,8"
DEFAULT_ACCELERATOR = "nvidia.com/gpu"
ShapesOpt = Annotated[
    str,
    typer.Option(
        "--fragmentation-shapes",
        metavar="N,N,...",
        help="Pod shapes of the room-left figures: accelerators per pod, with proportional cpu/memory.",
    ),
]
AcceleratorOpt = Annotated[
    str,
    typer.Option(
        "--fragmentation-resource", metavar="NAME", help="The accelerator resource of those shapes."
    ),
]


def _elapsed_seconds(text: str | None) -> float:
    """``--elapsed`` as seconds (a Go duration such as 15m or 1h30m)."""
    if not text:
        return 0.0
    try:
        seconds = parse_go_duration(text)
    except ValueError:
        _fail(f"--elapsed: {text!r} is not a duration (e.g. 15m, 1h30m)")
    if seconds < 0:
        _fail("--elapsed: must not be negative")
    return seconds


ElapsedOpt = Annotated[
    str | None,
    typer.Option(
        "--elapsed",
        metavar="DURATION",
        help="Schedule as if this much more time had passed (previews hyperplace.io/relax-topology steps).",
    ),
]

SchedulerConfigOpt = Annotated[
    Path | None,
    typer.Option("--scheduler-config", metavar="FILE", help="volcano-scheduler.conf (or its ConfigMap)."),
]
CyclesOpt = Annotated[
    int | None,
    typer.Option(
        "--cycles", min=1, metavar="N", help="Run N cycles (default: until nothing changes, at most 10)."
    ),
]
NowOpt = Annotated[
    str | None,
    typer.Option(
        "--now",
        metavar="TIME",
        help="The scheduler's clock in cycle 1 (RFC 3339; default: no clock, nothing reserved); jobs wait "
        "from their PodGroup's creationTimestamp, and a head-of-queue gang waiting past its threshold "
        "gets a domain held.",
    ),
]


def _fragmentation_config(shapes: str, resource: str) -> Any:
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from scheduler_plugin.algorithms.fragmentation import FragmentationConfig, ShapeSpecError

    try:
        return FragmentationConfig.parse(shapes, resource)
    except ShapeSpecError as exc:
        _fail(str(exc))


@app.command(
    cls=_Command,
    short_help="Run admission, controllers and scheduler on the inputs; show where every pod lands and why the rest wait.",
)
# The inputs and the simulated API server's objects are large trees free of reference cycles:
# the cyclic collector would only walk them, pass after pass (a fifth of a 10k-node run).
@no_cyclic_gc()
def simulate(
    paths: PathsArg = None,
    scheduler_config: SchedulerConfigOpt = None,
    cycles: CyclesOpt = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", metavar="table|json|yaml", help="Output format.")
    ] = OutputFormat.table,
    html: Annotated[
        Path | None, typer.Option("--html", metavar="FILE", help="Also write a self-contained HTML picture.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of every random choice.")] = 0,
    now: NowOpt = None,
    cluster_snapshot: Annotated[
        bool, typer.Option("--cluster-snapshot", help="Start from the objects of a live cluster (read-only).")
    ] = False,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    fragmentation_shapes: ShapesOpt = DEFAULT_SHAPES_TEXT,
    fragmentation_resource: AcceleratorOpt = DEFAULT_ACCELERATOR,
    elapsed: ElapsedOpt = None,
) -> None:
    """Admission, controllers and scheduler sessions on the given objects; print the outcome."""
    frag = _fragmentation_config(fragmentation_shapes, fragmentation_resource)
    live = cluster_snapshot or kubeconfig is not None or context is not None
    inputs = load_inputs(paths, live=live, kubeconfig=kubeconfig, context=context)
    show_progress = output is OutputFormat.table and sys.stderr.isatty()
    result = _simulate(
        inputs,
        scheduler_config=scheduler_config,
        cycles=cycles,
        seed=seed,
        show_progress=show_progress,
        elapsed=_elapsed_seconds(elapsed),
        now=now,
    )
    topo = final_topology(result)
    views = job_views(result, topo)
    if html is not None:
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from .html import render_html

        try:
            html.write_text(render_html(result, views, topo, frag), encoding="utf-8")
        except OSError as exc:
            _fail(f"{html}: cannot write: {exc.strerror or exc}")
    if output is not OutputFormat.table:
        # The JSON/YAML document has no place for warnings; they go to stderr.
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        for w in result.warnings:
            err.print(Text(f"Warning: {w}", style="yellow"))
    if output is OutputFormat.json:
        sys.stdout.write(to_json(result_dict(result)) + "\n")
    elif output is OutputFormat.yaml:
        sys.stdout.write(to_yaml(result_dict(result)))
    else:
        with _stdout() as console:
            render_simulation(console, result, views, topo)
        if html is not None:
            Console(stderr=True).print(f"wrote {html}")


@app.command(
    cls=_Command,
    short_help="Admit the files as kubectl apply would: refusals as FILE:LINE: lines, then a summary.",
)
def validate(
    files: Annotated[
        list[Path],
        typer.Argument(help="YAML files or directories to admit.", show_default=False, metavar="FILE"),
    ],
    old: Annotated[
        list[Path] | None,
        typer.Option(
            "--old", metavar="FILE", help="The previous objects: those given there are admitted as UPDATE."
        ),
    ] = None,
) -> None:
    """What kubectl apply of the files would be told: unknown kinds and fields, CRD schema
    errors in the apiserver's words, the webhooks' refusals. One FILE:LINE: line per problem,
    then a summary; warnings go to stderr."""
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from .validation import load_old, validate_files

    old_inputs = None
    if old:
        try:
            old_inputs = load_old(old)
        except InputError as exc:
            _fail(str(exc))
    report = validate_files(files, old_inputs)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for p in report.unreadable:
        err.print(Text(str(p), style="red"))
    for p in report.warnings:
        err.print(Text(f"Warning: {p}", style="yellow"))
    for p in report.refusals:
        sys.stdout.write(f"{p}\n")
    sys.stdout.write(report.summary() + "\n")
    raise typer.Exit(report.exit_code)


@app.command(cls=_Command, short_help="Show the HyperNode tree: tiers, node counts, free capacity, problems.")
def tree(
    paths: PathsArg = None,
    output: Annotated[
        TreeFormat, typer.Option("--output", "-o", metavar="table|json", help="Output format.")
    ] = TreeFormat.table,
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", help="Seed for names of discovered HyperNodes.")
    ] = 0,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    fragmentation_shapes: ShapesOpt = DEFAULT_SHAPES_TEXT,
    fragmentation_resource: AcceleratorOpt = DEFAULT_ACCELERATOR,
) -> None:
    """The HyperNode tree with tiers, node counts and free capacity; problems in red; then,
    per tier, the room left as the scheduler counts it (free HyperNodes, pods of each shape
    that fit in total and in the best HyperNode)."""
    frag = _fragmentation_config(fragmentation_shapes, fragmentation_resource)
    live = kubeconfig is not None or context is not None
    inputs = load_inputs(paths, live=live, kubeconfig=kubeconfig, context=context)
    hns: list[HyperNode] = []
    invalid: list[str] = []
    for o in inputs.of_kind("HyperNode"):
        try:
            hns.append(HyperNode.model_validate(o.obj))
        except ValidationError as exc:
            invalid.append(f"HyperNode {o.name} ({o.source}): {'; '.join(format_validation_error(exc))}")
    nodes = [o.obj for o in inputs.of_kind("Node")]
    discovered, notes = discover_for_display(inputs, nodes, hns, seed)
    pods = [o.obj for o in inputs.of_kind("Pod")]
    topo = build_topology(discovered, nodes, pods)
    mark_reservations(topo, (o.obj for o in inputs.of_kind("PodGroup")))
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from .fragmentation import fragmentation_lines, fragmentation_of

    report = fragmentation_of(discovered, nodes, pods, frag)

    names = job_names(o.obj for o in inputs.of_kind("PodGroup"))
    if output is TreeFormat.json:
        doc = topology_dict(topo)
        doc["invalid"] = invalid
        if invalid:
            doc["ready"] = False
        doc["fragmentation"] = report.to_dict()
        sys.stdout.write(to_json(doc) + "\n")
        return
    with _stdout() as console:
        for note in notes:
            console.print(Text(note, style="dim"), soft_wrap=True)
        console.print(topology_tree(topo, names=names))
        for line in invalid:
            console.print(Text(f"✗ {line}", style="red"), soft_wrap=True)
        if report.tiers:
            console.print()
            for part in fragmentation_lines(report):
                console.print(part, soft_wrap=isinstance(part, Text))


def discover_for_display(
    inputs: Inputs, nodes: list[dict[str, Any]], hns: list[Any], seed: int
) -> tuple[list[Any], list[str]]:
    """The HyperNodes plus those label discovery would create, when an input ConfigMap
    enables it (what the controller would maintain); and lines saying so."""
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from controller.hypernode.discovery import (
        DiscoveryConfigError,
        DiscoveryError,
        discover_offline,
        parse_discovery_config,
    )

    cms = [o.obj for o in inputs.of_kind("ConfigMap") if CONTROLLER_CONF_KEY in (o.obj.get("data") or {})]
    if not cms:
        return hns, []
    try:
        config = parse_discovery_config(cms[0])
        if config.enabled("label") is None and config.enabled("ufm") is None:
            return hns, []
        result = discover_offline(config, nodes, hns, random.Random(seed))
    except (DiscoveryConfigError, DiscoveryError) as exc:
        return hns, [f"HyperNode discovery: {exc}"]
    by_name = {h.name: h for h in hns}
    for name in result.delete:
        by_name.pop(name, None)
    for h in [*result.update, *result.create]:
        by_name[h.name] = h
    note = f"discovery: {len(result.create)} HyperNodes created, {len(result.update)} updated"
    notes = [note + (f", {len(result.delete)} deleted" if result.delete else "")]
    return list(by_name.values()), notes + [f"HyperNode discovery: {w}" for w in result.warnings]


@app.command(cls=_Command, short_help="Say why a job is placed where it is, or why it waits.")
def explain(
    job: Annotated[
        str,
        typer.Argument(
            help="<namespace>/<name> of a Volcano Job or a PodGroup.", show_default=False, metavar="NS/JOB"
        ),
    ],
    paths: PathsArg = None,
    scheduler_config: SchedulerConfigOpt = None,
    cycles: CyclesOpt = None,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of every random choice.")] = 0,
    now: NowOpt = None,
    output: Annotated[
        TreeFormat, typer.Option("--output", "-o", metavar="table|json", help="Output format.")
    ] = TreeFormat.table,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    elapsed: ElapsedOpt = None,
) -> None:
    """Why a job is placed where it is, or why it waits, after simulating the inputs."""
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from .explain import explain_dict, render_explain

    live = kubeconfig is not None or context is not None
    inputs = load_inputs(paths, live=live, kubeconfig=kubeconfig, context=context)
    result = _simulate(
        inputs,
        scheduler_config=scheduler_config,
        cycles=cycles,
        seed=seed,
        show_progress=False,
        elapsed=_elapsed_seconds(elapsed),
        now=now,
    )
    topo = final_topology(result)
    views = job_views(result, topo)
    view = find_job(views, job)
    if view is None:
        refused = [
            r
            for r in result.rejected
            if f"{r.namespace or 'default'}/{r.name}" == (job if "/" in job else f"default/{job}")
        ]
        if refused:
            _fail(f"{job} was refused by admission: {refused[0].message}", code=2)
        known = ", ".join(v.key for v in views) or "none"
        _fail(f"no Job or PodGroup {job} in the input (jobs: {known})")
    if output is TreeFormat.json:
        sys.stdout.write(to_json(explain_dict(view, result, topo)) + "\n")
    else:
        with _stdout() as console:
            render_explain(console, view, result, topo)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
