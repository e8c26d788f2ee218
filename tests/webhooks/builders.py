"""Builders shared by the webhook tests: objects and AdmissionReviews as users write them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from hyperplace.api import HyperNode
from webhooks.admission import AdmissionContext

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str) -> list[dict[str, Any]]:
    """Every document of a fixture YAML file."""
    return [d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d]


def hypernode(
    name: str,
    tier: int,
    nodes: tuple[str, ...] = (),
    children: tuple[str, ...] = (),
    tier_name: str | None = None,
) -> dict[str, Any]:
    """A HyperNode dict with exactMatch Node and HyperNode members."""
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def member(kind: str, selector: dict[str, Any]) -> dict[str, Any]:
    """One HyperNode member."""
    return {"type": kind, "selector": selector}


def context_of(*hypernodes: dict[str, Any], **kw: Any) -> AdmissionContext:
    """An AdmissionContext whose cache holds these HyperNode dicts."""
    cache = {h["metadata"]["name"]: HyperNode.model_validate(h) for h in hypernodes}
    return AdmissionContext(hypernodes=cache, **kw)


def job(
    name: str = "train",
    tasks: list[dict[str, Any]] | None = None,
    network_topology: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Volcano Job dict; one 4-replica task ``worker`` unless ``tasks`` is given."""
    body: dict[str, Any] = {
        "tasks": tasks
        if tasks is not None
        else [
            {
                "name": "worker",
                "replicas": 4,
                "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
            }
        ],
        **spec,
    }
    if network_topology is not None:
        body["networkTopology"] = network_topology
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
    }


def task(name: str, replicas: int, **fields: Any) -> dict[str, Any]:
    """A Job task with a minimal pod template."""
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
        **fields,
    }


def review(
    obj: dict[str, Any] | None,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    uid: str = "0f8f7a4e-1",
    **request: Any,
) -> dict[str, Any]:
    """An AdmissionReview request as the apiserver sends it."""
    req: dict[str, Any] = {"uid": uid, "operation": operation, "object": copy.deepcopy(obj), **request}
    if old is not None:
        req["oldObject"] = copy.deepcopy(old)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
