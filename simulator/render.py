"""Human-readable output with rich: per-job placements, waiting reasons, the topology tree."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from hyperplace.kube import format_milli, milli_value

from .resources import format_free, main_resources
from .result import SimResult
from .topology import NO_GROUP, HyperNodeView, TopologyView, natural_key
from .views import JobView, PodView, compress_names, queue_entries, short_pod_name, subgroup_label

# Jobs with at most this many pods list every pod; bigger ones are shown as ranges.
SMALL_JOB = 16
# Trees with at most this many nodes list the nodes under their leaf HyperNode.
SMALL_TREE = 32

JOB_COLORS = [
    "cyan",
    "magenta",
    "green",
    "yellow",
    "blue",
    "bright_red",
    "bright_cyan",
    "bright_magenta",
    "bright_green",
    "orange3",
]

PHASE_STYLE = {
    "Running": "bold green",
    "Pending": "bold yellow",
    "Inqueue": "bold yellow",
    "Completed": "bold blue",
    "Failed": "bold red",
    "Unknown": "bold red",
}


def job_colors(views: Iterable[JobView]) -> dict[str, str]:
    """podgroup key -> rich colour, stable in job order."""
    return {v.podgroup: JOB_COLORS[i % len(JOB_COLORS)] for i, v in enumerate(views)}


# --- explanations -----------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A JSON-compatible form of whatever the scheduler reports (dataclass, model, dict)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return _plain(value.to_dict())
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return str(value)


def explanation_dict(expl: Any) -> Any:
    """The scheduler's Explanation as JSON-compatible data (for ``explain --output json``)."""
    return _plain(expl)


def explanation_lines(expl: Any) -> list[str]:
    """Lines of the scheduler's explanation of a job, whatever shape it has."""
    if expl is None:
        return []
    for attr in ("lines", "as_lines", "render"):
        f = getattr(expl, attr, None)
        if callable(f):
            out = f()
            return [str(x) for x in out] if not isinstance(out, str) else out.splitlines()
    text = getattr(expl, "summary", None)
    if isinstance(text, str):
        return [text]
    return [str(expl)]


# --- jobs -------------------------------------------------------------------------------


def tier_of(topo: TopologyView | None, hn: str | None) -> int | None:
    """Tier of a HyperNode of the display tree, None when unknown."""
    if topo is None or hn is None or hn not in topo.hypernodes:
        return None
    return topo.hypernodes[hn].tier


def hn_label(topo: TopologyView | None, hn: str | None) -> str:
    """``s1 (tier 1)``; the scheduler's virtual root reads as "whole cluster"."""
    if not hn:
        return "-"
    if hn.startswith("<") and hn.endswith(">"):
        return "the whole cluster (no single HyperNode)"
    tier = tier_of(topo, hn)
    if tier is None:
        return hn
    name = topo.hypernodes[hn].tier_name if topo is not None else None
    return f"{hn} (tier {tier}{', ' + name if name else ''})"


def _pod_rows(job: JobView, small: bool) -> list[tuple[str, str, str, str]]:
    """(pods, nodes, HyperNode, phase) rows; for big jobs consecutive alike pods are merged."""
    rows: list[tuple[str, str, str, str]] = []
    if small:
        for p in job.pods:
            rows.append(
                (
                    short_pod_name(p.name, job.key),
                    p.node or "-",
                    p.leaf or "-",
                    p.phase if p.node else _pending(p),
                )
            )
        return rows
    groups: list[list[PodView]] = []
    for p in job.pods:
        sig = (p.task, p.partition, p.leaf, p.node is None)
        if groups:
            q = groups[-1][-1]
            qsig = (q.task, q.partition, q.leaf, q.node is None)
            if qsig == sig:
                groups[-1].append(p)
                continue
        groups.append([p])
    for g in groups:
        names = [short_pod_name(p.name, job.key) for p in g]
        first, last = names[0], names[-1]
        pods = first if len(g) == 1 else f"{first}..{last} ({len(g)})"
        nodes = [p.node for p in g if p.node]
        node_text = compress_names(nodes, limit=3) if nodes else "-"
        if len(set(nodes)) > 3:
            node_text = f"{len(set(nodes))} nodes: {node_text}"
        rows.append((pods, node_text, g[0].leaf or "-", g[0].phase if g[0].node else _pending(g[0])))
    return rows


