"""The scheduling loop against an API server: informers in, bindings and status out.

One **cycle** (Volcano's session, every ``schedule_period`` and at once after a relevant
event, coalesced):

1. Take a snapshot of the :class:`~scheduler_plugin.cache.cluster_state.ClusterState`, which the
   informer handlers keep current event by event (pods as the session must see them:
   assumed pods bound, terminating pending pods gone); PodGroups, Queues and HyperNodes are
   parsed with :mod:`hyperplace.api` (objects that do not parse are skipped and named in
   the log). The snapshot costs what changed since the last cycle and never changes after
   it is taken. ``--verify-state`` also rebuilds it from the stores every cycle and stops on
   a difference; ``--full-rebuild`` rebuilds instead (the old path, kept as a baseline).
2. :func:`~scheduler_plugin.cycle.run.run_session` in a worker thread, so informers, the
   lease and the probes keep running while it thinks.
3. Apply, synchronously before any ``await``: for each job whose decided pods are all still
   pending with the UIDs the session saw, assume them all, then hand them to the binder.
   A job with one decided pod gone or bound elsewhere is left whole for the next cycle:
   binding the rest could strand a partial gang.
4. Bind (:mod:`.binder`: ``POST pods/{name}/binding`` with the pod UID as precondition) with
   at most ``bind_concurrency`` requests in flight and a client-side QPS limit. A failed bind
   forgets that pod's assumption, stops the gang's binds not yet sent, and wakes the loop
   after a per-PodGroup backoff: the next session re-decides the rest of the gang, with
   the pods already bound counted as running.
5. Report, off the scheduling path (:mod:`.reporter`, a work queue with its own workers): pod
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
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ValidationError

from hyperplace.api import HyperNode, PodGroup, Queue, format_validation_error
from hyperplace.api.times import parse_rfc3339, rfc3339
from hyperplace.api.workload import UpstreamPodGroup, as_volcano_podgroup, with_upstream
from hyperplace.kube.objects import TERMINAL_PHASES, namespaced_key, podgroup_key_of
from hyperplace.runtime.api import (
    CONFIGMAPS,
    CSI_DRIVERS,
    CSI_NODES,
    CSI_STORAGE_CAPACITIES,
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    HYPERNODES,
    K8S_PODGROUPS,
    NAMESPACES,
    NODES,
    PDBS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_QUOTAS,
    RESOURCE_SLICES,
    STORAGE_CLASSES,
    ApiClient,
    Obj,
    meta,
    object_key,
)
from hyperplace.runtime.informer import Informer, wait_for_sync
from scheduler_plugin.cache.cluster_state import ClusterState
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.storage import StorageListing
from scheduler_plugin.cache.verify import StateDriftError
from scheduler_plugin.config.scheduler_conf import SchedulerConfig
from scheduler_plugin.cycle import LastSession, SessionResult, run_session_reusing
from scheduler_plugin.cycle.carried import verify_state
from scheduler_plugin.framework.evictions import Nomination
from scheduler_plugin.model.reservation import Reservation
from scheduler_plugin.model.runtime_history import RuntimeHistory, opted_in
from scheduler_plugin.model.snapshot import ClusterSnapshot

from .assume import AssumeCache
from .binder import Binder, GangBinds, PreBindStep
from .claim_binder import DevicePreBind, DeviceWrite
from .config_source import ConfigHolder, ConfigSource
from .events import EventRecorder, own_pod_reference
from .evictor import Evictor
from .fragmentation_metrics import FragmentationMetrics
from .history_store import HistoryStore
from .metrics import Metrics, Throttle
from .options import COMPONENT, SchedulerOptions
from .pods import pending_ours, spec_of
from .reporter import Reporter
from .volume_binder import PreBind, PreBindError

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


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


def _ready_status(node: Mapping[str, Any]) -> Any:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status")
    return None


def releasing(pod: Obj) -> bool:
    """A pod being deleted before it was bound: never placed, and holding no room (Volcano:
    Releasing). One with a node holds its room until it is gone."""
    return not spec_of(pod).get("nodeName") and bool(meta(pod).get("deletionTimestamp"))


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
        # Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1, 1.37; optional: a cluster that
        # does not serve the group version, or whose RBAC does not grant it, runs without them).
        self.k8s_podgroups = Informer(api, K8S_PODGROUPS)
        self.queues = Informer(api, QUEUES)
        self.hypernodes = Informer(api, HYPERNODES)
        self.priority_classes = Informer(api, PRIORITY_CLASSES)
        # What the pdb and resourcequota plugins read.
        self.pdbs = Informer(api, PDBS)
        self.quotas = Informer(api, RESOURCE_QUOTAS)
        # What a pod affinity term's namespaceSelector reads.
        self.namespaces = Informer(api, NAMESPACES)
        # What the volume filters read (kube-scheduler's VolumeBinding, VolumeZone, ...).
        self.pvcs = Informer(api, PERSISTENT_VOLUME_CLAIMS)
        self.pvs = Informer(api, PERSISTENT_VOLUMES)
        self.storage_classes = Informer(api, STORAGE_CLASSES)
        self.csinodes = Informer(api, CSI_NODES)
        self.csidrivers = Informer(api, CSI_DRIVERS)
        self.capacities = Informer(api, CSI_STORAGE_CAPACITIES)
        # What DynamicResources reads (resource.k8s.io/v1; optional: a cluster that does not
        # serve it, or whose RBAC does not grant it, runs without, and a pod with claims waits).
        self.device_classes = Informer(api, DEVICE_CLASSES)
        self.resource_slices = Informer(api, RESOURCE_SLICES)
        self.resource_claims = Informer(api, RESOURCE_CLAIMS)
        self.claim_templates = Informer(api, RESOURCE_CLAIM_TEMPLATES)
        self.device_taint_rules = Informer(api, DEVICE_TAINT_RULES)
        self.metrics.volcano.podgroups = self.podgroups.objects
        if now is not rfc3339:  # a given clock (tests, simulations): durations follow it
            self.metrics.volcano.clock = lambda: parse_rfc3339(now()) or time.time()
        self.informers = [
            self.nodes,
            self.pods,
            self.podgroups,
            self.queues,
            self.hypernodes,
            self.priority_classes,
            self.pdbs,
            self.quotas,
            self.namespaces,
            self.pvcs,
            self.pvs,
            self.storage_classes,
            self.csinodes,
            self.csidrivers,
            self.capacities,
            self.k8s_podgroups,
            self.device_classes,
            self.resource_slices,
            self.resource_claims,
            self.claim_templates,
            self.device_taint_rules,
        ]
        self.configmaps: Informer | None = None
        if self.conf.source.configmap is not None:
            self.configmaps = Informer(api, CONFIGMAPS, self.conf.source.configmap[0])
            self.informers.append(self.configmaps)
        # PriorityClasses only order jobs; a cluster whose RBAC does not grant them must not
        # keep the scheduler from starting (as for the controller).
        # PodDisruptionBudgets and ResourceQuotas likewise only matter with their plugins.
        # Namespaces only matter to affinity terms with a namespaceSelector, the CSI objects only
        # with CSI limits and capacity.
        optional = (
            self.k8s_podgroups,
            self.priority_classes,
            self.pdbs,
            self.quotas,
            self.namespaces,
            self.csinodes,
            self.csidrivers,
            self.capacities,
            self.device_classes,
            self.resource_slices,
            self.resource_claims,
            self.claim_templates,
            self.device_taint_rules,
        )
        self.required_informers = [i for i in self.informers if all(i is not o for o in optional)]

        self._pg_models = _Models(self.podgroups, PodGroup)
        self._k8s_pg_models = _Models(self.k8s_podgroups, UpstreamPodGroup)
        # key -> (the parsed upstream PodGroup, the job's PodGroup made from it): the same
        # object while the PodGroup stands, so the state does not rebuild its job every cycle.
        self._upstream_jobs: dict[str, tuple[UpstreamPodGroup, PodGroup]] = {}
        self._clashes: set[str] = set()
        self._queue_models = _Models(self.queues, Queue)
        self._hn_models = _Models(self.hypernodes, HyperNode)

        self.assumed = AssumeCache()
        self.metrics.assumed.set_function(self.assumed.__len__)
        # The cluster as the next session sees it, kept from informer events and assumptions.
        self.state = ClusterState(self.options.scheduler_names)
        opts = self.options
        self.events = EventRecorder(
            api,
            COMPONENT,
            opts.identity,
            min_interval=opts.event_interval,
            qps=opts.event_qps,
            burst=opts.event_burst,
            metrics=self.metrics,
        )
        self.events.enabled = opts.status_writes
        throttle = Throttle(opts.api_qps, opts.api_burst)
        # Status writes keep to their own, lower rate: they never make a bind wait.
        status_qps = min(opts.status_qps, opts.api_qps) if opts.api_qps > 0 else opts.status_qps
        status_throttle = Throttle(status_qps, min(opts.status_burst, max(opts.api_burst, 1)))
        # preempt/reclaim: evictions sent, nominations held across cycles.
        self.evictor = Evictor(api, self.events, COMPONENT, now=now)
        # Head-of-queue reservations, carried from one session to the next (a restart starts
        # from the PodGroups' HyperNodeReserved conditions).
        self.reservations: dict[str, Reservation] = {}
        # The last session, reused while nothing changes and nothing waits (run_session_reusing).
        self._last_session = LastSession()
        # Run times of finished gangs, for queues that learn them; the leader keeps the part of
        # the queues that opt in in a ConfigMap (history_store.py).
        self._history = RuntimeHistory()
        self.history_store: HistoryStore | None = None
        if opts.runtime_history_configmap and opts.status_writes:
            self.history_store = HistoryStore(
                api, opts.runtime_history_namespace, opts.runtime_history_configmap, self.events
            )
        self._reported_error: str | None = None
        self.wake = asyncio.Event()
        # VolumeBinding's PreBind: the claims a gang's session chose, written and waited for
        # before any pod of the gang is bound.
        self.prebind = PreBind(
            api, self.pvs, self.pvcs, sync=self._sync_volume, timeout=self.options.volume_bind_timeout
        )
        # DynamicResources' PreBind: the claims' allocation and reservation, written before any
        # pod of the gang is bound.
        self.device_prebind = DevicePreBind(api, self.resource_claims, sync=self._sync_resource_claim)
        self.binder = Binder(
            api,
            self.assumed,
            self.events,
            self.metrics,
            throttle,
            concurrency=self.options.bind_concurrency,
            backoff=self.options.bind_backoff,
            sync_pod=self._sync_pod,
            wake=self.wake,
        )
        self.reporter = Reporter(
            api,
            self.pods,
            self.podgroups,
            self.queues,
            self.assumed,
            self.events,
            self.metrics,
            status_throttle,
            k8s_podgroups=self.k8s_podgroups,
            scheduler_names=self.options.scheduler_names,
            gang_creation_grace=self.options.gang_creation_grace,
            now=now,
            status_writes=opts.status_writes,
            podgroup_interval=opts.podgroup_status_interval,
            settle=opts.podgroup_settle,
            queue_interval=opts.queue_status_interval,
        )
        self.cycles = 0
        self.last_result: SessionResult | None = None
        self._wire()

    # -- informer wiring --------------------------------------------------------------------

    def _pending_ours(self, pod: Mapping[str, Any]) -> bool:
        return pending_ours(pod, self.options.scheduler_names)

    def _wire(self) -> None:
        def group_of(p: Obj) -> list[str]:
            g = podgroup_key_of(p)
            return [g] if g else []

        self.pods.add_index("group", group_of)
        wake = self.wake.set

        def pod_added(p: Obj) -> None:
            key = namespaced_key(p)
            self.assumed.observe(p, key)
            self._sync_pod(key)
            if self._pending_ours(p):
                wake()

        def pod_updated(old: Obj, new: Obj) -> None:
            key = namespaced_key(new)
            self.assumed.observe(new, key)
            self._sync_pod(key)
            if spec_of(new).get("nodeName"):
                self.reporter.pod_bound(key)
            terminal_old = (old.get("status") or {}).get("phase") in TERMINAL_PHASES
            terminal_new = (new.get("status") or {}).get("phase") in TERMINAL_PHASES
            # Our own condition patches and binds change neither of these: no wake-up loop.
            if terminal_old != terminal_new or (
                self._pending_ours(new)
                and (
                    spec_of(old).get("schedulingGates") != spec_of(new).get("schedulingGates")
                    or meta(old).get("annotations") != meta(new).get("annotations")
                    or meta(old).get("labels") != meta(new).get("labels")
                )
            ):
                wake()

        def pod_deleted(p: Obj) -> None:
            key = namespaced_key(p)
            self.assumed.observe(None, key)
            self.state.remove_pod(key)
            self.reporter.forget_pod(key)
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
            self.reporter.forget_podgroup(namespaced_key(pg))
            wake()

        self.podgroups.add_handler(lambda _o: wake(), spec_changed, podgroup_deleted)

        def k8s_podgroup_changed(old: Obj, new: Obj) -> None:
            # Our own status writes change neither: no wake-up loop.
            if old.get("spec") != new.get("spec") or meta(old).get("annotations") != meta(new).get(
                "annotations"
            ):
                wake()

        self.k8s_podgroups.add_handler(lambda _o: wake(), k8s_podgroup_changed, podgroup_deleted)
        self.hypernodes.add_handler(lambda _o: wake(), spec_changed, lambda _o: wake())

        def queue_changed(old: Obj, new: Obj) -> None:
            if old.get("spec") != new.get("spec") or (old.get("status") or {}).get("state") != (
                new.get("status") or {}
            ).get("state"):
                wake()

        self.queues.add_handler(lambda _o: wake(), queue_changed, lambda _o: wake())
        self.priority_classes.add_handler(lambda _o: wake(), lambda _o, _n: wake(), lambda _o: wake())
        self.pdbs.add_handler(lambda _o: wake(), lambda _o, _n: wake(), lambda _o: wake())
        self.quotas.add_handler(lambda _o: wake(), lambda _o, _n: wake(), lambda _o: wake())
        self.namespaces.add_handler(lambda _o: wake(), lambda _o, _n: wake(), lambda _o: wake())
        self._wire_storage()

        if self.configmaps is not None:
            self.configmaps.add_handler(
                self._configmap_event, lambda _old, new: self._configmap_event(new), None
            )

    def _wire_storage(self) -> None:
        """The storage informers feed the state's storage view (claims and volumes through
        PreBind's assumptions) and wake the loop; a claim or volume event also wakes a PreBind
        waiting for its claims."""
        st = self.state.storage
        kinds = (
            (self.storage_classes, st.classes),
            (self.csinodes, st.csinodes),
            (self.csidrivers, st.drivers),
            (self.capacities, st.capacities),
        )
        for informer, kind in kinds:
            self._feed(informer, kind)
        self._feed_volumes(self.pvs, "pv")
        self._feed_volumes(self.pvcs, "pvc")
        self._feed(self.device_classes, st.device_classes)
        self._feed(self.resource_slices, st.resource_slices)
        self._feed(self.claim_templates, st.claim_templates)
        self._feed(self.device_taint_rules, st.device_taint_rules)

        def claim_event(obj: Obj) -> None:
            self._sync_resource_claim(object_key(obj))
            self.wake.set()

        self.resource_claims.add_handler(claim_event, lambda _old, new: claim_event(new), claim_event)

    def _sync_resource_claim(self, key: str) -> None:
        """Show the state a ResourceClaim as a session should see it: PreBind's write where
        one is under way."""
        kind = self.state.storage.resource_claims
        obj = self.device_prebind.claim(key)
        if obj is None:
            kind.remove(key)
        else:
            kind.set(obj)

    def _feed(self, informer: Informer, kind: Any) -> None:
        """``informer``'s objects into one storage kind of the state."""

        def changed(obj: Obj) -> None:
            kind.set(obj)
            self.wake.set()

        def updated(_old: Obj, new: Obj) -> None:
            changed(new)

        def deleted(obj: Obj) -> None:
            kind.remove(kind.key(obj))
            self.wake.set()

        informer.add_handler(changed, updated, deleted)

    def _feed_volumes(self, informer: Informer, what: str) -> None:
        """Volumes (``pv``) or claims (``pvc``) into the state, through PreBind's assumptions."""

        def sync(obj: Obj) -> None:
            self._sync_volume(what, object_key(obj))
            self.prebind.changed.set()
            self.wake.set()

        def updated(_old: Obj, new: Obj) -> None:
            sync(new)

        informer.add_handler(sync, updated, sync)

    def _sync_volume(self, kind: str, key: str) -> None:
        """Show the state a claim (``pvc``) or volume (``pv``) as a session should see it:
        PreBind's write where one is under way."""
        st = self.state.storage
        if kind == "pv":
            obj = self.prebind.pv(key)
            if obj is None:
                st.volumes.remove(key)
            else:
                st.volumes.set(obj)
        else:
            obj = self.prebind.pvc(key)
            if obj is None:
                st.claims.remove(key)
            else:
                st.claims.set(obj)

    def _sync_pod(self, key: str) -> None:
        """Show the state the pod as a session should see it: bound where it is assumed, and
        gone when it is terminating without a node (Volcano: Releasing)."""
        pod = self.pods.get(key)
        if pod is not None and releasing(pod):
            # Even when assumed: the apiserver refuses to bind a pod being deleted, so its room
            # is free now (as in the from-scratch listing, :meth:`_listing`).
            pod = None
        elif pod is not None and not spec_of(pod).get("nodeName"):
            a = self.assumed.get(key)
            if a is not None and str(meta(pod).get("uid") or "") == a.uid:
                pod = {**pod, "spec": {**spec_of(pod), "nodeName": a.node}}
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
        return self.assumed.overlay(p for p in self.pods.objects() if not releasing(p))

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
                verify_state(self.state, snap, rebuilt)
        assert snap is not None
        result = run_session_reusing(
            self._last_session,
            snap,
            config,
            nominations,
            now=parse_rfc3339(self._now()),
            reservations=reservations,
            history=self._history,
        )
        return snap, result

    def _with_upstream(self, podgroups: list[PodGroup]) -> list[PodGroup]:
        """Volcano's PodGroups and the jobs made from Kubernetes' own (a Volcano PodGroup of
        the same name wins, said once in the log)."""
        made: dict[str, tuple[UpstreamPodGroup, PodGroup]] = {}
        for upg in self._k8s_pg_models.parse():
            seen = self._upstream_jobs.get(upg.key)
            made[upg.key] = seen if seen is not None and seen[0] is upg else (upg, as_volcano_podgroup(upg))
        self._upstream_jobs = made
        out, clashes = with_upstream(podgroups, (pg for _, pg in made.values()))
        for key in set(clashes) - self._clashes:
            log.warning(
                "PodGroup.scheduling.k8s.io %s: a Volcano PodGroup of the same name is scheduled instead", key
            )
        self._clashes = set(clashes)
        return out

    async def run_cycle(self) -> SessionResult:
        """Snapshot, decide, assume, start binds, queue status reports. Returns the session result."""
        t0 = time.perf_counter()
        if self.conf.poll_file():
            self.metrics.config_loads.labels("ok").inc()
        elif self.conf.source.path is not None:
            self._config_outcome(False, None)
        podgroups = self.reporter.with_admissions(self._pg_models.parse())
        podgroups = self._with_upstream(podgroups)
        queues = self._queue_models.parse()
        hypernodes = self._hn_models.parse()
        pcs = self.priority_classes.objects()
        self.metrics.skipped.set(
            len(self._pg_models.invalid)
            + len(self._k8s_pg_models.invalid)
            + len(self._queue_models.invalid)
            + len(self._hn_models.invalid)
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
            st.replace_policies(self.pdbs.objects(), self.quotas.objects())
            st.replace_namespaces(self.namespaces.objects())
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
                "pdbs": self.pdbs.objects(),
                "quotas": self.quotas.objects(),
                "namespaces": self.namespaces.objects(),
                # Claims and volumes with PreBind's writes under way, as the state shows them.
                "storage": StorageListing(
                    claims=[o for k in list(self.pvcs.store) if (o := self.prebind.pvc(k)) is not None],
                    volumes=[o for k in list(self.pvs.store) if (o := self.prebind.pv(k)) is not None],
                    classes=self.storage_classes.objects(),
                    csinodes=self.csinodes.objects(),
                    drivers=self.csidrivers.objects(),
                    capacities=self.capacities.objects(),
                    device_classes=self.device_classes.objects(),
                    resource_slices=self.resource_slices.objects(),
                    resource_claims=[
                        o
                        for k in list(self.resource_claims.store)
                        if (o := self.device_prebind.claim(k)) is not None
                    ],
                    claim_templates=self.claim_templates.objects(),
                    device_taint_rules=self.device_taint_rules.objects(),
                ),
            }
        decided, result = await asyncio.to_thread(
            self._decide, snap, rebuild, self.config, self.evictor.held(), dict(self.reservations)
        )
        self.metrics.session.observe(time.perf_counter() - t0)
        self.cycles += 1
        ran = result is not self.last_result
        self.last_result = result
        self._apply(decided, result)
        # The gauges are not on the binding path: the binds above are under way meanwhile.
        await asyncio.to_thread(self.fragmentation.observe, decided, result.bindings)
        cycle_seconds = time.perf_counter() - t0
        self.metrics.cycle.observe(cycle_seconds)
        open_seconds = decided.build_seconds + result.open_seconds
        self.metrics.volcano.observe_cycle(cycle_seconds, open_seconds, decided, result, ran)
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
                try:
                    # The claims the session chose, assumed now (before any await) and written
                    # before the gang's first bind (VolumeBinding's PreBind, then
                    # DynamicResources').
                    writes = self.prebind.plan(pods, result.volumes) if result.volumes else []
                    device_writes = (
                        self.device_prebind.plan(pods, result.claims) if self._has_claims(pods) else []
                    )
                except PreBindError as exc:
                    for w in writes:
                        self.prebind.assumed.drop(
                            "pv" if w.volume is not None else "pvc", w.volume or w.claim
                        )
                        self._sync_volume("pv" if w.volume is not None else "pvc", w.volume or w.claim)
                    log.info("job %s: %s since the session; deciding the job again", jkey, exc)
                    self.wake.set()
                    continue
                gang = GangBinds(jkey)
                steps = self._prebind_steps(writes, device_writes, gang)
                decided = []
                for (pkey, node), pod in zip(members, pods, strict=True):
                    assumed = self.assumed.assume(pkey, uid_of[pkey], node, jkey)
                    self._sync_pod(pkey)
                    self.metrics.decisions.inc()
                    self.metrics.volcano.task_assumed(meta(pod).get("creationTimestamp"))
                    decided.append((assumed, pod))
                if steps:
                    self.binder.start_after_prebind(steps, decided, gang)
                else:
                    for assumed, pod in decided:
                        self.binder.start(assumed, pod, gang)
        self.reporter.queue_reports(result, snap)
        self._report_reservations(result)
        self.evictor.after_session(result.evictions, result.nominations, self.pods.get, self.podgroups.get)

    @staticmethod
    def _has_claims(pods: list[Obj]) -> bool:
        return any((p.get("spec") or {}).get("resourceClaims") for p in pods)

    def _prebind_steps(
        self, writes: list[Any], device_writes: list[DeviceWrite], gang: GangBinds
    ) -> list[PreBindStep]:
        """The gang's PreBind steps; a pod of it left unbound gives its ResourceClaims back."""
        steps: list[PreBindStep] = []
        if writes:
            steps.append(
                PreBindStep(
                    "VolumeBinding",
                    lambda exist: self.prebind.run(writes, exist),
                    lambda: self.prebind.give_back(writes),
                )
            )
        if device_writes:
            dp = self.device_prebind
            steps.append(
                PreBindStep(
                    "DynamicResources",
                    lambda exist: dp.run(device_writes, exist),
                    lambda: dp.give_back(device_writes),
                )
            )
            uid_of = {k: u for w in device_writes for k, u in w.pods}

            def unbound(pod_key: str) -> None:
                uid = uid_of.get(pod_key)
                if uid is not None:
                    task = asyncio.create_task(dp.give_back(device_writes, {uid}))
                    self.binder.in_flight.add(task)
                    task.add_done_callback(self.binder.in_flight.discard)

            gang.unbound = unbound
        return steps

    def _report_reservations(self, result: SessionResult) -> None:
        """Keep the holds for the next session; an event on the PodGroup when one starts."""
        for jkey, res in result.reservations.items():
            prev = self.reservations.get(jkey)
            pg = self.podgroups.get(jkey)
            if pg is not None and (prev is None or prev.hypernode != res.hypernode):
                self.events.record(pg, "Normal", "HyperNodeReserved", res.message())
        self.reservations = dict(result.reservations)

    # -- the loop ---------------------------------------------------------------------------

    async def schedule(self) -> None:
        """Run cycles until cancelled (the leader's work). Informers must be running.

        On cancellation: no new cycle, binds not yet sent are dropped, binds in flight get
        ``bind_drain_timeout`` to finish, then pending events are flushed (best effort).
        """
        self.binder.stopping = False
        workers = [
            asyncio.create_task(self.reporter.worker()) for _ in range(max(1, self.options.status_workers))
        ]
        flusher = asyncio.create_task(self.reporter.flush_events(min(1.0, self.options.schedule_period)))
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
            if self.history_store is not None:
                await self.history_store.load(self._history)
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
                if self.history_store is not None and self.history_store.due(self._history):
                    await self.history_store.save(self._history, self._learning_queues())
        finally:
            self.binder.stopping = True
            if not await self.binder.drain(self.options.bind_drain_timeout):
                log.warning("%d binds still in flight at shutdown; cancelling", len(self.binder.in_flight))
                for t in list(self.binder.in_flight):
                    t.cancel()
            await self.evictor.drain(self.options.bind_drain_timeout)
            self.reporter.status_queue.shutdown()
            flusher.cancel()
            for w in workers:
                w.cancel()
            await asyncio.gather(flusher, *workers, return_exceptions=True)
            if self.history_store is not None:
                try:  # what was learned since the last write, for whoever leads next
                    async with asyncio.timeout(2.0):
                        await self.history_store.save(self._history, self._learning_queues())
                except Exception as exc:  # best effort on the way out
                    log.info("final runtime history write: %s", exc)
            try:
                async with asyncio.timeout(2.0):
                    await self.events.flush()
            except Exception as exc:  # best effort on the way out
                log.info("final event flush: %s", exc)

    def _learning_queues(self) -> set[str]:
        """The queues whose run times are kept: the ones annotated to learn them."""
        out = set()
        for q in self.queues.objects():
            md = q.get("metadata") or {}
            if opted_in(md.get("annotations"))[0]:
                out.add(str(md.get("name")))
        return out

    async def run(self) -> None:
        """Informers plus :meth:`schedule`, until cancelled (no leader election)."""
        tasks = await self.start_informers()
        try:
            await self.schedule()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["Metrics", "Scheduler", "SchedulerOptions"]
