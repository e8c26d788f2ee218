"""The real entry point in a subprocess: streams, exit codes, no progress bar when piped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "volcano-e2e"


def hyperplace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from simulator.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_simulate_json_on_stdout_nothing_on_stderr():
    res = hyperplace("simulate", str(EXAMPLE), "--output", "json")
    assert res.returncode == 0
    assert res.stderr == ""  # no progress bar, no warnings for this input
    doc = json.loads(res.stdout)
    assert list(doc) == [
        "bindings",
        "pods",
        "evictions",
        "podgroups",
        "rejected",
        "created",
        "updated",
        "notes",
    ]


def test_table_when_piped_has_no_control_codes():
    res = hyperplace("simulate", str(EXAMPLE))
    assert res.returncode == 0
    assert "\x1b[" not in res.stdout and "\x1b[" not in res.stderr
    assert "Job e2e/too-wide" in res.stdout
    # Plain text for pasting and diffing: no padding at line ends.
    assert not [ln for ln in res.stdout.splitlines() if ln != ln.rstrip()]


def test_errors_go_to_stderr_with_exit_2(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Node\nmetadata: {name: [x\n")
    res = hyperplace("simulate", str(bad))
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.startswith(f"error: {bad}:")
    assert len(res.stderr.strip().splitlines()) == 1


def test_output_does_not_depend_on_hash_seed():
    example = EXAMPLE.parent / "topograph-discovery"
    outs = set()
    for seed in ("1", "2"):
        res = subprocess.run(
            [
                sys.executable,
                "-c",
                "from simulator.cli import main; main()",
                "simulate",
                str(example),
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert res.returncode == 0
        outs.add(res.stdout)
    assert len(outs) == 1
