"""Wires informers and work queues to the pure reconcilers and applies their results.

* **Job controller** (key ``namespace/name``): reads the Job, its PodGroup and its pods
  from the informers, calls :func:`controller.job.reconcile.reconcile_job`, then creates
  or updates the PodGroup, creates/deletes pods and merge-patches ``status`` through the
  status subresource. Pod and PodGroup events requeue their owning Job. Pod names are
  deterministic, so acting on a slightly stale cache is harmless: a second create gets
  AlreadyExists, a second delete NotFound, and both are ignored (this replaces
  client-go's "expectations").
* **HyperNode controller** (key ``name``): :func:`controller.hypernode.status.compute_status`
  and a status patch when it differs. Any spec change of a HyperNode, and any node
  add/delete/label change, requeues every HyperNode: counts and Ready depend on
  parents, children and nodes. Our own status writes do not requeue anything.
* **Discovery** (single key): when Volcano's ``volcano-controller-configmap`` enables
  the ``label`` source, node label changes and HyperNode deletions re-run
  :func:`controller.hypernode.discovery.discover_from_labels` and its diff is applied.
  An enabled ``ufm`` source is fetched at its interval (and at once after a ConfigMap
  change) by :meth:`ControllerManager.run_ufm_discovery`; a failed or partial fetch keeps
  the last good HyperNodes, and every HyperNode of a source carries a ``Discovery``
  condition with the outcome of that source's last run.

* **Queue controller** (key ``name``): :func:`controller.queue.status.queue_status`, the
  queue's state and its PodGroup counts per phase, patched when they differ (the scheduler
  owns ``status.allocated``; it is never touched here). PodGroup events requeue the queue
  they name (and the one they named before); queue events requeue the queue.
* **Queue commands** (key ``namespace/name``): a ``bus.volcano.sh`` Command targeting a
  Queue (what ``vcctl queue operate --action open|close`` creates) is judged by
  :func:`controller.queue.command.judge`, deleted (with a uid precondition), and only then
  its action handed to the queue's reconcile, which applies it with the status patch; a
  dropped Command (unknown action, missing queue) is deleted with a log line saying why.
  Deleting first, as Volcano does, applies a command at most once: a Command seen twice
  (a re-list, a restart) finds nothing left to delete and is skipped. The accepted action
  is kept in memory and retried with the queue's backoff until its status patch lands; a
  crash between the delete and that patch loses it (Volcano accepts the same), and the
  user, seeing the Command gone and the state unchanged, runs ``vcctl queue operate``
  again. One worker serves Commands, so they apply in the order they were created.

A failed reconcile is retried with the queue's per-key exponential backoff; a success
forgets the key's failures. Objects that fail model validation are logged and dropped
(retrying cannot fix them; the next edit requeues them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import ValidationError

from controller.hypernode.discovery import (
    CONFIGMAP_NAME,
    LABEL_SOURCE,
    DiscoveryConfig,
    DiscoveryConfigError,
    DiscoveryError,
    DiscoveryResult,
    DiscoverySource,
    discover_from_labels,
    discover_from_ufm,
    label_tiers,
    parse_discovery_config,
    source_of,
)
from controller.hypernode.status import TopologyIndex, compute_status
from controller.hypernode.ufm import (
    UFM_SOURCE,
    UfmError,
    credentials_from_secret,
    fetch_ports,
    leaf_groups,
    ufm_settings,
)
from controller.job.reconcile import find_podgroup, reconcile_job
from controller.podgroup.sync import PodGroupController
from controller.queue.command import judge
from controller.queue.status import owned_part, podgroup_queue, queue_status
from hyperplace.api import Command, Condition, HyperNode, Job, PodGroup
from hyperplace.api.constants import BATCH_GROUP, DEFAULT_SCHEDULER_NAME, JOB_NAME_KEY
from hyperplace.api.times import rfc3339
from hyperplace.kube.members import MemberIndex, node_labels_of
from hyperplace.pki import commandmark
from hyperplace.runtime.api import (
    COMMANDS,
    CONFIGMAPS,
    HYPERNODES,
    JOBS,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    SECRETS,
    ApiClient,
    ApiError,
    Obj,
    meta,
)
from hyperplace.runtime.informer import Informer, wait_for_sync
from hyperplace.runtime.parallel import run_bounded
from hyperplace.runtime.status_writer import StatusWriter
from hyperplace.runtime.workqueue import WorkQueue

log = logging.getLogger(__name__)

DISCOVERY_KEY = "discovery"
# HyperNode condition saying how the last run of the HyperNode's discovery source went.
DISCOVERY_CONDITION = "Discovery"
MAX_DISCOVERY_MESSAGE = 4096


@dataclass
class ManagerConfig:
    workers: int = 4
    # Pod creates (and deletes) of one Job in flight at once, over the one connection pool
    # (Volcano's job controller creates a job's pods in parallel too).
    pod_concurrency: int = 64
    # Where Volcano's controller ConfigMap lives (Volcano: $KUBE_POD_NAMESPACE).
    config_namespace: str = "volcano-system"
    config_map: str = CONFIGMAP_NAME
    # Seeds discovery's random HyperNode name suffixes (None: from the OS).
    seed: int | None = None
    # Pods naming one of these get a PodGroup when they have none (Volcano: --scheduler-name).
    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    # Copy the owner's volcano.sh/ annotations and read its group-min-member (Volcano's default).
    inherit_owner_annotations: bool = True
    # Queue Commands are obeyed only with a valid admission marker made with this key
    # (hyperplace.pki.commandmark); without a key none is, unless unadmitted ones are accepted
    # (Volcano's behaviour).
    command_key: bytes | None = None
    accept_unadmitted_commands: bool = False


def owning_job_key(obj: Mapping[str, Any]) -> str | None:
    """``namespace/job`` of the Volcano Job controlling a pod or PodGroup."""
    m = meta(obj)
    ns = m.get("namespace")
    for ref in m.get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == "Job"
            and str(ref.get("apiVersion", "")).startswith(BATCH_GROUP + "/")
        ):
            return f"{ns}/{ref.get('name')}"
    job = (m.get("labels") or {}).get(JOB_NAME_KEY)
    return f"{ns}/{job}" if job else None


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


@dataclass(frozen=True, eq=False)
class PendingAction:
    """A queue Command's action, accepted (its Command deleted) and not yet applied."""

    action: str
    command: str  # namespace/name of the Command it came from, for log lines


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return (meta(obj).get("labels") or {}) if obj else {}


