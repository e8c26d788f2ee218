"""``conformance`` plugin: system-critical pods and kube-system are never preempted or reclaimed.

Volcano's conformance filters the evictees of both actions: a pod whose PriorityClass is
``system-cluster-critical`` or ``system-node-critical``, or that runs in ``kube-system``, is
dropped from the candidates. We also drop pods whose priority value is system-critical
(>= 2,000,000,000), the threshold kube-scheduler uses, so a renamed critical class is safe too
(:func:`~scheduler_plugin.model.jobs.is_critical`, which the eviction actions apply whatever
the plugins say).
"""

from __future__ import annotations

from typing import Any

from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import PREEMPTABLE, RECLAIMABLE
from ..framework.session import Session
from ..model.jobs import TaskInfo, is_critical

SYSTEM_NAMESPACE = "kube-system"


def evictable(actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    """The candidates that are neither system-critical nor in kube-system."""
    return [t for t in candidates if t.namespace != SYSTEM_NAMESPACE and not is_critical(t)]


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> None:
    """Register the filter for preempt and reclaim."""
    ssn.register(PREEMPTABLE, evictable)
    ssn.register(RECLAIMABLE, evictable)
