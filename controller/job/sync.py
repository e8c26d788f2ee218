"""The Volcano Job controller: informers and a work queue around :mod:`controller.job.reconcile`.

Key ``namespace/name``. A reconcile reads the Job, its PodGroup and its pods from the
informers, calls :func:`controller.job.reconcile.reconcile_job`, then creates or updates the
PodGroup, creates/deletes pods and merge-patches ``status`` through the status subresource.
Pod and PodGroup events requeue their owning Job. Pod names are deterministic, so acting on a
slightly stale cache is harmless: a second create gets AlreadyExists, a second delete
NotFound, and both are ignored (this replaces client-go's "expectations").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from controller.kube_io import KubeIO
from hyperplace.api import Job, PodGroup
from hyperplace.api.constants import BATCH_GROUP, JOB_NAME_KEY
from hyperplace.runtime.api import JOBS, PODGROUPS, PODS, ApiError, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.parallel import run_bounded
from hyperplace.runtime.workqueue import WorkQueue

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
    ) -> None:
        self.io = io
        self.jobs = jobs
        self.pods = pods
        self.podgroups = podgroups
        self.priority_classes = priority_classes
        self.pod_concurrency = pod_concurrency
        self._now = now
        self.queue: WorkQueue[str] = WorkQueue(name="jobs")
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

        self.jobs.add_handler(job_key, lambda _old, new: job_key(new), job_key)
        self.pods.add_handler(owner, lambda _old, new: owner(new), owner)
        self.podgroups.add_handler(owner, lambda _old, new: owner(new), owner)

    async def reconcile(self, key: str) -> None:
        """Bring one Job's PodGroup, pods and status to what :func:`reconcile_job` says."""
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
            await self.io.create(PODGROUPS, result.podgroup.to_dict(), ns)
        elif result.podgroup_changed:
            await self.io.api.replace(PODGROUPS, result.podgroup.to_dict(), ns)
            self.io.wrote("podgroups", "update")
        limit = self.pod_concurrency

        async def create(pod: Obj) -> None:
            await self.io.create(PODS, pod, ns)

        async def delete(name: str) -> None:
            try:
                await self.io.api.delete(PODS, name, ns)
                self.io.wrote("pods", "delete")
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
        await self.io.patch_status(JOBS, job.name, ns, obj.get("status"), result.status.to_dict())
