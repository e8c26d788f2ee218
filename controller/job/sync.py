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
from hyperplace.api.constants import BATCH_GROUP, JOB_NAME_KEY
from hyperplace.runtime.api import COMMANDS, JOBS, PODGROUPS, PODS, ApiError, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.parallel import run_bounded
from hyperplace.runtime.workqueue import WorkQueue

from .lifecycle import OUT_OF_SYNC_ANNOTATION
from .reconcile import find_podgroup, reconcile_job

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
    ) -> None:
        self.io = io
        self.jobs = jobs
        self.pods = pods
        self.podgroups = podgroups
        self.priority_classes = priority_classes
        self.commands = commands
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
            for memo in (self._actions, self._evicted, self._marked):
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
        result = reconcile_job(
            job,
            pg,
            pods,
            now=self._now(),
            priority_classes=prios,
            command=actions[0][1] if actions else None,
            evicted=evicted,
        )
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
            await self.io.create(PODS, pod, ns)

        async def delete(name: str) -> None:
            try:
                await self.io.api.delete(PODS, name, ns)
                self.io.wrote("pods", "delete")
            except ApiError as exc:
                if not exc.not_found:
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
        errors += await run_bounded(result.create_pods, create, limit)
        if errors:
            if len(errors) > 1:
                log.warning("job %s: %d pod writes failed, first: %s", key, len(errors), errors[0])
            raise errors[0]
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)
