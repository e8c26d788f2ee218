"""Adapter of the Volcano Job controller (``controller.job``): each Job's PodGroup and pods,
pods beyond its replicas removed, the Job's lifecycle (its policies acting on the pods the
scheduler evicted, on pods lost with their node, on failed pods and on pods pending past a
timeout; restarts with a new job version) and the Job's status.

A pod's node is judged as the controller judges it (``controller.job.node_failure``, its default
NotReady grace, on the simulated clock): a Node missing from the input is gone (the input is the
whole cluster), one whose Ready condition is False or Unknown past the grace, or with a NoExecute
taint the pod does not tolerate, loses the pod. Deleted pods go at once, so none is force-deleted."""

from __future__ import annotations

import functools
from typing import Any, cast

from pydantic import ValidationError

from hyperplace.api import Job, PodGroup
from hyperplace.api.constants import JOB_NAME_KEY

from ..cluster import Cluster
from ..store import key_of


class VolcanoJobs:
    """The Job controller, over every Volcano Job."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._evictions_seen = 0  # how far into cluster.evicted_pods the Jobs were told

    def _podgroup_named(self, ns: str, name: str) -> dict[str, Any] | None:
        return self.cluster.objects.get(("PodGroup", ns, name))

    def reconcile(self) -> bool:
        """One pass; whether it changed anything."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.job.node_failure import DEFAULT_DAMAGED_RESTART_AFTER
        from controller.job.reconcile import NodeFailures, find_podgroup, reconcile_job

        c = self.cluster
        priority_classes = {
            str(pc["metadata"]["name"]): int(pc.get("value") or 0) for pc in c.of_kind("PriorityClass")
        }
        nodes = {str(n["metadata"]["name"]): n for n in c.of_kind("Node")}
        pods_by_job = _by_job(c.of_kind("Pod"))
        evicted_by_job = _by_job(c.evicted_pods[self._evictions_seen :])
        self._evictions_seen = len(c.evicted_pods)
        changed = False
        for jobj, job in c.models(Job):
            ns = job.namespace or "default"
            # <job>-<uid>, or a PodGroup under the legacy name (the job's own), as Volcano finds it.
            found = find_podgroup(job, functools.partial(self._podgroup_named, ns))
            pg_obj = cast("dict[str, Any] | None", found)
            pg_name = (
                str(pg_obj["metadata"]["name"])
                if pg_obj is not None
                else f"{job.name}-{job.metadata.uid or ''}"
            )
            try:
                pg = PodGroup.model_validate(pg_obj) if pg_obj is not None else None
            except ValidationError:
                c.warn_once(f"PodGroup {ns}/{pg_name} is invalid; the Job controller leaves it alone")
                continue
            pods = pods_by_job.get((ns, job.name), [])
            bound = {str(n) for p in pods if (n := (p.get("spec") or {}).get("nodeName"))}
            r = reconcile_job(
                job,
                pg,
                pods,
                now=c.clock.now,
                priority_classes=priority_classes,
                evicted=evicted_by_job.get((ns, job.name), []),
                nodes=NodeFailures({n: nodes.get(n) for n in bound}),
                damaged_restart_after=DEFAULT_DAMAGED_RESTART_AFTER,
            )
            desired = r.podgroup.to_dict()
            c.clock.freeze_times(desired)
            if pg_obj is None:
                if c.create(desired, f"Job {ns}/{job.name}") is not None:
                    changed = True
            elif r.podgroup_changed and desired != pg_obj:
                c.objects[key_of(desired)] = desired
                changed = True
            for name in r.delete_pods:
                if c.objects.pop(("Pod", ns, name), None) is not None:
                    c.evictions.append(f"{ns}/{name}")
                    changed = True
            for pod in r.create_pods:
                created = c.create_pod(pod, f"Job {ns}/{job.name}")
                if created is not None:
                    pods_by_job.setdefault((ns, job.name), []).append(created)
                    changed = True
            status = r.status.to_dict()
            c.clock.freeze_times(status)
            if jobj.get("status") != status:
                jobj["status"] = status
                changed = True
        return changed


def _by_job(pods: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Pods by the (namespace, name) of the Job they name in their controller ownerReference or
    job-name label (the controller needs one of them to claim a pod), so that each Job is handed
    only those: passing every pod of the namespace to every Job is quadratic on big inputs."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in pods:
        meta = p["metadata"]
        ns = meta.get("namespace") or "default"
        names = {str(o.get("name")) for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"}
        label = (meta.get("labels") or {}).get(JOB_NAME_KEY)
        if label:
            names.add(str(label))
        for n in names:
            out.setdefault((ns, n), []).append(p)
    return out
