"""``simulate --html``: a self-contained page, checked in a real headless Chromium.

Small clusters: Volcano's e2e cluster (8 nodes) and the user guide's three clusters
(24 nodes), through the real command line. Big clusters are in ``test_html_scale.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from simulator.cli import app

from .chromium import chromium, open_page

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "volcano-e2e"
GUIDE = REPO / "examples" / "user-guide-3.3"

# A pod of no job in the input: a node agent someone started by hand on ug3-node6.
AGENT = """
apiVersion: v1
kind: Pod
metadata: {name: node-agent, namespace: kube-system}
spec:
  nodeName: ug3-node6
  containers:
  - name: agent
    image: example.com/agent
    resources: {requests: {cpu: "1"}}
"""


def simulate_page(out: Path, *inputs: Path) -> dict[str, Any]:
    """Run ``hyperplace simulate INPUTS --html OUT --output json``; the JSON result."""
    res = CliRunner().invoke(app, ["simulate", *map(str, inputs), "--html", str(out), "--output", "json"])
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def browser() -> str:
    binary = chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium); the HTML page is not rendered")
    return binary


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "e2e.html"
    simulate_page(out, EXAMPLE)
    return out


def test_page_is_self_contained(page: Path):
    text = page.read_text()
    # No network: no external scripts, styles, images or fonts.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "@import" not in text and "url(" not in text
    assert text.startswith("<!DOCTYPE html>")


@pytest.mark.browser
async def test_page_renders_in_chromium(page: Path, tmp_path: Path):
    async with open_page(browser(), tmp_path / "profile") as tab:
        await tab.goto(page.as_uri())
        # The legend has one entry per job, in job order, each naming its class.
        legend = await tab.js(
            "[...document.querySelectorAll('.legend-entry')].map(e => [e.dataset.job, e.dataset.class])"
        )
        assert [j for j, _ in legend] == ["e2e/tier1-pair", "e2e/tier2-quad", "e2e/soft-pair", "e2e/too-wide"]
        cls = dict(legend)
        # Node cells carry the class of the job running on them: tier2-quad fills s4 or s5.
        cells = await tab.js(
            "Object.fromEntries([...document.querySelectorAll('.node')].map(n => [n.dataset.node, [...n.classList]]))"
        )
        assert set(cells) == {f"node{i}" for i in range(8)}
        quad = {n for n, c in cells.items() if cls["e2e/tier2-quad"] in c}
        assert quad in ({"node0", "node1", "node2", "node3"}, {"node4", "node5", "node6", "node7"})
        pair = {n for n, c in cells.items() if cls["e2e/tier1-pair"] in c}
        assert len(pair) == 2
        # Nested domains: 7 HyperNode boxes, all open in a cluster this small.
        boxes = await tab.js("[...document.querySelectorAll('.hn')].map(e => [e.dataset.hn, e.open])")
        assert {b for b, _ in boxes} == {f"s{i}" for i in range(7)}
        assert all(is_open for _, is_open in boxes)
        # The pending list names the waiting job with the scheduler's reason.
        pending = await tab.js("[...document.querySelectorAll('.pending-job')].map(e => e.dataset.job)")
        assert pending == ["e2e/too-wide"]
        assert "tier 1: best" in await tab.js("document.getElementById('pending').textContent")
        assert await tab.js("document.getElementById('rejected') !== null")
        shot = await tab.screenshot(tmp_path / "e2e.png")
    assert shot.stat().st_size > 10_000  # a real picture, not an empty page


def guide_domains() -> dict[str, tuple[int, set[str]]]:
    """HyperNode -> (tier, its nodes), read from the guide's cluster file (exactMatch members only)."""
    docs = [d for d in yaml.safe_load_all((GUIDE / "00-cluster.yaml").read_text()) if d]
    hns = {d["metadata"]["name"]: d for d in docs if d["kind"] == "HyperNode"}

    def nodes(name: str) -> set[str]:
        out: set[str] = set()
        for m in hns[name]["spec"]["members"]:
            target = m["selector"]["exactMatch"]["name"]
            out |= {target} if m["type"] == "Node" else nodes(target)
        return out

    return {name: (hn["spec"]["tier"], nodes(name)) for name, hn in hns.items()}


