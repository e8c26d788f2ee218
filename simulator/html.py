"""``simulate --html``: one self-contained page (inline CSS/JS, no network).

The page opens with a sticky search bar (a job, node or HyperNode by name: matches open
and are highlighted) and a per-tier summary: for every tier, how many of its domains are
free as a whole and how many accelerators (GPUs, NPUs; cpu when the nodes have none) are free
in all of them and in the best one. The topology follows as nested boxes (a HyperNode's
box holds its children's boxes; leaves hold node cells). Each node cell is a small bar
filled with the share of its accelerators in use, in the colour of the job using it (pods
of no job in the input in grey), with a legend; hovering a legend entry highlights that
job's nodes. In big clusters HyperNodes with no pod on any node start collapsed, and runs
of idle siblings fold into one box, so a 10,000-node picture opens on what is in use.
Pending jobs with their reasons and objects refused by admission are listed below.

Styles and script live next to this module (``html_page.css``, ``html_page.js``) and are
inlined into the page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from html import escape
from importlib.resources import files

from hyperplace.kube import format_milli
from hyperplace.kube.objects import namespaced_key
from hyperplace.kube.requests import pod_requests
from scheduler_plugin.algorithms.fragmentation import FragmentationConfig

from .fragmentation import fragmentation_html, fragmentation_of
from .render import hn_label, waiting_lines
from .resources import format_free, main_resources, short_name
from .result import SimResult
from .topology import TopologyView, natural_key
from .views import JobView, compress_names, subgroup_label

# Above this many nodes the cells drop their names and become small bars.
NAMED_CELLS_MAX = 64
# Above this many nodes HyperNodes with no pod on any of their nodes start collapsed.
COLLAPSE_IDLE_MIN = 256
# At least this many idle siblings in a row fold into one "N idle HyperNodes" box.
IDLE_RUN_MIN = 4
# A HyperNode holding more nodes directly than this gets a wider grid of cells.
WIDE_GRID_MIN = 256
# Colour of pods that belong to no job of the input (kept in step with --other in the CSS).
OTHER_COLOR = "#5f6673"
OTHER_CLASS = "job-other"


def job_color(i: int) -> str:
    """Well separated hues (golden angle); every 7 jobs the lightness shifts too, so that
    jobs whose hues come close again still differ. Readable on white."""
    lightness = (50, 36, 64)[(i // 7) % 3]
    return f"hsl({(i * 137.508) % 360:.0f}, 65%, {lightness}%)"


@cache
def _asset(name: str) -> str:
    return files("simulator").joinpath(name).read_text(encoding="utf-8")


def key_resources(resources: list[str]) -> list[str]:
    """What the page measures use in: the extended resources (GPUs, NPUs, ...) when some
    node offers one, else cpu."""
    extended = [r for r in resources if r not in ("cpu", "memory")]
    return extended or [r for r in resources if r == "cpu"]


def _pct(used: int, total: int) -> str:
    return f"{min(100.0, 100.0 * used / total):.4g}%" if total > 0 else "0%"


@dataclass
class _Page:
    """What every part of the page needs to know, computed once."""

    topo: TopologyView
    classes: dict[str, str]  # "ns/podgroup" -> CSS class of its job
    colors: dict[str, str]  # CSS class -> colour
    resources: list[str]  # shown in titles, key ones first
    keys: list[str]  # the resources use is measured in
    named: bool
    collapse: bool
    requests: dict[str, dict[str, int]]  # "ns/pod" -> requests
    # Per resource: node -> free and node -> allocatable, read once (sums over 10,000 nodes add up).
    _free: dict[str, dict[str, int]] = field(init=False)
    _alloc: dict[str, dict[str, int]] = field(init=False)
    _hn_amounts: dict[tuple[str, str], tuple[int, int]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        topo = self.topo
        self._alloc = {r: {n: a.get(r, 0) for n, a in topo.allocatable.items()} for r in self.resources}
        self._free = {
            r: {n: a - topo.used.get(n, {}).get(r, 0) for n, a in self._alloc[r].items()}
            for r in self.resources
        }

    def amount(self, nodes: Iterable[str], r: str) -> tuple[int, int]:
        """(free, allocatable) of resource ``r`` over ``nodes``."""
        free, alloc = self._free.get(r, {}), self._alloc.get(r, {})
        f = t = 0
        for n in nodes:
            f += free.get(n, 0)
            t += alloc.get(n, 0)
        return f, t

    def hn_amount(self, name: str, r: str) -> tuple[int, int]:
        """:meth:`amount` over every node of a HyperNode, computed once."""
        k = (name, r)
        if k not in self._hn_amounts:
            self._hn_amounts[k] = self.amount(self.topo.hypernodes[name].nodes, r)
        return self._hn_amounts[k]

    def job_class(self, pod: str) -> str:
        return self.classes.get(self.topo.job_of_pod.get(pod, ""), OTHER_CLASS)

    def key_of(self, node: str) -> str | None:
        """The resource a node's bar shows: its first key resource, else cpu."""
        alloc = self.topo.allocatable.get(node, {})
        for r in self.keys:
            if alloc.get(r, 0) > 0:
                return r
        return "cpu" if alloc.get("cpu", 0) > 0 else None

    def node_free(self, node: str) -> bool:
        """Every key resource of the node free (a node offering none of them: no pod on it)."""
        used = self.topo.used.get(node, {})
        if any(self.topo.allocatable.get(node, {}).get(r, 0) > 0 for r in self.keys):
            return all(used.get(r, 0) <= 0 for r in self.keys)
        return not self.topo.pods_by_node.get(node)

    def free_text(self, nodes: Iterable[str]) -> str:
        nodes = list(nodes)
        return ", ".join(format_free(r, *self.amount(nodes, r)) for r in self.resources)


