"""Node capacity and pod requests as integer milli-units, for occupancy displays.

The scheduler keeps its own books; these are only what the simulator shows (free/total per
node and per HyperNode), with the scheduler's own count of a pod's requests
(:func:`hyperplace.kube.requests.pod_requests`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hyperplace.kube import QuantityError, format_milli, milli_value
from hyperplace.kube.objects import TERMINAL_PHASES
from hyperplace.kube.requests import ResourceError, pod_requests

# Resources that are never worth a column.
_HIDDEN = {"pods", "ephemeral-storage"}


def _milli_map(raw: Mapping[str, Any] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in (raw or {}).items():
        try:
            out[str(k)] = milli_value(v)
        except (QuantityError, TypeError):
            continue  # admission is not ours to do here; an unreadable quantity just does not count
    return out


def node_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    """status.allocatable, else status.capacity."""
    status = node.get("status") or {}
    return _milli_map(status.get("allocatable") or status.get("capacity"))


def pod_node(pod: Mapping[str, Any]) -> str | None:
    """The node a pod is bound to, or None."""
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def pod_phase(pod: Mapping[str, Any]) -> str:
    """The pod's phase (Running when bound without a phase, else Pending)."""
    return str((pod.get("status") or {}).get("phase") or ("Running" if pod_node(pod) else "Pending"))


def used_by_node(pods: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Requests of the non-terminated pods on each node, as the scheduler charges them (a pod
    whose requests the API server would refuse holds nothing there either)."""
    used: dict[str, dict[str, int]] = {}
    for p in pods:
        node = pod_node(p)
        if node is None or pod_phase(p) in TERMINAL_PHASES:
            continue
        try:
            requests = pod_requests(p)
        except ResourceError:
            continue
        acc = used.setdefault(node, {})
        for k, v in requests.items():
            acc[k] = acc.get(k, 0) + v
    return used


def main_resources(allocatable: Iterable[Mapping[str, int]]) -> list[str]:
    """cpu, memory, then extended resources (GPUs, NPUs, ...) that some node offers."""
    names: set[str] = set()
    for a in allocatable:
        names |= {k for k, v in a.items() if v > 0}
    names -= _HIDDEN
    names = {n for n in names if not n.startswith("hugepages-")}
    ordered = [n for n in ("cpu", "memory") if n in names]
    return ordered + sorted(names - {"cpu", "memory"})


def short_name(resource: str) -> str:
    """``nvidia.com/gpu`` -> ``gpu``, ``memory`` -> ``mem`` for compact columns."""
    return "mem" if resource == "memory" else resource.rpartition("/")[2]


def format_free(resource: str, free: int, total: int) -> str:
    """``cpu 4/8`` (free/total)."""
    return f"{short_name(resource)} {format_milli(resource, max(free, 0))}/{format_milli(resource, total)}"
