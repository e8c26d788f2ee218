"""kube-scheduler's NodeUnschedulable filter: a cordoned node (``spec.unschedulable``) takes no
pod unless the pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``."""

from __future__ import annotations

from .nodes import NodeStatic
from .plugin import CompiledPod
from .taint_toleration import tolerates

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"


class NodeUnschedulable:
    """Refuses a cordoned node to a pod that does not tolerate it."""

    name = "NodeUnschedulable"

    def filter(self, pod: CompiledPod, node: NodeStatic) -> str | None:
        """None on a schedulable node, or when the pod tolerates the unschedulable taint."""
        if node.unschedulable and not any(
            tolerates(t, UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule") for t in pod.tolerations
        ):
            return REASON_UNSCHEDULABLE
        return None


FILTER = NodeUnschedulable()