def _node_cell(page: _Page, node: str) -> str:
    topo = page.topo
    pods = topo.pods_by_node.get(node, [])
    key = page.key_of(node)
    alloc = topo.allocatable.get(node, {}).get(key, 0) if key else 0
    # Per job class: pods and use of the key resource, in order of first pod.
    pods_of: dict[str, int] = {}
    use_of: dict[str, int] = {}
    names: dict[str, str] = {}
    for p in pods:
        c = page.job_class(p)
        pods_of[c] = pods_of.get(c, 0) + 1
        use_of[c] = use_of.get(c, 0) + (page.requests.get(p, {}).get(key, 0) if key else 0)
        names.setdefault(c, topo.job_of_pod.get(p, "") if c != OTHER_CLASS else "pods of no job in the input")
    used = sum(use_of.values())
    title = f"{node} · free {page.free_text([node])}" if page.resources else node
    if key and alloc and pods:
        title += f"\n{short_name(key)} in use: {format_milli(key, used)} of {format_milli(key, alloc)}"
    cls = ["node"]
    style = ""
    if pods_of:
        main = max(pods_of, key=lambda c: (use_of[c], pods_of[c]))
        cls += ["busy", main, *(c for c in pods_of if c != main)]
        if len(pods_of) == 1:
            style = f"--u:{_pct(used, alloc)}"
        else:
            # Several jobs share the node: stacked segments, the main job's colour at the bottom.
            stops, acc = [], 0
            for c in [main, *(c for c in pods_of if c != main)]:
                acc += use_of[c]
                stops.append(f"{page.colors[c]} 0 {_pct(acc, alloc)}")
            style = (
                f"--c:{page.colors[main]};background-image:linear-gradient(var(--dir),"
                f"{','.join(stops)},var(--free) 0)"
            )
        title += "\n" + "\n".join(
            f"{names[c]}: {n} pod{'s' if n != 1 else ''}"
            for c, n in sorted(pods_of.items(), key=lambda kv: natural_key(names[kv[0]]))
        )
    label = ""
    if page.named:
        use = (
            f"{format_milli(key, used)}/{format_milli(key, alloc)} {short_name(key)} used"
            if key and alloc
            else ""
        )
        label = f'{escape(node)}<span class="use">{escape(use)}</span>'
    style_attr = f' style="{escape(style)}"' if style else ""
    return f'<div class="{" ".join(cls)}" data-node="{escape(node)}"{style_attr} title="{escape(title)}">{label}</div>'


def _cap_text(page: _Page, nodes: set[str], hn: str | None = None) -> str:
    """``gpu 0/256 · cpu 0/3072 · mem 24Ti/24Ti`` (free/total) over nodes (of HyperNode ``hn``)."""
    return " · ".join(
        format_free(r, *(page.hn_amount(hn, r) if hn else page.amount(nodes, r))) for r in page.resources
    )


