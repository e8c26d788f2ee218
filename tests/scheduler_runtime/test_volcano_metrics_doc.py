"""The README's table of Volcano's series says what a scrape shows: every exported series is
listed as exported, and nothing listed as exported is missing from the code."""

from __future__ import annotations

import re
from pathlib import Path

from scheduler_plugin.runtime.volcano_metrics import EXPORTED

README = Path(__file__).resolve().parents[2] / "manifests" / "README.md"


def table() -> dict[str, str]:
    """series name -> the 'here' column, with `a`, `_b` shorthands expanded."""
    text = README.read_text().split("## Volcano's metric names", 1)[1]
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("| `volcano_"):
            continue
        names_cell, _labels, here = (c.strip() for c in line.strip("|").split("|")[:3])
        names = re.findall(r"`([^`]+)`", names_cell)
        first = names[0]
        for n in names:
            if n.startswith("_"):  # a suffix of the first name's stem
                stem = first.rsplit("_", 2 if first.endswith("_count") else 1)[0]
                if first.endswith(("_milli_cpu",)):
                    stem = first.removesuffix("_milli_cpu")
                n = stem + n
            out[n] = here
    return out


def test_every_exported_series_is_documented_as_exported():
    doc = table()
    for name in EXPORTED:
        assert name in doc, f"{name} missing from manifests/README.md"
        assert doc[name].startswith("exported"), f"{name}: {doc[name]}"


def test_nothing_documented_as_exported_is_missing():
    documented = {n for n, here in table().items() if here.startswith("exported")}
    assert documented == set(EXPORTED)