def _pending(p: PodView) -> str:
    # The reason is shown once per job under "why waiting", not on every pod row.
    return p.phase if p.phase not in ("Pending", "Running") else "Pending"


def job_header(job: JobView, topo: TopologyView | None, color: str) -> Text:
    """``● Job ns/name  Phase  n/m pods running, minMember k``."""
    t = Text()
    t.append("● ", style=color)
    t.append(f"{job.kind} {job.key}", style="bold")
    t.append("  ")
    t.append(job.phase, style=PHASE_STYLE.get(job.phase, "bold"))
    t.append(f"  {job.running}/{len(job.pods)} pods running, minMember {job.min_member}", style="dim")
    return t


def job_renderable(
    job: JobView, topo: TopologyView | None, color: str, *, explain: bool = True
) -> RenderableType:
    """One job: header, constraint and placement facts, pod table, why it waits."""
    parts: list[RenderableType] = [job_header(job, topo, color)]
    facts = Table.grid(padding=(0, 1))
    facts.add_column(style="dim")
    facts.add_column()
    if job.topology_spec:
        nt = job.topology_spec
        bound = nt.get("highestTierAllowed", nt.get("highestTierName", "any"))
        facts.add_row("  constraint:", f"networkTopology {nt.get('mode', 'hard')}, highest tier {bound}")
    elif not job.partitions:
        facts.add_row("  constraint:", "none (no networkTopology)")
    for task, pp in job.partitions.items():
        pnt = pp.get("networkTopology") or {}
        pbound = pnt.get("highestTierAllowed", pnt.get("highestTierName", "any"))
        facts.add_row(
            f"  task {task}:",
            f"{pp.get('totalPartitions')} partitions of {pp.get('partitionSize')} pods"
            + (f", each {pnt.get('mode', 'hard')} within tier {pbound}" if pnt else ""),
        )
    if job.allocated:
        facts.add_row("  HyperNode:", hn_label(topo, job.allocated))
    for sid, hn in sorted(job.subgroups.items(), key=lambda kv: natural_key(kv[0])):
        label = subgroup_label(sid, job.podgroup)
        if label == sid and sid == job.podgroup:
            continue  # the default SubJob is the job itself
        facts.add_row(f"  partition {label}:", hn_label(topo, hn))
    if facts.row_count:
        parts.append(facts)
    if job.pods:
        small = len(job.pods) <= SMALL_JOB
        table = Table(show_header=True, header_style="dim", box=None, padding=(0, 2), pad_edge=True)
        table.add_column("pod" if small else "pods")
        table.add_column("node" if small else "nodes")
        table.add_column("leaf HyperNode")
        table.add_column("phase")
        for pods, nodes, leaf, phase in _pod_rows(job, small):
            style = "yellow" if phase.startswith("Pending") else None
            table.add_row(pods, nodes, leaf, Text(phase, style=style or ""))
        parts.append(table)
    if explain and job.waiting:
        lines = waiting_lines(job)
        if lines:
            pending = len(job.pods) - job.running
            title = (
                "why waiting:" if not job.running else f"why {pending} pod{'s' if pending != 1 else ''} wait:"
            )
            parts.append(Text(f"  {title}", style="bold yellow"))
            for line in lines:
                parts.append(Text("    " + line))
    return Group(*parts)


def waiting_lines(job: JobView) -> list[str]:
    """The scheduler's per-tier explanation, else the distinct reasons of its pending pods."""
    lines = explanation_lines(getattr(job.outcome, "explanation", None)) if job.outcome is not None else []
    if lines:
        return lines
    # A pod's reason is the scheduler's explanation in one line ("; "-joined): show its parts,
    # as the scheduler's PodsPending condition does.
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from scheduler_plugin.cycle import reason_parts

    return reason_parts(p.reason for p in job.pods if p.node is None and p.reason)


# --- topology tree ------------------------------------------------------------------------


def _occupancy(topo: TopologyView, nodes: Iterable[str], resources: list[str]) -> str:
    nodes = list(nodes)
    return "  ".join(format_free(r, *topo.free_total(nodes, r)) for r in resources)


