"""Evictions and nominations on an API server: the runtime side of ``preempt`` and ``reclaim``.

For every victim the session chose, as kube-scheduler's preemption does:

1. the pod gets the ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``, message
   naming the preemptor and why), through ``pods/status``;
2. it is evicted through the Eviction API (``pods/eviction``, ``policy/v1``), so
   PodDisruptionBudgets are honoured by the API server; the UID is a precondition, so a pod
   recreated under the same name is never evicted by mistake;
3. an Event on the victim (``Preempted``) and on the preemptor's PodGroup (``Preempting`` or
   ``Reclaiming``).

Nominations (the room held for each preemptor) are kept here across cycles and handed to the
next session, which binds the gang once its victims are gone. A nomination ends when the session
no longer returns it (bound, or its pods are gone) or after ``timeout`` seconds (an eviction a
PodDisruptionBudget refuses, a victim that never terminates): the gang is then considered again
from scratch. Nominations live in memory: a restarted scheduler decides again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import PODS, ApiClient, ApiError, Obj, meta
from scheduler_plugin.framework.evictions import ACTION_REASONS, Eviction, Nomination

from .events import EventRecorder

log = logging.getLogger(__name__)

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
DEFAULT_NOMINATION_TIMEOUT = 300.0


def disruption_patch(pod: Obj, message: str, now: str) -> Obj:
    """Merge patch for ``pods/status`` adding (or refreshing) ``DisruptionTarget=True``."""
    conds = [dict(c) for c in ((pod.get("status") or {}).get("conditions") or []) if isinstance(c, dict)]
    rest = [c for c in conds if c.get("type") != DISRUPTION_TARGET]
    new = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": message,
        "lastTransitionTime": now,
    }
    return {"status": {"conditions": [*rest, new]}}


def eviction_body(pod: Obj) -> Obj:
    """A ``policy/v1`` Eviction of ``pod``, preconditioned on its UID."""
    m = meta(pod)
    body: Obj = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": m.get("name"), "namespace": m.get("namespace")},
    }
    if m.get("uid"):
        body["deleteOptions"] = {"preconditions": {"uid": m.get("uid")}}
    return body


class Evictor:
    """Sends the evictions of each session and keeps nominations between sessions."""

    def __init__(
        self,
        api: ApiClient,
        events: EventRecorder,
        component: str,
        *,
        timeout: float = DEFAULT_NOMINATION_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], str] = rfc3339,
    ) -> None:
        self.api = api
        self.events = events
        self.component = component
        self.timeout = timeout
        self._clock = clock
        self._now = now
        self._held: dict[str, tuple[Nomination, float]] = {}  # job key -> (nomination, deadline)
        self._sent: dict[str, str] = {}  # victim key -> UID evicted (or being evicted)
        self.tasks: set[asyncio.Task[None]] = set()
        self.evicted: list[str] = []  # victims the API server accepted, in order
        self.refused: dict[str, str] = {}  # victim key -> why its eviction was refused

    def held(self) -> dict[str, Nomination]:
        """Nominations for the next session; expired ones are dropped (and logged)."""
        t = self._clock()
        for key in [k for k, (_, deadline) in self._held.items() if deadline <= t]:
            log.warning("nomination of %s expired after %.0fs; the gang is decided again", key, self.timeout)
            nom = self._held.pop(key)[0]
            for pkey in sorted(nom.pods):
                ns, _, name = pkey.partition("/")
                self._spawn(self._nominate({"metadata": {"name": name, "namespace": ns}}, None))
        return {k: nom for k, (nom, _) in self._held.items()}

    def after_session(
        self,
        evictions: list[Eviction],
        nominations: dict[str, Nomination],
        pod_of: Callable[[str], Obj | None],
        podgroup_of: Callable[[str], Obj | None],
    ) -> None:
        """Keep the session's nominations (a continuing one keeps its deadline) and start the
        evictions it decided. No awaits: the informer lookups and the bookkeeping are atomic."""
        t = self._clock()
        fresh = [nom for k, nom in nominations.items() if k not in self._held]
        self._held = {
            k: (nom, self._held[k][1] if k in self._held else t + self.timeout)
            for k, nom in nominations.items()
        }
        for nom in fresh:
            for pkey, node in sorted(nom.pods.items()):
                pod = pod_of(pkey)
                if pod is not None:
                    self._spawn(self._nominate(pod, node))
        for ev in evictions:
            pod = pod_of(ev.victim)
            if pod is None:
                continue  # already gone
            uid = str(meta(pod).get("uid") or "")
            if self._sent.get(ev.victim) == uid:
                continue  # asked once already: never twice for the same pod
            self._sent[ev.victim] = uid
            self._spawn(self._evict(ev, pod, podgroup_of(ev.preemptor)))
        # Forget victims that no longer exist, so the map does not grow without bound.
        for key in [k for k in self._sent if pod_of(k) is None]:
            del self._sent[key]

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _nominate(self, pod: Obj, node: str | None) -> None:
        """``status.nominatedNodeName``, as kube-scheduler shows a preemptor's node (None clears it)."""
        m = meta(pod)
        patch = {"status": {"nominatedNodeName": node}}
        try:
            await self.api.patch(PODS, str(m.get("name")), patch, m.get("namespace"), subresource="status")
        except Exception as exc:  # informative only
            log.info("nominatedNodeName on %s/%s: %s", m.get("namespace"), m.get("name"), exc)

    async def _evict(self, ev: Eviction, pod: Obj, preemptor: Obj | None) -> None:
        m = meta(pod)
        ns, name = str(m.get("namespace") or "default"), str(m.get("name") or "")
        message = f"{self.component}: {ev.reason}"
        try:
            await self.api.patch(
                PODS, name, disruption_patch(pod, message, self._now()), ns, subresource="status"
            )
        except ApiError as exc:
            if exc.not_found:
                return
            # The condition is informative; the eviction itself still goes ahead.
            log.warning("DisruptionTarget on %s: %s", ev.victim, exc)
        try:
            await self.api.create(PODS, eviction_body(pod), ns, subresource="eviction")
        except ApiError as exc:
            if exc.not_found:
                return
            # 429: a PodDisruptionBudget refuses it now; the nomination waits, then expires.
            self.refused[ev.victim] = str(exc)
            log.warning("eviction of %s refused: %s", ev.victim, exc)
            self.events.record(pod, "Warning", "EvictionRefused", f"{ev.reason}: {exc}")
            return
        except Exception as exc:  # connection trouble: the nomination expires if it never lands
            self.refused[ev.victim] = str(exc)
            log.warning("eviction of %s failed: %s", ev.victim, exc)
            return
        self.evicted.append(ev.victim)
        self.events.record(pod, "Normal", "Preempted", ev.reason)
        if preemptor is not None:
            verb = ACTION_REASONS.get(ev.action, "Preempting")
            self.events.record(preemptor, "Normal", verb, f"evicted {ev.victim} on {ev.node}")

    async def drain(self, timeout: float) -> None:
        """Let evictions in flight finish (at most ``timeout``)."""
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=timeout)