class Metrics:
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


class ControllerManager:
    """Owns the informers, queues and workers of both controllers."""

    def __init__(
        self,
        api: ApiClient,
        config: ManagerConfig | None = None,
        *,
        registry: CollectorRegistry | None = None,
        now: Callable[[], str] = rfc3339,
    ) -> None:
        self.api = api
        self.status_writer = StatusWriter(api)
        self.config = config or ManagerConfig()
        self.registry = registry or CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self._now = now
        self._rng = random.Random(self.config.seed)

        self.jobs = Informer(api, JOBS)
        self.pods = Informer(api, PODS)
        self.podgroups = Informer(api, PODGROUPS)
        self.hypernodes = Informer(api, HYPERNODES)
        self.nodes = Informer(api, NODES)
        self.priority_classes = Informer(api, PRIORITY_CLASSES)
        self.configmaps = Informer(api, CONFIGMAPS, self.config.config_namespace)
        self.queue_objs = Informer(api, QUEUES)
        self.commands = Informer(api, COMMANDS)
        self.informers = [
            self.jobs,
            self.pods,
            self.podgroups,
            self.hypernodes,
            self.nodes,
            self.priority_classes,
            self.configmaps,
            self.queue_objs,
            self.commands,
        ]
        # PriorityClasses only refine minResources' task order; a cluster whose RBAC does
        # not grant them must not keep the controllers from starting. Nor must a cluster whose
        # Command CRD is not installed yet: queue Commands are then served once it is.
        # PodGroups for pods of any owner (controller.podgroup); its owner informers are
        # optional too: without them (RBAC) PodGroups are still made, with minMember 1.
        self.podgroup_ctl = PodGroupController(
            api,
            self.pods,
            self.podgroups,
            self.status_writer,
            scheduler_names=self.config.scheduler_names,
            inherit_owner_annotations=self.config.inherit_owner_annotations,
            now=now,
            on_write=lambda res, verb: self.metrics.writes.labels(res, verb).inc(),
            tier_of_label=self._tier_of_label,
        )
        self.informers += self.podgroup_ctl.informers
        optional = (self.priority_classes, self.commands, *self.podgroup_ctl.informers)
        self.required_informers = [i for i in self.informers if i not in optional]

        self.job_queue: WorkQueue[str] = WorkQueue(name="jobs")
        self.hypernode_queue: WorkQueue[str] = WorkQueue(name="hypernodes")
        self.discovery_queue: WorkQueue[str] = WorkQueue(name="discovery")
        self.queue_queue: WorkQueue[str] = WorkQueue(name="queues")
        self.command_queue: WorkQueue[str] = WorkQueue(name="commands")
        self.queues = [
            self.job_queue,
            self.hypernode_queue,
            self.discovery_queue,
            self.queue_queue,
            self.command_queue,
            self.podgroup_ctl.queue,
        ]
        for q in self.queues:
            self.metrics.depth.labels(q.name).set_function(q.__len__)

        self._command_nonces = commandmark.NonceLog()
        # queue name -> the action of its last accepted Command, until a status patch applies it.
        self.queue_actions: dict[str, PendingAction] = {}
        self.discovery: DiscoveryConfig = DiscoveryConfig()
        # source -> (status, reason, message) of its last run, shown on its HyperNodes.
        self.source_conditions: dict[str, tuple[str, str, str]] = {}
        self._ufm_wake = asyncio.Event()  # config changed: re-read and run UFM discovery now
        self._insecure_warned = False
        self._hn_models: dict[str, tuple[str, HyperNode]] = {}  # name -> (resourceVersion, model)
        self._hn_view: dict[str, HyperNode] | None = None  # _hypernode_models() until the store changes
        self._node_labels: dict[str, dict[str, str]] | None = None
        # Shared by every HyperNode reconcile until a spec or a node changes.
        self._topology: TopologyIndex | None = None
        # HyperNode members, kept resolved across changes (only what changed is re-resolved).
        self._members = MemberIndex()
        self._started = False
        self._wire()

    # -- event wiring -----------------------------------------------------------------------

    def _wire(self) -> None:
        self.pods.add_index("job", lambda o: [k] if (k := owning_job_key(o)) else [])

        def job_key(o: Obj) -> None:
            ns, name = meta(o).get("namespace"), meta(o).get("name")
            self.job_queue.add(f"{ns}/{name}")

        def owner(o: Obj) -> None:
            key = owning_job_key(o)
            if key:
                self.job_queue.add(key)

        self.jobs.add_handler(job_key, lambda _old, new: job_key(new), job_key)
        self.pods.add_handler(owner, lambda _old, new: owner(new), owner)
        self.podgroups.add_handler(owner, lambda _old, new: owner(new), owner)

        # Queue controller: a PodGroup counts in the queue it names.
        self.podgroups.add_index("queue", lambda o: [podgroup_queue(o)])

        def pg_queue(o: Obj) -> None:
            self.queue_queue.add(podgroup_queue(o))

        def pg_queue_changed(old: Obj, new: Obj) -> None:
            if podgroup_queue(old) != podgroup_queue(new):
                pg_queue(old)
            if (old.get("status") or {}).get("phase") != (new.get("status") or {}).get(
                "phase"
            ) or podgroup_queue(old) != podgroup_queue(new):
                pg_queue(new)

        self.podgroups.add_handler(pg_queue, pg_queue_changed, pg_queue)

        def queue_event(o: Obj) -> None:
            self.queue_queue.add(str(meta(o).get("name")))

        def queue_changed(old: Obj, new: Obj) -> None:
            # The scheduler's allocated writes change nothing the controller computes.
            if owned_part(old.get("status")) != owned_part(new.get("status")) or old.get("spec") != new.get(
                "spec"
            ):
                queue_event(new)

        self.queue_objs.add_handler(queue_event, queue_changed, lambda _o: None)

        def command_event(o: Obj) -> None:
            # Volcano's filter (IsQueueReference): only Commands targeting a Queue are ours.
            target = o.get("target") or {}
            if (
                isinstance(target, Mapping)
                and target.get("kind") == "Queue"
                and target.get("apiVersion") == QUEUES.api_version
            ):
                self.command_queue.add(f"{meta(o).get('namespace')}/{meta(o).get('name')}")

        self.commands.add_handler(command_event, lambda _old, new: command_event(new), lambda _o: None)

        def hn_changed(old: Obj, new: Obj) -> None:
            # Our own status patches change neither spec nor labels: no requeue, no loop.
            if old.get("spec") != new.get("spec") or _labels(old) != _labels(new):
                self._all_hypernodes()

        def hn_deleted(_o: Obj) -> None:
            self._all_hypernodes()
            self._trigger_discovery()

        self.hypernodes.add_handler(lambda _o: self._all_hypernodes(), hn_changed, hn_deleted)

        def hn_store_changed(*_: Obj) -> None:
            self._hn_view = None  # status patches included: the models carry the status too

        self.hypernodes.add_handler(hn_store_changed, hn_store_changed, hn_store_changed)

        def node_event(_o: Obj) -> None:
            self._node_labels = None
            self._all_hypernodes()
            self._trigger_discovery()

        def node_changed(old: Obj, new: Obj) -> None:
            if _labels(old) != _labels(new):
                node_event(new)

        self.nodes.add_handler(node_event, node_changed, node_event)

        def cm_event(o: Obj) -> None:
            if meta(o).get("name") == self.config.config_map:
                self._load_discovery_config(o)

        def cm_deleted(o: Obj) -> None:
            if meta(o).get("name") == self.config.config_map:
                self.discovery = DiscoveryConfig()
                self._ufm_wake.set()

        self.configmaps.add_handler(cm_event, lambda _old, new: cm_event(new), cm_deleted)

    def _tier_of_label(self, key: str) -> int | None:
        """The HyperNode tier label discovery builds from the node label ``key`` (None: none)."""
        source = self.discovery.enabled(LABEL_SOURCE)
        if source is None:
            return None
        types, _ = label_tiers(source.config)
        return next((t for keys in types.values() for t, k in enumerate(keys, start=1) if k == key), None)

    def _all_hypernodes(self) -> None:
        self._topology = None  # called on every change that can alter counts or readiness
        for name in self.hypernodes.store:
            self.hypernode_queue.add(name)

    def _trigger_discovery(self) -> None:
        if self.discovery.enabled(LABEL_SOURCE) is not None:
            # A short delay coalesces a burst of node events into one run (as Volcano does).
            self.discovery_queue.add_after(DISCOVERY_KEY, 0.001)

    def _load_discovery_config(self, cm: Obj) -> None:
        try:
            self.discovery = parse_discovery_config(cm)
        except DiscoveryConfigError as exc:
            log.error("discovery config %s: %s", self.config.config_map, exc)
            self.discovery = DiscoveryConfig()
            return
        # Any ConfigMap change restarts discovery in Volcano; here it re-runs it.
        self._trigger_discovery()
        self._ufm_wake.set()

    # -- caches -----------------------------------------------------------------------------

    def _hypernode_models(self) -> dict[str, HyperNode]:
        """name -> parsed HyperNode of the informer's store (shared: do not change it).

        Kept until the store changes: every HyperNode reconcile asks for all of them, and
        re-walking the store each time was O(HyperNodes^2) per pass, which at 666 HyperNodes
        over 10k nodes kept the controller's event loop busy enough to starve its Job
        reconciles (pods created at 2/s)."""
        if self._hn_view is not None:
            return self._hn_view
        out: dict[str, HyperNode] = {}
        fresh: dict[str, tuple[str, HyperNode]] = {}
        for name, obj in self.hypernodes.store.items():
            rv = str(meta(obj).get("resourceVersion", ""))
            cached = self._hn_models.get(name)
            if cached is not None and cached[0] == rv:
                model = cached[1]
            else:
                try:
                    model = HyperNode.model_validate(obj)
                except ValidationError:
                    continue
            fresh[name] = (rv, model)
            out[name] = model
        self._hn_models = fresh
        self._hn_view = out
        return out

    def _current_node_labels(self) -> dict[str, dict[str, str]]:
        if self._node_labels is None:
            self._node_labels = node_labels_of(self.nodes.objects())
        return self._node_labels

    # -- reconcilers ------------------------------------------------------------------------

    async def reconcile_job(self, key: str) -> None:
        obj = self.jobs.get(key)
        if obj is None:
            return  # deleted: ownerReferences let the garbage collector remove the rest
        job = Job.model_validate(obj)
        if job.metadata.deletion_timestamp:
            return
        ns = job.namespace
        pg_obj = find_podgroup(job, lambda name: self.podgroups.get(f"{ns}/{name}"))
        pg = PodGroup.model_validate(pg_obj) if pg_obj is not None else None
        prios = {
            str(meta(pc).get("name")): int(pc.get("value") or 0) for pc in self.priority_classes.objects()
        }
        result = reconcile_job(
            job, pg, self.pods.by_index("job", key), now=self._now(), priority_classes=prios
        )

        if pg is None:
            await self._create(PODGROUPS, result.podgroup.to_dict(), ns)
        elif result.podgroup_changed:
            await self.api.replace(PODGROUPS, result.podgroup.to_dict(), ns)
            self.metrics.writes.labels("podgroups", "update").inc()
        limit = self.config.pod_concurrency

        async def create(pod: Obj) -> None:
            await self._create(PODS, pod, ns)

        async def delete(name: str) -> None:
            try:
                await self.api.delete(PODS, name, ns)
                self.metrics.writes.labels("pods", "delete").inc()
            except ApiError as exc:
                if not exc.not_found:
                    raise

        # Every create and delete is tried; the first failure then fails the reconcile, which
        # retries with backoff (the pods that were created are in the informer by then).
        errors = await run_bounded(result.create_pods, create, limit)
        errors += await run_bounded(result.delete_pods, delete, limit)
        if errors:
            if len(errors) > 1:
                log.warning("job %s: %d pod writes failed, first: %s", key, len(errors), errors[0])
            raise errors[0]
        await self._patch_status(JOBS, job.name, ns, obj.get("status"), result.status.to_dict())

    async def reconcile_hypernode(self, name: str) -> None:
        obj = self.hypernodes.get(name)
        if obj is None:
            return
        models = self._hypernode_models()
        hn = models.get(name)
        if hn is None:
            log.warning("hypernode %s does not validate; skipping", name)
            return
        if self._topology is None:
            self._members.sync_nodes(self._current_node_labels())
            self._members.sync_hypernodes(models.values())
            self._topology = TopologyIndex(models, self._current_node_labels(), self._members)
        status = compute_status(
            hn, self._current_node_labels(), models, now=self._now(), index=self._topology
        )
        source = source_of(hn)
        if source is not None and source in self.source_conditions:
            st, reason, message = self.source_conditions[source]
            old = next((c for c in status.conditions or [] if c.type == DISCOVERY_CONDITION), None)
            since = old.last_transition_time if old is not None and old.status == st else None
            cond = Condition(
                type=DISCOVERY_CONDITION,
                status=st,
                reason=reason,
                message=message[:MAX_DISCOVERY_MESSAGE],
                last_transition_time=since or self._now(),
                observed_generation=hn.metadata.generation,
            )
            rest = [c for c in status.conditions or [] if c.type != DISCOVERY_CONDITION]
            status.conditions = [*rest, cond]
        await self._patch_status(HYPERNODES, name, None, obj.get("status"), status.to_dict())

    async def reconcile_queue(self, name: str) -> None:
        """State and PodGroup counts of one queue, patched when they differ, with the action
        of an accepted Command applied (and forgotten once its patch landed)."""
        pending = self.queue_actions.get(name)
        obj = self.queue_objs.get(name)
        if obj is None:
            if pending is not None and await self._queue_exists(name):
                self.queue_queue.add_rate_limited(name)  # not in the cache yet: wait for it
                return
            if pending is not None:
                del self.queue_actions[name]
                log.warning(
                    "queue %s was deleted before %s of command %s was applied; dropped",
                    name,
                    pending.action,
                    pending.command,
                )
                self.metrics.commands.labels(pending.action, "dropped").inc()
            return
        action = pending.action if pending is not None else None
        want = queue_status(obj, self.podgroups.by_index("queue", name), action)
        have = owned_part(obj.get("status"))
        if have != want:
            # Only what changed: a counts update never rewrites the state it read.
            body: dict[str, Any] = {"status": {k: v for k, v in want.items() if have.get(k) != v}}
            if have.get("state") != want["state"]:
                # A state change is computed from the state read; on a stale read (our own
                # last write not seen yet) it would undo that write, so it is conditional:
                # 409 Conflict, and the retry reads the newer object.
                body["metadata"] = {"resourceVersion": meta(obj).get("resourceVersion")}
            await self.status_writer.patch_status(QUEUES, name, body, None)
            self.metrics.writes.labels("queues", "patch-status").inc()
        if pending is not None:
            log.info(
                "queue %s: %s (command %s): state %s -> %s",
                name,
                pending.action,
                pending.command,
                have.get("state"),
                want["state"],
            )
            self.metrics.commands.labels(pending.action, "applied").inc()
            # A newer Command accepted meanwhile stays: its key is queued again already.
            if self.queue_actions.get(name) is pending:
                del self.queue_actions[name]

    async def reconcile_command(self, key: str) -> None:
        """Serve one queue Command: delete it, then hand its action to the queue's reconcile
        (or drop it, saying why). See the module docstring for the order."""
        obj = self.commands.get(key)
        if obj is None:
            return  # deleted: by us (already served) or by its user
        cmd = Command.model_validate(obj)
        if cmd.metadata.deletion_timestamp:
            return
        target = cmd.target_queue()
        if target is None:
            return  # not a queue's Command (a Job's is not served here)
        exists = self.queue_objs.get(target) is not None or await self._queue_exists(target)
        verdict = judge(cmd, lambda _q: exists, self._not_admitted(obj))
        if verdict is None:
            return
        ns, name = cmd.namespace, cmd.name
        try:
            await self.api.delete(COMMANDS, name, ns, uid=cmd.metadata.uid)
        except ApiError as exc:
            if exc.not_found:
                return  # seen twice: the first sighting deleted and applied it
            if exc.conflict:
                return  # the name now holds a newer Command; its own event queues it
            raise
        self.metrics.writes.labels("commands", "delete").inc()
        if verdict.dropped:
            log.warning(
                "command %s (%s on queue %s) deleted without effect: %s",
                key,
                verdict.action or "no action",
                verdict.queue,
                verdict.reason,
            )
            self.metrics.commands.labels(verdict.action or "", "dropped").inc()
            return
        nonce = None if self.config.accept_unadmitted_commands else commandmark.nonce_of(obj)
        if nonce is not None and not self._command_nonces.use(*nonce):
            # Checked once the Command is deleted, so a retried reconcile is not taken for it.
            log.warning("command %s deleted without effect: its admission marker was used already", key)
            self.metrics.commands.labels(verdict.action, "dropped").inc()
            return
        self.metrics.commands.labels(verdict.action, "accepted").inc()
        self.queue_actions[verdict.queue] = PendingAction(verdict.action, key)
        self.queue_queue.add(verdict.queue)

    def _not_admitted(self, obj: Mapping[str, Any]) -> str | None:
        """Why a queue Command may not be obeyed (see controller.queue.command); None: it may."""
        if self.config.accept_unadmitted_commands:
            return None
        if self.config.command_key is None:
            return "this controller has no --command-key-file to check admission markers with"
        return commandmark.verify(self.config.command_key, obj)

    async def _queue_exists(self, name: str) -> bool:
        """Asks the API server: a queue created a moment before its Command may not have
        reached the informer yet, and dropping the Command as "not found" would lose it."""
        try:
            await self.api.get(QUEUES, name)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def run_discovery(self) -> None:
        if self.discovery.enabled(LABEL_SOURCE) is None:
            return
        existing = list(self._hypernode_models().values())
        result = discover_from_labels(self.discovery, self.nodes.objects(), existing, self._rng)
        await self._apply_discovery(LABEL_SOURCE, result)

    async def run_ufm_discovery(self, source: DiscoverySource) -> bool:
        """One UFM fetch and, when the answer is complete, its diff applied. Never deletes
        on a failed or partial fetch: the HyperNodes stay as they are and carry a
        ``Discovery=False`` condition saying why. Returns whether the run succeeded."""
        try:
            settings = ufm_settings(source.config)
            username = password = None
            if not settings.is_file:
                username, password = await self._ufm_credentials(source)
            if settings.insecure_skip_verify and not self._insecure_warned:
                self._insecure_warned = True
                log.warning("ufm discovery: TLS certificate verification is disabled (insecureSkipVerify)")
            ports = await fetch_ports(settings, username, password)
        except UfmError as exc:
            log.error("ufm discovery: %s; keeping the HyperNodes from the last good answer", exc)
            self._set_source_condition(UFM_SOURCE, "False", "FetchFailed", f"{exc}; last good tree kept")
            self.metrics.reconciles.labels("ufm-discovery", "retry").inc()
            return False
        result = discover_from_ufm(ports, list(self._hypernode_models().values()))
        await self._apply_discovery(UFM_SOURCE, result)
        groups = leaf_groups(ports)
        nodes = len({n for _, ns in groups for n in ns})
        self._set_source_condition(
            UFM_SOURCE,
            "True",
            "Fetched",
            f"{len(groups)} leaf group(s), {nodes} node(s) from {settings.endpoint}",
        )
        self.metrics.reconciles.labels("ufm-discovery", "ok").inc()
        return True

    async def _ufm_credentials(self, source: DiscoverySource) -> tuple[str, str]:
        ref = (source.credentials or {}).get("secretRef") or {}
        name = ref.get("name") if isinstance(ref, Mapping) else None
        if not name:
            raise UfmError("credentials.secretRef: UFM authentication credentials are not configured")
        ns = str(ref.get("namespace") or self.config.config_namespace)
        try:
            secret: Obj | None = await self.api.get(SECRETS, str(name), ns)
        except ApiError as exc:
            if not exc.not_found:
                raise UfmError(f"failed to get secret {ns}/{name}: {exc}") from None
            secret = None
        return credentials_from_secret(secret, f"{ns}/{name}")

    def _set_source_condition(self, source: str, status: str, reason: str, message: str) -> None:
        value = (status, reason, message)
        if self.source_conditions.get(source) != value:
            self.source_conditions[source] = value
            self._all_hypernodes()  # the condition is written with each HyperNode's status

    async def _ufm_loop(self) -> None:
        """Run UFM discovery at its interval while a ``ufm`` source is enabled; a config
        change runs it at once (Volcano restarts its discoverers on any change)."""
        while True:
            self._ufm_wake.clear()
            source = self.discovery.enabled(UFM_SOURCE)
            if source is None:
                await self._ufm_wake.wait()
                continue
            try:
                await self.run_ufm_discovery(source)
            except Exception:  # an API write failed: try again at the next interval
                log.exception("ufm discovery failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ufm_wake.wait(), timeout=source.interval_seconds)

    async def _apply_discovery(self, source: str, result: DiscoveryResult) -> None:
        for warning in result.warnings:
            log.warning("%s discovery: %s", source, warning)
        for hn in result.create:
            await self._create(HYPERNODES, hn.to_dict(), None)
        for hn in result.update:
            body = hn.to_dict()
            body.pop("status", None)
            await self.api.replace(HYPERNODES, body, None)
            self.metrics.writes.labels("hypernodes", "update").inc()
        for name in result.delete:
            try:
                await self.api.delete(HYPERNODES, name)
                self.metrics.writes.labels("hypernodes", "delete").inc()
            except ApiError as exc:
                if not exc.not_found:
                    raise

    async def _create(self, res: Any, body: Obj, namespace: str | None) -> None:
        try:
            await self.api.create(res, body, namespace)
            self.metrics.writes.labels(res.plural, "create").inc()
        except ApiError as exc:
            if not exc.already_exists:
                raise

    async def _patch_status(
        self, res: Any, name: str, namespace: str | None, old: Any, new: dict[str, Any]
    ) -> None:
        old = old if isinstance(old, dict) else {}
        if old == new:
            return
        # A merge patch merges nested objects: stale keys are nulled where they sit.
        body = merge_patch_to(old, new)
        await self.status_writer.patch_status(res, name, {"status": body}, namespace)
        self.metrics.writes.labels(res.plural, "patch-status").inc()

    # -- workers ----------------------------------------------------------------------------

    async def _worker(self, queue: WorkQueue[str], name: str, fn: Callable[[str], Awaitable[None]]) -> None:
        while (key := await queue.get()) is not None:
            start = time.perf_counter()
            try:
                await fn(key)
            except ValidationError as exc:
                log.warning("%s %s: invalid object, dropped: %s", name, key, exc.errors()[:1])
                queue.forget(key)
                self.metrics.reconciles.labels(name, "invalid").inc()
            except (ApiError, DiscoveryError) as exc:
                log.info("%s %s: %s; retrying", name, key, exc)
                queue.add_rate_limited(key)
                self.metrics.reconciles.labels(name, "retry").inc()
            except Exception:
                log.exception("%s %s: reconcile failed", name, key)
                queue.add_rate_limited(key)
                self.metrics.reconciles.labels(name, "error").inc()
            else:
                queue.forget(key)
                self.metrics.reconciles.labels(name, "ok").inc()
            finally:
                queue.done(key)
                self.metrics.duration.labels(name).observe(time.perf_counter() - start)

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.required_informers)

    async def start_informers(self) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(i.run(), name=f"informer-{i.res.plural}") for i in self.informers]

    async def run(self, informer_tasks: list[asyncio.Task[None]] | None = None) -> None:
        """Run until cancelled: informers (unless given), wait for sync, then workers.

        On cancellation the queues stop taking keys, in-flight reconciles finish (up to
        10 s), and informers stop.
        """
        own = informer_tasks is None
        tasks = informer_tasks if informer_tasks is not None else await self.start_informers()
        workers: list[asyncio.Task[None]] = []
        ufm: asyncio.Task[None] | None = None
        try:
            await wait_for_sync(self.required_informers)
            log.info("controller manager: caches synced, starting workers")
            for i in range(self.config.workers):
                workers.append(asyncio.create_task(self._worker(self.job_queue, "job", self.reconcile_job)))
                workers.append(
                    asyncio.create_task(
                        self._worker(self.hypernode_queue, "hypernode", self.reconcile_hypernode)
                    )
                )
                workers.append(
                    asyncio.create_task(self._worker(self.queue_queue, "queue", self.reconcile_queue))
                )
                workers.append(
                    asyncio.create_task(
                        self._worker(self.podgroup_ctl.queue, "podgroup", self.podgroup_ctl.reconcile)
                    )
                )
                if i == 0:  # one discovery at a time; Commands in the order they came
                    workers.append(
                        asyncio.create_task(
                            self._worker(self.command_queue, "command", self.reconcile_command)
                        )
                    )
                    workers.append(
                        asyncio.create_task(
                            self._worker(self.discovery_queue, "discovery", lambda _k: self.run_discovery())
                        )
                    )
            ufm = asyncio.create_task(self._ufm_loop(), name="ufm-discovery")  # not a worker: no drain
            # asyncio.wait, not gather: cancelling run() must not cancel the workers
            # mid-reconcile; they finish their key once the queues shut down.
            await asyncio.wait(workers)
        finally:
            if ufm is not None:
                ufm.cancel()
                await asyncio.gather(ufm, return_exceptions=True)
            for q in self.queues:
                q.shutdown()
            if workers:
                await asyncio.wait(workers, timeout=10)
            for t in workers:
                t.cancel()
            if own:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    async def wait_idle(self, timeout: float = 5.0) -> bool:
        """Test helper: every queue drained (keys neither queued nor in flight)."""
        results = await asyncio.gather(*(q.drain(timeout) for q in self.queues))
        return all(results)
