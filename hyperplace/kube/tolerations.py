"""Whether a pod tolerates a node's taint, as ``v1.Toleration.ToleratesTaint`` says, and for
how long a NoExecute taint is tolerated (the taint eviction controller's reading of
``tolerationSeconds``). Pure; reads wire objects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def tolerates_taint(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``v1.Toleration.ToleratesTaint``: empty effect and key are wildcards, operator
    ``Exists`` ignores the value, an empty operator means ``Equal``, an unknown operator
    tolerates nothing."""
    effect = str(toleration.get("effect") or "")
    if effect and effect != str(taint.get("effect") or ""):
        return False
    key = str(toleration.get("key") or "")
    if key and key != str(taint.get("key") or ""):
        return False
    operator = str(toleration.get("operator") or "Equal")
    if operator == "Exists":
        return True
    if operator == "Equal":
        return str(toleration.get("value") or "") == str(taint.get("value") or "")
    return False


def toleration_seconds(tolerations: Iterable[Any], taint: Mapping[str, Any]) -> float | None:
    """How long the pod tolerates ``taint``: None when no toleration matches it, ``inf`` when
    one matches without ``tolerationSeconds``, else the shortest matching ``tolerationSeconds``
    (a negative one counts as 0, as the taint eviction controller reads it). A toleration that
    is not an object is skipped."""
    found: float | None = None
    for tol in tolerations:
        if not isinstance(tol, Mapping) or not tolerates_taint(tol, taint):
            continue
        raw = tol.get("tolerationSeconds")
        if raw is None:
            seconds = float("inf")
        else:
            try:
                seconds = max(0.0, float(raw))
            except (TypeError, ValueError):
                seconds = 0.0  # admission refuses it; tolerate it no longer than a bad value says
        found = seconds if found is None else min(found, seconds)
    return found
