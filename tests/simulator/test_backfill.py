"""The simulator shows time-aware backfill: ``explain`` gives the held gang's estimated start
(the pods it waits for declare ``activeDeadlineSeconds``) and tells a short job that it runs in
the held leaf because it ends before then; a job with a longer limit stays out."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from .conftest import default_queue_holding_after, hypernode_yaml, nodes_yaml

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  annotations: {{scheduling.k8s.io/group-name: {group}}}
spec:
  schedulerName: volcano
  {node}
  {limit}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "4"}}}}}}]
{status}
"""

PODGROUP = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default}}
spec:
  minMember: {min}
  {topology}
"""
NOW = "2025-01-01T00:11:00Z"


def pod(name: str, group: str, node: str | None = None, limit: int | None = None) -> str:
    return POD.format(
        name=name,
        group=group,
        node=f"nodeName: {node}" if node else "",
        limit=f"activeDeadlineSeconds: {limit}" if limit else "",
        status="status: {phase: Running, startTime: '2025-01-01T00:00:00Z'}" if node else "",
    )


def podgroup(name: str, min_member: int, leaf: bool = False) -> str:
    topo = "networkTopology: {mode: hard, highestTierAllowed: 1}" if leaf else ""
    return PODGROUP.format(name=name, min=min_member, topology=topo)


def scenario(write: Callable[[str, str], Path]) -> Path:
    """Two leaves of four 4-CPU nodes; a 4-pod gang (one leaf) waits behind one job in leaf0
    that started at 00:00 with a 1-hour limit, while leaf1 is full of jobs without one; then a
    10-minute job and a 2-hour job arrive."""
    names = [f"n{i}" for i in range(8)]
    docs = [
        default_queue_holding_after("10m"),
        nodes_yaml(names),
        hypernode_yaml("leaf0", 1, names[:4]),
        hypernode_yaml("leaf1", 1, names[4:]),
        podgroup("big", 4, leaf=True),
        *(pod(f"big-{i}", "big") for i in range(4)),
        podgroup("old0", 1),
        pod("old0-0", "old0", "n0", limit=3600),
    ]
    for i, node in enumerate(["n4", "n5", "n6", "n7"], start=1):
        docs += [podgroup(f"old{i}", 1), pod(f"old{i}-0", f"old{i}", node)]
    docs += [podgroup("short", 1), pod("short-0", "short", limit=600)]
    docs += [podgroup("long", 1), pod("long-0", "long", limit=7200)]
    return write("cluster.yaml", "\n---\n".join(docs))


def explain(run_cli: Callable[..., Result], path: Path, job: str) -> dict:
    res = run_cli("explain", job, path, "--output", "json", "--cycles", "1", "--now", NOW)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_explain_gives_the_held_gang_its_estimated_start(run_cli, write) -> None:
    path = scenario(write)
    doc = explain(run_cli, path, "default/big")
    assert doc["reservation"]["hyperNode"] == "leaf0"
    assert doc["reservation"]["estimatedStart"] == "2025-01-01T01:00:00Z"
    held = next(c for c in doc["conditions"] if c["type"] == "HyperNodeReserved")
    assert "estimated start 2025-01-01T01:00:00Z" in held["message"]
    table = run_cli("explain", "default/big", path, "--cycles", "1", "--now", NOW)
    assert "estimated start 2025-01-01T01:00:00Z" in " ".join(table.output.split())


def test_a_short_job_runs_in_the_held_leaf_and_explain_says_it_ends_before_the_gang_starts(
    run_cli, write
) -> None:
    path = scenario(write)
    res = run_cli("simulate", path, "-o", "json", "--cycles", "1", "--now", NOW)
    assert res.exit_code == 0, res.output
    bindings = json.loads(res.output)["bindings"]
    assert bindings["default/short-0"] in {"n1", "n2", "n3"}
    assert "default/long-0" not in bindings
    doc = explain(run_cli, path, "default/short")
    assert len(doc["backfill"]) == 1
    assert "held for default/big" in doc["backfill"][0]
    assert "ends by 2025-01-01T00:21:0" in doc["backfill"][0]
    table = run_cli("explain", "default/short", path, "--cycles", "1", "--now", NOW)
    text = " ".join(table.output.split())  # rich wraps long lines
    assert "Backfill" in text and "before that gang's estimated start 2025-01-01T01:00:00Z" in text
    # The 2-hour job would outlast the gang's start: it waits, told who holds the leaf.
    long = explain(run_cli, path, "default/long")
    assert "backfill" not in long
    assert any("held for the head of the queue: leaf0" in c.get("message", "") for c in long["conditions"])
