"""``conformance`` plugin: system-critical pods and kube-system are never preempted or reclaimed.

Volcano's conformance filters the evictees of both actions: a pod whose PriorityClass is
``system-cluster-critical`` or ``system-node-critical``, or that runs in ``kube-system``, is
dropped from the candidates. We also drop pods whose priority value is system-critical
(>= 2,000,000,000), the threshold kube-scheduler uses, so a renamed critical class is safe too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..algorithms.victims import CRITICAL_PRIORITY_CLASSES, SYSTEM_CRITICAL_PRIORITY
from ..model.jobs import TaskInfo
from .gang import _enabled
from .tiers import tier_list

if TYPE_CHECKING:
    from ..framework.session import Session

SYSTEM_NAMESPACE = "kube-system"


def evictable(actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    """The candidates that are neither system-critical nor in kube-system."""
    return [
        t
        for t in candidates
        if t.namespace != SYSTEM_NAMESPACE
        and t.priority_class not in CRITICAL_PRIORITY_CLASSES
        and t.priority < SYSTEM_CRITICAL_PRIORITY
    ]


def register(ssn: Session, args: dict[str, Any], opt: Any) -> None:
    """Register the filter for preempt and reclaim (honouring enablePreemptable/enableReclaimable)."""
    if _enabled(opt, "enablePreemptable"):
        tier_list(ssn.preemptable_fns, ssn).append(evictable)
    if _enabled(opt, "enableReclaimable"):
        tier_list(ssn.reclaimable_fns, ssn).append(evictable)
