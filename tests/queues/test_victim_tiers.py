"""Victim choice as Volcano's tiers make it, then least harm: a tier whose plugins leave no
candidate passes the decision to the next tier (Volcano's ``Session.Reclaimable`` and
``Preemptable``), and between domains that break as many gangs the one that stops fewer pods
wins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from scheduler_plugin.config.scheduler_conf import PluginOption, load_scheduler_config
from scheduler_plugin.cycle import run_session
from scheduler_plugin.framework.extension_points import RECLAIMABLE
from scheduler_plugin.framework.session import Session
from simulator.cli import app
from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, racks, running_gang
from tests.scheduler.builders import build_snapshot, node
from tests.scheduler_conf.defaults import default_conf_text

CONF = default_conf_text("enqueue, allocate, reclaim", volcano=True)


def gpu_pod(name: str, group: str, node_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {
                    "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                    "limits": {"nvidia.com/gpu": "1"},
                },
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": spec,
    }


def two_teams(tmp_path: Path) -> Path:
    """Two equal-weight queues; team A runs eight 1-pod gangs on all eight GPUs, team B has a
    pending 4-pod gang."""
    docs: list[dict[str, Any]] = []
    for i in range(2):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {
                    "allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "4"}
                },
            }
        )
    for q in ("qa", "qb"):
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": q},
                "spec": {"weight": 1, "reclaimable": True},
            }
        )
    for j in range(8):
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"a{j}", "namespace": "default"},
                "spec": {"minMember": 1, "queue": "qa"},
            }
        )
        docs.append(gpu_pod(f"a{j}-0", f"a{j}", node_name=f"n{j // 4}"))
    docs.append(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"minMember": 4, "queue": "qb"},
        }
    )
    docs += [gpu_pod(f"b-{i}", "b") for i in range(4)]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "volcano-scheduler.conf").write_text(CONF)
    return tmp_path


def test_reclaim_gives_the_idle_team_its_half_of_the_gpus(tmp_path):
    res = CliRunner().invoke(
        app, ["simulate", str(two_teams(tmp_path)), "-o", "json"], catch_exceptions=False
    )
    out = json.loads(res.stdout)
    # Four of team A's gangs go (the youngest, all on one node), and B's gang runs there.
    assert out["evictions"] == [f"default/a{j}-0" for j in range(4, 8)]
    assert sorted(out["pods"][f"default/b-{i}"]["node"] for i in range(4)) == ["n1"] * 4
    assert out["queues"]["qa"]["allocated"]["nvidia.com/gpu"] == "4"
    assert out["queues"]["qb"]["allocated"]["nvidia.com/gpu"] == "4"


def _session_with(tiers: list[list[Any]]) -> tuple[Session, list[Any]]:
    nodes = [node("n0", cpu=8)]
    a = running_gang("a", ["n0", "n0"], priority="low")
    snap = build_snapshot(nodes=nodes, pods=a[1], podgroups=[a[0]], priority_classes=PRIORITY_CLASSES)
    conf = load_scheduler_config(CONF)
    ssn = Session(snap=snap, config=conf)
    for i, tier in enumerate(tiers):
        for fn in tier:
            ssn._building = (i, PluginOption(name=f"p{i}"))
            ssn.register(RECLAIMABLE, fn)
    ssn._building = None
    return ssn, snap.jobs["default/a"].tasks


def test_a_tier_that_leaves_no_candidate_passes_the_decision_on():
    ssn, tasks = _session_with([[lambda r, c: []], [lambda r, c: c[:1]]])
    assert [t.key for t in ssn.reclaimable(tasks[0], tasks)] == [tasks[0].key]


def test_a_later_tier_still_narrows_the_first_answer():
    # The queue plugins of tier 2 keep their limits after tier 1 answered.
    ssn, tasks = _session_with([[lambda r, c: c], [lambda r, c: c[1:]]])
    assert [t.key for t in ssn.reclaimable(tasks[0], tasks)] == [tasks[1].key]
    ssn, tasks = _session_with([[lambda r, c: c], [lambda r, c: []]])
    assert ssn.reclaimable(tasks[0], tasks) == []


def test_between_equally_breaking_domains_the_one_stopping_fewer_pods_wins():
    # rack0 runs a young 4-pod gang on its four nodes, rack1 an older 2-pod gang on two of its
    # nodes (both low priority, each needs breaking). A 2-pod urgent rack-limited gang takes
    # rack1: one gang broken either way, but 2 pods stopped instead of 4.
    nodes, hns = racks(n_racks=2, per_rack=4, cpu=4)
    young = running_gang("young", [f"r0n{i}" for i in range(4)], created="2026-01-02T00:00:00Z")
    old = running_gang("old", ["r1n0", "r1n1"], created="2025-01-01T00:00:00Z")
    filler = running_gang("filler", ["r1n2", "r1n3"], priority="high", created="2025-01-01T00:00:00Z")
    urgent = pending_gang("urgent", 2, tier=1, priority="high", cpu=4)
    urgent[0].metadata.creation_timestamp = "2026-01-03T00:00:00Z"
    groups = [young, old, filler, urgent]
    snap = build_snapshot(
        nodes=nodes,
        pods=[p for _, ps in groups for p in ps],
        hypernodes=hns,
        podgroups=[pg for pg, _ in groups],
        priority_classes=PRIORITY_CLASSES,
    )
    res = run_session(snap, PREEMPT_CONF)
    assert sorted(e.victim for e in res.evictions) == ["default/old-t0-0", "default/old-t0-1"]
