"""Adapter of Kubernetes' workload controllers and the operators the simulator stands in for:
the pods (and a JobSet's Jobs, a PyTorchJob's PodGroup) that batch Jobs, StatefulSets,
JobSets, LeaderWorkerSets and PyTorchJobs would create (``simulator.workloads``); the
PodGroup controller then groups them."""

from __future__ import annotations

from hyperplace.runtime.api import object_key

from ..cluster import Cluster
from ..store import key_of
from ..workloads import (
    BATCH_JOB,
    JOBSET,
    LEADERWORKERSET,
    PYTORCHJOB,
    STATEFULSET,
    job_pods,
    jobset_jobs,
    lws_pods,
    pytorchjob_objects,
    statefulset_pods,
    statefulset_revision,
)


class Workloads:
    """The objects the workload controllers create, once each."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reconcile(self) -> bool:
        """One pass; whether it changed anything."""
        c = self.cluster
        changed = False
        for js in c.of_kind(JOBSET):
            for job in jobset_jobs(js):
                if key_of(job) not in c.objects:
                    # No webhook sees a batch Job.
                    c.create(job, f"JobSet {object_key(js)}", admit=False)
                    changed = True
        for lws in c.of_kind(LEADERWORKERSET):
            for pod in lws_pods(lws):
                if key_of(pod) not in c.objects:
                    changed = c.create_pod(pod, f"LeaderWorkerSet {object_key(lws)}") is not None or changed
        for ptj in c.of_kind(PYTORCHJOB):
            pg, pods = pytorchjob_objects(ptj)
            if key_of(pg) not in c.objects:
                changed = c.create(pg, f"PyTorchJob {object_key(ptj)}") is not None or changed
            for pod in pods:
                if key_of(pod) not in c.objects:
                    changed = c.create_pod(pod, f"PyTorchJob {object_key(ptj)}") is not None or changed
        for job in c.of_kind(BATCH_JOB):
            for pod in job_pods(job):
                ns = pod["metadata"]["namespace"]
                if ("Pod", ns, pod["metadata"]["name"]) not in c.objects:
                    changed = c.create_pod(pod, f"Job {object_key(job)}") is not None or changed
        for sts in c.of_kind(STATEFULSET):
            ns = sts["metadata"].get("namespace") or "default"
            status = sts.setdefault("status", {})
            if status.get("updateRevision") != (rev := statefulset_revision(sts)):
                status["updateRevision"] = rev
                changed = True
            bound = {}
            for i in range(int((sts.get("spec") or {}).get("replicas", 1) or 0)):
                p = c.objects.get(("Pod", ns, f"{sts['metadata']['name']}-{i}"))
                bound[i] = bool(p and (p.get("spec") or {}).get("nodeName"))
            for pod in statefulset_pods(sts, bound):
                if ("Pod", ns, pod["metadata"]["name"]) not in c.objects:
                    changed = c.create_pod(pod, f"StatefulSet {object_key(sts)}") is not None or changed
        return changed
