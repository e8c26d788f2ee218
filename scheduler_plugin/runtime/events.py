"""Kubernetes Events with aggregation and series, as client-go's recorder and correlator do it.

The scheduler says the same thing about an unschedulable pod every cycle. One Event object
per (object, type, reason, series) carries it: the first occurrence creates it, repeats raise
``count`` and ``lastTimestamp`` (and carry the latest ``message``, which may change within a
series: client-go's aggregator folds "similar" events, differing only in message, the same way).
Repeats are folded locally and written at most once per ``min_interval`` per Event (client-go's
spam filter lets one write through per 5 minutes per object once its burst is spent), so a pod
that waits an hour costs a dozen patches, not one per cycle. Every write also takes a token of
one client-side bucket (``qps``/``burst``): a burst of news waits, folded, instead of flooding
the apiserver.

The Event name is derived from the object's UID and a hash of the type, reason and series key,
so a restarted scheduler finds its predecessor's Event (create answers AlreadyExists) and keeps
counting on it instead of starting a second one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import EVENTS, ApiClient, ApiError, Obj, meta
from hyperplace.runtime.workqueue import TokenBucket

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024  # the API server refuses longer event messages


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis marker when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def own_pod_reference() -> Obj | None:
    """This process's own Pod (``POD_NAME``/``POD_NAMESPACE``, set by the Deployment) as an
    Event's involved object, for news about the process itself (a refused configuration
    file); None outside a Pod."""
    name, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
    if not name or not namespace:
        return None
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}}


class EventMetrics(Protocol):
    """The counters the recorder keeps (see :class:`~.metrics.Metrics`)."""

    @property
    def folded(self) -> Any: ...

    @property
    def event_writes(self) -> Any: ...


@dataclass
class _Record:
    name: str
    namespace: str
    count: int  # occurrences known to the API server
    unsent: int  # occurrences folded locally since the last write
    last_write: float
    created: bool
    message: str = ""  # the message the API server holds


class EventRecorder:
    """Writes deduplicated core/v1 Events; call :meth:`record`, then :meth:`flush`."""

    def __init__(
        self,
        api: ApiClient,
        component: str,
        instance: str,
        *,
        min_interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], str] = rfc3339,
        max_records: int = 50_000,
        qps: float = 0.0,
        burst: int = 100,
        metrics: EventMetrics | None = None,
    ) -> None:
        self.api = api
        self.component, self.instance = component, instance
        self.min_interval = min_interval
        self._clock, self._now = clock, now
        self._max = max_records
        self._bucket = TokenBucket(qps, max(1, burst)) if qps > 0 else None
        self._metrics = metrics
        self.enabled = True  # False: record nothing (a benchmark's binds-only floor)
        self._records: dict[tuple[str, str, str, str], _Record] = {}
        self._dirty: dict[tuple[str, str, str, str], tuple[Obj, str, str, str]] = {}

    @staticmethod
    def event_name(obj: Mapping[str, Any], etype: str, reason: str, series: str) -> str:
        """Deterministic per (object UID, type, reason, series key)."""
        m = meta(obj)
        digest = hashlib.sha256(f"{m.get('uid')}\0{etype}\0{reason}\0{series}".encode()).hexdigest()[:16]
        return f"{str(m.get('name', 'object'))[:200]}.{digest}"

    def record(
        self,
        obj: Mapping[str, Any],
        etype: str,
        reason: str,
        message: str,
        *,
        series: str | None = None,
        repeats: bool = True,
    ) -> None:
        """Note one occurrence; it reaches the API at the next :meth:`flush`. Occurrences with
        the same ``series`` key (default: the message) are one Event whose message is the
        latest one's. ``repeats`` False: only the first occurrence is written (another object
        carries the count, as a PodGroup's series does for the pods of its gang)."""
        if not self.enabled:
            return
        message = truncate(message, MAX_MESSAGE)
        series = message if series is None else series
        key = (str(meta(obj).get("uid") or ""), etype, reason, series)
        rec = self._records.get(key)
        if rec is not None and not repeats:
            return
        if rec is None:
            if len(self._records) >= self._max:
                self._records.pop(next(iter(self._records)))  # oldest first: dicts keep order
            m = meta(obj)
            rec = _Record(
                self.event_name(obj, etype, reason, series),
                str(m.get("namespace") or "default"),
                0,
                0,
                0.0,
                False,
            )
            self._records[key] = rec
        rec.unsent += 1
        if key in self._dirty and self._metrics is not None:
            self._metrics.folded.inc()
        self._dirty[key] = (dict(obj), etype, reason, message)

    def _is_due(self, rec: _Record) -> bool:
        return not rec.created or self._clock() - rec.last_write >= self.min_interval

    async def flush(self) -> None:
        """Write every due Event (creates first, then count bumps)."""
        for key in list(self._dirty):
            rec = self._records.get(key)
            if rec is None or key not in self._dirty:
                self._dirty.pop(key, None)
                continue
            if not self._is_due(rec):
                continue
            if self._bucket is not None and (delay := self._bucket.reserve()) > 0:
                await asyncio.sleep(delay)  # the client-side limit; repeats meanwhile are folded
                if key not in self._dirty:
                    continue
            obj, etype, reason, message = self._dirty.pop(key)
            try:
                await self._write(rec, obj, etype, reason, message)
            except ApiError as exc:
                log.warning("event %s/%s: %s", rec.namespace, rec.name, exc)
                self._dirty.setdefault(key, (obj, etype, reason, message))  # try again later
            except Exception:
                self._dirty.setdefault(key, (obj, etype, reason, message))
                raise

    async def _write(self, rec: _Record, obj: Obj, etype: str, reason: str, message: str) -> None:
        now = self._now()
        if not rec.created:
            body = self._body(rec, obj, etype, reason, message, now)
            try:
                await self.api.create(EVENTS, body, rec.namespace)
                rec.count, rec.unsent, rec.created = max(1, rec.unsent), 0, True
                rec.message = message
                self._count("create")
                rec.last_write = self._clock()
                return
            except ApiError as exc:
                if not exc.already_exists:
                    raise
            # A predecessor (before a restart) wrote it: continue its count. The patch answers
            # with the Event, so no read access to events is needed (the RBAC grants none).
            existing = await self.api.patch(EVENTS, rec.name, {"lastTimestamp": now}, rec.namespace)
            rec.count, rec.created = int(existing.get("count") or 1), True
        rec.count += rec.unsent
        rec.unsent = 0
        rec.last_write = self._clock()
        bump: dict[str, Any] = {"count": rec.count, "lastTimestamp": now}
        if message != rec.message:
            bump["message"] = message
        try:
            await self.api.patch(EVENTS, rec.name, bump, rec.namespace)
            rec.message = message
            self._count("patch")
        except ApiError as exc:
            if exc.not_found:  # expired (events have a TTL): start over next time
                rec.created = False
            raise

    def _count(self, verb: str) -> None:
        if self._metrics is not None:
            self._metrics.event_writes.labels(verb).inc()

    def _body(self, rec: _Record, obj: Obj, etype: str, reason: str, message: str, now: str) -> Obj:
        m = meta(obj)
        involved = {
            "apiVersion": obj.get("apiVersion", "v1"),
            "kind": obj.get("kind", ""),
            "name": m.get("name"),
            "uid": m.get("uid"),
            "resourceVersion": m.get("resourceVersion"),
        }
        if m.get("namespace"):
            involved["namespace"] = m.get("namespace")
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": rec.name, "namespace": rec.namespace},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "type": etype,
            "reason": reason,
            "message": message,
            "count": max(1, rec.unsent),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }
