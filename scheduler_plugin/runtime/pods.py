"""Which pods are this scheduler's to place, as its informer handlers and reports ask."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hyperplace.api.constants import DEFAULT_SCHEDULER_NAME
from hyperplace.kube.objects import TERMINAL_PHASES


def spec_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """An object's ``spec`` (empty when it has none)."""
    return (obj or {}).get("spec") or {}


def owned(pod: Mapping[str, Any], scheduler_names: Sequence[str]) -> bool:
    """The pod names one of ``scheduler_names`` (Kubernetes' default scheduler when unset)."""
    return spec_of(pod).get("schedulerName", DEFAULT_SCHEDULER_NAME) in scheduler_names


def pending_ours(pod: Mapping[str, Any], scheduler_names: Sequence[str]) -> bool:
    """The pod waits for one of ``scheduler_names``: no node, not finished, not terminating."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return (
        not spec_of(pod).get("nodeName")
        and phase not in TERMINAL_PHASES
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
        and owned(pod, scheduler_names)
    )