def _use_bar(page: _Page, nodes: set[str], hn: str | None = None) -> str:
    """A small bar of the share of the key resource in use below a HyperNode."""
    if not page.keys:
        return ""
    free, total = page.hn_amount(hn, page.keys[0]) if hn else page.amount(nodes, page.keys[0])
    return f'<span class="hbar" style="--u:{_pct(total - free, total)}"></span>'


class _Tree:
    """Renders the HyperNode boxes, folding idle subtrees when the cluster is big."""

    def __init__(self, page: _Page) -> None:
        self.page = page
        self.seen: set[str] = set()
        topo = page.topo
        busy_nodes = {n for n in topo.node_names if topo.pods_by_node.get(n)}
        self.idle = {
            name: not (v.nodes & busy_nodes) and not v.problems and not v.in_cycle
            for name, v in topo.hypernodes.items()
        }

    def box(self, name: str) -> str:
        page, topo = self.page, self.page.topo
        v = topo.hypernodes[name]
        idle = self.idle[name]
        cls = ["hn", f"tier-{v.tier}"]
        if v.problems:
            cls.append("invalid")
        if v.parent is None:
            cls.append("tier-top")
        if idle:
            cls.append("idle")
        is_open = not (idle and page.collapse)
        cap = _cap_text(page, v.nodes, name) if v.nodes else ""
        parts = [
            f'<details class="{" ".join(cls)}" data-hn="{escape(name)}"{" open" if is_open else ""}>',
            f'<summary><b>{escape(name)}</b> <span class="tier">tier {v.tier}'
            f"{(' · ' + escape(v.tier_name)) if v.tier_name else ''}</span> {_use_bar(page, v.nodes, name)}"
            f'<span class="cap">{len(v.nodes)} nodes{(" · free " + escape(cap)) if cap else ""}</span>'
            f"{' <span class=idle-tag>idle</span>' if idle else ''}</summary>",
        ]
        for p in v.problems:
            parts.append(f'<div class="problem">✗ {escape(p)}</div>')
        for h in v.held_for:
            parts.append(f'<div class="held">held for {escape(h)} (head-of-queue reservation)</div>')
        if name not in self.seen:
            self.seen.add(name)
            kids = topo.ordered_children(name)
            if kids:
                parts.append('<div class="children">')
                parts.extend(self.boxes(kids, fold=not idle))
                parts.append("</div>")
            direct = sorted(v.direct_nodes, key=natural_key)
            if direct:
                parts.append(f'<div class="nodes{" wide" if len(direct) > WIDE_GRID_MIN else ""}">')
                parts.extend(_node_cell(page, n) for n in direct)
                parts.append("</div>")
        parts.append("</details>")
        return "".join(parts)

    def boxes(self, names: list[str], fold: bool = True) -> list[str]:
        """Sibling boxes; in a big cluster a run of idle siblings folds into one box (not
        inside an idle HyperNode: that one is collapsed already)."""
        out: list[str] = []
        run: list[str] = []

        def flush() -> None:
            if fold and len(run) >= IDLE_RUN_MIN and self.page.collapse:
                out.append(self.idle_run(run))
            else:
                out.extend(self.box(n) for n in run)
            run.clear()

        for n in names:
            if self.idle[n] and n not in self.seen:
                run.append(n)
                continue
            flush()
            out.append(self.box(n))
        flush()
        return out

    def idle_run(self, names: list[str]) -> str:
        topo, page = self.page.topo, self.page
        nodes: set[str] = set()
        for n in names:
            nodes |= topo.hypernodes[n].nodes
        tiers = sorted({topo.hypernodes[n].tier for n in names})
        tier = f"tier {tiers[0]}" if len(tiers) == 1 else "tiers " + ", ".join(map(str, tiers))
        head = (
            f"{len(names)} idle HyperNodes ({tier}): {escape(compress_names(names, limit=3))} · "
            f"{len(nodes)} nodes · free {escape(_cap_text(page, nodes))}"
        )
        return (
            f'<details class="idle-run" data-run="{len(names)}"><summary>{head}</summary>'
            f'<div class="children">{"".join(self.box(n) for n in names)}</div></details>'
        )


