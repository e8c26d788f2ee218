"""The simulator shows a head-of-queue reservation: ``explain`` names the held HyperNode, the
tree marks it, and the small jobs keep landing outside it."""

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


def pod(name: str, group: str, node: str | None = None) -> str:
    return POD.format(
        name=name,
        group=group,
        node=f"nodeName: {node}" if node else "",
        status="status: {phase: Running}" if node else "",
    )


def podgroup(name: str, min_member: int, leaf: bool = False) -> str:
    topo = "networkTopology: {mode: hard, highestTierAllowed: 1}" if leaf else ""
    return PODGROUP.format(name=name, min=min_member, topology=topo)


def scenario(write: Callable[[str, str], Path]) -> Path:
    """Two leaves of four 4-CPU nodes; a 4-pod gang (one leaf, whole nodes) waits behind one
    running job in leaf0 and two in leaf1; three one-node jobs arrive with it."""
    names = [f"n{i}" for i in range(8)]
    docs = [
        default_queue_holding_after("10m"),
        nodes_yaml(names),
        hypernode_yaml("leaf0", 1, names[:4]),
        hypernode_yaml("leaf1", 1, names[4:]),
        podgroup("big", 4, leaf=True),
        *(pod(f"big-{i}", "big") for i in range(4)),
    ]
    for i, node in enumerate(["n0", "n4", "n5"]):
        docs += [podgroup(f"old{i}", 1), pod(f"old{i}-0", f"old{i}", node)]
    for i in range(3):
        docs += [podgroup(f"s{i}", 1), pod(f"s{i}-0", f"s{i}")]
    return write("cluster.yaml", "\n---\n".join(docs))


def explain(run_cli: Callable[..., Result], path: Path, *extra: str) -> dict:
    res = run_cli("explain", "default/big", path, "--output", "json", "--cycles", "1", *extra)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_explain_shows_the_held_leaf_once_the_gang_waited_past_the_threshold(run_cli, write) -> None:
    path = scenario(write)
    # Inputs are stamped from 2025-01-01T00:00:00Z on. Five minutes later nothing is held.
    assert "reservation" not in explain(run_cli, path, "--now", "2025-01-01T00:05:00Z")
    # Eleven minutes later (the clock reads --now in cycle 1): leaf0 (one node to drain) is held.
    doc = explain(run_cli, path, "--now", "2025-01-01T00:11:00Z")
    assert doc["reservation"]["hyperNode"] == "leaf0"
    assert doc["reservation"]["since"].startswith("2025-01-01T00:11:")
    held = [c for c in doc["conditions"] if c["type"] == "HyperNodeReserved"]
    assert held and "HyperNode leaf0 is held" in held[0]["message"]
    table = run_cli("explain", "default/big", path, "--cycles", "1", "--now", "2025-01-01T00:11:00Z")
    assert "HyperNodeReserved" in table.output


def test_simulate_places_small_jobs_outside_the_held_leaf_and_the_html_marks_it(
    run_cli, write, tmp_path
) -> None:
    path = scenario(write)
    page = tmp_path / "out.html"
    res = run_cli(
        "simulate", path, "-o", "json", "--cycles", "1", "--now", "2025-01-01T00:11:00Z", "--html", page
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    placed = {p: n for p, n in doc["bindings"].items() if p.startswith("default/s")}
    # leaf1 has two free nodes: two small jobs run there, the third waits; leaf0 is left alone.
    assert sorted(placed.values()) == ["n6", "n7"]
    assert "held for default/big" in page.read_text()
    tree = run_cli("simulate", path, "--cycles", "1", "--now", "2025-01-01T00:11:00Z")
    assert "held for default/big" in tree.output
