"""The Volcano Job controller: informers and a work queue around :mod:`controller.job.reconcile`.

Key ``namespace/name``. A reconcile reads the Job, its PodGroup and its pods from the
informers, calls :func:`controller.job.reconcile.reconcile_job`, then creates or updates the
PodGroup, merge-patches ``status`` through the status subresource, marks and deletes pods and
creates the missing ones. Pod and PodGroup events requeue their owning Job. Pod names are
deterministic, so creating or deleting from a slightly stale cache is harmless: a second create
gets AlreadyExists, a second delete NotFound, and both are ignored.

A lifecycle move (phase, version or retry count; :mod:`controller.job.lifecycle`) is not
harmless twice, nor is a stale status written back over it, so every status patch carries the
Job's resourceVersion: a pass that read a stale Job gets 409 Conflict and is retried on the fresh
one. The pods a restart kills are marked out-of-sync first, then the status is written, then
pods are deleted, so a controller that stops half-way finds the restart recorded and finishes it
(the marked pods, and the pods of an older version, are deleted on the next pass) without
counting it again. The pods a pass marked are remembered until the pod informer shows them
marked or gone, so a lagging cache does not replay their failure as a new event.

**PodEvicted.** A pod of a Job deleted without the controller's out-of-sync mark is remembered
(in memory) and handed to the next reconcile as evicted; a terminating pod without the mark is
seen as evicted by the reconcile itself, across restarts too.

**Nodes.** A pod bound to a node that failed is lost with it (:mod:`controller.job.node_failure`):
a Node event whose health changed (its Ready condition, its NoExecute taints) or that deleted it
requeues the Jobs with pods there, and a reconcile looks again when a grace ends. A Node deleted
while this controller watched is gone at once; one that is missing without a delete seen (deleted
while the controller was down, or a watch that lags behind the pod's binding) counts as gone once
it has been missing for the NotReady grace. A pod the lifecycle deletes for it gets no out-of-sync
mark (it is an eviction, as the taint eviction controller's would be); a pod terminating on a node
that is gone or not Ready is force-deleted (grace 0) once it has been stuck past its
``deletionTimestamp`` for ``force_delete_after`` seconds, when that is set.

**Commands.** A ``bus.volcano.sh`` Command whose target is a Volcano Job (``vcctl job suspend``
creates ``AbortJob``, ``resume`` ``ResumeJob``; also ``RestartJob``, ``TerminateJob``,
``CompleteJob``) is deleted first, with a uid precondition, so it applies at most once (as in
Volcano), then its action is handed to the Job's reconcile, which keeps it until the status
patch that applies it lands. The Job is the Command's namesake in the Command's namespace, as
Volcano reads it. A Command with another action is deleted without effect, with a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from controller.kube_io import KubeIO
from hyperplace.api import Command, Job, PodGroup
from hyperplace.api.command import JOB_ACTIONS
from hyperplace.api.constants import BATCH_GROUP, JOB_NAME_KEY, REPLACES_NODE_ANNOTATION
from hyperplace.api.times import parse_rfc3339
from hyperplace.runtime.api import COMMANDS, JOBS, PODGROUPS, PODS, ApiError, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.parallel import run_bounded
from hyperplace.runtime.workqueue import WorkQueue

from .lifecycle import OUT_OF_SYNC_ANNOTATION
from .node_failure import DEFAULT_NOT_READY_GRACE, NO_EXECUTE, ready_condition
from .reconcile import NodeFailures, find_podgroup, reconcile_job

log = logging.getLogger(__name__)


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


def _marked(pod: Obj) -> Obj:
    """A copy of ``pod`` carrying the out-of-sync mark."""
    m = dict(meta(pod))
    m["annotations"] = {**(m.get("annotations") or {}), OUT_OF_SYNC_ANNOTATION: "true"}
    return {**pod, "metadata": m}


def _is_marked(pod: Obj) -> bool:
    return OUT_OF_SYNC_ANNOTATION in (meta(pod).get("annotations") or {})


def _node_of(pod: Obj) -> str | None:
    spec = pod.get("spec")
    name = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return str(name) if name else None


def node_health(node: Obj | None) -> tuple[Any, ...]:
    """What of a Node the job controller reacts to: its Ready condition's status and transition
    time, its NoExecute taints. Heartbeats change none of it, so they requeue nothing."""
    if node is None:
        return ()
    ready = ready_condition(node) or {}
    spec = node.get("spec")
    taints = spec.get("taints") if isinstance(spec, Mapping) else None
    no_execute = sorted(
        (str(t.get("key")), str(t.get("value")), str(t.get("timeAdded")))
        for t in (taints if isinstance(taints, list) else [])
        if isinstance(t, Mapping) and t.get("effect") == NO_EXECUTE
    )
    return (ready.get("status"), ready.get("lastTransitionTime"), tuple(no_execute))


class JobController:
    """Volcano Jobs into PodGroups, pods and Job status; see the module docstring."""

    def __init__(
        self,
        io: KubeIO,
        jobs: Informer,
        pods: Informer,
        podgroups: Informer,
        priority_classes: Informer,
        *,
        pod_concurrency: int,
        now: Callable[[], str],
        commands: Informer | None = None,
        nodes: Informer | None = None,
        not_ready_grace: float = DEFAULT_NOT_READY_GRACE,
        force_delete_after: float | None = None,
        damaged_restart_after: float | None = None,
    ) -> None:
        self.io = io
        self.jobs = jobs
        self.pods = pods
        self.podgroups = podgroups
        self.priority_classes = priority_classes
        self.commands = commands
        self.nodes = nodes
        self.not_ready_grace = not_ready_grace
        self.force_delete_after = force_delete_after
        self.damaged_restart_after = damaged_restart_after
        self.pod_concurrency = pod_concurrency
        self._now = now
        self.queue: WorkQueue[str] = WorkQueue(name="jobs")
        # Job Commands, served one at a time in the order they came.
        self.command_queue: WorkQueue[str] = WorkQueue(name="job-commands")
        # Per Job key: Command actions accepted and not yet applied (key of the Command, action).
        self._actions: dict[str, list[tuple[str, str]]] = {}
        # Per Job key: pods seen deleted without the out-of-sync mark, not yet handed over.
        self._evicted: dict[str, list[Obj]] = {}
        # Per Job key: uids of pods this controller marked out-of-sync, until the cache shows it.
        self._marked: dict[str, set[str]] = {}
        # Per Job: pods lost with their node, by name -> that node, until made again (the
        # replacement names it, REPLACES_NODE_ANNOTATION). Memory only: a hint, lost on restart.
        self._replaces: dict[str, dict[str, str]] = {}
        # Per node name missing from the node informer: since when it counts as missing (epoch
        # seconds; a delete seen backdates it by the grace, so it is gone at once).
        self._missing: dict[str, float] = {}
        self._wire()

    def _wire(self) -> None:
        self.pods.add_index("job", lambda o: [k] if (k := owning_job_key(o)) else [])

        def job_key(o: Obj) -> None:
            ns, name = meta(o).get("namespace"), meta(o).get("name")
            self.queue.add(f"{ns}/{name}")

        def owner(o: Obj) -> None:
            key = owning_job_key(o)
            if key:
                self.queue.add(key)

        def pod_deleted(o: Obj) -> None:
            key = owning_job_key(o)
            if key and not _is_marked(o):
                self._evicted.setdefault(key, []).append(o)
            owner(o)

        def command(o: Obj) -> None:
            target = o.get("target") or {}
            if (
                isinstance(target, Mapping)
                and target.get("kind") == "Job"
                and target.get("apiVersion") == (JOBS.api_version)
            ):
                self.command_queue.add(f"{meta(o).get('namespace')}/{meta(o).get('name')}")

        self.pods.add_index("node", lambda o: [n] if (n := _node_of(o)) else [])

        def jobs_on(node: Obj) -> None:
            for pod in self.pods.by_index("node", str(meta(node).get("name"))):
                owner(pod)

        def node_changed(old: Obj, new: Obj) -> None:
            if node_health(old) != node_health(new):
                jobs_on(new)

        def node_deleted(node: Obj) -> None:
            name = str(meta(node).get("name"))
            self._missing[name] = self._epoch() - self.not_ready_grace
            # Forget the deleted nodes no pod is bound to any more.
            for gone in [n for n in self._missing if not self.pods.by_index("node", n)]:
                del self._missing[gone]
            jobs_on(node)

        if self.nodes is not None:
            self.nodes.add_handler(jobs_on, node_changed, node_deleted)
        self.jobs.add_handler(job_key, lambda _old, new: job_key(new), job_key)
        self.pods.add_handler(owner, lambda _old, new: owner(new), pod_deleted)
        self.podgroups.add_handler(owner, lambda _old, new: owner(new), owner)
        if self.commands is not None:
            self.commands.add_handler(command, lambda _old, new: command(new), None)

    async def serve_command(self, key: str) -> None:
        """Consume one Job Command: delete it, then hand its action to the Job's reconcile (or
        drop it, saying why). See the module docstring."""
        obj = self.commands.get(key) if self.commands is not None else None
        if obj is None:
            return  # deleted: by us (already served) or by its user
        cmd = Command.model_validate(obj)
        job = cmd.target_job()
        if job is None or cmd.metadata.deletion_timestamp:
            return
        try:
            await self.io.api.delete(COMMANDS, cmd.name, cmd.namespace, uid=cmd.metadata.uid)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return  # served already, or the name now holds a newer Command (its own event)
            raise
        self.io.wrote("commands", "delete")
        action = cmd.action or ""
        if action not in JOB_ACTIONS:
            log.warning(
                "command %s (%s on job %s) deleted without effect: not a job action (use %s)",
                key,
                action or "no action",
                job,
                ", ".join(JOB_ACTIONS),
            )
            return
        job_key = f"{cmd.namespace}/{job}"
        log.info("command %s: %s on job %s", key, action, job_key)
        self._actions.setdefault(job_key, []).append((key, action))
        self.queue.add(job_key)

    def _epoch(self) -> float:
        return parse_rfc3339(self._now()) or 0.0

    def _node_failures(self, pods: list[Obj]) -> tuple[NodeFailures | None, float | None]:
        """The nodes of ``pods`` as the lifecycle judges them (see the module docstring), and
        when a node missing from the cache but not counted as gone yet will be."""
        if self.nodes is None:
            return None, None
        now = self._epoch()
        nodes: dict[str, Obj | None] = {}
        waits: list[float] = []
        for pod in pods:
            name = _node_of(pod)
            if name is None or name in nodes:
                continue
            node = self.nodes.get(name)
            if node is not None:
                self._missing.pop(name, None)
                nodes[name] = node
                continue
            left = self._missing.setdefault(name, now) + self.not_ready_grace - now
            if left <= 0:
                nodes[name] = None
            else:
                waits.append(left)
        return NodeFailures(nodes, self.not_ready_grace, self.force_delete_after), min(waits, default=None)

    def _pods_of(self, key: str) -> list[Obj]:
        """The Job's pods from the informer, with the marks this controller made and the cache
        does not show yet."""
        pods = self.pods.by_index("job", key)
        marked = self._marked.get(key)
        if not marked:
            return pods
        live = {str(meta(p).get("uid")) for p in pods}
        marked &= live  # gone from the cache: no longer needed
        return [_marked(p) if str(meta(p).get("uid")) in marked and not _is_marked(p) else p for p in pods]

    async def reconcile(self, key: str) -> None:
        """Bring one Job's PodGroup, pods and status to what :func:`reconcile_job` says."""
        obj = self.jobs.get(key)
        if obj is None:
            # deleted: ownerReferences let the garbage collector remove the rest
            for memo in (self._actions, self._evicted, self._marked, self._replaces):
                memo.pop(key, None)
            return
        job = Job.model_validate(obj)
        if job.metadata.deletion_timestamp:
            return
        ns = job.namespace
        pg_obj = find_podgroup(job, lambda name: self.podgroups.get(f"{ns}/{name}"))
        pg = PodGroup.model_validate(pg_obj) if pg_obj is not None else None
        prios = {
            str(meta(pc).get("name")): int(pc.get("value") or 0) for pc in self.priority_classes.objects()
        }
        actions = self._actions.get(key) or []
        evicted = list(self._evicted.get(key) or [])
        pods = self._pods_of(key)
        node_failures, missing_wait = self._node_failures(pods)
        result = reconcile_job(
            job,
            pg,
            pods,
            now=self._now(),
            priority_classes=prios,
            command=actions[0][1] if actions else None,
            evicted=evicted,
            nodes=node_failures,
            damaged_restart_after=self.damaged_restart_after,
        )
        if missing_wait is not None:
            result.requeue_after = min(missing_wait, result.requeue_after or missing_wait)
        for name, why in sorted(result.lost_pods.items()):
            log.warning("job %s: pod %s lost with its node: %s", key, name, why)
            node = next(
                ((p.get("spec") or {}).get("nodeName") for p in pods if meta(p).get("name") == name), None
            )
            if node:
                self._replaces.setdefault(key, {})[name] = str(node)
        if result.action != "SyncJob":
            log.info(
                "job %s: %s (%s)",
                key,
                result.action,
                (result.status.state and result.status.state.message) or "",
            )

        if pg is None:
            await self.io.create(PODGROUPS, result.podgroup.to_dict(), ns)
        elif result.podgroup_changed:
            await self.io.api.replace(PODGROUPS, result.podgroup.to_dict(), ns)
            self.io.wrote("podgroups", "update")
        limit = self.pod_concurrency
        by_name = {str(meta(p).get("name")): p for p in pods}

        async def mark(name: str) -> None:
            patch = {"metadata": {"annotations": {OUT_OF_SYNC_ANNOTATION: "true"}}}
            try:
                await self.io.api.patch(PODS, name, patch, ns)
                self.io.wrote("pods", "patch")
            except ApiError as exc:
                if not exc.not_found:
                    raise
            uid = meta(by_name.get(name) or {}).get("uid")
            if uid:
                self._marked.setdefault(key, set()).add(str(uid))

        async def create(pod: Obj) -> None:
            lost_on = self._replaces.get(key, {}).pop(str(meta(pod).get("name")), None)
            if lost_on:
                pod["metadata"].setdefault("annotations", {})[REPLACES_NODE_ANNOTATION] = lost_on
            await self.io.create(PODS, pod, ns)

        async def delete(name: str) -> None:
            try:
                await self.io.api.delete(PODS, name, ns)
                self.io.wrote("pods", "delete")
            except ApiError as exc:
                if not exc.not_found:
                    raise

        async def force_delete(name: str) -> None:
            uid = meta(by_name.get(name) or {}).get("uid")
            log.warning("job %s: force-deleting pod %s: %s", key, name, result.force_delete_pods[name])
            try:
                # The uid precondition: never the replacement that took the name meanwhile.
                await self.io.api.delete(
                    PODS, name, ns, uid=str(uid) if uid else None, grace_period_seconds=0
                )
                self.io.wrote("pods", "delete")
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    raise

        # The marks first: a pod a restart kills is marked before the restart is recorded, so a
        # controller that stops after the record never takes the pod's failure for a new event,
        # and the pod's deletion is never taken for an eviction.
        errors = await run_bounded(result.mark_pods, mark, limit)
        if errors:
            raise errors[0]
        # Then the status, before a pod is deleted for a lifecycle move it records, and only onto
        # the Job as read: a pass from a stale cache must neither count a restart twice nor write
        # an older phase, version or retry count back (409 Conflict; retried on the fresh Job).
        await self.io.patch_status(
            JOBS,
            job.name,
            ns,
            obj.get("status"),
            result.status.to_dict(),
            resource_version=str(meta(obj).get("resourceVersion") or "") or None,
        )
        # The Command's action and the evictions are applied now; whatever fails below is
        # finished by the next pass from the recorded status.
        if actions:
            actions.pop(0)
            if actions:
                self.queue.add(key)
        if evicted:
            left = [p for p in self._evicted.get(key) or [] if not any(p is e for e in evicted)]
            if left:
                self._evicted[key] = left
            else:
                self._evicted.pop(key, None)

        # Every create and delete is tried; the first failure then fails the reconcile, which
        # retries with backoff (the pods that were created are in the informer by then).
        errors = await run_bounded(result.delete_pods, delete, limit)
        errors += await run_bounded(sorted(result.force_delete_pods), force_delete, limit)
        errors += await run_bounded(result.create_pods, create, limit)
        if errors:
            if len(errors) > 1:
                log.warning("job %s: %d pod writes failed, first: %s", key, len(errors), errors[0])
            raise errors[0]
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)
