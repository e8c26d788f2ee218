"""PriorityClass ``preemptionPolicy: Never``: the apiserver's Priority admission copies the
class's value and policy onto each pod, and such a job never evicts anyone for its room (it
waits, and says so)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from simulator.cli import app
from simulator.engine import Simulation
from simulator.loader import load_paths

CONF = """actions: "enqueue, allocate, preempt, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
"""


def pc(name: str, value: int, policy: str | None = None, default: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if policy:
        out["preemptionPolicy"] = policy
    if default:
        out["globalDefault"] = True
    return out


def pod(name: str, cls: str | None, node: str | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}],
        **spec,
    }
    if cls:
        s["priorityClassName"] = cls
    if node:
        s["nodeName"] = node
    group = {"scheduling.k8s.io/group-name": f"pg-{name}"}
    meta = {"name": name, "namespace": "default", "annotations": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": s}


def podgroup(name: str, cls: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 1}
    if cls:
        spec["priorityClassName"] = cls
    meta = {"name": f"pg-{name}", "namespace": "default"}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def cluster(tmp_path: Path, urgent_class: str, extra: list[dict[str, Any]] | None = None) -> Path:
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n0"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        },
        pc("batch", 10, default=True),
        pc("polite", 1000, "Never"),
        pc("urgent", 1000),
        podgroup("running", None),
        pod("running", None, node="n0"),
        podgroup("waiting", urgent_class),
        pod("waiting", urgent_class),
        *(extra or []),
    ]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "volcano-scheduler.conf").write_text(CONF)
    return tmp_path


def simulate(path: Path) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["simulate", str(path), "-o", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_a_class_that_preempts_lower_priority_evicts_the_running_pod(tmp_path):
    out = simulate(cluster(tmp_path, "urgent"))
    assert out["evictions"] == ["default/running"]


def test_a_class_with_preemption_policy_never_waits_and_says_why(tmp_path):
    out = simulate(cluster(tmp_path, "polite"))
    assert out["evictions"] == []
    reason = out["pods"]["default/waiting"]["reason"]
    assert "preempt: pod waiting has preemptionPolicy Never (PriorityClass polite)" in reason


def test_priority_admission_writes_the_class_value_and_policy_on_the_pod(tmp_path):
    sim = Simulation(load_paths([cluster(tmp_path, "polite")]))
    objects = sim.run(cycles=1).objects
    waiting = objects[("Pod", "default", "waiting")]["spec"]
    assert (waiting["priority"], waiting["preemptionPolicy"]) == (1000, "Never")
    # The globalDefault class is given to the pod that names none, as the apiserver does.
    running = objects[("Pod", "default", "running")]["spec"]
    assert (running["priorityClassName"], running["priority"], running["preemptionPolicy"]) == (
        "batch",
        10,
        "PreemptLowerPriority",
    )


def test_a_pod_whose_own_priority_disagrees_with_its_class_is_refused(tmp_path):
    bad = pod("liar", "urgent", priority=5)
    out = simulate(cluster(tmp_path, "urgent", [bad]))
    [rej] = out["rejected"]
    assert rej["name"] == "liar"
    assert "must not be provided in pod spec; priority admission controller computed 1000" in rej["message"]


def test_a_pod_whose_own_policy_disagrees_with_its_class_is_refused(tmp_path):
    bad = pod("sneaky", "polite", preemptionPolicy="PreemptLowerPriority")
    out = simulate(cluster(tmp_path, "urgent", [bad]))
    [rej] = out["rejected"]
    assert rej["name"] == "sneaky"
    assert "priority admission controller computed Never" in rej["message"]
