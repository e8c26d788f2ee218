"""`hyperplace simulate` treats a Volcano Job's pod on a failed node as the controller does: a
Node missing from the input or NotReady (past the grace) loses the pod, a ``PodEvicted`` event,
so ``event: PodEvicted, action: RestartJob`` restarts the Job, whose new pods go to the healthy
nodes; without a policy only the lost pod is replaced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from simulator.cli import app

from .test_job_lifecycle import trainer, updated

RESTART_ON_EVICTION = [{"event": "PodEvicted", "action": "RestartJob"}]


def node(name: str, ready: str = "True") -> dict[str, Any]:
    room = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    # The day before the simulated clock starts: far past any grace.
    condition = {"type": "Ready", "status": ready, "lastTransitionTime": "2025-01-01T00:00:00Z"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": room, "capacity": room, "conditions": [condition]},
    }


def simulate(tmp_path: Path, nodes: list[dict[str, Any]], policies: list[dict[str, Any]]) -> dict[str, Any]:
    """The trainer's 4 pods of 8 cpu run on pp-node4..7; pp-node8 is free."""
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([*nodes, *trainer(policies)]))
    res = CliRunner().invoke(app, ["simulate", str(tmp_path), "--output", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


HEALTHY = ["pp-node4", "pp-node6", "pp-node7", "pp-node8"]


@pytest.mark.parametrize(
    ("nodes", "why"),
    [
        ([node(n) for n in HEALTHY] + [node("pp-node5", ready="False")], "node pp-node5 Ready=False for "),
        ([node(n) for n in HEALTHY], "node pp-node5 is gone"),
    ],
    ids=["not-ready", "deleted"],
)
def test_a_job_whose_node_failed_restarts_on_the_healthy_nodes(
    tmp_path: Path, nodes: list[dict[str, Any]], why: str
) -> None:
    out = simulate(tmp_path, nodes, RESTART_ON_EVICTION)
    status = updated(out, "Job", "trainer")["status"]
    assert (status["retryCount"], status["version"]) == (1, 1)
    assert status["state"]["message"].startswith(f"RestartJob on PodEvicted of pod trainer-worker-1 ({why}")
    assert sorted(out["evictions"]) == [f"preempt/trainer-worker-{i}" for i in range(4)]
    placed = {out["pods"][f"preempt/trainer-worker-{i}"]["node"] for i in range(4)}
    assert placed == set(HEALTHY)


def test_without_a_policy_only_the_lost_pod_is_replaced(tmp_path: Path) -> None:
    out = simulate(tmp_path, [node(n) for n in HEALTHY] + [node("pp-node5", ready="Unknown")], [])
    assert out["evictions"] == ["preempt/trainer-worker-1"]
    assert out["pods"]["preempt/trainer-worker-1"]["node"] == "pp-node8"
    status = updated(out, "Job", "trainer")["status"]
    assert (status["retryCount"], status["version"]) == (0, 0)
