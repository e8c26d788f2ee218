"""``simulate --html``: a self-contained page, checked in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "volcano-e2e"


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_args(binary: str, profile: Path) -> list[str]:
    return [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]


class _Collect(HTMLParser):
    """Elements with their classes and data attributes, from the DOM Chromium dumps."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def with_class(self, cls: str) -> list[dict[str, str | None]]:
        return [a for _, a in self.elements if cls in (a.get("class") or "").split()]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from typer.testing import CliRunner

    from simulator.cli import app

    out = tmp_path_factory.mktemp("html") / "e2e.html"
    res = CliRunner().invoke(app, ["simulate", str(EXAMPLE), "--html", str(out), "--output", "json"])
    assert res.exit_code == 0, res.stderr
    return out


def test_page_is_self_contained(page: Path):
    text = page.read_text()
    # No network: no external scripts, styles, images or fonts.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "@import" not in text and "url(http" not in text
    assert text.startswith("<!DOCTYPE html>")


@pytest.mark.browser
def test_page_renders_in_chromium(page: Path, tmp_path: Path):
    binary = chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium); the HTML page is not rendered")
    profile = tmp_path / "profile"
    dom = subprocess.run(
        [*chromium_args(binary, profile), "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    ).stdout
    doc = _Collect()
    doc.feed(dom)
    # The legend has one entry per job, in job order, each naming its class.
    legend = doc.with_class("legend-entry")
    jobs = [a["data-job"] for a in legend]
    assert jobs == ["e2e/tier1-pair", "e2e/tier2-quad", "e2e/soft-pair", "e2e/too-wide"]
    cls = {a["data-job"]: a["data-class"] for a in legend}
    # Node cells carry the class of the job running on them: tier2-quad fills s5 (node4..node7).
    cells = {a["data-node"]: (a.get("class") or "").split() for a in doc.with_class("node")}
    assert set(cells) == {f"node{i}" for i in range(8)}
    quad = {n for n, c in cells.items() if cls["e2e/tier2-quad"] in c}
    assert quad in ({"node0", "node1", "node2", "node3"}, {"node4", "node5", "node6", "node7"})
    pair = {n for n, c in cells.items() if cls["e2e/tier1-pair"] in c}
    assert len(pair) == 2
    # Nested domains: 7 HyperNode boxes; the pending list names the waiting job with its reason.
    assert {a["data-hn"] for a in doc.with_class("hn")} == {f"s{i}" for i in range(7)}
    pending = doc.with_class("pending-job")
    assert [a["data-job"] for a in pending] == ["e2e/too-wide"]
    assert "tier 1: best" in dom
    assert 'id="rejected"' in dom

    shot = tmp_path / "page.png"
    subprocess.run(
        [*chromium_args(binary, profile), f"--screenshot={shot}", "--window-size=1400,1000", page.as_uri()],
        capture_output=True,
        timeout=90,
        check=True,
    )
    assert shot.stat().st_size > 10_000  # a real picture, not an empty page