def _tier_summary(page: _Page) -> list[str]:
    """Per tier: domains, domains free as a whole (every key resource of every node free),
    free key resources in all of them and in the best one."""
    topo = page.topo
    free_nodes = {n for n in topo.node_names if page.node_free(n)}
    unit = " and ".join(short_name(r) for r in page.keys)
    by_tier: dict[int, list[str]] = {}
    for name, v in topo.hypernodes.items():
        by_tier.setdefault(v.tier, []).append(name)
    head = [
        '<th>tier</th><th class="num">domains</th>'
        f'<th class="num" title="domains in which every node has all its {escape(unit)} free">'
        "whole domains free</th>"
    ]
    for r in page.keys:
        head.append(f'<th class="num">free {escape(short_name(r))}</th>')
        head.append(f'<th class="num">most free {escape(short_name(r))} in one domain</th>')
    out = [
        "<h2>Capacity by tier</h2>",
        '<table class="tiers" id="tiers"><tr>' + "".join(head) + "</tr>",
    ]

    for tier in sorted(by_tier, reverse=True):
        names = sorted(by_tier[tier], key=natural_key)
        tier_names = Counter(t for n in names if (t := topo.hypernodes[n].tier_name))
        label = f"{tier}" + (f" · {escape(tier_names.most_common(1)[0][0])}" if tier_names else "")
        wholly = [n for n in names if topo.hypernodes[n].nodes and topo.hypernodes[n].nodes <= free_nodes]
        cells = [
            f'<td>{label}</td><td class="num">{len(names)}</td>',
            f'<td class="num">{len(wholly)} of {len(names)}</td>',
        ]
        covered: set[str] = set()
        for n in names:
            covered |= topo.hypernodes[n].nodes
        for r in page.keys:
            free, total = page.amount(covered, r)
            cells.append(f'<td class="num">{format_milli(r, max(free, 0))} of {format_milli(r, total)}</td>')
            best = max(names, key=lambda n: page.hn_amount(n, r)[0])  # first in name order on ties
            bfree, btotal = page.hn_amount(best, r)
            cells.append(
                f'<td class="num">{format_milli(r, max(bfree, 0))} of {format_milli(r, btotal)} '
                f'(<span class="goto" data-find="{escape(best)}">{escape(best)}</span>)</td>'
            )
        out.append(
            f'<tr data-tier="{tier}" data-domains="{len(names)}" data-free-domains="{len(wholly)}">'
            + "".join(cells)
            + "</tr>"
        )
    nodes = topo.node_names
    cells = [
        f'<td>nodes</td><td class="num">{len(nodes)}</td>',
        f'<td class="num">{len(free_nodes)} of {len(nodes)}</td>',
    ]
    for r in page.keys:
        free, total = page.amount(nodes, r)
        cells.append(f'<td class="num">{format_milli(r, max(free, 0))} of {format_milli(r, total)}</td>')
        best_free = max((page.amount([n], r)[0] for n in nodes), default=0)
        cells.append(f'<td class="num">{format_milli(r, max(best_free, 0))} on one node</td>')
    out.append(
        f'<tr class="nodes-row" data-tier="nodes" data-domains="{len(nodes)}" '
        f'data-free-domains="{len(free_nodes)}">' + "".join(cells) + "</tr></table>"
    )
    return out


def _lowest_common(topo: TopologyView, leaves: set[str]) -> str | None:
    """The lowest HyperNode holding all of ``leaves`` (None when they are in different trees)."""
    chains = []
    for leaf in sorted(leaves):
        chain, seen = [], set()
        h: str | None = leaf
        while h is not None and h not in seen:
            seen.add(h)
            chain.append(h)
            h = topo.hypernodes[h].parent
        chains.append(chain)
    common = set(chains[0]).intersection(*chains[1:]) if chains else set()
    return next((h for h in chains[0] if h in common), None) if chains else None


