"""Adapter of the queue controller (``controller.queue``): every Queue's state and PodGroup counts."""

from __future__ import annotations

from typing import Any

from ..cluster import Cluster


class Queues:
    """The queue controller, over every Queue."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reconcile(self) -> bool:
        """One pass; whether it changed anything."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.queue.status import owned_part, podgroup_queue, queue_status

        c = self.cluster
        by_queue: dict[str, list[dict[str, Any]]] = {}
        for pg in c.of_kind("PodGroup"):
            by_queue.setdefault(podgroup_queue(pg), []).append(pg)
        changed = False
        for q in c.of_kind("Queue"):
            name = str((q.get("metadata") or {}).get("name"))
            want = queue_status(q, by_queue.get(name, []))
            if owned_part(q.get("status")) != want:
                q["status"] = {**(q.get("status") or {}), **want}
                changed = True
        return changed
