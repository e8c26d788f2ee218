"""``hyperplace simulate --output json`` on every bundled example prints, byte for byte, the
committed golden file ``golden/<example>.json``.

The JSON holds nothing of the machine or the wall clock: times are the simulated clock's, uids
and discovered names derive from the input and ``--seed``, paths do not appear. So any byte that
moves is a change of behaviour, which a restructuring must not make.

When a change of output IS intended (and only then), rewrite the golden files and review the diff:

    HYPERPLACE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/simulator/test_golden_json.py
    git diff tests/simulator/golden/
"""

from __future__ import annotations

import difflib
import itertools
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden"
# Every example directory, as tests/examples runs them (each with the CLI's defaults: a
# scheduler configuration it holds is found in the directory itself).
ALL = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
UPDATE = os.environ.get("HYPERPLACE_UPDATE_GOLDEN") == "1"


def simulate_json(example: str) -> str:
    """The stdout of ``hyperplace simulate examples/<example> --output json``."""
    res = CliRunner().invoke(
        app, ["simulate", str(EXAMPLES / example), "--output", "json"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.stderr
    return res.stdout


def test_every_example_has_a_golden_file():
    assert ALL, "no examples found"
    if UPDATE:
        return
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == ALL, (
        "golden files and examples differ; HYPERPLACE_UPDATE_GOLDEN=1 writes the missing ones "
        "(and delete the golden file of a removed example)"
    )


@pytest.mark.parametrize("example", ALL)
def test_simulate_json_is_the_golden_file(example: str):
    out = simulate_json(example)
    golden = GOLDEN / f"{example}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(out, encoding="utf-8")
    assert golden.exists(), f"{golden.name} missing; HYPERPLACE_UPDATE_GOLDEN=1 writes it"
    expected = golden.read_bytes()
    if out.encode() != expected:
        # A unified diff of the lines that moved (pytest's own diff of two long strings is slow).
        diff = difflib.unified_diff(
            expected.decode().splitlines(),
            out.splitlines(),
            f"golden/{golden.name}",
            f"simulate {example} -o json",
            lineterm="",
        )
        pytest.fail("\n".join(itertools.islice(diff, 80)), pytrace=False)
