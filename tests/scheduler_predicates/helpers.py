"""Small builders for Pod and Node dicts in wire form."""

from __future__ import annotations

from typing import Any


def make_pod(
    name: str = "p",
    *,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod with one container carrying ``requests``/``limits``, plus extra spec fields."""
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    body: dict[str, Any] = {"containers": [{"name": "c0", "image": "nginx", "resources": resources}]}
    body.update(spec)
    return {"metadata": {"name": name, "namespace": "default"}, "spec": body}


def make_node(
    name: str = "n0",
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: str | None = "True",
    allocatable: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A node like the e2e kwok nodes (cpu 8, memory 8Gi, pods 110) unless told otherwise."""
    status: dict[str, Any] = {
        "allocatable": allocatable
        if allocatable is not None
        else {"cpu": "8", "memory": "8Gi", "pods": "110"}
    }
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": status}


KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
