"""What the filters read of a Node, parsed once when the node is cached."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperplace.kube.requests import resource_list


@dataclass(frozen=True)
class NodeStatic:
    """What the static predicates need from a Node. Hashes by name (the mappings are dicts).

    ``allocatable`` holds milli-units; a node that reports no ``pods`` has no pod slots,
    as in kube-scheduler.
    """

    name: str
    labels: Mapping[str, str] = field(hash=False)
    taints: tuple[dict[str, str], ...] = field(hash=False)  # each {key, value, effect}
    unschedulable: bool
    ready: bool
    allocatable: Mapping[str, int] = field(hash=False)  # milli-units, includes "pods"


def node_static_from_dict(node: Mapping[str, Any]) -> NodeStatic:
    """A NodeStatic from a Node in wire form.

    Allocatable comes from ``status.allocatable`` (falling back to ``status.capacity`` when
    allocatable is absent). A node is ready unless it has a Ready condition whose status
    is not "True" (False or Unknown); a node without conditions counts as ready.
    """
    meta = node.get("metadata") or {}
    name = str(meta.get("name", ""))
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    owner = f"node {name}"
    if status.get("allocatable"):
        alloc = resource_list(owner, "status.allocatable", status.get("allocatable"))
    else:
        alloc = resource_list(owner, "status.capacity", status.get("capacity"))
    taints = tuple(
        {
            "key": str(t.get("key", "")),
            "value": str(t.get("value") or ""),
            "effect": str(t.get("effect", "")),
        }
        for t in spec.get("taints") or []
    )
    ready = True
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            ready = False
    return NodeStatic(
        name=name,
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        taints=taints,
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
        allocatable=alloc,
    )
