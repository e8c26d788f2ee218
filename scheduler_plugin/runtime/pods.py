"""Which pods are this scheduler's to place, as its informer handlers and reports ask."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hyperplace.kube.objects import TERMINAL_PHASES
from scheduler_plugin.cache.records import owned_by


def spec_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """An object's ``spec`` (empty when it has none)."""
    return (obj or {}).get("spec") or {}


def pending_ours(pod: Mapping[str, Any], scheduler_names: Sequence[str]) -> bool:
    """The pod waits for one of ``scheduler_names``: no node, not finished, not terminating."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return (
        not spec_of(pod).get("nodeName")
        and phase not in TERMINAL_PHASES
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
        and owned_by(pod, scheduler_names)
    )
