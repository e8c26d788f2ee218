"""``simulate --html``: one self-contained page (inline CSS/JS, no network).

The topology is drawn as nested boxes (a HyperNode's box holds its children's boxes;
leaves hold node cells). Each node cell is coloured by the job with most pods on it,
with a legend; hovering a legend entry highlights that job's nodes. Pending jobs with
their reasons and objects refused by admission are listed below. Node cells shrink to
small squares for big clusters, so a 1,000+ node picture still fits a screen.
"""

from __future__ import annotations

from html import escape

from .engine import SimResult
from .render import hn_label, waiting_lines
from .resources import format_free, main_resources
from .topology import Topology, natural_key
from .views import JobView, compress_names, subgroup_label

# Above this many nodes the cells drop their names and become small squares.
NAMED_CELLS_MAX = 64


def job_color(i: int) -> str:
    """Well separated hues (golden angle); every 7 jobs the lightness shifts too, so that
    jobs whose hues come close again still differ. Readable on white."""
    lightness = (50, 36, 64)[(i // 7) % 3]
    return f"hsl({(i * 137.508) % 360:.0f}, 65%, {lightness}%)"


CSS = """
:root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; }
body { margin: 16px 24px; background: #f6f7f9; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 20px 0 8px; }
.summary { color: #555; margin-bottom: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 14px; padding: 0; margin: 0 0 12px; list-style: none; }
.legend-entry { display: flex; align-items: center; gap: 6px; cursor: default; font-size: 13px;
  padding: 2px 6px; border-radius: 4px; }
.legend-entry:hover { background: #e6e9ef; }
.swatch { width: 14px; height: 14px; border-radius: 3px; display: inline-block; border: 1px solid rgba(0,0,0,.15); }
.hn { border: 1px solid #b9c0cc; border-radius: 6px; padding: 4px 6px 6px; margin: 4px; background: #fff;
  display: inline-block; vertical-align: top; }
.hn > .hn-title { font-size: 12px; color: #333; white-space: nowrap; margin-bottom: 3px; }
.hn > .hn-title b { font-size: 13px; }
.hn .tier { color: #2a6fb0; }
.hn .cap { color: #777; }
.hn.tier-top { background: #fbfbfd; }
.hn.invalid { border: 2px solid #d11; background: #fff5f5; }
.problem { color: #c00; font-size: 12px; }
.children { display: flex; flex-wrap: wrap; align-items: flex-start; }
.nodes { display: flex; flex-wrap: wrap; gap: 2px; max-width: 560px; }
.node { width: 10px; height: 10px; border-radius: 2px; background: #dfe3ea; border: 1px solid #c9ced8; }
.named .node { width: auto; height: auto; min-width: 44px; padding: 2px 4px; font-size: 11px; text-align: center;
  color: #222; }
.node.busy { color: #fff; border-color: rgba(0,0,0,.25); }
.node.partial { background-image: linear-gradient(135deg, rgba(255,255,255,.45) 25%, transparent 25%,
  transparent 50%, rgba(255,255,255,.45) 50%, rgba(255,255,255,.45) 75%, transparent 75%); background-size: 6px 6px; }
body.focus .node.busy:not(.hl) { opacity: .15; }
body.focus .node:not(.busy) { opacity: .35; }
#pending, #rejected { list-style: none; padding-left: 0; }
.pending-job, .rejected-obj { margin-bottom: 8px; font-size: 13px; }
.pending-job .reason { color: #555; margin-left: 16px; white-space: pre-wrap; font-family: ui-monospace, monospace;
  font-size: 12px; }
.rejected-obj { color: #a00; }
table.jobs { border-collapse: collapse; font-size: 13px; background: #fff; }
table.jobs td, table.jobs th { padding: 3px 10px; border-bottom: 1px solid #e3e6eb; text-align: left; }
.muted { color: #888; }
"""

JS = """
document.querySelectorAll('.legend-entry').forEach(function (e) {
  var cls = e.getAttribute('data-class');
  e.addEventListener('mouseenter', function () {
    document.body.classList.add('focus');
    document.querySelectorAll('.node.' + cls).forEach(function (n) { n.classList.add('hl'); });
  });
  e.addEventListener('mouseleave', function () {
    document.body.classList.remove('focus');
    document.querySelectorAll('.node.hl').forEach(function (n) { n.classList.remove('hl'); });
  });
});
"""


def _node_cell(topo: Topology, node: str, classes: dict[str, str], named: bool, resources: list[str]) -> str:
    pods = topo.pods_by_node.get(node, [])
    jobs: dict[str, int] = {}
    for p in pods:
        j = topo.job_of_pod.get(p, p)
        jobs[j] = jobs.get(j, 0) + 1
    free = ", ".join(format_free(r, *topo.free_total([node], r)) for r in resources)
    title = f"{node} (free {free})" if free else node
    cls = ["node"]
    if jobs:
        main = max(sorted(jobs), key=lambda j: jobs[j])
        cls += ["busy", classes.get(main, "job-other")]
        cls += [classes[j] for j in jobs if j != main and j in classes]
        if len(jobs) > 1:
            cls.append("partial")
        title += "\n" + "\n".join(f"{j}: {n} pod{'s' if n != 1 else ''}" for j, n in sorted(jobs.items()))
    label = escape(node) if named else ""
    return f'<div class="{" ".join(cls)}" data-node="{escape(node)}" title="{escape(title)}">{label}</div>'


def _hn_box(
    topo: Topology, name: str, classes: dict[str, str], named: bool, resources: list[str], seen: set[str]
) -> str:
    v = topo.hypernodes[name]
    cap = " · ".join(format_free(r, *topo.free_total(v.nodes, r)) for r in resources) if v.nodes else ""
    cls = ["hn", f"tier-{v.tier}"]
    if v.problems:
        cls.append("invalid")
    if v.parent is None:
        cls.append("tier-top")
    parts = [
        f'<div class="{" ".join(cls)}" data-hn="{escape(name)}">',
        f'<div class="hn-title"><b>{escape(name)}</b> <span class="tier">tier {v.tier}'
        f"{(' · ' + escape(v.tier_name)) if v.tier_name else ''}</span> "
        f'<span class="cap">· {len(v.nodes)} nodes{(" · free " + escape(cap)) if cap else ""}</span></div>',
    ]
    for p in v.problems:
        parts.append(f'<div class="problem">✗ {escape(p)}</div>')
    if name not in seen:
        seen.add(name)
        kids = topo.ordered_children(name)
        if kids:
            parts.append('<div class="children">')
            parts.extend(_hn_box(topo, c, classes, named, resources, seen) for c in kids)
            parts.append("</div>")
        direct = sorted(v.direct_nodes, key=natural_key)
        if direct:
            parts.append('<div class="nodes">')
            parts.extend(_node_cell(topo, n, classes, named, resources) for n in direct)
            parts.append("</div>")
    parts.append("</div>")
    return "".join(parts)


def render_html(result: SimResult, views: list[JobView], topo: Topology) -> str:
    """The whole page as a string."""
    classes = {v.podgroup: f"job-{i}" for i, v in enumerate(views)}
    resources = main_resources(topo.allocatable.values())
    named = len(topo.node_names) <= NAMED_CELLS_MAX
    css = [CSS]
    for i, _v in enumerate(views):
        css.append(f".node.job-{i}, .swatch.job-{i} {{ background-color: {job_color(i)}; }}")
    css.append(".node.job-other { background-color: #777; }")

    running = sum(v.running for v in views)
    total = sum(len(v.pods) for v in views)
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>hyperplace simulation</title>",
        f"<style>{''.join(css)}</style></head><body>",
        "<h1>hyperplace simulation</h1>",
        f'<div class="summary">{len(views)} jobs · {running}/{total} pods running · '
        f"{len(topo.node_names)} nodes · {len(topo.hypernodes)} HyperNodes · {result.cycles} cycles"
        f"{'' if topo.ready else ' · <b class=problem>HyperNode tree not ready</b>'}</div>",
        "<h2>Jobs</h2>",
        '<ul class="legend" id="legend">',
    ]
    for v in views:
        c = classes[v.podgroup]
        if v.allocated:
            where = hn_label(topo, v.allocated)
        else:
            where = "no topology constraint" if not v.topology_spec else "no HyperNode yet"
        out.append(
            f'<li class="legend-entry" data-class="{c}" data-job="{escape(v.key)}">'
            f'<span class="swatch {c}"></span><span>{escape(v.key)} — {escape(v.phase)}, '
            f"{v.running}/{len(v.pods)} running, {escape(where)}</span></li>"
        )
    out.append("</ul>")

    out.append("<h2>Topology</h2>")
    out.append(f'<div id="topology" class="{"named" if named else "compact"}">')
    seen: set[str] = set()
    for r in topo.roots:
        out.append(_hn_box(topo, r, classes, named, resources, seen))
    cyc = [n for n in sorted(topo.hypernodes, key=natural_key) if topo.hypernodes[n].in_cycle]
    if cyc:
        out.append(
            '<div class="hn invalid"><div class="hn-title"><b>on a cycle</b></div><div class="children">'
        )
        out.extend(_hn_box(topo, n, classes, named, resources, seen) for n in cyc)
        out.append("</div></div>")
    if topo.unplaced_nodes:
        out.append(
            '<div class="hn" data-hn=""><div class="hn-title"><b>not in any HyperNode</b> '
            f'<span class="cap">· {len(topo.unplaced_nodes)} nodes</span></div><div class="nodes">'
        )
        out.extend(_node_cell(topo, n, classes, named, resources) for n in topo.unplaced_nodes)
        out.append("</div></div>")
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
    out.append(f"<script>{JS}</script></body></html>")
    return "\n".join(out)
