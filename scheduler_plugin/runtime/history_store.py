"""Learned run times kept in a ConfigMap, so a restarted scheduler or a new leader goes on from
what the last leader learned instead of from nothing (``model/runtime_history.py``).

The leader reads the ConfigMap (``--runtime-history-configmap``, by default named after its Lease,
``options.configmap_name``, in the Lease's namespace) once when it starts scheduling, and writes
it when runs were recorded since its last write, at most once per ``interval`` and once more when
it stops leading. Only the queues that opt in
(``hyperplace.io/runtime-estimate: history``) are written, so a cluster where none does never
gets the ConfigMap. A ConfigMap that cannot be read as a history is reported (a log line and a
Warning Event on it naming the field) and then overwritten by the next write; scheduling goes on
either way, with what memory holds. A document that would outgrow a ConfigMap (about 1 MiB; many
queues that learn) keeps fewer of the latest runs per queue and size until it fits.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection

from hyperplace.runtime.api import CONFIGMAPS, ApiClient, ApiError, Obj
from scheduler_plugin.model.runtime_history import KEPT, RuntimeHistory

from .events import EventRecorder
from .options import COMPONENT

log = logging.getLogger(__name__)

KEY = "history.json"
DEFAULT_INTERVAL = 60.0
# Under the apiserver's 1 MiB object limit, with room for the metadata.
MAX_BYTES = 900_000


class HistoryStore:
    """Reads and writes one ConfigMap holding a :class:`RuntimeHistory`'s document."""

    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        name: str,
        events: EventRecorder,
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.events = events
        self.interval = interval
        self.clock = clock
        self._written_changes = 0  # history.changes at the last write (or load)
        self._written_at: float | None = None
        self._resource_version: str | None = None

    async def load(self, history: RuntimeHistory) -> None:
        """Replace ``history``'s runs with the ConfigMap's; nothing when it does not exist or
        cannot be read (said in the log). Never raises: scheduling starts either way."""
        self._written_changes = history.changes  # loading records no run
        try:
            cm = await self.api.get(CONFIGMAPS, self.name, self.namespace)
        except Exception as exc:  # a refusal or connection trouble: start from what memory holds
            if not (isinstance(exc, ApiError) and exc.not_found):
                log.warning("runtime history ConfigMap %s/%s not read: %s", self.namespace, self.name, exc)
            return
        self._resource_version = (cm.get("metadata") or {}).get("resourceVersion")
        text = (cm.get("data") or {}).get(KEY)
        try:
            doc = json.loads(text) if text is not None else None
        except ValueError as exc:
            doc = None
            problems = [f"data.{KEY}: not JSON ({exc}); nothing loaded"]
        else:
            problems = history.load(doc) if doc is not None else [f"data.{KEY}: missing; nothing loaded"]
        runs = sum(len(r) for r in history.runs.values())
        log.info("runtime history: %d runs loaded from ConfigMap %s/%s", runs, self.namespace, self.name)
        for p in problems:
            msg = f"runtime history ConfigMap {self.namespace}/{self.name}: {p}"
            log.warning("%s", msg)
            self.events.record(cm, "Warning", "InvalidRuntimeHistory", msg)

    def due(self, history: RuntimeHistory) -> bool:
        """Runs were recorded since the last write and ``interval`` has passed."""
        if history.changes == self._written_changes:
            return False
        return self._written_at is None or self.clock() - self._written_at >= self.interval

    async def save(self, history: RuntimeHistory, queues: Collection[str]) -> None:
        """Write the runs of ``queues`` (the ones that opt in); nothing when no run was recorded
        since the last write. A failed write is logged and tried again at the next one; it
        never raises, so it cannot stop the scheduling loop it runs in."""
        changes = history.changes
        if changes == self._written_changes:
            return
        doc = history.document(queues)
        if not doc["queues"] and self._resource_version is None:
            self._written_changes = changes  # nothing any queue asked to keep
            return
        text, keep = json.dumps(doc, separators=(",", ":"), sort_keys=True), KEPT
        while len(text) > MAX_BYTES and keep > 1:
            keep //= 2
            text = json.dumps(history.document(queues, keep), separators=(",", ":"), sort_keys=True)
        if keep < KEPT:
            log.warning("runtime history: only the latest %d runs per queue and size fit the ConfigMap", keep)
        body: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": COMPONENT},
            },
            "data": {KEY: text},
        }
        try:
            if self._resource_version is None:
                try:
                    out = await self.api.create(CONFIGMAPS, body, self.namespace)
                except ApiError as exc:
                    if not exc.already_exists:
                        raise
                    current = await self.api.get(CONFIGMAPS, self.name, self.namespace)
                    self._resource_version = (current.get("metadata") or {}).get("resourceVersion")
                    out = await self._replace(body)
            else:
                out = await self._replace(body)
        except Exception as exc:  # a refusal or connection trouble: the next write tries again
            log.warning("runtime history ConfigMap %s/%s not written: %s", self.namespace, self.name, exc)
            if isinstance(exc, ApiError) and exc.conflict:
                self._resource_version = None  # re-read at the next write
            return
        self._resource_version = (out.get("metadata") or {}).get("resourceVersion")
        self._written_changes = changes
        self._written_at = self.clock()

    async def _replace(self, body: Obj) -> Obj:
        body["metadata"]["resourceVersion"] = self._resource_version
        return await self.api.replace(CONFIGMAPS, body, self.namespace)
