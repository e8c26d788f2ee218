"""Admission reads what changed, not every object again for each arriving one.

Counted, not timed: the work of a simulation on an input four times as large (four times the
nodes, HyperNodes and pods) may grow about fourfold. Admission that looked through every input
object for each pod (the Priority admission's PriorityClasses) or listed every HyperNode for
each arriving HyperNode (the webhooks' caches) grew sixteenfold.
"""

from __future__ import annotations

from typing import Any

import pytest

from simulator.engine import simulate
from simulator.loader import InputObject, Inputs, Source, add_object, finish
from simulator.store import ObjectStore


def cluster(nodes: int, per_leaf: int = 4) -> Inputs:
    """Nodes in regex-membered leaves under one root, and a Volcano Job of nodes/2 pods."""
    objs: list[dict[str, Any]] = []
    leaves = nodes // per_leaf
    for i in range(nodes):
        name = f"n-l{i // per_leaf}-{i % per_leaf}"
        res = {"cpu": "8", "memory": "8Gi", "pods": "110"}
        objs.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": res}}
        )
    for leaf in range(leaves):
        member = {"type": "Node", "selector": {"regexMatch": {"pattern": f"^n-l{leaf}-"}}}
        objs.append(_hypernode(f"leaf{leaf}", 1, [member]))
    children = [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"leaf{i}"}}} for i in range(leaves)
    ]
    objs.append(_hypernode("root", 2, children))
    pods = nodes // 2
    template = {
        "spec": {"containers": [{"name": "w", "image": "x", "resources": {"requests": {"cpu": "8"}}}]}
    }
    objs.append(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "gang", "namespace": "default"},
            "spec": {
                "schedulerName": "volcano",
                "minAvailable": pods,
                "tasks": [{"name": "w", "replicas": pods, "template": template}],
            },
        }
    )
    inputs = Inputs()
    for i, o in enumerate(objs):
        add_object(inputs, o, Source("test", i + 1))
    finish(inputs)
    return inputs


def _hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


def reads(monkeypatch: pytest.MonkeyPatch, nodes: int) -> dict[str, int]:
    """How often a simulation of :func:`cluster` reads an input object's kind, and how many
    stored objects it lists by kind."""
    counts = {"input kinds": 0, "listed": 0}
    kind = InputObject.kind.fget
    of_kind = ObjectStore.of_kind

    def counted_kind(self: InputObject) -> str:
        counts["input kinds"] += 1
        return kind(self)  # type: ignore[misc]

    def counted_of_kind(self: ObjectStore, k: str) -> list[dict[str, Any]]:
        out = of_kind(self, k)
        counts["listed"] += len(out)
        return out

    inputs = cluster(nodes)
    with monkeypatch.context() as m:
        m.setattr(InputObject, "kind", property(counted_kind))
        m.setattr(ObjectStore, "of_kind", counted_of_kind)
        result = simulate(inputs, cycles=1)
    assert len(result.bindings) == nodes // 2
    return counts


def test_four_times_the_input_is_about_four_times_the_reads(monkeypatch: pytest.MonkeyPatch):
    small, large = reads(monkeypatch, 64), reads(monkeypatch, 256)
    for what in small:
        assert large[what] <= 5 * small[what], (what, small[what], large[what])
