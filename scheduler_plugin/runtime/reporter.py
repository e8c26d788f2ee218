"""Reporting a session's outcome, off the scheduling path: pod ``PodScheduled`` conditions,
PodGroup status and its allocated-HyperNode annotation, Queue ``status.allocated``, and Events.

What is written is what a user acts on, when it changes in kind (:mod:`.waiting`):

* a waiting pod's condition and its ``FailedScheduling`` Event say the kind of reason and the
  blocking scope, rewritten only when that changes (a pod on its own counts repeats on its
  Event, a gang's pods leave that to the PodGroup's ``Unschedulable`` series); a pod
  placed within ``settle`` seconds of its first miss gets neither (it was never news), nor does
  a pod of a gang its queue has not admitted yet (the PodGroup says that for all of them);
* the numbers (per tier, the best domain and what it lacks) go to the PodGroup's condition and
  its ``Unschedulable`` Event series, written at once when the PodGroup's phase or a
  condition's status or reason changes, and otherwise at most once per ``podgroup_interval``;
* a Queue's ``status.allocated`` at most once per ``queue_interval`` seconds;
* a new condition on an unchanged phase is held up to ``settle`` seconds (default
  :data:`SETTLE`), so a gang that waits only a moment is written once, Running; a gang that
  went Running is written once the kubelets report its pods running (at most ``settle``
  later), so the phase and the pod counts go in one write. Inqueue (enqueue's decision, read
  back by later sessions) is held the same way, kept in this process meanwhile
  (:meth:`Reporter.with_admissions`), so a gang admitted and placed within the settle is
  written once, Running; a PodGroup of no pod yet (an operator waits for its Inqueue to
  create them) and Completed are written at once;
* a started gang stays Running while its pods end (Completed once none runs or waits, and
  after they are deleted), without the conditions or Events of a waiting gang; its pods'
  counts moving are not written on their own (kubectl shows the pods): they ride on the
  Completed write, and a failed pod is written at once. So a job that never waits costs two
  writes, Running and Completed.

The latest desired state per object is queued in one rate-limited, coalescing queue
(:mod:`.write_queue`) apart from binds, and written only when it changes: what was written is
remembered with the resourceVersion the object had, and while the informer still shows that
version it has not caught up with our write, so writing again would only conflict. Once it
shows a newer version (our write's echo, or someone else's change) the patch is recomputed
from it. With ``status_writes`` off (``--no-status-writes``: a benchmark's floor) nothing but
binds is written.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from hyperplace.api import PodGroup, PodGroupStatus
from hyperplace.api.constants import JOB_ALLOCATED_HYPERNODE_ANNOTATION
from hyperplace.kube.objects import podgroup_key_of
from hyperplace.runtime.api import PODGROUPS, PODS, QUEUES, ApiClient, ApiError, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.status_writer import StatusWriter
from scheduler_plugin.cache.records import owned_by
from scheduler_plugin.cycle import JobOutcome, SessionResult
from scheduler_plugin.model.snapshot import ClusterSnapshot

from .assume import AssumeCache
from .events import EventRecorder
from .metrics import Metrics, Throttle
from .pods import pending_ours, spec_of
from .queue_status import queue_allocated_patch, wanted_allocated
from .status import (
    SCHEDULING_GATED,
    UNSCHEDULABLE,
    GangFormation,
    allocated_hypernode_patch,
    gang_finishing,
    pod_counts,
    pod_unschedulable_patch,
    podgroup_status_patch,
    status_kind,
)
from .waiting import not_admitted, pod_wait_message
from .write_queue import StatusWriteQueue

log = logging.getLogger(__name__)

# Seconds a PodGroup's change of kind is held: a gang placed within it is written once (Running),
# and one that went Running waits for its pods to be reported running (the kubelets answer
# within a second or two of the binds), so its phase and pod counts are one write.
SETTLE = 5.0


class Reporter:
    """The status reports of the scheduler process; see the module docstring."""

    def __init__(
        self,
        api: ApiClient,
        pods: Informer,
        podgroups: Informer,
        queues: Informer,
        assumed: AssumeCache,
        events: EventRecorder,
        metrics: Metrics,
        throttle: Throttle,
        *,
        scheduler_names: tuple[str, ...],
        gang_creation_grace: float,
        now: Callable[[], str],
        status_writes: bool = True,
        podgroup_interval: float = 60.0,
        settle: float = SETTLE,
        queue_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``throttle``: the rate status writes keep to (apart from the binds');
        ``podgroup_interval``: seconds between PodGroup status writes in which only numbers
        moved; ``status_writes`` False: write nothing (binds only)."""
        self.api = api
        self.status_writer = StatusWriter(api)
        self.pods, self.podgroups, self.queues = pods, podgroups, queues
        self.assumed, self.events, self.metrics = assumed, events, metrics
        self.names = scheduler_names
        self._now = now
        self._clock = clock
        self.status_writes = status_writes
        self.podgroup_interval = podgroup_interval
        self.settle = settle
        self.queue_interval = queue_interval
        self._notes_logged: set[str] = set()
        self._spare_leaves = False  # the spare gauges hold series to clear
        self._spares_counted: SessionResult | None = None
        # The latest desired state per key, written by status workers.
        self.status_queue = StatusWriteQueue(throttle, metrics)
        metrics.status_queue_depth.set_function(self.status_queue.__len__)
        self._pod_wanted: dict[str, str] = {}  # pod key -> unschedulable message
        self._pod_first_seen: dict[str, float] = {}  # pod key -> when first found waiting
        self._pg_wanted: dict[str, JobOutcome] = {}
        self._queue_wanted: dict[str, dict[str, str]] = {}  # queue -> status.allocated
        self._queue_written: dict[str, float] = {}  # queue -> when status.allocated was written
        # What we wrote, with the resourceVersion the object had when we wrote it.
        self._pod_sent: dict[str, tuple[str, str, str]] = {}  # pod key -> (uid, rv, message)
        self._pg_sent: dict[str, tuple[str, str, str]] = {}  # pg key -> (uid, rv, status digest)
        # pg key -> (uid, kind of the status written, when): the per-PodGroup interval.
        self._pg_written: dict[str, tuple[str, str, float]] = {}
        self._pg_settling: dict[str, float] = {}  # pg key -> when it was first wanted Running
        # pg key -> uid: admitted (Inqueue) by a session, the write held within the settle.
        self._admitting: dict[str, str] = {}
        self._admitted_models: dict[str, tuple[PodGroup, PodGroup]] = {}  # key -> (object, read Inqueue)
        self._formation = GangFormation(gang_creation_grace, time.monotonic)
        self._settled: dict[str, tuple[Any, JobOutcome]] = {}  # Running jobs reported last cycle

    def pod_bound(self, key: str) -> None:
        """A pod got its node: what was written about it waiting no longer stands."""
        self._pod_sent.pop(key, None)

    def forget_pod(self, key: str) -> None:
        """A pod was deleted."""
        self._pod_sent.pop(key, None)
        self._pod_wanted.pop(key, None)

    def forget_podgroup(self, key: str) -> None:
        """A PodGroup was deleted."""
        self._pg_wanted.pop(key, None)
        self._pg_sent.pop(key, None)
        self._pg_written.pop(key, None)
        self._pg_settling.pop(key, None)
        self._admitting.pop(key, None)

    def with_admissions(self, podgroups: list[PodGroup]) -> list[PodGroup]:
        """``podgroups`` with those a session admitted to Inqueue, whose write is held within
        the settle, read Inqueue, as if written: enqueue's decision is kept in this process,
        as a bind is assumed before the informer shows it. (A restart within the settle loses
        it: the next session decides again, in the same job order.)"""
        if not self._admitting:
            self._admitted_models.clear()
            return podgroups
        out: list[PodGroup] = []
        models: dict[str, tuple[PodGroup, PodGroup]] = {}
        for pg in podgroups:
            key = f"{pg.metadata.namespace}/{pg.metadata.name}"
            phase = pg.status.phase if pg.status is not None else None
            if self._admitting.get(key) != (pg.metadata.uid or "") or phase not in (None, "Pending"):
                out.append(pg)
                continue
            # The same copy while the object stands, so the state does not rebuild the job.
            seen = self._admitted_models.get(key)
            if seen is None or seen[0] is not pg:
                status = (pg.status or PodGroupStatus()).model_copy(update={"phase": "Inqueue"})
                seen = (pg, pg.model_copy(update={"status": status}))
            models[key] = seen
            out.append(seen[1])
        self._admitted_models = models
        return out

    def _group_size(self, jkey: str) -> int:
        """Pods of a PodGroup in the informer's cache."""
        return len(self.pods.by_index("group", jkey))

    def _report_spares(self, result: SessionResult) -> None:
        """The spare-node gauges (replaced whole: a leaf no longer annotated drops out) and the
        pods placed on spares."""
        spares = result.spares
        gauge = self.metrics.spare_nodes
        if spares.wanted or self._spare_leaves:
            gauge.clear()
            for leaf, n in spares.wanted.items():
                gauge.labels(leaf, "wanted").set(n)
                gauge.labels(leaf, "held").set(spares.held.get(leaf, 0))
            self._spare_leaves = bool(spares.wanted)
        if result is not self._spares_counted:  # a session reused unchanged counts nothing twice
            self._spares_counted = result
            for leaf, n in spares.used.items():
                self.metrics.spare_pods.labels(leaf).inc(n)

    def queue_reports(self, result: SessionResult, snap: ClusterSnapshot) -> None:
        """Queue what the session says about pods, PodGroups and Queues for the status workers,
        and its warnings as Events (each only when it changed)."""
        for note in result.notes:
            # Configuration warnings, pods on deleted nodes, ...: logged once each, not every cycle.
            if note not in self._notes_logged:
                if len(self._notes_logged) > 1000:
                    self._notes_logged.clear()
                self._notes_logged.add(note)
                log.warning("scheduler: %s", note)
        self._report_spares(result)
        # Gangs whose pods the Job controller is still creating: nothing to report yet.
        forming = {
            jkey
            for jkey, outcome in result.jobs.items()
            if self._formation.forming(jkey, outcome, functools.partial(self._group_size, jkey))
        }
        self._formation.forget(result.jobs)
        if not self.status_writes:
            # The floor: binds only. The gauges still say what waits.
            self.metrics.unschedulable.set(len(result.unschedulable))
            self.metrics.pending_jobs.set(sum(1 for o in result.jobs.values() if o.phase != "Running"))
            return
        unschedulable = 0
        now = self._clock()
        first_seen, self._pod_first_seen = self._pod_first_seen, {}
        for pkey, reason in result.unschedulable.items():
            pod = self.pods.get(pkey)
            if pod is None or not pending_ours(pod, self.names) or pkey in self.assumed:
                continue
            if forming and podgroup_key_of(pod) in forming:
                continue
            unschedulable += 1
            # A pod placed within the settle of its first miss was never news: nothing is said.
            since = self._pod_first_seen[pkey] = first_seen.get(pkey, now)
            if now - since < self.settle and pkey not in self._pod_wanted:
                continue
            group = podgroup_key_of(pod)
            outcome = result.jobs.get(group) if group else None
            if not_admitted(outcome) and pkey not in self._pod_wanted:
                # A gang its queue has not admitted: the PodGroup (Pending, its Unschedulable
                # condition and Event) says so once for all its pods, which under Volcano's
                # Job controller would not even exist yet.
                continue
            message = pod_wait_message(pod, reason, outcome, snap.jobs.get(group) if group else None)
            if not spec_of(pod).get("schedulingGates"):  # gated pods wait by design: no warning
                # One Event per pod and kind of reason. A pod on its own counts its repeats, as
                # kube-scheduler's do; a gang's pods do not: its PodGroup's series counts them.
                self.events.record(pod, "Warning", "FailedScheduling", message, repeats=outcome is None)
            if self._pod_wanted.get(pkey) != message:
                self._pod_wanted[pkey] = message
                self.status_queue.add(("pod", pkey))
        self.metrics.unschedulable.set(unschedulable)
        pending = 0
        settled: dict[str, tuple[Any, JobOutcome]] = {}
        for jkey, outcome in result.jobs.items():
            job = snap.jobs.get(jkey)
            if outcome.phase == "Running" and job is not None:
                # Same JobInfo (the state rebuilds it on any change of the PodGroup or one of
                # its pods) and the same outcome as last cycle: its status is queued already.
                last = self._settled.get(jkey)
                settled[jkey] = (job, outcome)
                if last is not None and last[0] is job and last[1] == outcome:
                    continue
            pg = self.podgroups.get(jkey)
            members = self.pods.by_index("group", jkey)
            # Not ours to report on: no pod of this PodGroup names our scheduler. A PodGroup of no
            # pod yet is reported (Inqueue): a training operator creates the pods only then.
            if pg is None or (members and not any(owned_by(p, self.names) for p in members)):
                continue
            if jkey in forming:
                continue
            # A gang whose pods are ending is not waiting (its status follows its pods: Running,
            # then Completed), though a session no longer finds it ready.
            if outcome.phase != "Running" and not gang_finishing(pg, outcome, members):
                pending += 1
                if outcome.explanation is not None:
                    # Gang-level news on the PodGroup: one series per kind of reason, carrying
                    # the latest numbers when its count is next written.
                    expl = outcome.explanation
                    self.events.record(pg, "Warning", "Unschedulable", expl.message(), series=expl.reason)
            self._pg_wanted[jkey] = outcome
            self.status_queue.add(("pg", jkey))
        self._settled = settled
        self.metrics.pending_jobs.set(pending)
        # Queue status.allocated (the queue controller owns the rest of the status).
        for qname, allocated in wanted_allocated(result).items():
            if self.queues.get(qname) is not None:
                self._queue_wanted[qname] = allocated
                self.status_queue.add(("queue", qname))

    async def _report(self, item: tuple[str, str]) -> None:
        kind, key = item
        if kind == "queue":
            queue, allocated = self.queues.get(key), self._queue_wanted.get(key)
            patch = queue_allocated_patch(queue, allocated) if queue and allocated is not None else None
            if patch is not None:
                # Sums that move with every bind and every pod that ends: at most one write
                # per queue_interval, carrying the latest sums.
                wait = self._queue_written.get(key, -math.inf) + self.queue_interval - self._clock()
                if wait > 0:
                    self.metrics.status_deferred.inc()
                    self.status_queue.add_after(item, wait)
                    return
                await self.status_queue.throttle()
                await self.status_writer.patch_status(QUEUES, key, patch, None)
                self.metrics.writes.labels("queues/status", "ok").inc()
                self._queue_written[key] = self._clock()
            return
        ns, name = key.split("/", 1)
        if kind == "pod":
            pod = self.pods.get(key)
            message = self._pod_wanted.get(key)
            if pod is None or message is None or not pending_ours(pod, self.names) or key in self.assumed:
                self.status_queue.dropped(item)  # gone, bound or decided meanwhile
                return
            uid, rv = str(meta(pod).get("uid") or ""), str(meta(pod).get("resourceVersion") or "")
            if self._pod_sent.get(key) == (uid, rv, message):
                return  # written already; the informer does not show it yet
            why = SCHEDULING_GATED if spec_of(pod).get("schedulingGates") else UNSCHEDULABLE
            patch = pod_unschedulable_patch(pod, message, self._now(), why)
            if patch is not None:
                await self.status_queue.throttle()
                await self.api.patch(PODS, name, patch, ns, subresource="status")
                self.metrics.writes.labels("pods/status", "ok").inc()
                self._pod_sent[key] = (uid, rv, message)
            return
        pg = self.podgroups.get(key)
        outcome = self._pg_wanted.get(key)
        if pg is None or outcome is None:
            self.status_queue.dropped(item)
            return
        uid, rv = str(meta(pg).get("uid") or ""), str(meta(pg).get("resourceVersion") or "")
        ann = allocated_hypernode_patch(pg, JOB_ALLOCATED_HYPERNODE_ANNOTATION, outcome.allocated_hypernode)
        pods = self.pods.by_index("group", key)
        patch = podgroup_status_patch(pg, outcome, pods, self._now())
        # On Volcano's CRD (no status subresource) status goes through the object: the
        # annotation rides on the same write.
        rides = ann is not None and patch is not None
        if rides and await self.status_writer.has_status_subresource(PODGROUPS):
            rides = False
        if patch is not None and self._pg_wait(key, uid, rv, pg, patch, pods):
            if ann is not None and not (rides and key in self._pg_settling):
                await self._annotate(name, ns, ann)
            return
        if rides and patch is not None and ann is not None:
            patch = {**patch, "metadata": {**(patch.get("metadata") or {}), **ann["metadata"]}}
            ann = None
        elif ann is not None:
            await self._annotate(name, ns, ann)
        if patch is not None:
            sent = (uid, rv, json.dumps(_timeless(patch), sort_keys=True))
            if self._pg_sent.get(key) != sent:
                await self.status_queue.throttle()
                # Through podgroups/status, or the object on Volcano's CRD (no subresource).
                await self.status_writer.patch_status(PODGROUPS, name, patch, ns)
                self.metrics.writes.labels("podgroups/status", "ok").inc()
                self._pg_sent[key] = sent
                self._pg_written[key] = (uid, status_kind(patch["status"]), self._clock())
                self._pg_settling.pop(key, None)
                self._admitting.pop(key, None)
        else:
            self._admitting.pop(key, None)  # the object says what is wanted: nothing held

    async def _annotate(self, name: str, ns: str, ann: Obj) -> None:
        await self.status_queue.throttle()
        await self.api.patch(PODGROUPS, name, ann, ns)
        self.metrics.writes.labels("podgroups", "ok").inc()

    def _pg_wait(self, key: str, uid: str, rv: str, pg: Obj, patch: Obj, pods: list[Obj]) -> bool:
        """Whether the PodGroup's write is put off (and re-queued for later): only numbers
        moved within ``podgroup_interval`` of the last write (on a Running PodGroup, only
        numbers moved: not re-queued, they ride on its next change of kind, unless a pod
        failed); or, for at most ``settle``
        seconds, a new condition on an unchanged phase (a gang placed meanwhile is written once,
        Running) or a gang that went Running and whose pods are not reported running yet."""
        now = self._clock()
        status = patch["status"]
        kind = status_kind(status)
        old = pg.get("status") or {}
        shown = status_kind(old) == kind
        last = self._pg_written.get(key)
        if last is None and uid and old.get("phase") and shown:
            # Nothing written by this process yet: what the object says counts as written
            # (a restart does not rewrite every PodGroup's numbers at once).
            last = (uid, kind, now)
            self._pg_written[key] = last
        # Only numbers moved if the object says this in kind, or still is what it was when we
        # wrote this kind (the informer does not show our write yet). Another writer's change
        # of kind (Volcano's scheduler next to us marks our gang Unschedulable when a session
        # of it falls between two of our binds) is taken back like any change of kind.
        sent = self._pg_sent.get(key)
        unseen = sent is not None and sent[1] == rv
        if last is not None and last[0] == uid and last[1] == kind and (shown or unseen):
            old_failed = int(old.get("failed") or 0)
            if status.get("phase") == "Running" and int(status.get("failed") or 0) <= old_failed:
                # A started gang whose phase and conditions stand: its pods' counts move as
                # they start and end, which kubectl shows on the pods; the counts ride on its
                # next change of kind (Completed). A pod that failed is news: written below.
                self.metrics.status_deferred.inc()
                return True
            wait = last[2] + self.podgroup_interval - now
            if wait > 0:
                self.metrics.status_deferred.inc()
                self.status_queue.add_after(("pg", key), wait)
                return True
            return False
        phase = status.get("phase")
        written = old.get("phase") or "Pending"
        # Inqueue is enqueue's decision, which later sessions read back. A gang admitted and
        # placed within the settle is written once, Running: meanwhile this process keeps the
        # admission (:meth:`with_admissions`: sessions read it Inqueue). A PodGroup of no pod yet is
        # written Inqueue at once: a training operator waits for it to create the pods.
        holds_admission = phase == "Inqueue" and written == "Pending" and bool(pods) and bool(uid)
        if phase != "Running" and phase != written and not holds_admission:
            # Completed is final, Pending (a hold given up) news: written at once.
            self._admitting.pop(key, None)
            return False
        since = self._pg_settling.setdefault(key, now)
        if now - since >= self.settle:
            return False
        if holds_admission:
            self._admitting[key] = uid
        if phase == "Running":
            counts = pod_counts(pods)
            started = counts["running"] + counts["succeeded"] + counts["failed"]
            need = int((pg.get("spec") or {}).get("minMember") or 0)
            if started >= need:
                return False
        # A gang that waits only a moment, or whose pods are not reported running yet: the
        # newer state (Running, with its pods' counts) replaces this one if it comes in time.
        self.status_queue.add_after(("pg", key), min(1.0, self.settle - (now - since)))
        return True

    async def worker(self) -> None:
        """Write queued reports until the queue shuts down."""
        while (item := await self.status_queue.get()) is not None:
            try:
                await self._report(item)
            except ApiError as exc:
                if exc.not_found:
                    # The object is gone (a missing status subresource is handled, and logged,
                    # by the StatusWriter, which then writes through the object).
                    log.debug("status %s %s: object deleted; dropping the write", *item)
                    self.status_queue.forget(item)
                else:
                    # 409: the object moved under us; retry from the informer's newer copy.
                    log.info("status %s %s: %s; retrying", *item, exc)
                    self.metrics.writes.labels(item[0], "retry").inc()
                    self.status_queue.add_rate_limited(item)
            except Exception:
                log.exception("status %s %s failed", *item)
                self.status_queue.add_rate_limited(item)
            else:
                self.status_queue.forget(item)
            finally:
                self.status_queue.done(item)

    async def flush_events(self, period: float) -> None:
        """Write folded Events every ``period`` seconds, until cancelled."""
        while True:
            try:
                await self.events.flush()
            except Exception:
                log.exception("writing events failed")
            await asyncio.sleep(period)


def _timeless(patch: Obj) -> Any:
    """A patch without timestamps, to recognise one we already sent."""
    if isinstance(patch, dict):
        return {k: _timeless(v) for k, v in patch.items() if k != "lastTransitionTime"}
    if isinstance(patch, list):
        return [_timeless(v) for v in patch]
    return patch
