"""The HTML page of a big cluster stays usable: what is in use is open, idle subtrees are
collapsed, a per-tier summary leads, and the search box finds any job, node or HyperNode.

The pages are the real renderer's output for :func:`scale_result` (a 4,096-node cluster
with 8 children per HyperNode and a 10,240-node one with 4, GPU clusters in use, see
``scale_cluster.py``); the 10,240-node one is checked in headless Chromium.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from simulator.cli import final_topology
from simulator.html import IDLE_RUN_MIN, render_html
from simulator.result import SimResult
from simulator.views import job_views

from .chromium import chromium, open_page
from .scale_cluster import TOO_WIDE_REASON, scale_result


def scale_page(nodes: int, fanout: int = 4) -> tuple[str, dict[Any, dict[str, Any]]]:
    """The page of :func:`scale_result` as ``simulate --html`` writes it, and its objects."""
    result = scale_result(nodes, fanout)
    topo = final_topology(result)
    return render_html(result, job_views(result, topo), topo), result.objects


@dataclass
class Cluster:
    """What the page should show, worked out from the input objects alone."""

    tier: dict[str, int] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)
    below: dict[str, set[str]] = field(default_factory=dict)  # HyperNode -> every node under it
    with_pods: set[str] = field(default_factory=set)  # nodes running any pod
    gpus_used: set[str] = field(default_factory=set)  # nodes with a GPU in use
    nodes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, objects: dict[Any, dict[str, Any]]) -> Cluster:
        c = cls()
        direct: dict[str, set[str]] = {}
        kids: dict[str, list[str]] = {}
        for (kind, _, name), o in objects.items():
            if kind == "Node":
                c.nodes.append(name)
            elif kind == "HyperNode":
                c.tier[name] = o["spec"]["tier"]
                for m in o["spec"]["members"]:
                    target = m["selector"]["exactMatch"]["name"]
                    if m["type"] == "Node":
                        direct.setdefault(name, set()).add(target)
                    else:
                        kids.setdefault(name, []).append(target)
                        c.parent[target] = name
            elif kind == "Pod" and o["spec"].get("nodeName"):
                c.with_pods.add(o["spec"]["nodeName"])
                req = o["spec"]["containers"][0]["resources"]["requests"]
                if int(req.get("nvidia.com/gpu", 0)):
                    c.gpus_used.add(o["spec"]["nodeName"])

        def under(hn: str) -> set[str]:
            if hn not in c.below:
                c.below[hn] = set(direct.get(hn, ())).union(*(under(k) for k in kids.get(hn, [])))
            return c.below[hn]

        for hn in c.tier:
            under(hn)
        return c

    def path(self, hn: str) -> list[str]:
        out = [hn]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return out

    def free_domains(self, tier: int) -> tuple[int, int]:
        names = [h for h, t in self.tier.items() if t == tier]
        return len(names), sum(1 for h in names if not self.below[h] & self.gpus_used)


class Boxes(HTMLParser):
    """The nesting of the page's <details> boxes and where each node cell sits."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[dict[str, Any]] = []
        self.boxes: list[dict[str, Any]] = []
        self.cells: dict[str, list[list[dict[str, Any]]]] = {}  # node -> [boxes around it, innermost first]
        self.tiers: dict[str, tuple[int, int]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "details":
            box: dict[str, Any] = {
                "hn": a.get("data-hn"),
                "run": "idle-run" in cls,
                "idle": "idle" in cls,
                "open": "open" in a,
                "parent": self.stack[-1] if self.stack else None,
                "kids": [],
            }
            if self.stack:
                self.stack[-1]["kids"].append(box)
            self.stack.append(box)
            self.boxes.append(box)
        elif tag == "div" and "node" in cls:
            self.cells.setdefault(str(a["data-node"]), []).append(list(reversed(self.stack)))
        elif tag == "tr" and a.get("data-tier"):
            self.tiers[str(a["data-tier"])] = (int(a["data-domains"] or 0), int(a["data-free-domains"] or 0))

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.stack.pop()


def test_4096_nodes_open_on_what_is_in_use():
    # Eight children per HyperNode: an open box has runs of idle siblings to fold.
    page, objects = scale_page(4096, fanout=8)
    cluster = Cluster.of(objects)
    doc = Boxes()
    doc.feed(page)

    # Every node is drawn once (so the search finds it), inside its leaf's box.
    assert sorted(doc.cells) == sorted(cluster.nodes)
    assert all(len(where) == 1 for where in doc.cells.values())
    # Every HyperNode has one box; it starts open exactly when a pod runs below it.
    hn_boxes = {b["hn"]: b for b in doc.boxes if b["hn"]}
    assert set(hn_boxes) == set(cluster.tier)
    busy = {h for h in cluster.tier if cluster.below[h] & cluster.with_pods}
    assert {h for h, b in hn_boxes.items() if b["open"]} == busy
    assert {h for h, b in hn_boxes.items() if b["idle"]} == set(cluster.tier) - busy
    # So only the leaves in use show their cells: 7 leaves of 32 nodes out of 4,096.
    shown = [n for n, [where] in doc.cells.items() if all(b["open"] for b in where)]
    leaves_in_use = {h for h in busy if cluster.tier[h] == 1}
    assert len(shown) == 32 * len(leaves_in_use) == 32 * 7
    # Runs of idle siblings of a box that is open fold into one closed box.
    runs = [b for b in doc.boxes if b["run"]]
    assert runs
    for run in runs:
        assert not run["open"] and run["parent"]["open"]
        assert len(run["kids"]) >= IDLE_RUN_MIN and all(k["idle"] and not k["open"] for k in run["kids"])
    # The per-tier summary counts the domains with every GPU free (a cpu-only agent does not
    # take a GPU domain), from the top tier down, then the nodes.
    assert list(doc.tiers) == [str(t) for t in sorted(set(cluster.tier.values()), reverse=True)] + ["nodes"]
    for t in set(cluster.tier.values()):
        assert doc.tiers[str(t)] == cluster.free_domains(t), t
    assert doc.tiers["nodes"] == (4096, 4096 - len(cluster.gpus_used))
    assert page.index('id="tiers"') < page.index('id="topology"')


def rendered_cells() -> str:
    """JavaScript: how many node cells the browser shows (those in closed boxes it skips)."""
    return "[...document.querySelectorAll('.node')].filter(n => n.checkVisibility()).length"


async def search(tab: Any, text: str) -> str:
    await tab.js("(i => { i.value = ''; i.focus(); })(document.getElementById('search'))")
    await tab.type(text)
    await tab.press("Enter")
    return str(await tab.js("document.getElementById('search-status').textContent"))


@pytest.mark.browser
async def test_10240_nodes_in_chromium(tmp_path: Path):
    binary = chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium); the HTML page is not rendered")
    page, objects = scale_page(10240)
    cluster = Cluster.of(objects)
    out = tmp_path / "cluster-10240.html"
    out.write_text(page, encoding="utf-8")
    # Self-contained and of a size a browser opens at once.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page) and "url(" not in page
    assert out.stat().st_size < 2_000_000

    async with open_page(binary, tmp_path / "profile") as tab:
        await tab.goto(out.as_uri())
        await tab.screenshot(tmp_path / "top.png")

        # The summary is on the first screen: domains per tier, whole ones free, free GPUs.
        assert await tab.js("document.getElementById('tiers').getBoundingClientRect().bottom < innerHeight")
        rows = await tab.js(
            "Object.fromEntries([...document.querySelectorAll('#tiers tr[data-tier]')]"
            ".map(r => [r.dataset.tier, [+r.dataset.domains, +r.dataset.freeDomains]]))"
        )
        assert rows["1"] == list(cluster.free_domains(1)) == [320, 314]
        assert rows["2"] == list(cluster.free_domains(2))
        text = await tab.js("document.getElementById('tiers').innerText")
        assert "free gpu" in text and f"{10240 * 8 - 3 * 256 - 128 - 3 - 128} of {10240 * 8}" in text

        # The best domain of a tier is a link to it.
        await tab.js("document.querySelector('#tiers tr[data-tier=\"1\"] .goto').click()")
        status = await tab.js("document.getElementById('search-status').textContent")
        # (the exact name first; leaf30..leaf39 and leaf300.. follow on Enter)
        assert status.startswith(
            "HyperNode leaf3 in " + " › ".join(cluster.path("leaf3")[1:]) + " (1 of 31 matches"
        )
        # Escape in the search box puts the page back as it opened.
        await tab.js("document.getElementById('search').focus()")
        await tab.press("Escape")

        # Only what is in use is laid out: the leaves with pods, 32 nodes each; all the
        # other cells exist, folded away.
        leaves_in_use = {
            h for h, t in cluster.tier.items() if t == 1 and cluster.below[h] & cluster.with_pods
        }
        assert await tab.js(rendered_cells()) == 32 * len(leaves_in_use)
        assert await tab.js("document.querySelectorAll('.node').length") == 10240

        # Legend: jobs, then pods of no job in the input; bars show the share of GPUs in use,
        # stacked when two jobs share a node.
        assert await tab.js("document.getElementById('legend-other').textContent") == (
            "pods of no job in the input — 4 pods on 4 nodes"
        )
        probe = "document.querySelector('[data-node=\"gpu-l7-n0\"]')"
        assert await tab.js(f"{probe}.style.getPropertyValue('--u')") == "12.5%"
        assert "job-other" in await tab.js(f"[...{probe}.classList]")
        shared = await tab.js(
            "getComputedStyle(document.querySelector('[data-node=\"gpu-l160-n0\"]')).backgroundImage"
        )
        assert len(set(re.findall(r"rgb\([^)]*\)", shared))) == 3  # half-a, half-b, free
        pending = await tab.js("document.getElementById('pending').textContent")
        assert "training/too-wide" in pending and TOO_WIDE_REASON.split("; ")[1] in pending

        # Search a node deep in an idle subtree: its boxes open, it is on screen, framed,
        # and the status names its HyperNodes up to the root.
        status = await search(tab, "gpu-l200-n7")
        assert status == "node gpu-l200-n7 in " + " › ".join(cluster.path("leaf200"))
        assert await tab.js("[...document.querySelectorAll('.found')].map(e => e.dataset.node)") == [
            "gpu-l200-n7"
        ]
        cell = "document.querySelector('[data-node=\"gpu-l200-n7\"]')"
        assert await tab.js(
            f"(r => r.width > 0 && r.top >= 0 && r.bottom <= innerHeight)({cell}.getBoundingClientRect())"
        )
        await tab.screenshot(tmp_path / "found-node.png")

        # Search a HyperNode: the boxes the last search opened close again.
        status = await search(tab, "leaf300")
        assert status == "HyperNode leaf300 in " + " › ".join(cluster.path("leaf300")[1:])
        assert await tab.js("document.querySelector('[data-hn=\"leaf200\"]').checkVisibility()") is False
        assert await tab.js("document.querySelector('[data-hn=\"leaf300\"]').open")
        assert await tab.js(rendered_cells()) == 32 * (len(leaves_in_use) + 1)

        # Search a job: exactly its nodes are highlighted.
        assert await search(tab, "half-b") == "job training/half-b: 16 nodes"
        lit = await tab.js("[...document.querySelectorAll('.node.hl')].map(n => n.dataset.node)")
        assert sorted(lit) == sorted(f"gpu-l160-n{i}" for i in range(16))
        await tab.screenshot(tmp_path / "found-job.png")

        # Expand all lays out every node; Collapse idle folds them again.
        await tab.js("document.getElementById('expand-all').click()")
        assert await tab.js(rendered_cells()) == 10240
        await tab.js("document.getElementById('collapse-idle').click()")
        assert await tab.js(rendered_cells()) == 32 * len(leaves_in_use)

        # A link to the page can name what to show.
        await tab.goto("about:blank")
        await tab.goto(out.as_uri() + "#find=gpu-l300-n3")
        assert await tab.js("[...document.querySelectorAll('.found')].map(e => e.dataset.node)") == [
            "gpu-l300-n3"
        ]


