"""A newcomer follows the README's links: every relative link in the project's Markdown files
names a file that exists, and a ``#section`` in it names a heading of that file (GitHub's anchors)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".venv", ".git", "node_modules", "__pycache__"}
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.M)


def _markdown_files() -> list[Path]:
    return sorted(
        p
        for p in REPO.rglob("*.md")
        if not any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(REPO).parts[:-1])
    )


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(FENCE.sub("", path.read_text())):
        a = _anchor(m.group(2))
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def test_the_readme_and_docs_are_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _markdown_files()}
    assert {"README.md", "docs/architecture.md", "tests/README.md", "bench/README.md"} <= names


def test_every_relative_link_resolves() -> None:
    broken = []
    for path in _markdown_files():
        for m in LINK.finditer(FENCE.sub("", path.read_text())):
            link = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", link):
                continue  # https:, mailto:, ...
            target, _, fragment = link.partition("#")
            resolved = (path.parent / target).resolve() if target else path
            where = f"{path.relative_to(REPO)}: {link}"
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved):
                broken.append(f"{where} (no such heading)")
    assert broken == []
