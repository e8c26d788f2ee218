"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's leaderelection).

* **Optimistic concurrency**: every write is a PUT carrying the resourceVersion we
  read; a 409 Conflict means someone else wrote first and we simply lost this round.
* **Monotonic local expiry**: a lease held by someone else counts as expired only when
  *we* have seen its record unchanged for ``lease_duration`` on our monotonic clock.
  The renewTime written by the holder is never compared with our wall clock, so clock
  skew between machines cannot make two leaders.
* **Renew deadline**: the leader keeps renewing every ``retry_period``; if it cannot
  renew within ``renew_deadline`` it stops leading (the leading coroutine is
  cancelled) before anyone else may consider the lease expired.
* **Release on shutdown**: when cancelled while leading, the holder is cleared and
  ``leaseDurationSeconds`` set to 1 so a successor takes over at once
  (``ReleaseOnCancel``).

Durations must satisfy ``lease_duration > renew_deadline > 1.2 * retry_period``
(client-go's JitterFactor), checked at construction.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

from hyperplace.api.times import micro_time

from .api import LEASES, ApiClient, ApiError, Obj

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2


class LeaderElector:
    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if not lease_duration > renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if not renew_deadline > JITTER_FACTOR * retry_period:
            raise ValueError(f"renew_deadline must be greater than {JITTER_FACTOR} * retry_period")
        if not identity:
            raise ValueError("identity must not be empty")
        self.api = api
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._rng = rng or random.Random()
        # What we last saw of the lease, and when (our monotonic clock) it last changed.
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.last_renew: float | None = None  # monotonic time of our last successful write
        self.is_leader = False
        self.transitions = 0

    # -- one attempt ------------------------------------------------------------------------

    def _record(self, lease: Obj) -> tuple[Any, ...]:
        spec = lease.get("spec") or {}
        return (
            spec.get("holderIdentity") or "",
            spec.get("leaseDurationSeconds"),
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseTransitions"),
        )

    def _spec(self, previous: Obj | None) -> dict[str, Any]:
        now = micro_time()
        spec = dict((previous or {}).get("spec") or {})
        held = spec.get("holderIdentity") == self.identity
        transitions = int(spec.get("leaseTransitions") or 0)
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, round(self.lease_duration)),
            renewTime=now,
        )
        if not held:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = transitions + 1 if previous is not None else 0
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One round: True when we hold the lease afterwards."""
        now = self._clock()
        try:
            lease = await self.api.get(LEASES, self.name, self.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(None),
            }
            try:
                created = await self.api.create(LEASES, body, self.namespace)
            except ApiError as cexc:
                if cexc.conflict:
                    return False
                raise
            self._observe(created, now)
            self.last_renew = now
            return True

        record = self._record(lease)
        if record != self._observed:
            self._observe(lease, now)
        holder = record[0]
        if holder and holder != self.identity and self._observed_at + self._held_for(lease) > now:
            return False  # someone else holds a lease that has not expired by our clock

        body = {**lease, "spec": self._spec(lease)}
        try:
            updated = await self.api.replace(LEASES, body, self.namespace)
        except ApiError as exc:
            if exc.conflict:
                return False
            raise
        self._observe(updated, now)
        self.last_renew = now
        return True

    def _held_for(self, lease: Obj) -> float:
        secs = (lease.get("spec") or {}).get("leaseDurationSeconds")
        return float(secs) if secs else self.lease_duration

    def _observe(self, lease: Obj, now: float) -> None:
        self._observed = self._record(lease)
        self._observed_at = now

    # -- the loop ---------------------------------------------------------------------------

    async def _sleep_jittered(self) -> None:
        await asyncio.sleep(self.retry_period * (1 + self._rng.random() * (JITTER_FACTOR - 1)))

    async def acquire(self) -> None:
        """Block until we hold the lease."""
        while True:
            try:
                if await self.try_acquire_or_renew():
                    self.is_leader = True
                    self.transitions += 1
                    log.info("leader election: %s acquired %s/%s", self.identity, self.namespace, self.name)
                    return
            except Exception as exc:  # API or network trouble: keep campaigning
                log.warning("leader election: %s", exc)
            await self._sleep_jittered()

    async def renew_until_lost(self) -> None:
        """Renew every retry period; return when the renew deadline passes without success."""
        while True:
            await asyncio.sleep(self.retry_period)
            deadline = self._clock() + self.renew_deadline
            while True:
                try:
                    # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel.
                    async with asyncio.timeout(max(0.0, deadline - self._clock())):
                        renewed = await self.try_acquire_or_renew()
                    if renewed:
                        break
                except Exception as exc:  # includes TimeoutError and network errors
                    log.warning("leader election: renew failed: %s", exc)
                if self._clock() >= deadline:
                    self.is_leader = False
                    log.error("leader election: %s lost %s/%s", self.identity, self.namespace, self.name)
                    return
                await asyncio.sleep(min(self.retry_period, max(0.0, deadline - self._clock())))

    async def release(self) -> None:
        """Give the lease up if we hold it (holder cleared, duration 1 s)."""
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            lease = await self.api.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            now = micro_time()
            spec = {
                **(lease.get("spec") or {}),
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": now,
            }
            await self.api.replace(LEASES, {**lease, "spec": spec}, self.namespace)
            log.info("leader election: %s released %s/%s", self.identity, self.namespace, self.name)
        except Exception as exc:  # best effort: the lease expires on its own anyway
            log.warning("leader election: release failed: %s", exc)

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Acquire, run ``lead()`` while leading, release on exit.

        Returns when leadership is lost (``lead`` is cancelled) or ``lead`` returns.
        Cancelling ``run`` cancels ``lead`` and releases the lease.
        """
        try:
            await self.acquire()
            leading = asyncio.create_task(lead())
            renewing = asyncio.create_task(self.renew_until_lost())
            try:
                await asyncio.wait({leading, renewing}, return_when=asyncio.FIRST_COMPLETED)
                if leading.done() and not leading.cancelled() and leading.exception() is not None:
                    log.error("leader election: the leading task failed", exc_info=leading.exception())
            finally:
                for t in (leading, renewing):
                    t.cancel()
                await asyncio.gather(leading, renewing, return_exceptions=True)
        finally:
            await asyncio.shield(self.release())

    def healthy(self, tolerance: float = 20.0) -> bool:
        """client-go's healthz adaptor: a leader that has not renewed for
        ``lease_duration + tolerance`` is unhealthy; non-leaders are always healthy."""
        if not self.is_leader or self.last_renew is None:
            return True
        return self._clock() - self.last_renew <= self.lease_duration + tolerance
