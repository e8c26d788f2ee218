"""The scheduling loop against an API server: informers in, bindings and status out.

One **cycle** (Volcano's session, every ``schedule_period`` and at once after a relevant
event, coalesced):

1. Take a snapshot of the :class:`~scheduler_plugin.cluster_state.ClusterState`, which the
   informer handlers keep current event by event (pods as the session must see them:
   assumed pods bound, terminating pending pods gone); PodGroups, Queues and HyperNodes are
   parsed with :mod:`hyperplace.api` (objects that do not parse are skipped and named in
   the log). The snapshot costs what changed since the last cycle and never changes after
   it is taken. ``--verify-state`` also rebuilds it from the stores every cycle and stops on
   a difference; ``--full-rebuild`` rebuilds instead (the old path, kept as a baseline).
2. :func:`~scheduler_plugin.session.run_session` in a worker thread, so informers, the
   lease and the probes keep running while it thinks.
3. Apply, synchronously before any ``await``: for each job whose decided pods are all still
   pending with the UIDs the session saw, assume them all, then hand them to the binder.
   A job with one decided pod gone or bound elsewhere is left whole for the next cycle:
   binding the rest could strand a partial gang.
4. Bind (``POST pods/{name}/binding`` with the pod UID as precondition) with at most
   ``bind_concurrency`` requests in flight and a client-side QPS limit. A failed bind
   forgets that pod's assumption, stops the gang's binds not yet sent, and wakes the loop
   after a per-PodGroup backoff: the next session re-decides the rest of the gang, with
   the pods already bound counted as running.
5. Report, off the scheduling path (a work queue with its own workers): pod
   ``PodScheduled=False/Unschedulable`` conditions, PodGroup status and the
   ``volcano.sh/job-allocated-hypernode`` annotation, each only when it changes; Events
   ``FailedScheduling`` (deduplicated), ``Scheduled`` on bind.

**Why a bind cannot double-book a node.** Within a process, a node's usage in every
snapshot is the pods the informer shows bound to it *plus* the pods assumed onto it: a
decision is assumed before its binding is sent and stays counted until the informer shows
the pod bound (then the informer counts it) or the binding fails (then the room was never
used). So two cycles never hand the same room out twice, whatever order binds, watch
events and cycles interleave in. A binding carries the pod's UID: the API server refuses
it (409) for a recreated pod of the same name, and for a pod that already has a node, so a
pod is never bound twice either.

**Why a restart is safe.** Nothing the scheduler knows lives only in memory: after a crash
or a restart the new process (and only once it holds the Lease, so never two at once)
lists everything again. Pods whose bind reached the API server are bound there and count
as used; pods whose bind did not are pending and are decided afresh. A gang interrupted
half-way has its bound pods counted as running members; the core recovers the gang's
allocated HyperNode from where they run and places the remainder there (or reports why
it cannot), so the gang is finished, never re-placed elsewhere. Losing the Lease cancels
the loop: binds not yet sent are dropped, those in flight get ``bind_drain_timeout``
(shorter than the gap between the renew deadline and the lease duration), and the
process exits.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import BaseModel, ValidationError

from hyperplace.api import HyperNode, PodGroup, Queue, format_validation_error
from hyperplace.api.constants import (
    DEFAULT_SCHEDULER_NAME,
    JOB_ALLOCATED_HYPERNODE_ANNOTATION,
)
from hyperplace.kube.objects import TERMINAL_PHASES, object_key, podgroup_key_of
from hyperplace.kube.times import parse_rfc3339, rfc3339
from hyperplace.runtime.api import (
    CONFIGMAPS,
    HYPERNODES,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    ApiClient,
    ApiError,
    Obj,
    meta,
)
from hyperplace.runtime.informer import Informer, wait_for_sync
from hyperplace.runtime.status_writer import StatusWriter
from hyperplace.runtime.workqueue import ItemExponentialBackoff, RateLimiter, TokenBucket, WorkQueue
from scheduler_plugin.algorithms.fragmentation import FragmentationConfig
from scheduler_plugin.cache.cluster_state import ClusterState
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.verify import StateDriftError, verify_snapshot
from scheduler_plugin.config.scheduler_conf import SchedulerConfig
from scheduler_plugin.cycle import JobOutcome, LastSession, SessionResult, run_session_reusing
from scheduler_plugin.framework.evictions import Nomination
from scheduler_plugin.model.reservation import Reservation
from scheduler_plugin.model.snapshot import ClusterSnapshot

from .assume import AssumeCache, Assumed
from .config_source import ConfigHolder, ConfigSource
from .events import EventRecorder, own_pod_reference
from .evictor import Evictor
from .fragmentation_metrics import FragmentationMetrics
from .queue_status import queue_allocated_patch, wanted_allocated
from .status import (
    SCHEDULING_GATED,
    UNSCHEDULABLE,
    GangFormation,
    allocated_hypernode_patch,
    pod_unschedulable_patch,
    podgroup_status_patch,
)

log = logging.getLogger(__name__)

COMPONENT = "hyperplace-scheduler"
M = TypeVar("M", bound=BaseModel)


@dataclass
class SchedulerOptions:
    """Process settings (flags); the scheduling policy itself is the configuration file."""

    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    schedule_period: float = 1.0  # Volcano's --schedule-period
    bind_concurrency: int = 64
    api_qps: float = 2000.0  # Volcano's --kube-api-qps / --kube-api-burst defaults
    api_burst: int = 2000
    status_workers: int = 16
    event_interval: float = 60.0  # at most one count update per Event per interval
    # Binds in flight when the loop stops (SIGTERM, lost Lease) may finish within this.
    # Below lease_duration - renew_deadline (15 s - 10 s), so a successor cannot be
    # deciding while our last binds land.
    bind_drain_timeout: float = 4.0
    bind_backoff: tuple[float, float] = (1.0, 10.0)  # per-PodGroup requeue delay after a failed bind
    # A gang short of pods whose pod count changed this recently is still being created by
    # its Job controller: its "not enough pods" is not reported yet (0: report at once).
    gang_creation_grace: float = 10.0
    identity: str = COMPONENT
    # Keep the cluster state from watch events (False: rebuild the snapshot every cycle).
    incremental_state: bool = True
    # Debug: after every snapshot, rebuild one from scratch and fail the cycle loudly on a
    # difference (HYPERPLACE_VERIFY_STATE=1 turns it on; the test suite does).
    verify_state: bool = field(default_factory=lambda: os.environ.get("HYPERPLACE_VERIFY_STATE") == "1")
    # Pod shapes of the fragmentation gauges (--fragmentation-shapes and friends).
    fragmentation: FragmentationConfig = field(default_factory=FragmentationConfig)


class Metrics:
    """Prometheus series of the scheduler process."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.cycle = Histogram(
            "hyperplace_scheduler_cycle_duration_seconds",
            "Whole scheduling cycle: snapshot, session, apply",
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.session = Histogram(
            "hyperplace_scheduler_session_duration_seconds",
            "Snapshot build plus run_session",
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.decisions = Counter(
            "hyperplace_scheduler_decisions_total",
            "Pods decided (assumed and sent to bind)",
            registry=registry,
        )
        self.binds = Counter(
            "hyperplace_scheduler_binds_total", "Binding requests by result", ["result"], registry=registry
        )
        self.pending_jobs = Gauge(
            "hyperplace_scheduler_pending_jobs",
            "PodGroups not placed after the last session",
            registry=registry,
        )
        self.unschedulable = Gauge(
            "hyperplace_scheduler_unschedulable_pods",
            "Pods left pending by the last session",
            registry=registry,
        )
        self.assumed = Gauge(
            "hyperplace_scheduler_assumed_pods", "Pods decided, not yet seen bound", registry=registry
        )
        self.skipped = Gauge(
            "hyperplace_scheduler_invalid_objects",
            "Objects skipped because they do not parse",
            registry=registry,
        )
        self.bind_latency = Histogram(
            "hyperplace_scheduler_bind_request_duration_seconds",
            "One binding request, sent to answered (the client's side of the apiserver's latency)",
            registry=registry,
            buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.writes = Counter(
            "hyperplace_scheduler_api_writes_total",
            "Status and event writes",
            ["resource", "result"],
            registry=registry,
        )
        self.config_loads = Counter(
            "hyperplace_scheduler_config_loads_total",
            "Configuration (re)loads by result",
            ["result"],
            registry=registry,
        )


class Throttle:
    """Client-side QPS limit shared by every write (client-go's rest.Config QPS/Burst)."""

    def __init__(self, qps: float, burst: int) -> None:
        self._bucket = TokenBucket(qps, max(1, burst)) if qps > 0 else None

    async def __call__(self) -> None:
        if self._bucket is not None:
            delay = self._bucket.reserve()
            if delay > 0:
                await asyncio.sleep(delay)


class _Models(Generic[M]):
    """Parsed models of an informer's objects, re-parsed only when resourceVersion moves."""

    def __init__(self, informer: Informer, model: type[M]) -> None:
        self.informer, self.model = informer, model
        self._cache: dict[str, tuple[str, M | None]] = {}
        self.invalid: dict[str, str] = {}

    def parse(self) -> list[M]:
        out: list[M] = []
        fresh: dict[str, tuple[str, M | None]] = {}
        self.invalid = {}
        for key, obj in list(self.informer.store.items()):
            rv = str(meta(obj).get("resourceVersion", ""))
            cached = self._cache.get(key)
            if cached is not None and cached[0] == rv:
                model = cached[1]
            else:
                try:
                    model = self.model.model_validate(obj)
                except ValidationError as exc:
                    model = None
                    problems = "; ".join(format_validation_error(exc)[:3])
                    log.warning("%s %s skipped, does not parse: %s", self.informer.res.kind, key, problems)
                    self.invalid[key] = problems
            if model is None and key not in self.invalid:
                self.invalid[key] = "does not parse"
            fresh[key] = (rv, model)
            if model is not None:
                out.append(model)
        self._cache = fresh
        return out


@dataclass
class _GangBinds:
    """The binds of one job decided in one cycle."""

    job: str
    failed: bool = False


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("spec") or {}


def _ready_status(node: Mapping[str, Any]) -> Any:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status")
    return None


class Scheduler:
    """Informers, the cycle loop, the binder and the status reporter; see the module docstring."""

    def __init__(
        self,
        api: ApiClient,
        options: SchedulerOptions | None = None,
        config_source: ConfigSource | None = None,
        *,
        registry: CollectorRegistry | None = None,
        now: Callable[[], str] = rfc3339,
    ) -> None:
        self.api = api
        self.status_writer = StatusWriter(api)
        self._notes_logged: set[str] = set()
        self.options = options or SchedulerOptions()
        self.registry = registry or CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self.fragmentation = FragmentationMetrics(self.options.fragmentation, self.registry)
        self._now = now
        self.conf = ConfigHolder(config_source or ConfigSource())
        self.conf.poll_file()

        self.nodes = Informer(api, NODES)
        self.pods = Informer(api, PODS)
        self.podgroups = Informer(api, PODGROUPS)
        self.queues = Informer(api, QUEUES)
        self.hypernodes = Informer(api, HYPERNODES)
        self.priority_classes = Informer(api, PRIORITY_CLASSES)
        self.informers = [
            self.nodes,
            self.pods,
            self.podgroups,
            self.queues,
            self.hypernodes,
            self.priority_classes,
        ]
        self.configmaps: Informer | None = None
        if self.conf.source.configmap is not None:
            self.configmaps = Informer(api, CONFIGMAPS, self.conf.source.configmap[0])
            self.informers.append(self.configmaps)
        # PriorityClasses only order jobs; a cluster whose RBAC does not grant them must not
        # keep the scheduler from starting (as for the controller).
        self.required_informers = [i for i in self.informers if i is not self.priority_classes]

        self._pg_models = _Models(self.podgroups, PodGroup)
        self._queue_models = _Models(self.queues, Queue)
        self._hn_models = _Models(self.hypernodes, HyperNode)

        self.assumed = AssumeCache()
        self.metrics.assumed.set_function(self.assumed.__len__)
        # The cluster as the next session sees it, kept from informer events and assumptions.
        self.state = ClusterState(self.options.scheduler_names)
        self.events = EventRecorder(
            api, COMPONENT, self.options.identity, min_interval=self.options.event_interval
        )
        self._throttle = Throttle(self.options.api_qps, self.options.api_burst)
        # preempt/reclaim: evictions sent, nominations held across cycles.
        self.evictor = Evictor(api, self.events, COMPONENT, now=now)
        # Head-of-queue reservations, carried from one session to the next (a restart starts
        # from the PodGroups' HyperNodeReserved conditions).
        self.reservations: dict[str, Reservation] = {}
        # The last session, reused while nothing changes and nothing waits (run_session_reusing).
        self._last_session = LastSession()
        self._bind_sem = asyncio.Semaphore(max(1, self.options.bind_concurrency))
        self._binds: set[asyncio.Task[None]] = set()
        self._gang_backoff: ItemExponentialBackoff[str] = ItemExponentialBackoff(*self.options.bind_backoff)
        self._stopping = False

        # Status reporting: the latest desired state per key, written by status workers.
        self.status_queue: WorkQueue[tuple[str, str]] = WorkQueue(
            RateLimiter(ItemExponentialBackoff(0.05, 60.0)), name="scheduler-status"
        )
        self._pod_wanted: dict[str, str] = {}  # pod key -> unschedulable message
        self._pg_wanted: dict[str, JobOutcome] = {}
        self._queue_wanted: dict[str, dict[str, str]] = {}  # queue -> status.allocated
        # What we wrote, with the resourceVersion the object had when we wrote it: while
        # the informer still shows that version, it has not caught up with our write, and
        # writing again would only conflict. Once it shows a newer version (our write's
        # echo, or someone else's change) the patch is recomputed from it.
        self._pod_sent: dict[str, tuple[str, str, str]] = {}  # pod key -> (uid, rv, message)
        self._pg_sent: dict[str, tuple[str, str, str]] = {}  # pg key -> (uid, rv, status digest)
        self._reported_error: str | None = None
        self._formation = GangFormation(self.options.gang_creation_grace, time.monotonic)
        self._settled: dict[str, tuple[Any, JobOutcome]] = {}  # Running jobs reported last cycle

        self.wake = asyncio.Event()
        self.cycles = 0
        self.last_result: SessionResult | None = None
        self._wire()

    # -- informer wiring --------------------------------------------------------------------

    def _owned(self, pod: Mapping[str, Any]) -> bool:
        return _spec(pod).get("schedulerName", DEFAULT_SCHEDULER_NAME) in self.options.scheduler_names

    def _pending_ours(self, pod: Mapping[str, Any]) -> bool:
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        return (
            not _spec(pod).get("nodeName")
            and phase not in TERMINAL_PHASES
            and not meta(pod).get("deletionTimestamp")
            and self._owned(pod)
        )

    def _wire(self) -> None:
        def group_of(p: Obj) -> list[str]:
            g = podgroup_key_of(p)
            return [g] if g else []

        self.pods.add_index("group", group_of)
        wake = self.wake.set

        def pod_added(p: Obj) -> None:
            key = object_key(p)
            self.assumed.observe(p, key)
            self._sync_pod(key)
            if self._pending_ours(p):
                wake()

        def pod_updated(old: Obj, new: Obj) -> None:
            key = object_key(new)
            self.assumed.observe(new, key)
            self._sync_pod(key)
            if _spec(new).get("nodeName"):
                self._pod_sent.pop(key, None)
            terminal_old = (old.get("status") or {}).get("phase") in TERMINAL_PHASES
            terminal_new = (new.get("status") or {}).get("phase") in TERMINAL_PHASES
            # Our own condition patches and binds change neither of these: no wake-up loop.
            if terminal_old != terminal_new or (
                self._pending_ours(new)
                and (
                    _spec(old).get("schedulingGates") != _spec(new).get("schedulingGates")
                    or meta(old).get("annotations") != meta(new).get("annotations")
                    or meta(old).get("labels") != meta(new).get("labels")
                )
            ):
                wake()

        def pod_deleted(p: Obj) -> None:
            key = object_key(p)
            self.assumed.observe(None, key)
            self.state.remove_pod(key)
            self._pod_sent.pop(key, None)
            self._pod_wanted.pop(key, None)
            wake()

        self.pods.add_handler(pod_added, pod_updated, pod_deleted)

        def node_updated(old: Obj, new: Obj) -> None:
            # Heartbeats rewrite status every few seconds; only what placement reads wakes us.
            if (
                old.get("spec") != new.get("spec")
                or meta(old).get("labels") != meta(new).get("labels")
                or (old.get("status") or {}).get("allocatable")
                != (new.get("status") or {}).get("allocatable")
                or _ready_status(old) != _ready_status(new)
            ):
                wake()

        self.nodes.add_handler(lambda _o: wake(), node_updated, lambda _o: wake())

        def node_deleted(n: Obj) -> None:
            self.state.remove_node(str(meta(n).get("name", "")))

        # Every node change reaches the state (a heartbeat that changes nothing it reads is
        # recognised there); only the ones placement reads wake a cycle (above).
        self.nodes.add_handler(self.state.set_node, lambda _o, n: self.state.set_node(n), node_deleted)

        def spec_changed(old: Obj, new: Obj) -> None:
            if old.get("spec") != new.get("spec"):
                wake()

        def podgroup_deleted(pg: Obj) -> None:
            key = object_key(pg)
            self._pg_wanted.pop(key, None)
            self._pg_sent.pop(key, None)
            wake()

        self.podgroups.add_handler(lambda _o: wake(), spec_changed, podgroup_deleted)
        self.hypernodes.add_handler(lambda _o: wake(), spec_changed, lambda _o: wake())

        def queue_changed(old: Obj, new: Obj) -> None:
            if old.get("spec") != new.get("spec") or (old.get("status") or {}).get("state") != (
                new.get("status") or {}
            ).get("state"):
                wake()

        self.queues.add_handler(lambda _o: wake(), queue_changed, lambda _o: wake())
        self.priority_classes.add_handler(lambda _o: wake(), lambda _o, _n: wake(), lambda _o: wake())

        if self.configmaps is not None:
            self.configmaps.add_handler(
                self._configmap_event, lambda _old, new: self._configmap_event(new), None
            )

    def _sync_pod(self, key: str) -> None:
        """Show the state the pod as a session should see it: bound where it is assumed, and
        gone when it is terminating without a node (Volcano: Releasing)."""
        pod = self.pods.get(key)
        if pod is not None:
            a = self.assumed.get(key)
            if a is not None and not _spec(pod).get("nodeName") and str(meta(pod).get("uid") or "") == a.uid:
                pod = {**pod, "spec": {**_spec(pod), "nodeName": a.node}}
            elif not _spec(pod).get("nodeName") and meta(pod).get("deletionTimestamp"):
                pod = None
        if pod is None:
            self.state.remove_pod(key)
        else:
            self.state.set_pod(pod)

    def _configmap_event(self, cm: Obj) -> None:
        ref = self.conf.source.configmap
        if ref is None or meta(cm).get("name") != ref[1]:
            return
        changed = self.conf.offer_configmap(cm)
        self._config_outcome(changed, cm)

    def _config_outcome(self, changed: bool, obj: Obj | None) -> None:
        if changed:
            self.metrics.config_loads.labels("ok").inc()
            self.wake.set()
        elif self.conf.error is not None and self.conf.error != self._reported_error:
            self._reported_error = self.conf.error
            self.metrics.config_loads.labels("error").inc()
            # A ConfigMap source: the Event is on the ConfigMap; a file: on our own Pod.
            target = obj if obj is not None else own_pod_reference()
            if target is not None:
                self.events.record(
                    target,
                    "Warning",
                    "InvalidConfiguration",
                    f"kept the previous configuration: {self.conf.error}",
                )

    def readiness_detail(self) -> str | None:
        """The configuration problem ``/readyz`` reports, or None: a refused configuration
        leaves the last good one in force (or the built-in default before any)."""
        if self.conf.error is None:
            return None
        kept = "the previous configuration" if self.conf.text is not None else "the built-in default"
        return f"scheduler configuration refused, running on {kept}: {self.conf.error}"

    # -- state ------------------------------------------------------------------------------

    @property
    def config(self) -> SchedulerConfig:
        """The scheduling configuration in force."""
        return self.conf.config

    def synced(self) -> bool:
        """Every required informer has listed once."""
        return all(i.synced.is_set() for i in self.required_informers)

    async def start_informers(self) -> list[asyncio.Task[None]]:
        """Start every informer (they run also while standing by, for a fast takeover)."""
        return [asyncio.create_task(i.run(), name=f"informer-{i.res.plural}") for i in self.informers]

    # -- one cycle --------------------------------------------------------------------------

    def _listing(self) -> list[Obj]:
        """Informer pods with assumptions overlaid (the from-scratch path's input)."""
        return self.assumed.overlay(
            p for p in self.pods.objects() if _spec(p).get("nodeName") or not meta(p).get("deletionTimestamp")
        )

    def _decide(
        self,
        snap: ClusterSnapshot | None,
        rebuild: dict[str, Any] | None,
        config: SchedulerConfig,
        nominations: Mapping[str, Nomination] | None = None,
        reservations: Mapping[str, Reservation] | None = None,
    ) -> tuple[ClusterSnapshot, SessionResult]:
        """In a worker thread: the snapshot from scratch when there is no incremental one
        (or to verify it), then the session."""
        if rebuild is not None:
            rebuilt = build_snapshot(**rebuild, scheduler_names=self.options.scheduler_names)
            if snap is None:
                snap = rebuilt
            else:
                verify_snapshot(self.state, snap, rebuilt)
        assert snap is not None
        result = run_session_reusing(
            self._last_session,
            snap,
            config,
            nominations,
            now=parse_rfc3339(self._now()),
            reservations=reservations,
        )
        return snap, result

    async def run_cycle(self) -> SessionResult:
        """Snapshot, decide, assume, start binds, queue status reports. Returns the session result."""
        t0 = time.perf_counter()
        if self.conf.poll_file():
            self.metrics.config_loads.labels("ok").inc()
        elif self.conf.source.path is not None:
            self._config_outcome(False, None)
        podgroups = self._pg_models.parse()
        queues = self._queue_models.parse()
        hypernodes = self._hn_models.parse()
        pcs = self.priority_classes.objects()
        self.metrics.skipped.set(
            len(self._pg_models.invalid) + len(self._queue_models.invalid) + len(self._hn_models.invalid)
        )
        # The view is taken here, on the loop thread: no event can interleave with it, and
        # the session in the worker thread reads only that immutable view (or copies).
        snap: ClusterSnapshot | None = None
        if self.options.incremental_state:
            st = self.state
            st.replace_hypernodes(hypernodes)
            st.replace_podgroups(podgroups)
            st.replace_queues(queues)
            st.replace_priority_classes(pcs)
            snap = st.snapshot()
        rebuild: dict[str, Any] | None = None
        if snap is None or self.options.verify_state:
            # Copies of the store listings: the informers keep changing their stores while
            # the worker thread builds. A terminating pod without a node is not to be placed
            # (Volcano: Releasing); one with a node still holds its room until it is gone.
            rebuild = {
                "nodes": self.nodes.objects(),
                "pods": self._listing(),
                "hypernodes": hypernodes,
                "podgroups": podgroups,
                "queues": queues,
                "priority_classes": pcs,
            }
        decided, result = await asyncio.to_thread(
            self._decide, snap, rebuild, self.config, self.evictor.held(), dict(self.reservations)
        )
        self.metrics.session.observe(time.perf_counter() - t0)
        self.cycles += 1
        self.last_result = result
        self._apply(decided, result)
        # The gauges are not on the binding path: the binds above are under way meanwhile.
        await asyncio.to_thread(self.fragmentation.observe, decided, result.bindings)
        self.metrics.cycle.observe(time.perf_counter() - t0)
        return result

    def _apply(self, snap: ClusterSnapshot, result: SessionResult) -> None:
        """Assume and start binds gang by gang, then queue status reports. No awaits: the
        informer cannot change under the checks below."""
        job_of: dict[str, str] = {}
        uid_of: dict[str, str] = {}
        for jkey, job in snap.jobs.items():
            for t in job.pending:  # only pending pods are decided
                job_of[t.key] = jkey
                uid_of[t.key] = t.uid
        by_job: dict[str, list[tuple[str, str]]] = {}
        for pkey, node in result.bindings.items():
            by_job.setdefault(job_of.get(pkey, pkey), []).append((pkey, node))
        for jkey, members in sorted(by_job.items()):
            pods: list[Obj] = []
            for pkey, _node in members:
                pod = self.pods.get(pkey)
                if (
                    pod is None
                    or pkey in self.assumed
                    or not self._pending_ours(pod)
                    or str(meta(pod).get("uid") or pkey) != uid_of.get(pkey)
                ):
                    log.info("job %s: pod %s changed during the session; deciding the job again", jkey, pkey)
                    self.wake.set()
                    break
                pods.append(pod)
            else:
                gang = _GangBinds(jkey)
                for (pkey, node), pod in zip(members, pods, strict=True):
                    assumed = self.assumed.assume(pkey, uid_of[pkey], node, jkey)
                    self._sync_pod(pkey)
                    self.metrics.decisions.inc()
                    task = asyncio.create_task(self._bind(assumed, pod, gang))
                    self._binds.add(task)
                    task.add_done_callback(self._binds.discard)
        self._queue_reports(result, snap)
        self._report_reservations(result)
        self.evictor.after_session(result.evictions, result.nominations, self.pods.get, self.podgroups.get)

    def _report_reservations(self, result: SessionResult) -> None:
        """Keep the holds for the next session; an event on the PodGroup when one starts."""
        for jkey, res in result.reservations.items():
            prev = self.reservations.get(jkey)
            pg = self.podgroups.get(jkey)
            if pg is not None and (prev is None or prev.hypernode != res.hypernode):
                self.events.record(pg, "Normal", "HyperNodeReserved", res.message())
        self.reservations = dict(result.reservations)

    # -- binding ----------------------------------------------------------------------------

    async def _bind(self, a: Assumed, pod: Obj, gang: _GangBinds) -> None:
        ns, name = a.key.split("/", 1)
        try:
            async with self._bind_sem:
                if self._stopping or gang.failed:
                    # Not sent: the room is free again and the pod is pending for the next
                    # session (or the next leader).
                    self.assumed.forget(a.key)
                    self._sync_pod(a.key)
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
                self.metrics.bind_latency.observe(time.perf_counter() - sent)
        except asyncio.CancelledError:
            # Cancelled mid-request: the bind may or may not have landed; the informer will
            # tell. Keep the assumption until it does (or the process ends).
            raise
        except Exception as exc:
            self._bind_failed(a, pod, gang, exc)
            return
        self.assumed.mark_bound(a.key)
        self.metrics.binds.labels("ok").inc()
        self._gang_backoff.forget(gang.job)
        self.events.record(pod, "Normal", "Scheduled", f"Successfully assigned {a.key} to {a.node}")

    def _bind_failed(self, a: Assumed, pod: Obj, gang: _GangBinds, exc: Exception) -> None:
        self.assumed.forget(a.key)
        self._sync_pod(a.key)
        self.metrics.binds.labels("failed").inc()
        gang.failed = True  # the gang's binds not yet sent are dropped, not sent
        log.warning("bind %s to %s failed (job %s): %s", a.key, a.node, gang.job, exc)
        if not (isinstance(exc, ApiError) and exc.not_found):
            self.events.record(pod, "Warning", "FailedScheduling", f"Binding rejected: {exc}")
        delay = self._gang_backoff.when(gang.job)
        asyncio.get_running_loop().call_later(delay, self.wake.set)

    async def drain_binds(self, timeout: float) -> bool:
        """Let in-flight binds finish (at most ``timeout``); True when none is left."""
        if self._binds:
            await asyncio.wait(set(self._binds), timeout=timeout)
        return not self._binds

    # -- status reporting -------------------------------------------------------------------

    def _group_size(self, jkey: str) -> int:
        """Pods of a PodGroup in the informer's cache."""
        return len(self.pods.by_index("group", jkey))

    def _queue_reports(self, result: SessionResult, snap: ClusterSnapshot) -> None:
        for note in result.notes:
            # Configuration warnings, pods on deleted nodes, ...: logged once each, not every cycle.
            if note not in self._notes_logged:
                if len(self._notes_logged) > 1000:
                    self._notes_logged.clear()
                self._notes_logged.add(note)
                log.warning("scheduler: %s", note)
        # Gangs whose pods the Job controller is still creating: nothing to report yet.
        forming = {
            jkey
            for jkey, outcome in result.jobs.items()
            if self._formation.forming(jkey, outcome, functools.partial(self._group_size, jkey))
        }
        self._formation.forget(result.jobs)
        unschedulable = 0
        for pkey, reason in result.unschedulable.items():
            pod = self.pods.get(pkey)
            if pod is None or not self._pending_ours(pod) or pkey in self.assumed:
                continue
            if forming and podgroup_key_of(pod) in forming:
                continue
            unschedulable += 1
            if not _spec(pod).get("schedulingGates"):  # gated pods wait by design: no warning
                self.events.record(pod, "Warning", "FailedScheduling", reason)
            self._pod_wanted[pkey] = reason
            self.status_queue.add(("pod", pkey))  # a no-op write is skipped by the worker
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
            if pg is None or not any(self._owned(p) for p in self.pods.by_index("group", jkey)):
                continue  # not ours to report on: no pod of this PodGroup names our scheduler
            if jkey in forming:
                continue
            if outcome.phase != "Running":
                pending += 1
                if outcome.explanation is not None:
                    self.events.record(pg, "Warning", "Unschedulable", outcome.explanation.message())
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
                await self._throttle()
                await self.status_writer.patch_status(QUEUES, key, patch, None)
                self.metrics.writes.labels("queues/status", "ok").inc()
            return
        ns, name = key.split("/", 1)
        if kind == "pod":
            pod = self.pods.get(key)
            message = self._pod_wanted.get(key)
            if pod is None or message is None or not self._pending_ours(pod) or key in self.assumed:
                return
            uid, rv = str(meta(pod).get("uid") or ""), str(meta(pod).get("resourceVersion") or "")
            if self._pod_sent.get(key) == (uid, rv, message):
                return  # written already; the informer does not show it yet
            why = SCHEDULING_GATED if _spec(pod).get("schedulingGates") else UNSCHEDULABLE
            patch = pod_unschedulable_patch(pod, message, self._now(), why)
            if patch is not None:
                await self._throttle()
                await self.api.patch(PODS, name, patch, ns, subresource="status")
                self.metrics.writes.labels("pods/status", "ok").inc()
                self._pod_sent[key] = (uid, rv, message)
            return
        pg = self.podgroups.get(key)
        outcome = self._pg_wanted.get(key)
        if pg is None or outcome is None:
            return
        uid, rv = str(meta(pg).get("uid") or ""), str(meta(pg).get("resourceVersion") or "")
        patch = podgroup_status_patch(pg, outcome, self.pods.by_index("group", key), self._now())
        if patch is not None:
            sent = (uid, rv, json.dumps(_timeless(patch), sort_keys=True))
            if self._pg_sent.get(key) != sent:
                await self._throttle()
                # Through podgroups/status, or the object on Volcano's CRD (no subresource).
                await self.status_writer.patch_status(PODGROUPS, name, patch, ns)
                self.metrics.writes.labels("podgroups/status", "ok").inc()
                self._pg_sent[key] = sent
        ann = allocated_hypernode_patch(pg, JOB_ALLOCATED_HYPERNODE_ANNOTATION, outcome.allocated_hypernode)
        if ann is not None:
            await self._throttle()
            await self.api.patch(PODGROUPS, name, ann, ns)
            self.metrics.writes.labels("podgroups", "ok").inc()

    async def _status_worker(self) -> None:
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

    async def _event_flusher(self) -> None:
        while True:
            try:
                await self.events.flush()
            except Exception:
                log.exception("writing events failed")
            await asyncio.sleep(min(1.0, self.options.schedule_period))

    # -- the loop ---------------------------------------------------------------------------

    async def schedule(self) -> None:
        """Run cycles until cancelled (the leader's work). Informers must be running.

        On cancellation: no new cycle, binds not yet sent are dropped, binds in flight get
        ``bind_drain_timeout`` to finish, then pending events are flushed (best effort).
        """
        self._stopping = False
        workers = [
            asyncio.create_task(self._status_worker()) for _ in range(max(1, self.options.status_workers))
        ]
        flusher = asyncio.create_task(self._event_flusher())
        try:
            await wait_for_sync(self.required_informers)
            if self.configmaps is not None:
                ref = self.conf.source.configmap
                assert ref is not None
                cm = self.configmaps.get(f"{ref[0]}/{ref[1]}")
                if cm is None:
                    log.warning(
                        "scheduler ConfigMap %s/%s not found; using %s", ref[0], ref[1], "the default"
                    )
            log.info(
                "scheduler %s: caches synced, scheduling pods of %s every %.3gs",
                self.options.identity,
                ", ".join(self.options.scheduler_names),
                self.options.schedule_period,
            )
            while True:
                try:
                    async with asyncio.timeout(self.options.schedule_period):
                        await self.wake.wait()
                except TimeoutError:
                    pass
                self.wake.clear()  # events from here on wake the next cycle: coalesced
                try:
                    await self.run_cycle()
                except (asyncio.CancelledError, StateDriftError):
                    raise  # a drifted state (--verify-state) is a bug: stop, loudly
                except Exception:
                    log.exception("scheduling cycle failed")
        finally:
            self._stopping = True
            if not await self.drain_binds(self.options.bind_drain_timeout):
                log.warning("%d binds still in flight at shutdown; cancelling", len(self._binds))
                for t in list(self._binds):
                    t.cancel()
            await self.evictor.drain(self.options.bind_drain_timeout)
            self.status_queue.shutdown()
            flusher.cancel()
            for w in workers:
                w.cancel()
            await asyncio.gather(flusher, *workers, return_exceptions=True)
            try:
                async with asyncio.timeout(2.0):
                    await self.events.flush()
            except Exception as exc:  # best effort on the way out
                log.info("final event flush: %s", exc)

    async def run(self) -> None:
        """Informers plus :meth:`schedule`, until cancelled (no leader election)."""
        tasks = await self.start_informers()
        try:
            await self.schedule()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _timeless(patch: Obj) -> Any:
    """A patch without timestamps, to recognise one we already sent."""
    if isinstance(patch, dict):
        return {k: _timeless(v) for k, v in patch.items() if k != "lastTransitionTime"}
    if isinstance(patch, list):
        return [_timeless(v) for v in patch]
    return patch


__all__ = ["Metrics", "Scheduler", "SchedulerOptions"]
