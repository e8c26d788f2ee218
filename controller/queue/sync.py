"""The queue controller: informers and a work queue around :mod:`controller.queue.status`.

Key ``name``. A reconcile computes :func:`controller.queue.status.queue_status`, the queue's
state and its PodGroup counts per phase, and patches them when they differ (the scheduler
owns ``status.allocated``; it is never touched here). PodGroup events requeue the queue they
name (and the one they named before); queue events requeue the queue.

The action of a queue Command the Command controller (:mod:`controller.queue.command_sync`)
accepted is kept here, in memory, until a status patch applies it; it is retried with the
queue's backoff until then.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from controller.kube_io import KubeIO
from hyperplace.runtime.api import QUEUES, ApiError, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.workqueue import WorkQueue

from .status import owned_part, podgroup_queue, queue_status

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class PendingAction:
    """A queue Command's action, accepted (its Command deleted) and not yet applied."""

    action: str
    command: str  # namespace/name of the Command it came from, for log lines


class QueueController:
    """Queue state and PodGroup counts, and accepted Commands' actions; see the module docstring."""

    def __init__(self, io: KubeIO, queue_objs: Informer, podgroups: Informer) -> None:
        self.io = io
        self.queue_objs = queue_objs
        self.podgroups = podgroups
        self.queue: WorkQueue[str] = WorkQueue(name="queues")
        # queue name -> the action of its last accepted Command, until a status patch applies it.
        self.queue_actions: dict[str, PendingAction] = {}
        self._wire()

    def _wire(self) -> None:
        # A PodGroup counts in the queue it names.
        self.podgroups.add_index("queue", lambda o: [podgroup_queue(o)])

        def pg_queue(o: Obj) -> None:
            self.queue.add(podgroup_queue(o))

        def pg_queue_changed(old: Obj, new: Obj) -> None:
            if podgroup_queue(old) != podgroup_queue(new):
                pg_queue(old)
            if (old.get("status") or {}).get("phase") != (new.get("status") or {}).get(
                "phase"
            ) or podgroup_queue(old) != podgroup_queue(new):
                pg_queue(new)

        self.podgroups.add_handler(pg_queue, pg_queue_changed, pg_queue)

        def queue_event(o: Obj) -> None:
            self.queue.add(str(meta(o).get("name")))

        def queue_changed(old: Obj, new: Obj) -> None:
            # The scheduler's allocated writes change nothing the controller computes.
            if owned_part(old.get("status")) != owned_part(new.get("status")) or old.get("spec") != new.get(
                "spec"
            ):
                queue_event(new)

        self.queue_objs.add_handler(queue_event, queue_changed, lambda _o: None)

    def accept(self, name: str, pending: PendingAction) -> None:
        """Hand an accepted Command's action to the queue's next reconcile (a newer one replaces it)."""
        self.queue_actions[name] = pending
        self.queue.add(name)

    async def queue_exists(self, name: str) -> bool:
        """Asks the API server: a queue created a moment before its Command may not have
        reached the informer yet, and dropping the Command as "not found" would lose it."""
        try:
            await self.io.api.get(QUEUES, name)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def reconcile(self, name: str) -> None:
        """State and PodGroup counts of one queue, patched when they differ, with the action
        of an accepted Command applied (and forgotten once its patch landed)."""
        pending = self.queue_actions.get(name)
        obj = self.queue_objs.get(name)
        commands = self.io.metrics.commands
        if obj is None:
            if pending is not None and await self.queue_exists(name):
                self.queue.add_rate_limited(name)  # not in the cache yet: wait for it
                return
            if pending is not None:
                del self.queue_actions[name]
                log.warning(
                    "queue %s was deleted before %s of command %s was applied; dropped",
                    name,
                    pending.action,
                    pending.command,
                )
                commands.labels(pending.action, "dropped").inc()
            return
        action = pending.action if pending is not None else None
        want = queue_status(obj, self.podgroups.by_index("queue", name), action)
        have = owned_part(obj.get("status"))
        if have != want:
            # Only what changed: a counts update never rewrites the state it read.
            body: dict[str, Any] = {"status": {k: v for k, v in want.items() if have.get(k) != v}}
            if have.get("state") != want["state"]:
                # A state change is computed from the state read; on a stale read (our own
                # last write not seen yet) it would undo that write, so it is conditional:
                # 409 Conflict, and the retry reads the newer object.
                body["metadata"] = {"resourceVersion": meta(obj).get("resourceVersion")}
            await self.io.status_writer.patch_status(QUEUES, name, body, None)
            self.io.wrote("queues", "patch-status")
        if pending is not None:
            log.info(
                "queue %s: %s (command %s): state %s -> %s",
                name,
                pending.action,
                pending.command,
                have.get("state"),
                want["state"],
            )
            commands.labels(pending.action, "applied").inc()
            # A newer Command accepted meanwhile stays: its key is queued again already.
            if self.queue_actions.get(name) is pending:
                del self.queue_actions[name]
