"""The queue Command controller: an informer and a work queue around :mod:`controller.queue.command`.

Key ``namespace/name``. A ``bus.volcano.sh`` Command targeting a Queue (what ``vcctl queue
operate --action open|close`` creates) is judged by :func:`controller.queue.command.judge`,
deleted (with a uid precondition), and only then its action handed to the queue's reconcile
(:class:`controller.queue.sync.QueueController`), which applies it with the status patch; a
dropped Command (unknown action, missing queue) is deleted with a log line saying why.

Deleting first, as Volcano does, applies a command at most once: a Command seen twice (a
re-list, a restart) finds nothing left to delete and is skipped. The accepted action is kept
in memory and retried with the queue's backoff until its status patch lands; a crash between
the delete and that patch loses it (Volcano accepts the same), and the user, seeing the
Command gone and the state unchanged, runs ``vcctl queue operate`` again. One worker serves
Commands, so they apply in the order they were created.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controller.kube_io import KubeIO
from hyperplace.api import Command
from hyperplace.pki import commandmark
from hyperplace.runtime.api import COMMANDS, QUEUES, ApiError, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.workqueue import WorkQueue

from .command import judge
from .sync import PendingAction, QueueController

log = logging.getLogger(__name__)


class CommandController:
    """Serves queue Commands in the order they came; see the module docstring."""

    def __init__(
        self,
        io: KubeIO,
        commands: Informer,
        queues: QueueController,
        *,
        command_key: bytes | None,
        accept_unadmitted_commands: bool,
    ) -> None:
        self.io = io
        self.commands = commands
        self.queues = queues
        # Commands are obeyed only with a valid admission marker made with this key (see
        # controller.queue.command), unless unadmitted ones are accepted.
        self.command_key = command_key
        self.accept_unadmitted = accept_unadmitted_commands
        self.queue: WorkQueue[str] = WorkQueue(name="commands")
        self._nonces = commandmark.NonceLog()
        self._wire()

    def _wire(self) -> None:
        def command_event(o: Obj) -> None:
            # Volcano's filter (IsQueueReference): only Commands targeting a Queue are ours.
            target = o.get("target") or {}
            if (
                isinstance(target, Mapping)
                and target.get("kind") == "Queue"
                and target.get("apiVersion") == QUEUES.api_version
            ):
                self.queue.add(f"{meta(o).get('namespace')}/{meta(o).get('name')}")

        self.commands.add_handler(command_event, lambda _old, new: command_event(new), lambda _o: None)

    async def reconcile(self, key: str) -> None:
        """Serve one queue Command: delete it, then hand its action to the queue's reconcile
        (or drop it, saying why). See the module docstring for the order."""
        obj = self.commands.get(key)
        if obj is None:
            return  # deleted: by us (already served) or by its user
        cmd = Command.model_validate(obj)
        if cmd.metadata.deletion_timestamp:
            return
        target = cmd.target_queue()
        if target is None:
            return  # not a queue's Command (a Job's is not served here)
        exists = self.queues.queue_objs.get(target) is not None or await self.queues.queue_exists(target)
        verdict = judge(cmd, lambda _q: exists, self._not_admitted(obj))
        if verdict is None:
            return
        ns, name = cmd.namespace, cmd.name
        try:
            await self.io.api.delete(COMMANDS, name, ns, uid=cmd.metadata.uid)
        except ApiError as exc:
            if exc.not_found:
                return  # seen twice: the first sighting deleted and applied it
            if exc.conflict:
                return  # the name now holds a newer Command; its own event queues it
            raise
        self.io.wrote("commands", "delete")
        outcomes = self.io.metrics.commands
        if verdict.dropped:
            log.warning(
                "command %s (%s on queue %s) deleted without effect: %s",
                key,
                verdict.action or "no action",
                verdict.queue,
                verdict.reason,
            )
            outcomes.labels(verdict.action or "", "dropped").inc()
            return
        nonce = None if self.accept_unadmitted else commandmark.nonce_of(obj)
        if nonce is not None and not self._nonces.use(*nonce):
            # Checked once the Command is deleted, so a retried reconcile is not taken for it.
            log.warning("command %s deleted without effect: its admission marker was used already", key)
            outcomes.labels(verdict.action, "dropped").inc()
            return
        outcomes.labels(verdict.action, "accepted").inc()
        self.queues.accept(verdict.queue, PendingAction(verdict.action, key))

    def _not_admitted(self, obj: Mapping[str, Any]) -> str | None:
        """Why a queue Command may not be obeyed (see controller.queue.command); None: it may."""
        if self.accept_unadmitted:
            return None
        if self.command_key is None:
            return "this controller has no --command-key-file to check admission markers with"
        return commandmark.verify(self.command_key, obj)
