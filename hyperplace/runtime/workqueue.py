"""An asyncio work queue with client-go's ``util/workqueue`` semantics.

* **Fair**: keys are processed in the order they were added.
* **Stingy**: a key waiting in the queue is stored once however often it is added, and
  a key is never handed to two workers at the same time.
* **Re-add while processing**: adding a key that a worker holds marks it dirty; it is
  queued again when the worker calls :meth:`WorkQueue.done`, so no change is lost.
* **Rate limiting**: :meth:`WorkQueue.add_rate_limited` delays a key by the maximum of a
  per-key exponential backoff (5 ms doubling up to 1000 s) and an overall token bucket
  (10 qps, burst 100), like ``DefaultTypedControllerRateLimiter``. :meth:`forget`
  resets the key's backoff after a success.
* **Shutdown**: no new keys are accepted; :meth:`get` keeps returning what is queued
  and then ``None``; :meth:`drain` waits for in-flight keys.

Reconcilers are level-based, so keys (``namespace/name``) are queued, never events.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ItemExponentialBackoff(Generic[K]):
    """``base * 2**failures``, capped at ``cap`` (client-go ItemExponentialFailureRateLimiter)."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base, self.cap = base, cap
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        n = self._failures.get(item, 0)
        self._failures[item] = n + 1
        # Guard the exponent so 2**n cannot overflow a float on a key that fails forever.
        return self.cap if n >= 64 else min(self.base * 2**n, self.cap)

    def forget(self, item: K) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        return self._failures.get(item, 0)


class TokenBucket:
    """Overall rate limit: ``qps`` tokens per second, ``burst`` at most (golang.org/x/time/rate)."""

    def __init__(
        self, qps: float = 10.0, burst: int = 100, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.qps, self.burst, self._clock = qps, burst, clock
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take one token; the delay until it is really available (0 when in budget)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps


class RateLimiter(Generic[K]):
    """Max of per-item exponential backoff and an overall token bucket."""

    def __init__(
        self, backoff: ItemExponentialBackoff[K] | None = None, bucket: TokenBucket | None = None
    ) -> None:
        self.backoff: ItemExponentialBackoff[K] = backoff or ItemExponentialBackoff()
        self.bucket = bucket

    def when(self, item: K) -> float:
        delay = self.backoff.when(item)
        return max(delay, self.bucket.reserve()) if self.bucket is not None else delay

    def forget(self, item: K) -> None:
        self.backoff.forget(item)

    def num_requeues(self, item: K) -> int:
        return self.backoff.num_requeues(item)


class WorkQueue(Generic[K]):
    """See the module docstring. Must be used from one event loop."""

    def __init__(self, rate_limiter: RateLimiter[K] | None = None, name: str = "") -> None:
        self.name = name
        self.rate_limiter: RateLimiter[K] = rate_limiter or RateLimiter(bucket=TokenBucket())
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        # Set whenever the queue or the in-flight set changes; waiters re-check. The loop
        # is single-threaded, so check-then-wait cannot miss a wake-up.
        self._changed = asyncio.Event()
        self._shutting_down = False

    # -- adding ---------------------------------------------------------------------------

    def add(self, item: K) -> None:
        """Queue ``item`` unless it is already queued; defer it if a worker holds it."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        if item in self._processing:
            return  # queued again by done()
        self._queue.append(item)
        self._notify()

    def add_after(self, item: K, delay: float) -> None:
        """Queue ``item`` after ``delay`` seconds; an earlier pending deadline wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        loop = asyncio.get_running_loop()
        ready = loop.time() + delay
        pending = self._waiting.get(item)
        if pending is not None:
            if pending[0] <= ready:
                return
            pending[1].cancel()
        self._waiting[item] = (ready, loop.call_at(ready, self._fire, item))

    def add_rate_limited(self, item: K) -> None:
        """Queue ``item`` after its backoff (call after a failed reconcile)."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: K) -> None:
        """Reset ``item``'s backoff (call after a successful reconcile)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        return self.rate_limiter.num_requeues(item)

    def _fire(self, item: K) -> None:
        self._waiting.pop(item, None)
        self.add(item)

    def _notify(self) -> None:
        self._changed.set()

    # -- processing -----------------------------------------------------------------------

    async def get(self) -> K | None:
        """The next key to process (marked in-flight), or None once shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                return None
            self._changed.clear()
            await self._changed.wait()
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def done(self, item: K) -> None:
        """A worker finished ``item``; re-queue it if it was added meanwhile."""
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
        self._notify()  # a getter may take the re-queued key; drain() may be done

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop accepting keys, cancel delayed ones, and wake every waiting worker."""
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        self._notify()

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until no key is queued or in flight; False on timeout."""

        async def idle() -> None:
            while self._queue or self._processing:
                self._changed.clear()
                await self._changed.wait()

        try:
            async with asyncio.timeout(timeout):  # not wait_for: see informer.wait_for_sync
                await idle()
        except TimeoutError:
            return False
        return True
