"""Nodes that are not ready.

kube-scheduler relies on the ``node.kubernetes.io/not-ready`` taint for this; Volcano's cache
drops such nodes from the session. A node whose Ready condition is False or Unknown is refused
here, as "node(s) were not ready"."""

from __future__ import annotations

from .nodes import NodeStatic
from .plugin import CompiledPod

REASON_NOT_READY = "node(s) were not ready"


class NodeReady:
    """Refuses a node whose Ready condition is not True."""

    name = "NodeReady"

    def filter(self, pod: CompiledPod, node: NodeStatic) -> str | None:
        """None on a ready node."""
        return None if node.ready else REASON_NOT_READY


FILTER = NodeReady()
