"""examples/shared-cluster: what its README says each team sees is what `hyperplace simulate` shows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from simulator.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shared-cluster"


def simulate(path: Path) -> dict:
    res = CliRunner().invoke(app, ["simulate", str(path), "--output", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_research_keeps_its_protected_and_cooling_pods_and_evicts_sweep():
    out = simulate(EXAMPLE)
    research = [e for e in out["evictions"] if e.startswith("research/")]
    assert sorted(research) == ["research/sweep-0", "research/sweep-1"]
    for pod in ("notebook-0", "finetune-0", "data-prep-0", "eval-0"):
        assert out["pods"][f"research/{pod}"]["node"], pod
    assert out["queues"]["research"]["allocated"]["cpu"] == "16"


def test_prod_keeps_its_budgeted_web_pods_and_evicts_nightly():
    out = simulate(EXAMPLE)
    prod = [e for e in out["evictions"] if e.startswith("prod/")]
    assert sorted(prod) == ["prod/nightly-0", "prod/nightly-1"]
    assert {out["pods"][f"prod/release-{i}"]["node"] for i in range(2)} == {"node3"}
    assert all(out["pods"][f"prod/web-{i}"]["node"] == "node2" for i in range(3))
    assert out["queues"]["prod"]["allocated"]["cpu"] == "14"


def test_the_explanations_name_what_protected_which_pods():
    res = CliRunner().invoke(app, ["explain", "research/eval", str(EXAMPLE)], catch_exceptions=False)
    text = " ".join(res.stdout.split())
    assert "1 running pod of lower priority is protected by volcano.sh/preemptable" in text
    assert "protected by cdp (volcano.sh/cooldown-time not yet over)" in text
    res = CliRunner().invoke(app, ["explain", "prod/release", str(EXAMPLE)], catch_exceptions=False)
    assert "3 running pods of lower priority are protected by a PodDisruptionBudget (pdb)" in " ".join(
        res.stdout.split()
    )


def test_without_cdp_and_pdb_the_readme_says_what_would_go_instead(tmp_path):
    copy = tmp_path / "shared"
    shutil.copytree(EXAMPLE, copy)
    conf = copy / "volcano-scheduler.conf"
    conf.write_text(conf.read_text().replace("  - name: cdp\n", "").replace("  - name: pdb\n", ""))
    out = simulate(copy)
    # The cheapest victims then: the finetune pod (one pod, not two) and one web pod (no gang broken).
    assert "research/finetune-0" in out["evictions"]
    assert len([e for e in out["evictions"] if e.startswith("prod/web-")]) == 1
    assert not any(e.startswith("prod/nightly") for e in out["evictions"])
    assert "research/notebook-0" not in out["evictions"]
