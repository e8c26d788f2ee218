"""A list-and-watch cache of one resource (client-go's Reflector + Indexer, in asyncio).

* **List, then watch** from the list's resourceVersion, with bookmarks. Every event,
  bookmarks included, advances the tracked resourceVersion, so a reconnect resumes
  exactly where the stream stopped.
* **410 Gone** (an ERROR event with code 410, or ApiError(410)) means the server no
  longer has history that old: we **relist** and *replace* the store, synthesising
  delete notifications for keys that vanished meanwhile (``DeltaFIFO.Replace``) and
  update notifications for objects that changed. The first list asks for
  ``resourceVersion=0`` (served from the watch cache); a relist after 410 asks for ""
  (a consistent read), as client-go's ``relistResourceVersion`` does.
* A watch that ends normally (server timeout) is resumed from the last resourceVersion;
  other failures back off exponentially before the next attempt.
* ``synced`` is set after the first successful list; controllers must wait for every
  informer they read before reconciling (``WaitForCacheSync``).
* Handlers run synchronously in the informer's task and must not block (they usually
  just add a key to a work queue). A raising handler is logged and does not stop the
  informer.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .api import ApiClient, ApiError, Obj, Resource, meta, object_key

log = logging.getLogger(__name__)

IndexFunc = Callable[[Obj], Iterable[str]]


@dataclass
class Handler:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class Informer:
    """Keeps ``store`` (key -> object) in step with the server; see the module docstring."""

    def __init__(
        self,
        api: ApiClient,
        res: Resource,
        namespace: str | None = None,
        *,
        watch_timeout: tuple[int, int] = (300, 600),
        inactivity_timeout: float | None = 600.0,
        backoff: tuple[float, float] = (0.8, 30.0),
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.res = res
        self.namespace = namespace
        self.store: dict[str, Obj] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0  # lists after the first; tests and metrics read it
        self._handlers: list[Handler] = []
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._watch_timeout = watch_timeout
        self._inactivity = inactivity_timeout
        self._backoff = backoff
        self._rng = rng or random.Random()

    # -- reading ----------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        return self.store.get(key)

    def objects(self) -> list[Obj]:
        return list(self.store.values())

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Maintain a secondary index ``value -> keys`` (e.g. pods by owning job)."""
        self._indexers[name] = fn
        index: dict[str, set[str]] = {}
        for key, obj in self.store.items():
            for v in fn(obj):
                index.setdefault(v, set()).add(key)
        self._indices[name] = index

    def by_index(self, name: str, value: str) -> list[Obj]:
        keys = sorted(self._indices.get(name, {}).get(value, ()))
        return [self.store[k] for k in keys if k in self.store]

    def add_handler(
        self,
        on_add: Callable[[Obj], None] | None = None,
        on_update: Callable[[Obj, Obj], None] | None = None,
        on_delete: Callable[[Obj], None] | None = None,
    ) -> None:
        """Register callbacks; objects already in the store are replayed as adds."""
        h = Handler(on_add, on_update, on_delete)
        self._handlers.append(h)
        for obj in list(self.store.values()):
            self._call(h.on_add, obj)

    # -- store updates ----------------------------------------------------------------------

    def _call(self, fn: Callable[..., None] | None, *args: Any) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:
            log.exception("informer %s: handler failed", self.res.plural)

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, fn in self._indexers.items():
            index = self._indices.setdefault(name, {})
            for v in fn(old) if old is not None else ():
                keys = index.get(v)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[v]
            for v in fn(new) if new is not None else ():
                index.setdefault(v, set()).add(key)

    def _upsert(self, obj: Obj) -> None:
        key = object_key(obj)
        old = self.store.get(key)
        self.store[key] = obj
        self._reindex(key, old, obj)
        for h in self._handlers:
            if old is None:
                self._call(h.on_add, obj)
            else:
                self._call(h.on_update, old, obj)

    def _remove(self, obj: Obj) -> None:
        key = object_key(obj)
        old = self.store.pop(key, None)
        self._reindex(key, old, None)
        final = old if old is not None else obj
        for h in self._handlers:
            self._call(h.on_delete, final)

    def replace(self, items: list[Obj], resource_version: str) -> None:
        """Make the store exactly ``items``, notifying adds, changes and vanished keys."""
        fresh = {object_key(o): o for o in items}
        for key in sorted(set(self.store) - set(fresh)):
            self._remove(self.store[key])
        for key, obj in fresh.items():
            old = self.store.get(key)
            if old is None or meta(old).get("resourceVersion") != meta(obj).get("resourceVersion"):
                self._upsert(obj)
        self.resource_version = resource_version

    # -- the loop ---------------------------------------------------------------------------

    async def list_once(self, *, consistent: bool = False) -> None:
        items, rv = await self.api.list(self.res, self.namespace, resource_version="" if consistent else "0")
        if self.synced.is_set():
            self.relists += 1
        self.replace(items, rv)
        self.synced.set()

    async def watch_once(self) -> bool:
        """One watch from ``resource_version``; False when a relist is needed (410)."""
        timeout = self._rng.randint(*self._watch_timeout)
        stream = self.api.watch(
            self.res,
            self.namespace,
            resource_version=self.resource_version,
            timeout_seconds=timeout,
            allow_bookmarks=True,
        )
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._inactivity) as guard:
                async for event in stream:
                    if self._inactivity is not None:
                        # A silent connection (half-open TCP) must not stall the cache.
                        guard.reschedule(loop.time() + self._inactivity)
                    if not self._apply(event):
                        return False
        except ApiError as exc:
            if exc.gone:
                return False
            raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return True

    def _apply(self, event: Obj) -> bool:
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            code = obj.get("code")
            if code == 410:
                return False
            raise ApiError(int(code or 500), str(obj.get("reason", "")), str(obj.get("message", "")))
        rv = meta(obj).get("resourceVersion")
        if etype in ("ADDED", "MODIFIED"):
            self._upsert(obj)
        elif etype == "DELETED":
            self._remove(obj)
        if rv:
            self.resource_version = str(rv)
        return True

    async def run(self) -> None:
        """List and watch until cancelled."""
        failures = 0
        need_list, consistent = True, False
        while True:
            try:
                if need_list:
                    await self.list_once(consistent=consistent)
                    need_list = False
                if not await self.watch_once():
                    log.info(
                        "informer %s: resourceVersion %s too old, relisting",
                        self.res.plural,
                        self.resource_version,
                    )
                    need_list, consistent = True, True
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if isinstance(exc, ApiError) and exc.gone:
                    need_list, consistent = True, True
                delay = min(self._backoff[0] * 2 ** min(failures - 1, 16), self._backoff[1])
                log.warning("informer %s: %s; retrying in %.1fs", self.res.plural, exc, delay)
                await asyncio.sleep(delay * (0.5 + self._rng.random()))


async def wait_for_sync(informers: Iterable[Informer], timeout: float | None = None) -> bool:
    """client-go's WaitForCacheSync: True when every informer has listed once."""
    try:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
        # cancellation that races with completion.
        async with asyncio.timeout(timeout):
            for informer in informers:
                await informer.synced.wait()
    except TimeoutError:
        return False
    return True