def _jobs_text(
    topo: TopologyView, nodes: Iterable[str], colors: dict[str, str], names: dict[str, str]
) -> Text:
    t = Text()
    for i, (job, n) in enumerate(sorted(topo.jobs_on(nodes).items(), key=lambda kv: natural_key(kv[0]))):
        if i:
            t.append(", ")
        t.append(f"{names.get(job, job)} ×{n}", style=colors.get(job, "white"))
    return t


def hn_text(topo: TopologyView, v: HyperNodeView, resources: list[str]) -> Text:
    """One HyperNode line of the tree: name, tier, node count, free/total, problems in red."""
    t = Text()
    style = "bold red" if v.problems else "bold"
    t.append(v.name, style=style)
    t.append(f"  tier {v.tier}", style="cyan")
    if v.tier_name:
        t.append(f" ({v.tier_name})", style="cyan")
    t.append(f"  {len(v.nodes)} node{'s' if len(v.nodes) != 1 else ''}", style="dim")
    if v.nodes and resources:
        t.append("  free " + _occupancy(topo, v.nodes, resources), style="dim")
    for p in v.problems:
        t.append(f"\n  ✗ {p}", style="red")
    for n in v.notes:
        t.append(f"\n  ! {n}", style="yellow")
    for h in v.held_for:
        t.append(f"\n  ⏸ held for {h} (head-of-queue reservation)", style="magenta")
    return t


def topology_tree(
    topo: TopologyView,
    colors: dict[str, str] | None = None,
    names: dict[str, str] | None = None,
    *,
    list_nodes: bool | None = None,
) -> Tree:
    """rich Tree: roots by name, children by name; leaves show their jobs (and nodes when small)."""
    colors = colors or {}
    names = names or {}
    resources = main_resources(topo.allocatable.values())
    if list_nodes is None:
        list_nodes = len(topo.node_names) <= SMALL_TREE
    status = "[green]ready[/]" if topo.ready else "[bold red]NOT READY: jobs with a network topology wait[/]"
    root = Tree(
        f"[bold]Topology[/]  {len(topo.hypernodes)} HyperNodes, {len(topo.node_names)} nodes  {status}",
        guide_style="dim",
    )

    def add(parent: Tree, name: str, seen: set[str]) -> None:
        v = topo.hypernodes[name]
        direct = sorted(v.direct_nodes, key=natural_key)
        label = hn_text(topo, v, resources)
        jobs = _jobs_text(topo, direct, colors, names) if direct else Text()
        if jobs:
            label = Text.assemble(label, Text("  jobs: ", style="dim"), jobs)
        branch = parent.add(label)
        if name in seen:
            return
        seen.add(name)
        for c in topo.ordered_children(name):
            add(branch, c, seen)
        if direct and list_nodes:
            for n in direct:
                nt = Text(n, style="bold" if topo.pods_by_node.get(n) else "")
                if resources:
                    nt.append("  free " + _occupancy(topo, [n], resources), style="dim")
                for pk in topo.pods_by_node.get(n, []):
                    job = topo.job_of_pod.get(pk, NO_GROUP)
                    pod = pk.rpartition("/")[2]
                    nt.append(
                        f"  {short_pod_name(pod, names.get(job, '')) if job in names else pod}",
                        style=colors.get(job, "white"),
                    )
                branch.add(nt)

    seen: set[str] = set()
    for r in topo.roots:
        add(root, r, seen)
    cyclic = sorted((n for n, v in topo.hypernodes.items() if v.in_cycle), key=natural_key)
    if cyclic:
        bad = root.add(Text("on a cycle (unreachable from any root)", style="bold red"))
        for n in cyclic:
            bad.add(hn_text(topo, topo.hypernodes[n], resources))
    if topo.unplaced_nodes:
        label = Text(f"not in any HyperNode: {compress_names(topo.unplaced_nodes, limit=8)}", style="dim")
        if topo.unplaced_nodes and resources:
            label.append("  free " + _occupancy(topo, topo.unplaced_nodes, resources), style="dim")
        root.add(label)
    return root


