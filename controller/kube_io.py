"""The I/O every controller of ``hyperplace-controller`` shares: the writes, their metrics and
the worker that serves a work queue.

* :class:`KubeIO` is what a controller writes through: the API client, the status writer and
  the ``hyperplace_controller_api_writes_total`` counter every write is counted in. Its
  ``create`` takes AlreadyExists as success: names are deterministic, so a second create from
  a slightly stale cache is harmless (this replaces client-go's "expectations").
* :func:`merge_patch_to` is the status merge patch every status write is made of.
* :func:`worker` is client-go's ``processNextWorkItem`` loop. A failed reconcile is retried
  with the queue's per-key exponential backoff; a success forgets the key's failures. Objects
  that fail model validation are logged and dropped (retrying cannot fix them; the next edit
  requeues them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import ValidationError

from hyperplace.runtime.api import ApiClient, ApiError, Obj, Resource, meta
from hyperplace.runtime.status_writer import StatusWriter
from hyperplace.runtime.workqueue import WorkQueue

log = logging.getLogger(__name__)


class Metrics:
    """The controllers' Prometheus metrics, in one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.reconciles = Counter(
            "hyperplace_controller_reconcile_total",
            "Reconciles by controller and result",
            ["controller", "result"],
            registry=registry,
        )
        self.duration = Histogram(
            "hyperplace_controller_reconcile_duration_seconds",
            "Reconcile latency",
            ["controller"],
            registry=registry,
        )
        self.depth = Gauge("hyperplace_controller_queue_depth", "Keys waiting", ["queue"], registry=registry)
        self.writes = Counter(
            "hyperplace_controller_api_writes_total", "API writes", ["resource", "verb"], registry=registry
        )
        self.commands = Counter(
            "hyperplace_controller_queue_commands_total",
            "Queue Commands by action and outcome (accepted, applied, dropped)",
            ["action", "result"],
            registry=registry,
        )


def merge_patch_to(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``.

    A merge patch merges nested objects and removes only keys set to null, so every key
    gone from ``new`` is nulled at whatever depth it sits. Nulling only the top-level ones
    left stale nested keys behind (``taskStatusCount.worker.phase.Pending`` once the pods
    ran), the status never matched the desired one, and every write requeued the next.
    """
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for k, v in new.items():
        before = old.get(k)
        if isinstance(v, Mapping) and isinstance(before, Mapping):
            out[k] = merge_patch_to(before, v)
        else:
            out[k] = v
    return out


def labels_of(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    """An object's labels (empty for none, or no object)."""
    return (meta(obj).get("labels") or {}) if obj else {}


class KubeIO:
    """The API client, the status writer and the write counter a controller writes through."""

    def __init__(self, api: ApiClient, status_writer: StatusWriter, metrics: Metrics) -> None:
        self.api = api
        self.status_writer = status_writer
        self.metrics = metrics

    def wrote(self, resource: str, verb: str) -> None:
        """Count one API write."""
        self.metrics.writes.labels(resource, verb).inc()

    async def create(self, res: Resource, body: Obj, namespace: str | None) -> None:
        """Create ``body``; one already there under its name counts as created."""
        try:
            await self.api.create(res, body, namespace)
            self.wrote(res.plural, "create")
        except ApiError as exc:
            if not exc.already_exists:
                raise

    async def patch_status(
        self,
        res: Resource,
        name: str,
        namespace: str | None,
        old: Any,
        new: dict[str, Any],
        *,
        resource_version: str | None = None,
    ) -> None:
        """Merge-patch the status subresource from ``old`` to ``new`` (nothing when equal);
        with ``resource_version``, only onto that version of the object (409 Conflict else)."""
        old = old if isinstance(old, dict) else {}
        if old == new:
            return
        # A merge patch merges nested objects: stale keys are nulled where they sit.
        patch: dict[str, Any] = {"status": merge_patch_to(old, new)}
        if resource_version:
            patch["metadata"] = {"resourceVersion": resource_version}
        await self.status_writer.patch_status(res, name, patch, namespace)
        self.wrote(res.plural, "patch-status")


async def worker(
    queue: WorkQueue[str],
    name: str,
    reconcile: Callable[[str], Awaitable[None]],
    metrics: Metrics,
    retryable: tuple[type[Exception], ...] = (ApiError,),
) -> None:
    """Serve ``queue`` with ``reconcile`` until it shuts down; see the module docstring.
    ``retryable`` errors are retried with a log line, any other with a traceback."""
    while (key := await queue.get()) is not None:
        start = time.perf_counter()
        try:
            await reconcile(key)
        except ValidationError as exc:
            log.warning("%s %s: invalid object, dropped: %s", name, key, exc.errors()[:1])
            queue.forget(key)
            metrics.reconciles.labels(name, "invalid").inc()
        except retryable as exc:
            log.info("%s %s: %s; retrying", name, key, exc)
            queue.add_rate_limited(key)
            metrics.reconciles.labels(name, "retry").inc()
        except Exception:
            log.exception("%s %s: reconcile failed", name, key)
            queue.add_rate_limited(key)
            metrics.reconciles.labels(name, "error").inc()
        else:
            queue.forget(key)
            metrics.reconciles.labels(name, "ok").inc()
        finally:
            queue.done(key)
            metrics.duration.labels(name).observe(time.perf_counter() - start)