@pytest.mark.browser
async def test_24_node_page_in_chromium(tmp_path: Path):
    """The user guide's three 8-node clusters plus a node agent that belongs to no job."""
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT)
    out = tmp_path / "guide.html"
    result = simulate_page(out, GUIDE, agent)
    busy = {p["node"] for p in result["pods"].values() if p["node"]}
    domains = guide_domains()

    async with open_page(browser(), tmp_path / "profile") as tab:
        await tab.goto(out.as_uri())
        shot = await tab.screenshot(tmp_path / "guide-24.png")
        assert shot.stat().st_size > 10_000

        # Small cluster: every box open, cells named, each with a bar of its cpu in use.
        assert await tab.js("document.querySelectorAll('details.hn:not([open])').length") == 0
        assert await tab.js("document.getElementById('topology').className") == "named"
        assert await tab.js("document.querySelectorAll('.node').length") == 24

        # Per-tier summary at the top, before the topology: domains free as a whole (these
        # nodes have no GPUs, so use is measured in cpu and any pod makes a node busy).
        rows = await tab.js(
            "Object.fromEntries([...document.querySelectorAll('#tiers tr[data-tier]')]"
            ".map(r => [r.dataset.tier, [+r.dataset.domains, +r.dataset.freeDomains]]))"
        )
        for tier in (1, 2):
            names = [n for n, (t, _) in domains.items() if t == tier]
            free = [n for n in names if not domains[n][1] & busy]
            assert rows[str(tier)] == [len(names), len(free)], tier
        assert rows["nodes"] == [24, 24 - len(busy)]
        assert "free cpu" in await tab.js("document.querySelector('#tiers').textContent")
        assert await tab.js(
            "document.getElementById('tiers').getBoundingClientRect().bottom < innerHeight"
            " && document.getElementById('tiers').compareDocumentPosition(document.getElementById('topology'))"
            " === Node.DOCUMENT_POSITION_FOLLOWING"
        )

        # The agent is drawn, and the legend says what grey means.
        other = await tab.js("document.getElementById('legend-other').textContent")
        assert other == "pods of no job in the input — 1 pod on 1 node"
        agent_cell = await tab.js("[...document.querySelector('[data-node=\"ug3-node6\"]').classList]")
        assert {"busy", "job-other"} <= set(agent_cell)
        # Bars: a node whose 4 cpus a job fills shows 100 %, the agent's node 1 of 4.
        full = next(
            p["node"] for k, p in result["pods"].items() if k.startswith("section-3-3-2/") and p["node"]
        )
        assert await tab.js(
            f"document.querySelector('[data-node=\"{full}\"]').style.getPropertyValue('--u')"
        ) == ("100%")
        assert await tab.js(
            "document.querySelector('[data-node=\"ug3-node6\"]').style.getPropertyValue('--u')"
        ) == ("25%")

        # Search a node: it is highlighted, on screen, and the status names where it sits.
        await tab.js("document.getElementById('search').focus()")
        await tab.type("ug2-node5")
        assert (
            await tab.js("document.getElementById('search-status').textContent") == "1 match, Enter to show"
        )
        await tab.press("Enter")
        assert (
            await tab.js("document.getElementById('search-status').textContent")
            == "node ug2-node5 in ug2-hypernode1 › ug2-hypernode2"
        )
        assert await tab.js("[...document.querySelectorAll('.found')].map(e => e.dataset.node)") == [
            "ug2-node5"
        ]
        assert await tab.js(
            "(r => r.top >= 0 && r.bottom <= innerHeight)"
            "(document.querySelector('[data-node=\"ug2-node5\"]').getBoundingClientRect())"
        )

        # Search a job by its bare name: three namespaces have one; Enter steps through them
        # and highlights the nodes of the one shown.
        await tab.js("document.getElementById('search').value = ''")
        await tab.type("network-topology-job")
        await tab.press("Enter")
        status = await tab.js("document.getElementById('search-status').textContent")
        assert status.startswith("job section-3-3-1/network-topology-job: 4 nodes (1 of 3 matches")
        await tab.press("Enter")
        status = await tab.js("document.getElementById('search-status').textContent")
        assert status.startswith("job section-3-3-2/network-topology-job: 8 nodes (2 of 3 matches")
        lit = await tab.js("[...document.querySelectorAll('.node.hl')].map(n => n.dataset.node).sort()")
        expected = sorted(
            p["node"] for k, p in result["pods"].items() if k.startswith("section-3-3-2/") and p["node"]
        )
        assert lit == expected
        assert await tab.js("document.body.classList.contains('focus')")
        await tab.screenshot(tmp_path / "guide-24-job.png")

        # Nothing matches: said so; Escape clears the highlight.
        await tab.js("document.getElementById('search').value = ''")
        await tab.type("no-such-thing")
        await tab.press("Enter")
        assert await tab.js("document.getElementById('search-status').textContent") == (
            'no job, node or HyperNode matches "no-such-thing"'
        )
        await tab.press("Escape")
        assert not await tab.js("document.body.classList.contains('focus')")
