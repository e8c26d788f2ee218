"""The ``resourcequota`` plugin: a PodGroup whose minResources would go past a ResourceQuota of
its namespace stays Pending, and the reason names the quota; within the quota it is admitted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from simulator.cli import app

CONF = """actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: resourcequota
- plugins:
  - name: predicates
  - name: proportion
"""


def group(name: str, cpu: str, ns: str = "team-a") -> list[dict[str, Any]]:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": 1, "minResources": {"cpu": cpu}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-0",
            "namespace": ns,
            "annotations": {"scheduling.k8s.io/group-name": name},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        },
    }
    return [pg, pod]


def quota(hard: dict[str, str], used: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "team-a-quota", "namespace": "team-a"},
        "spec": {"hard": hard},
    }
    if used is not None:
        out["status"] = {"hard": hard, "used": used}
    return out


def simulate(tmp_path: Path, docs: list[dict[str, Any]], conf: str = CONF) -> dict[str, Any]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all([node, *docs]))
    (tmp_path / "volcano-scheduler.conf").write_text(conf)
    res = CliRunner().invoke(app, ["simulate", str(tmp_path), "-o", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_a_podgroup_over_its_namespace_quota_stays_pending_naming_the_quota(tmp_path):
    out = simulate(tmp_path, [quota({"requests.cpu": "4"}), *group("big", "6")])
    assert out["podgroups"]["team-a/big"]["phase"] == "Pending"
    reason = out["pods"]["team-a/big-0"]["reason"]
    assert (
        "resource quota team-a/team-a-quota insufficient: requests.cpu requested 6, used 0, limited 4"
        in reason
    )


def test_within_the_quota_it_is_admitted_and_runs(tmp_path):
    out = simulate(tmp_path, [quota({"requests.cpu": "4"}), *group("small", "3")])
    assert out["pods"]["team-a/small-0"]["node"] == "n0"


def test_what_the_quota_has_used_and_what_the_session_admitted_count(tmp_path):
    # 2 of 4 used by others (status.used also counts mid's own pod, 3, as the quota admitted it):
    # a 3-cpu group is refused.
    out = simulate(tmp_path, [quota({"cpu": "4"}, used={"cpu": "5"}), *group("mid", "3")])
    assert out["podgroups"]["team-a/mid"]["phase"] == "Pending"
    assert "cpu requested 3, used 2, limited 4" in out["pods"]["team-a/mid-0"]["reason"]
    # Its own pod alone in used: admitted (Volcano would count it twice and refuse).
    out = simulate(tmp_path, [quota({"cpu": "4"}, used={"cpu": "3"}), *group("mid", "3")])
    assert out["podgroups"]["team-a/mid"]["phase"] == "Running"
    out = simulate(tmp_path, [quota({"cpu": "4"}, used={"cpu": "5"}), *group("mid", "3")])
    assert out["podgroups"]["team-a/mid"]["phase"] == "Pending"
    # Two 3-cpu groups against 4: the first is admitted, the second waits.
    out = simulate(tmp_path, [quota({"requests.cpu": "4"}), *group("one", "3"), *group("two", "3")])
    phases = {k: v["phase"] for k, v in out["podgroups"].items()}
    assert sorted(phases.values()) == ["Pending", "Running"]


def test_other_namespaces_are_not_limited(tmp_path):
    out = simulate(tmp_path, [quota({"requests.cpu": "4"}), *group("elsewhere", "6", ns="team-b")])
    assert out["pods"]["team-b/elsewhere-0"]["node"] == "n0"


def test_without_the_plugin_quotas_are_not_read(tmp_path):
    out = simulate(
        tmp_path,
        [quota({"requests.cpu": "4"}), *group("big", "6")],
        CONF.replace("  - name: resourcequota\n", ""),
    )
    assert out["pods"]["team-a/big-0"]["node"] == "n0"
