"""kube-scheduler's TaintToleration plugin: its filter, a taint with effect NoSchedule or
NoExecute keeps a pod off the node unless the pod tolerates it; its score, the PreferNoSchedule
taints the pod does not tolerate (fewer is better)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .nodes import NodeStatic
from .plugin import CompiledPod, Toleration

# Taint effects that keep a pod off a node (PreferNoSchedule only lowers its score).
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")


def compile_tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """The pod's tolerations, canonical and sorted: duplicates and order do not change the
    outcome, and sorting lets more pods share a constraint signature."""
    return tuple(sorted({_canonical_toleration(t) for t in spec.get("tolerations") or []}))


def _canonical_toleration(t: Mapping[str, Any]) -> Toleration:
    # tolerationSeconds is dropped on purpose: it only delays NoExecute eviction.
    return (
        str(t.get("key") or ""),
        str(t.get("operator") or "Equal"),
        str(t.get("value") or ""),
        str(t.get("effect") or ""),
    )


def tolerates(tol: Toleration, key: str, value: str, effect: str) -> bool:
    """``v1.Toleration.ToleratesTaint`` on a canonical ``(key, operator, value, effect)``."""
    t_key, t_op, t_value, t_effect = tol
    if t_effect and t_effect != effect:
        return False
    if t_key and t_key != key:
        return False
    if t_op == "Exists":
        return True
    if t_op == "Equal":
        return t_value == value
    return False  # an operator kube does not know tolerates nothing


def first_untolerated(
    taints: Iterable[Mapping[str, str]], tolerations: tuple[Toleration, ...]
) -> Mapping[str, str] | None:
    """The first taint that keeps the pod off the node, or None."""
    for taint in taints:
        effect = taint.get("effect", "")
        if effect not in SCHEDULING_EFFECTS:
            continue  # PreferNoSchedule only lowers the score
        key, value = taint.get("key", ""), taint.get("value", "")
        if not any(tolerates(t, key, value, effect) for t in tolerations):
            return taint
    return None


def intolerable_prefer_no_schedule(node: NodeStatic, tolerations: tuple[Toleration, ...]) -> int:
    """TaintToleration's Score: the node's PreferNoSchedule taints that none of the pod's
    tolerations of that effect (or of every effect) tolerates (before NormalizeScore)."""
    mine = [t for t in tolerations if t[3] in ("", "PreferNoSchedule")]
    return sum(
        1
        for taint in node.taints
        if taint.get("effect") == "PreferNoSchedule"
        and not any(
            tolerates(t, taint.get("key", ""), taint.get("value", ""), "PreferNoSchedule") for t in mine
        )
    )


def taint_reason(taint: Mapping[str, Any]) -> str:
    """kube-scheduler's TaintToleration message for one taint."""
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value') or ''}}}"


class TaintToleration:
    """Refuses a node with a NoSchedule or NoExecute taint the pod does not tolerate."""

    name = "TaintToleration"

    def filter(self, pod: CompiledPod, node: NodeStatic) -> str | None:
        """None when every scheduling taint of the node is tolerated."""
        taint = first_untolerated(node.taints, pod.tolerations)
        return None if taint is None else taint_reason(taint)


FILTER = TaintToleration()
