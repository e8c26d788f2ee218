"""The status writes of the scheduler: one rate-limited, coalescing queue, apart from binds.

Keys name objects (``("pod", "ns/name")``); what to write is looked up when a worker takes the
key, so a newer desired state for an object replaces the one queued (the key is queued once:
client-go's work queue). Workers take a token of their own bucket before each write, set below
the process's ``--kube-api-qps``, so status never starves binds of the apiserver's attention and
a burst of news is spread out instead of flooding it. Depth, coalesced adds and writes dropped
(the object went away, or no longer needs the write, before its turn) are metrics.
"""

from __future__ import annotations

from typing import Any

from hyperplace.runtime.workqueue import ItemExponentialBackoff, RateLimiter, WorkQueue

from .metrics import Throttle

Item = tuple[str, str]  # (kind of object, key)


class StatusWriteQueue(WorkQueue[Item]):
    """A :class:`WorkQueue` of status writes that counts coalesced adds; ``throttle`` is the
    write rate its workers keep to."""

    def __init__(self, throttle: Throttle, metrics: Any | None = None) -> None:
        super().__init__(RateLimiter(ItemExponentialBackoff(0.05, 60.0)), name="scheduler-status")
        self.throttle = throttle
        self._metrics = metrics

    def add(self, item: Item) -> None:
        """Queue ``item``; if it is queued already, the newer state rides on that entry."""
        if self._metrics is not None and item in self._dirty and not self.shutting_down:
            self._metrics.status_coalesced.labels(item[0]).inc()
        super().add(item)

    def dropped(self, item: Item) -> None:
        """A write taken from the queue and not sent: nothing (left) to write."""
        if self._metrics is not None:
            self._metrics.status_dropped.labels(item[0]).inc()