def _where(v: JobView, topo: TopologyView) -> str:
    """Where a job runs: its allocated HyperNode, else the lowest one holding its running pods."""
    if v.allocated:
        return hn_label(topo, v.allocated)
    free_form = "" if v.topology_spec else ", no topology constraint"
    leaves = {p.leaf for p in v.pods if p.node}
    if leaves and None not in leaves:
        common = _lowest_common(topo, {leaf for leaf in leaves if leaf})
        if common:
            return f"pods within {hn_label(topo, common)}{free_form}"
    if leaves:
        nodes = len({p.node for p in v.pods if p.node})
        return f"pods on {nodes} node{'s' if nodes != 1 else ''}, in no single HyperNode{free_form}"
    return free_form[2:] or "no HyperNode yet"


def render_html(
    result: SimResult,
    views: list[JobView],
    topo: TopologyView,
    fragmentation: FragmentationConfig | None = None,
) -> str:
    """The whole page as a string (``fragmentation``: pod shapes of the room-left table)."""
    classes = {v.podgroup: f"job-{i}" for i, v in enumerate(views)}
    colors = {f"job-{i}": job_color(i) for i in range(len(views))}
    colors[OTHER_CLASS] = OTHER_COLOR
    resources = main_resources(topo.allocatable.values())
    keys = key_resources(resources)
    requests = {}
    for p in result.of_kind("Pod"):
        requests[namespaced_key(p)] = pod_requests(p, skip_invalid=True)
    page = _Page(
        topo=topo,
        classes=classes,
        colors=colors,
        resources=[*keys, *(r for r in resources if r not in keys)],
        keys=keys,
        named=len(topo.node_names) <= NAMED_CELLS_MAX,
        collapse=len(topo.node_names) > COLLAPSE_IDLE_MIN,
        requests=requests,
    )
    css = [_asset("html_page.css")]
    css.extend(f".job-{i}{{--c:{c}}}" for i, c in enumerate(colors[f"job-{i}"] for i in range(len(views))))
    css.append(".swatch{background-color:var(--c,#ccc)}")

    running = sum(v.running for v in views)
    total = sum(len(v.pods) for v in views)
    tree = _Tree(page)
    in_use = sum(1 for n in topo.node_names if topo.pods_by_node.get(n))
    unit = short_name(keys[0]) if keys else "cpu"
    other_pods = [p for pods in topo.pods_by_node.values() for p in pods if page.job_class(p) == OTHER_CLASS]
    other_nodes = {
        n for n, pods in topo.pods_by_node.items() for p in pods if page.job_class(p) == OTHER_CLASS
    }

    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>hyperplace simulation</title>",
        f"<style>{''.join(css)}</style></head><body>",
        '<div id="toolbar"><input id="search" type="search" list="search-names" autocomplete="off" '
        'placeholder="Find a job, node or HyperNode" aria-label="Find a job, node or HyperNode">'
        '<button id="search-go" type="button">Find</button>'
        '<button id="expand-all" type="button">Expand all</button>'
        '<button id="collapse-idle" type="button">Collapse idle</button>'
        '<span id="search-status" aria-live="polite"></span></div>',
        # Suggestions: jobs and HyperNodes (nodes are too many to list; they are still found).
        '<datalist id="search-names">'
        + "".join(f'<option value="{escape(v.key)}">' for v in views)
        + "".join(f'<option value="{escape(h)}">' for h in sorted(topo.hypernodes, key=natural_key))
        + "</datalist>",
        "<h1>hyperplace simulation</h1>",
        f'<div class="summary">{len(views)} jobs · {running}/{total} pods running · '
        f"{len(topo.node_names)} nodes ({in_use} with pods) · {len(topo.hypernodes)} HyperNodes · "
        f"{result.cycles} cycle{'s' if result.cycles != 1 else ''}"
        f"{'' if topo.ready else ' · <b class=problem>HyperNode tree not ready</b>'}</div>",
    ]
    out.extend(_tier_summary(page))
    report = fragmentation_of(
        result.of_kind("HyperNode"), result.of_kind("Node"), result.of_kind("Pod"), fragmentation
    )
    out.extend(fragmentation_html(report))
    out.append("<h2>Jobs</h2>")
    out.append('<ul class="legend" id="legend">')
    for v in views:
        c = classes[v.podgroup]
        where = _where(v, topo)
        out.append(
            f'<li class="legend-entry" data-class="{c}" data-job="{escape(v.key)}">'
            f'<span class="swatch {c}"></span><span>{escape(v.key)} — {escape(v.phase)}, '
            f"{v.running}/{len(v.pods)} running, {escape(where)}</span></li>"
        )
    if other_pods:
        out.append(
            f'<li class="legend-entry other" data-class="{OTHER_CLASS}" id="legend-other">'
            f'<span class="swatch {OTHER_CLASS}"></span><span>pods of no job in the input — '
            f"{len(other_pods)} pod{'s' if len(other_pods) != 1 else ''} on {len(other_nodes)} "
            f"node{'s' if len(other_nodes) != 1 else ''}</span></li>"
        )
    out.append("</ul>")
    out.append(
        '<div class="legend-key"><span><span class="swatch free"></span> free</span>'
        f'<span><span class="swatch half"></span> fill: share of the node\'s {escape(unit)} in use</span>'
        "<span>hover a job to highlight its nodes, click to keep it highlighted</span>"
        + ("<span>idle HyperNodes start collapsed</span>" if page.collapse and topo.hypernodes else "")
        + "</div>"
    )

    out.append("<h2>Topology</h2>")
    out.append(f'<div id="topology" class="{"named" if page.named else "compact"}">')
    out.extend(tree.boxes(list(topo.roots)))
    cyc = [n for n in sorted(topo.hypernodes, key=natural_key) if topo.hypernodes[n].in_cycle]
    if cyc:
        out.append(
            '<details class="hn invalid" open><summary><b>on a cycle</b></summary><div class="children">'
        )
        out.extend(tree.box(n) for n in cyc)
        out.append("</div></details>")
    if topo.unplaced_nodes:
        busy = any(topo.pods_by_node.get(n) for n in topo.unplaced_nodes)
        is_open = busy or not page.collapse
        unplaced = set(topo.unplaced_nodes)
        wide = " wide" if len(unplaced) > WIDE_GRID_MIN else ""
        out.append(
            f'<details class="hn unplaced{"" if busy else " idle"}"{" open" if is_open else ""}>'
            f"<summary><b>not in any HyperNode</b> {_use_bar(page, unplaced)}"
            f'<span class="cap">{len(unplaced)} nodes · free {escape(_cap_text(page, unplaced))}</span>'
            f'</summary><div class="nodes{wide}">'
        )
        out.extend(_node_cell(page, n) for n in topo.unplaced_nodes)
        out.append("</div></details>")
    out.append("</div>")

    waiting = [v for v in views if v.waiting]
    out.append(f"<h2>Jobs with pending pods ({len(waiting)})</h2>")
    out.append('<ul id="pending">')
    for v in waiting:
        pending = [p.name for p in v.pods if not p.node]
        text = "\n".join(waiting_lines(v) or ["the scheduler gave no reason"])
        out.append(
            f'<li class="pending-job" data-job="{escape(v.key)}"><span class="swatch {classes[v.podgroup]}"></span> '
            f"<b>{escape(v.key)}</b> — {len(pending)} pod(s) pending: {escape(compress_names(pending, limit=4))}"
            f'<div class="reason">{escape(text)}</div></li>'
        )
    if not waiting:
        out.append('<li class="muted">none</li>')
    out.append("</ul>")

    partitioned = [v for v in views if any(k != v.podgroup for k in v.subgroups)]
    if partitioned:
        out.append(
            "<h2>Partitions</h2><table class='jobs'><tr><th>job</th><th>partition</th><th>HyperNode</th></tr>"
        )
        for v in partitioned:
            for sid, hn in sorted(v.subgroups.items(), key=lambda kv: natural_key(kv[0])):
                if sid == v.podgroup:
                    continue
                out.append(
                    f"<tr><td>{escape(v.key)}</td><td>{escape(subgroup_label(sid, v.podgroup))}</td>"
                    f"<td>{escape(hn_label(topo, hn))}</td></tr>"
                )
        out.append("</table>")

    out.append(f"<h2>Refused by admission ({len(result.rejected)})</h2>")
    out.append('<ul id="rejected">')
    for rej in result.rejected:
        out.append(f'<li class="rejected-obj" data-kind="{escape(rej.kind)}">{escape(rej.line())}</li>')
    if not result.rejected:
        out.append('<li class="muted">none</li>')
    out.append("</ul>")
    out.append(f"<script>{_asset('html_page.js')}</script></body></html>")
    return "\n".join(out)