def test_cluster_without_hypernodes_and_empty_input():
    # Nodes in no HyperNode: one box of all of them, open since pods run there; the
    # summary has only the nodes row; jobs say where their pods are.
    result = scale_result(512)
    result.objects = {k: o for k, o in result.objects.items() if k[0] != "HyperNode"}
    cluster = Cluster.of(result.objects)
    topo = final_topology(result)
    page = render_html(result, job_views(result, topo), topo)
    doc = Boxes()
    doc.feed(page)
    assert [(b["hn"], b["open"]) for b in doc.boxes] == [(None, True)]
    assert len(doc.cells) == 512
    assert doc.tiers == {"nodes": (512, 512 - len(cluster.gpus_used))}
    assert "training/whole-0 — Running, 32/32 running, pods on 32 nodes, in no single HyperNode" in page

    # Nothing at all: still a page, with zero counts.
    empty = SimResult(
        objects={},
        bindings={},
        bound_in_cycle={},
        evictions=[],
        rejected=[],
        warnings=[],
        created=[],
        updated=[],
        outcomes={},
        unschedulable={},
        cycles=0,
        scheduler_ran=False,
    )
    topo = final_topology(empty)
    page = render_html(empty, job_views(empty, topo), topo)
    doc = Boxes()
    doc.feed(page)
    assert doc.tiers == {"nodes": (0, 0)} and not doc.cells
    assert "0 jobs · 0/0 pods running · 0 nodes (0 with pods) · 0 HyperNodes · 0 cycles" in page
