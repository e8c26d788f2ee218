"""Machine-readable results: the ``--output json|yaml`` contract of ``hyperplace simulate``.

Key order is fixed (the order of :data:`RESULT_KEYS`), maps are sorted naturally by key
(``pod-2`` before ``pod-10``), lists keep the order things happened in. See
``docs/`` / ``simulator/README.md`` for the field-by-field description.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from hyperplace.api.constants import DEFAULT_SCHEDULER_NAME
from hyperplace.runtime.api import object_key

from .loader import UPSTREAM_PODGROUP
from .render import waiting_lines
from .result import SimResult
from .store import key_of
from .topology import natural_order
from .views import job_views, queue_entries

RESULT_KEYS = ("bindings", "pods", "evictions", "podgroups", "rejected", "created", "updated", "notes")
# Present, right after "podgroups", when the input has Queues of its own (beyond ``default``).
QUEUES_KEY = "queues"


def podgroup_entry(result: SimResult, pg: dict[str, Any], reasons: list[str] | None = None) -> dict[str, Any]:
    """``{phase, allocatedHyperNode, subGroups, conditions, reasons}`` of one PodGroup;
    ``reasons`` are the lines the table prints under "why N pods wait"."""
    key = object_key(pg)
    outcome = result.outcomes.get(key)
    status = pg.get("status") or {}
    phase = status.get("phase") or (getattr(outcome, "phase", None) if outcome else None) or "Pending"
    allocated = getattr(outcome, "allocated_hypernode", None) if outcome else None
    subgroups = dict(getattr(outcome, "subgroups", None) or {}) if outcome else {}
    return {
        "phase": phase,
        "allocatedHyperNode": allocated or None,
        "subGroups": natural_order({str(k): v for k, v in subgroups.items()}),
        "conditions": list(status.get("conditions") or []),
        "reasons": list(reasons or []),
    }


def pending_reason(result: SimResult, pod: dict[str, Any]) -> str:
    """Why a pending pod waits: the scheduler's reason, or why the scheduler never looked."""
    key = object_key(pod)
    reason = result.unschedulable.get(key)
    if reason:
        return reason
    owners = tuple(getattr(result.snapshot, "scheduler_names", None) or (DEFAULT_SCHEDULER_NAME,))
    name = (pod.get("spec") or {}).get("schedulerName", DEFAULT_SCHEDULER_NAME)
    if name not in owners:
        return f"schedulerName {name!r} is not {' or '.join(map(repr, owners))}: left to that scheduler"
    if not result.scheduler_ran:
        return "the scheduler did not run"
    return "not placed this cycle"


def result_dict(result: SimResult) -> dict[str, Any]:
    """The JSON/YAML document of a simulation, keys in contract order."""
    pods: dict[str, Any] = {}
    for p in result.of_kind("Pod"):
        key = object_key(p)
        node = (p.get("spec") or {}).get("nodeName") or None
        phase = (p.get("status") or {}).get("phase") or "Pending"
        entry: dict[str, Any] = {"phase": phase, "node": node}
        if node is None and phase == "Pending":
            entry["reason"] = pending_reason(result, p)
        pods[key] = entry
    reasons = {v.podgroup: waiting_lines(v) for v in job_views(result) if v.waiting}
    podgroups: dict[str, Any] = {}
    for pg in [*result.of_kind("PodGroup"), *result.of_kind(UPSTREAM_PODGROUP)]:  # Volcano's first
        podgroups.setdefault(object_key(pg), podgroup_entry(result, pg, reasons.get(object_key(pg))))
    evictions = list(dict.fromkeys(result.evictions))
    out = {
        "bindings": natural_order(dict(result.bindings)),
        "pods": natural_order(pods),
        "evictions": evictions,
        "podgroups": natural_order(podgroups),
        "rejected": [r.to_dict() for r in result.rejected],
        "created": [result.objects[k] for k in result.created],
        "updated": [result.objects[k] for k in result.updated],
        "notes": list(result.notes),
    }
    assert tuple(out) == RESULT_KEYS
    if any(str((q.get("metadata") or {}).get("name")) != "default" for q in result.of_kind("Queue")):
        keys = list(out)
        at = keys.index("podgroups") + 1
        entries = queue_entries(result)
        out = {k: out[k] for k in keys[:at]} | {QUEUES_KEY: entries} | {k: out[k] for k in keys[at:]}
    return out


def to_json(doc: Any) -> str:
    """Indented JSON, key order kept."""
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str)


def to_yaml(doc: Any) -> str:
    """Block YAML of the same document, key order kept."""
    return yaml.safe_dump(
        json.loads(json.dumps(doc, default=str)), sort_keys=False, allow_unicode=True, width=120
    )


__all__ = [
    "QUEUES_KEY",
    "RESULT_KEYS",
    "key_of",
    "podgroup_entry",
    "queue_entries",
    "result_dict",
    "to_json",
    "to_yaml",
]
