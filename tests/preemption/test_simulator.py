"""`hyperplace simulate` runs preemption: the victims leave in one cycle, the preemptor binds on
the nominated nodes in the next, and both the JSON and `explain` say who went and why there."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from simulator.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "priority-preemption"


def run(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "--output", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_the_urgent_gang_evicts_the_rack_with_one_gang_and_binds_there():
    out = run("simulate", str(EXAMPLE))
    assert out["evictions"] == [f"preempt/train-c-worker-{i}" for i in range(4)]
    urgent = {k: v["node"] for k, v in out["pods"].items() if k.startswith("preempt/urgent-")}
    assert sorted(urgent.values()) == [f"pp-node{i}" for i in range(4, 8)]
    # The two gangs of rack0 were never touched.
    for name in ("train-a", "train-b"):
        assert all(out["pods"][f"preempt/{name}-worker-{i}"]["node"] for i in range(2))
    [pg] = [v for k, v in out["podgroups"].items() if k.startswith("preempt/urgent-")]
    assert pg["phase"] == "Running" and pg["allocatedHyperNode"] == "pp-rack1"


def test_explain_names_the_victims_and_why_that_rack():
    out = run("explain", "preempt/urgent", str(EXAMPLE))
    pre = out["preemption"]
    assert pre["why"].startswith(
        "tier 1: pp-rack1 fits the gang after evicting 4 pods of 1 job(s), 1 gang(s) broken"
    )
    assert [v["pod"] for v in pre["victims"]] == [f"preempt/train-c-worker-{i}" for i in range(4)]
    assert all(v["action"] == "preempt" for v in pre["victims"])


def test_the_table_lists_the_evictions():
    res = CliRunner().invoke(app, ["simulate", str(EXAMPLE)], catch_exceptions=False)
    assert res.exit_code == 0
    assert "Evicted (4 pods)" in res.stdout
    assert "preempt/train-c-worker-0 on pp-node4: preempted by preempt/urgent" in res.stdout
