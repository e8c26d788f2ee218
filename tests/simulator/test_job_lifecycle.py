"""`hyperplace simulate` restarts a Volcano Job per its lifecycle policy: a training Job
evicted by an urgent gang's preemption comes back whole, as a new version, on Volcano's rule
``event: PodEvicted, action: RestartJob``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from simulator.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "priority-preemption"
UID = "5e1f0000-0000-4000-8000-00000000000a"


def trainer(policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A 4-pod low-priority training Job already running on rack 1 (pp-node4..7)."""
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "trainer", "namespace": "preempt", "uid": UID},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 4,
            "priorityClassName": "training-low",
            "policies": policies,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 4,
                    "template": {
                        "spec": {
                            "priorityClassName": "training-low",
                            "containers": [
                                {"name": "w", "image": "t", "resources": {"requests": {"cpu": "8"}}}
                            ],
                        }
                    },
                }
            ],
        },
    }
    stamp = {
        "volcano.sh/job-name": "trainer",
        "volcano.sh/task-spec": "worker",
        "volcano.sh/job-version": "0",
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"trainer-worker-{i}",
                "namespace": "preempt",
                "labels": {**stamp, "volcano.sh/task-index": str(i)},
                "annotations": {**stamp, "scheduling.k8s.io/group-name": f"trainer-{UID}"},
                "ownerReferences": [
                    {
                        "apiVersion": "batch.volcano.sh/v1alpha1",
                        "kind": "Job",
                        "name": "trainer",
                        "uid": UID,
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "schedulerName": "volcano",
                "nodeName": f"pp-node{4 + i}",
                "priorityClassName": "training-low",
                "containers": [{"name": "w", "image": "t", "resources": {"requests": {"cpu": "8"}}}],
            },
            "status": {"phase": "Running"},
        }
        for i in range(4)
    ]
    return [job, *pods]


def simulate(tmp_path: Path, policies: list[dict[str, Any]]) -> dict[str, Any]:
    """The priority-preemption example with the trainer in place of its 4-pod gang on rack 1:
    the urgent gang preempts the rack where the fewest gangs break, the trainer's."""
    for name in ("00-cluster.yaml", "00-namespaces.yaml", "20-urgent-job.yaml", "volcano-scheduler.conf"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    running = [d for d in yaml.safe_load_all((EXAMPLE / "10-running.yaml").read_text()) if d]
    kept = [d for d in running if not d["metadata"]["name"].startswith("train-c")]
    (tmp_path / "10-running.yaml").write_text(yaml.safe_dump_all(kept + trainer(policies)))
    res = CliRunner().invoke(app, ["simulate", str(tmp_path), "--output", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def updated(out: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in out["updated"] if o["kind"] == kind and o["metadata"]["name"] == name)


def test_a_preempted_training_job_restarts_whole_as_a_new_version(tmp_path: Path) -> None:
    out = simulate(tmp_path, [{"event": "PodEvicted", "action": "RestartJob"}])
    assert sorted(out["evictions"]) == [f"preempt/trainer-worker-{i}" for i in range(4)]
    status = updated(out, "Job", "trainer")["status"]
    assert (status["retryCount"], status["version"], status["state"]["phase"]) == (1, 1, "Pending")
    assert status["state"]["message"].startswith("RestartJob on PodEvicted of pod trainer-worker-")
    # Its pods are back, of version 1, waiting for room; the urgent gang runs on rack 1.
    pods = {o["metadata"]["name"]: o for o in out["updated"] if o["kind"] == "Pod"}
    assert {
        n: p["metadata"]["labels"]["volcano.sh/job-version"] for n, p in pods.items() if "trainer" in n
    } == {f"trainer-worker-{i}": "1" for i in range(4)}
    assert all(out["pods"][f"preempt/trainer-worker-{i}"]["node"] is None for i in range(4))
    assert updated(out, "Job", "urgent")["status"]["state"]["phase"] == "Running"
    assert f"preempt/trainer-{UID}" in out["podgroups"]


def test_without_a_policy_the_preempted_pods_are_only_recreated(tmp_path: Path) -> None:
    out = simulate(tmp_path, [])
    status = updated(out, "Job", "trainer")["status"]
    assert (status["retryCount"], status["version"]) == (0, 0)
