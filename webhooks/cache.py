"""An AdmissionContext kept current by list-and-watch caches (informers).

The webhook server reads HyperNodes (and, where it may, Jobs) through informers so the
tree checks see the cluster as it is. Building pydantic models for thousands of
HyperNodes on every request would cost more than the request, so the context is rebuilt
only after the cache changed. Until a cache has synced, its part of the context stays
``None``: the checks that need it are skipped rather than run against an empty, wrong
picture (which would warn that every child "does not exist yet").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from hyperplace.api import HyperNode, Job, Queue

from .context import AdmissionContext

log = logging.getLogger("hyperplace.webhooks.cache")


class InformerLike(Protocol):
    """What ``hyperplace.runtime.informer.Informer`` offers and this module uses."""

    store: dict[str, Any]
    synced: asyncio.Event

    def add_handler(
        self,
        on_add: Callable[[Any], None] | None = None,
        on_update: Callable[[Any, Any], None] | None = None,
        on_delete: Callable[[Any], None] | None = None,
    ) -> None: ...


class InformerContext:
    """A callable context source for ``webhooks.server.create_app``."""

    def __init__(
        self,
        hypernodes: InformerLike | None = None,
        jobs: InformerLike | None = None,
        queues: InformerLike | None = None,
    ):
        self._hypernodes = hypernodes
        self._jobs = jobs
        self._queues = queues
        self._dirty = True
        self._ctx = AdmissionContext()
        for informer in (hypernodes, jobs, queues):
            if informer is not None:
                informer.add_handler(self._mark, lambda _old, _new: self._mark(None), self._mark)

    def _mark(self, _obj: Any) -> None:
        self._dirty = True

    @staticmethod
    def _models(
        informer: InformerLike | None, model: type[HyperNode] | type[Job] | type[Queue]
    ) -> Mapping[str, Any] | None:
        if informer is None or not informer.synced.is_set():
            return None
        out: dict[str, Any] = {}
        for obj in list(informer.store.values()):
            try:
                m = model.model_validate(obj)
            except ValidationError:
                # Stored before our schema existed, or written around it: not a tree member
                # we can reason about; the scheduler ignores it the same way.
                log.debug("skipping invalid %s %s", model.__name__, (obj.get("metadata") or {}).get("name"))
                continue
            out[m.key] = m
        return out

    def __call__(self) -> AdmissionContext:
        """The current context (rebuilt only after a cache change or first sync)."""
        synced_now = all(i is None or i.synced.is_set() for i in (self._hypernodes, self._jobs, self._queues))
        if self._dirty or (synced_now and self._ctx.hypernodes is None and self._hypernodes is not None):
            self._ctx = AdmissionContext(
                hypernodes=self._models(self._hypernodes, HyperNode),
                jobs=self._models(self._jobs, Job),
                queues=self._models(self._queues, Queue),
            )
            self._dirty = not synced_now
        return self._ctx