def topology_dict(topo: TopologyView) -> dict[str, Any]:
    """The tree for ``hyperplace tree --output json``."""
    resources = main_resources(topo.allocatable.values())

    def hn(name: str) -> dict[str, Any]:
        v = topo.hypernodes[name]
        return {
            "name": v.name,
            "tier": v.tier,
            "tierName": v.tier_name,
            "nodeCount": len(v.nodes),
            "free": {r: topo.free_total(v.nodes, r)[0] for r in resources},
            "allocatable": {r: topo.free_total(v.nodes, r)[1] for r in resources},
            "nodes": sorted(v.direct_nodes, key=natural_key),
            "children": [] if v.in_cycle else [hn(c) for c in topo.ordered_children(name)],
            "problems": list(v.problems),
            "notes": list(v.notes),
            "heldFor": list(v.held_for),
        }

    return {
        "ready": topo.ready,
        "resourceUnits": "milli",
        "roots": [hn(r) for r in topo.roots],
        "cycles": [hn(n) for n, v in sorted(topo.hypernodes.items()) if v.in_cycle],
        "nodesWithoutHyperNode": list(topo.unplaced_nodes),
        "problems": [
            {"hyperNode": n, "message": p}
            for n in sorted(topo.hypernodes, key=natural_key)
            for p in topo.hypernodes[n].problems
        ],
    }


# --- the simulate table -----------------------------------------------------------------------


def summary_line(result: SimResult, views: list[JobView]) -> Text:
    """The first line of ``simulate``'s table output."""
    pods = result.of_kind("Pod")
    running = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
    t = Text()
    t.append("hyperplace simulate", style="bold")
    t.append(
        f": {len(views)} job{'s' if len(views) != 1 else ''}, {len(pods)} pods ({running} running, "
        f"{len(pods) - running} pending), {len(result.bindings)} bound by this run in "
        f"{result.cycles} cycle{'s' if result.cycles != 1 else ''}"
    )
    if result.rejected:
        t.append(f", {len(result.rejected)} refused by admission", style="red")
    return t


def _rl(rl: dict[str, str] | None) -> str:
    if rl is None:
        return "-"

    parts = []
    for k, v in rl.items():
        milli = milli_value(v)
        if milli or k == "cpu":
            parts.append(f"{k} {format_milli(k, milli)}")
    return ", ".join(parts) or "-"


def queue_table(result: SimResult) -> Table | None:
    """Queues with their deserved share and what they hold; None when the input has no
    Queue of its own (the default queue alone)."""
    entries = queue_entries(result)
    if list(entries) in ([], ["default"]):
        return None
    table = Table(title="Queues", title_justify="left", box=None, pad_edge=False)
    for col in ("queue", "state", "weight", "deserved", "allocated", "pending", "inqueue", "running"):
        table.add_column(col)
    for name, e in entries.items():
        table.add_row(
            name,
            e["state"],
            str(e["weight"]),
            _rl(e["deserved"]),
            _rl(e["allocated"]),
            str(e["pending"]),
            str(e["inqueue"]),
            str(e["running"]),
        )
    return table


def render_simulation(console: Console, result: SimResult, views: list[JobView], topo: TopologyView) -> None:
    """The whole table output of ``simulate``."""
    colors = job_colors(views)
    console.print(summary_line(result, views))
    # Warnings and refusals are one line each (grep-able), however long.
    for w in result.warnings:
        console.print(Text(f"Warning: {w}", style="yellow"), soft_wrap=True)
    if result.rejected:
        console.print()
        console.print(Text("Refused by admission", style="bold red"))
        for r in result.rejected:
            console.print(Text(f"  {r.line()}", style="red"), soft_wrap=True)
    for v in views:
        console.print()
        console.print(job_renderable(v, topo, colors[v.podgroup]))
    queues = queue_table(result)
    if queues is not None:
        console.print()
        console.print(queues)
    if result.preemptions:
        console.print()
        console.print(Text(f"Evicted ({len(result.preemptions)} pods)", style="bold"))
        for ev in result.preemptions:
            console.print(Text(f"  {ev.victim} on {ev.node}: {ev.reason}"), soft_wrap=True)
        for job, why in sorted(result.preemption_reasons.items()):
            console.print(Text(f"  {job}: {why}", style="dim"), soft_wrap=True)
    console.print()
    names = {v.podgroup: v.key for v in views}
    console.print(topology_tree(topo, colors, names))
    if result.notes:
        console.print()
        for note in result.notes:
            console.print(Text(f"scheduler: {note}", style="dim"), soft_wrap=True)
