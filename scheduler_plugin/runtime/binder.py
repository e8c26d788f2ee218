"""Binding decided pods, gang by gang, with a bounded number of requests in flight.

A bind is ``POST pods/{name}/binding`` with the pod's UID as a precondition, under a
client-side QPS limit. A failed bind forgets that pod's assumption, drops the gang's binds
not yet sent, and wakes the loop after a per-PodGroup backoff: the next session re-decides the
rest of the gang, with the pods already bound counted as running.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hyperplace.runtime.api import PODS, ApiClient, ApiError, Obj
from hyperplace.runtime.workqueue import ItemExponentialBackoff

from .assume import AssumeCache, Assumed
from .events import EventRecorder
from .metrics import Metrics, Throttle

log = logging.getLogger(__name__)


@dataclass
class GangBinds:
    """The binds of one job decided in one cycle. ``unbound(pod key)``: called for each pod
    of the gang whose bind was not sent or failed (its claims are given back)."""

    job: str
    failed: bool = False
    unbound: Callable[[str], None] | None = None


@dataclass
class PreBindStep:
    """One PreBind plugin's part of a gang: its writes run (and waited for) before any bind,
    taken back if any step fails."""

    plugin: str  # kube-scheduler's plugin name, for the event
    run: Callable[[Callable[[], bool]], Awaitable[None]]  # given "do the gang's pods still exist"
    give_back: Callable[[], Awaitable[None]]


class Binder:
    """Sends the binds of decided pods; see the module docstring."""

    def __init__(
        self,
        api: ApiClient,
        assumed: AssumeCache,
        events: EventRecorder,
        metrics: Metrics,
        throttle: Throttle,
        *,
        concurrency: int,
        backoff: tuple[float, float],
        sync_pod: Callable[[str], None],
        wake: asyncio.Event,
    ) -> None:
        """``sync_pod``: show the state a pod as a session should see it (an assumption
        forgotten); ``wake``: set to start a cycle."""
        self.api, self.assumed, self.events, self.metrics = api, assumed, events, metrics
        self._throttle = throttle
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self._backoff: ItemExponentialBackoff[str] = ItemExponentialBackoff(*backoff)
        self._sync_pod = sync_pod
        self._wake = wake
        self.in_flight: set[asyncio.Task[None]] = set()
        self.stopping = False

    def start(self, a: Assumed, pod: Obj, gang: GangBinds) -> None:
        """Send the bind of an assumed pod in the background."""
        task = asyncio.create_task(self.bind(a, pod, gang))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    def start_after_prebind(
        self, steps: list[PreBindStep], members: list[tuple[Assumed, Obj]], gang: GangBinds
    ) -> None:
        """Run the gang's PreBind steps (VolumeBinding's claims written and waited for, then
        DynamicResources' claims written), then send its binds; on a failure give every step's
        writes back and bind none of the gang."""
        task = asyncio.create_task(self._after_prebind(steps, members, gang))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def _after_prebind(
        self, steps: list[PreBindStep], members: list[tuple[Assumed, Obj]], gang: GangBinds
    ) -> None:
        def pods_exist() -> bool:
            return not self.stopping and all(self.assumed.get(a.key) is a for a, _pod in members)

        ran: list[PreBindStep] = []
        try:
            for step in steps:
                ran.append(step)
                await step.run(pods_exist)
        except asyncio.CancelledError:
            # Stopping: nothing was bound; what was written stays for the next leader, whose
            # session sees the claims taken and decides the gang again.
            raise
        except Exception as exc:
            for done in reversed(ran):
                await done.give_back()
            gang.failed = True
            for a, pod in members:
                self.assumed.forget(a.key)
                self._sync_pod(a.key)
                if not self.stopping:
                    self.events.record(
                        pod,
                        "Warning",
                        "FailedScheduling",
                        f'running PreBind plugin "{ran[-1].plugin}": {exc}',
                    )
            self.metrics.binds.labels("failed").inc(len(members))
            log.warning("job %s: %s failed, no pod bound: %s", gang.job, ran[-1].plugin, exc)
            asyncio.get_running_loop().call_later(self._backoff.when(gang.job), self._wake.set)
            return
        for a, pod in members:
            self.start(a, pod, gang)

    async def bind(self, a: Assumed, pod: Obj, gang: GangBinds) -> None:
        """Bind one assumed pod (or drop it, when stopping or its gang failed)."""
        ns, name = a.key.split("/", 1)
        try:
            async with self._sem:
                if self.stopping or gang.failed:
                    # Not sent: the room is free again and the pod is pending for the next
                    # session (or the next leader).
                    self.assumed.forget(a.key)
                    self._sync_pod(a.key)
                    if gang.failed and gang.unbound is not None:
                        gang.unbound(a.key)
                    return
                await self._throttle()
                body = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "namespace": ns, "uid": a.uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": a.node},
                }
                sent = time.perf_counter()
                await self.api.create(PODS, body, ns, subresource="binding")
                took = time.perf_counter() - sent
                self.metrics.bind_latency.observe(took)
        except asyncio.CancelledError:
            # Cancelled mid-request: the bind may or may not have landed; the informer will
            # tell. Keep the assumption until it does (or the process ends).
            raise
        except Exception as exc:
            self._failed(a, pod, gang, exc)
            return
        self.assumed.mark_bound(a.key)
        self.metrics.binds.labels("ok").inc()
        self.metrics.volcano.task_bound((pod.get("metadata") or {}).get("creationTimestamp"), took)
        self._backoff.forget(gang.job)
        self.events.record(pod, "Normal", "Scheduled", f"Successfully assigned {a.key} to {a.node}")

    def _failed(self, a: Assumed, pod: Obj, gang: GangBinds, exc: Exception) -> None:
        self.assumed.forget(a.key)
        self._sync_pod(a.key)
        self.metrics.binds.labels("failed").inc()
        self.metrics.volcano.bind_failed()
        gang.failed = True  # the gang's binds not yet sent are dropped, not sent
        if gang.unbound is not None:
            gang.unbound(a.key)
        log.warning("bind %s to %s failed (job %s): %s", a.key, a.node, gang.job, exc)
        if not (isinstance(exc, ApiError) and exc.not_found):
            self.events.record(pod, "Warning", "FailedScheduling", f"Binding rejected: {exc}")
        delay = self._backoff.when(gang.job)
        asyncio.get_running_loop().call_later(delay, self._wake.set)

    async def drain(self, timeout: float) -> bool:
        """Let in-flight binds finish (at most ``timeout``); True when none is left."""
        if self.in_flight:
            await asyncio.wait(set(self.in_flight), timeout=timeout)
        return not self.in_flight
