"""The scheduler's fragmentation figures for ``tree`` and the HTML picture.

The numbers come from :func:`scheduler_plugin.algorithms.fragmentation.snapshot_fragmentation`, the very
function behind the scheduler's ``hyperplace_scheduler_tier_*`` gauges, run on a snapshot of
the displayed objects; this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from pydantic import ValidationError
from rich.table import Table
from rich.text import Text

from hyperplace.api import HyperNode
from hyperplace.kube import format_milli
from scheduler_plugin.algorithms.fragmentation import (
    FragmentationConfig,
    FragmentationReport,
    snapshot_fragmentation,
)
from scheduler_plugin.cache.rebuild import build_snapshot


def fragmentation_of(
    hypernodes: Iterable[HyperNode | dict[str, Any]],
    nodes: Sequence[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    config: FragmentationConfig | None = None,
) -> FragmentationReport:
    """The figures for these objects (pods with ``spec.nodeName`` use room; the rest do not)."""
    hns: list[HyperNode] = []
    for h in hypernodes:
        if isinstance(h, HyperNode):
            hns.append(h)
            continue
        try:
            hns.append(HyperNode.model_validate(h))
        except ValidationError:
            continue  # reported elsewhere as invalid; the scheduler skips it too
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    snap = build_snapshot(nodes=list(nodes), pods=bound, hypernodes=hns)
    return snapshot_fragmentation(snap, config or FragmentationConfig())


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def fragmentation_table(report: FragmentationReport) -> Table:
    """Per tier: HyperNodes, those entirely free, and per shape the pods that fit in total /
    in the best HyperNode (``hyperplace tree``)."""
    t = Table(box=None, padding=(0, 2))
    t.add_column("tier", justify="right")
    t.add_column("HyperNodes", justify="right")
    t.add_column("entirely free", justify="right")
    for s in report.shapes:
        t.add_column(f"{s.accelerators}-{_short(report.accelerator)} pods: all / best", justify="right")
    for tier in reversed(report.tiers):
        row = [str(tier.tier), str(tier.hypernodes), str(tier.free_hypernodes)]
        for s in report.shapes:
            best = tier.best[s.name]
            where = f" ({tier.best_hypernode[s.name]})" if best else ""
            row.append(f"{tier.fit[s.name]} / {best}{where}")
        t.add_row(*row)
    return t


def fragmentation_lines(report: FragmentationReport) -> list[Any]:
    """What ``hyperplace tree`` prints under the tree: a heading, the table, the note."""
    out: list[Any] = [
        Text("Room left by tier, as the scheduler counts it", style="bold"),
        fragmentation_table(report),
    ]
    if report.note:
        out.append(Text(report.note, style="dim"))
    return out


def fragmentation_html(report: FragmentationReport) -> list[str]:
    """The same figures as an HTML table (``id="fragmentation"``)."""
    acc = escape(report.accelerator)
    head = [
        '<th>tier</th><th class="num">HyperNodes</th>'
        f'<th class="num" title="every node schedulable, none of its {acc} in use">entirely free</th>'
    ]
    for s in report.shapes:
        req = ", ".join(f"{escape(r)} {format_milli(r, v)}" for r, v in s.requests.items())
        head.append(
            f'<th class="num" title="each pod asks {req}">'
            f"{s.accelerators}-{escape(_short(report.accelerator))} pods: all / best</th>"
        )
    out = [
        "<h2>Room left by tier, as the scheduler counts it</h2>",
        '<table class="tiers" id="fragmentation"><tr>' + "".join(head) + "</tr>",
    ]
    for tier in reversed(report.tiers):
        cells = [
            f'<td>{tier.tier}</td><td class="num">{tier.hypernodes}</td>'
            f'<td class="num">{tier.free_hypernodes}</td>'
        ]
        for s in report.shapes:
            best = tier.best[s.name]
            hn = tier.best_hypernode[s.name]
            where = (
                f' (<span class="goto" data-find="{escape(hn)}">{escape(hn)}</span>)' if best and hn else ""
            )
            cells.append(
                f'<td class="num" data-shape="{escape(s.name)}" data-fit="{tier.fit[s.name]}" '
                f'data-best="{best}">{tier.fit[s.name]} / {best}{where}</td>'
            )
        out.append(
            f'<tr data-frag-tier="{tier.tier}" data-free-hypernodes="{tier.free_hypernodes}">'
            + "".join(cells)
            + "</tr>"
        )
    out.append("</table>")
    if report.note:
        out.append(f'<p class="note">{escape(report.note)}</p>')
    return out
