"""Workload controllers of the simulated control plane: the pods Kubernetes' own controllers
would create for an indexed batch Job and a StatefulSet, stamped as they stamp them.

No kubelet runs and no pod completes, so a Job has ``min(parallelism, completions)`` pods at
once and a StatefulSet its replicas; an ``OrderedReady`` StatefulSet creates ordinal *i* only
once every lower ordinal runs (is bound), as the StatefulSet controller waits for Ready.
Pure functions of wire objects; the engine admits and stores what they return.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from hyperplace.kube.workloads import JOB_COMPLETION_INDEX, STATEFULSET_POD_INDEX

# The apiVersion and kind of the workloads simulated here, as the loader keys them.
BATCH_JOB = "Job.batch"
STATEFULSET = "StatefulSet"
REVISION_LABEL = "controller-revision-hash"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet


def _suffix(seed: str) -> str:
    """A deterministic stand-in for generateName's five random characters."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _owner_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _from_template(
    owner: Mapping[str, Any], name: str, labels: dict[str, str], ann: dict[str, str]
) -> dict[str, Any]:
    template = (owner.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": (owner.get("metadata") or {}).get("namespace") or "default",
            "labels": {**(tmeta.get("labels") or {}), **labels},
            "annotations": {**(tmeta.get("annotations") or {}), **ann},
            "ownerReferences": [_owner_ref(owner)],
        },
        "spec": dict(template.get("spec") or {}),
    }


def job_pods(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods a batch/v1 Job runs at once, as the Job controller names and labels them."""
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    name, uid = str(meta.get("name")), str(meta.get("uid"))
    par = spec.get("parallelism")
    count = 1 if par is None else int(par)
    if spec.get("completions") is not None:
        count = min(count, int(spec["completions"]))
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    indexed = spec.get("completionMode") == "Indexed"
    out = []
    for i in range(max(0, count)):
        if indexed:
            idx = {JOB_COMPLETION_INDEX: str(i)}
            pod_name = f"{name}-{i}-{_suffix(f'{uid}/{i}')}"
            out.append(_from_template(job, pod_name, {**labels, **idx}, dict(idx)))
        else:
            out.append(_from_template(job, f"{name}-{_suffix(f'{uid}/{i}')}", labels, {}))
    return out


def statefulset_revision(sts: Mapping[str, Any]) -> str:
    """``<name>-<hash of the template>``: the revision a StatefulSet's pods are labelled with."""
    template = repr(sorted(((sts.get("spec") or {}).get("template") or {}).items()))
    return f"{(sts.get('metadata') or {}).get('name')}-{hashlib.sha256(template.encode()).hexdigest()[:10]}"


def statefulset_pods(sts: Mapping[str, Any], bound: Mapping[int, bool]) -> list[dict[str, Any]]:
    """The pods a StatefulSet wants now (``bound``: ordinal -> whether its pod runs): every
    replica with ``podManagementPolicy: Parallel``, else up to the first ordinal not running."""
    meta = sts.get("metadata") or {}
    spec = sts.get("spec") or {}
    name = str(meta.get("name"))
    replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
    revision = statefulset_revision(sts)
    parallel = spec.get("podManagementPolicy") == "Parallel"
    out = []
    for i in range(max(0, replicas)):
        pod_name = f"{name}-{i}"
        labels = {
            REVISION_LABEL: revision,
            "statefulset.kubernetes.io/pod-name": pod_name,
            STATEFULSET_POD_INDEX: str(i),
        }
        out.append(_from_template(sts, pod_name, labels, {}))
        if not parallel and not bound.get(i, False):
            break  # OrderedReady: the next ordinal waits for this one
    return out


# -- JobSet, LeaderWorkerSet, PyTorchJob -------------------------------------------------------

PYTORCH_INIT_CONTAINER = {
    "name": "init-pytorch",
    "image": "alpine:3.10",
    "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
    "command": ["sh", "-c", "until nslookup $MASTER_ADDR; do sleep 2; done"],
}
JOBSET = "JobSet"
LEADERWORKERSET = "LeaderWorkerSet"
PYTORCHJOB = "PyTorchJob"


def jobset_jobs(js: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The child Jobs the JobSet controller creates (``<jobset>-<replicatedJob>-<index>``), each
    and its pod template labelled and annotated as JobSet does."""
    meta = js.get("metadata") or {}
    name, uid, ns = str(meta.get("name")), str(meta.get("uid")), meta.get("namespace") or "default"
    rjobs = list((js.get("spec") or {}).get("replicatedJobs") or [])
    total = sum(int(r.get("replicas", 1) or 0) for r in rjobs)
    out: list[dict[str, Any]] = []
    global_index = 0
    for rj in rjobs:
        replicas = int(rj.get("replicas", 1) or 0)
        template = rj.get("template") or {}
        for j in range(replicas):
            job_name = f"{name}-{rj.get('name')}-{j}"
            stamp = {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/jobset-uid": uid,
                "jobset.sigs.k8s.io/replicatedjob-name": str(rj.get("name")),
                "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
                "jobset.sigs.k8s.io/global-replicas": str(total),
                "jobset.sigs.k8s.io/job-index": str(j),
                "jobset.sigs.k8s.io/job-global-index": str(global_index),
                "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest(),
            }
            global_index += 1
            spec = dict(template.get("spec") or {})
            pt = dict(spec.get("template") or {})
            pmeta = dict(pt.get("metadata") or {})
            pmeta["labels"] = {**(pmeta.get("labels") or {}), **stamp}
            pmeta["annotations"] = {**(pmeta.get("annotations") or {}), **stamp}
            pt["metadata"] = pmeta
            spec["template"] = pt
            tmeta = template.get("metadata") or {}
            out.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": job_name,
                        "namespace": ns,
                        "labels": {**(tmeta.get("labels") or {}), **stamp},
                        "annotations": {**(tmeta.get("annotations") or {}), **stamp},
                        "ownerReferences": [_owner_ref(js)],
                    },
                    "spec": spec,
                }
            )
    return out


def lws_pods(lws: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every group's leader (``<lws>-<group>``, of the LWS's StatefulSet) and workers
    (``<lws>-<group>-<worker>``, of the leader's StatefulSet), labelled as LWS's pod webhook does."""
    meta = lws.get("metadata") or {}
    spec = lws.get("spec") or {}
    name, ns = str(meta.get("name")), meta.get("namespace") or "default"
    tpl = spec.get("leaderWorkerTemplate") or {}
    size = int(tpl.get("size", 1) or 1)
    replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
    worker_t = tpl.get("workerTemplate") or {}
    leader_t = tpl.get("leaderTemplate") or worker_t
    sts_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"sts/{ns}/{name}"))
    out = []
    for g in range(replicas):
        base = {"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": str(g)}
        ann = {"leaderworkerset.sigs.k8s.io/size": str(size)}
        excl = (meta.get("annotations") or {}).get("leaderworkerset.sigs.k8s.io/exclusive-topology")
        if excl:
            ann["leaderworkerset.sigs.k8s.io/exclusive-topology"] = excl
        for w in range(size):
            t = leader_t if w == 0 else worker_t
            tmeta = t.get("metadata") or {}
            owner = (
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": sts_uid}
                if w == 0
                else {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": f"{name}-{g}",
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"sts/{ns}/{name}-{g}")),
                }
            )
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{g}" if w == 0 else f"{name}-{g}-{w}",
                        "namespace": ns,
                        "labels": {
                            **(tmeta.get("labels") or {}),
                            **base,
                            "leaderworkerset.sigs.k8s.io/worker-index": str(w),
                        },
                        "annotations": {**(tmeta.get("annotations") or {}), **ann},
                        "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
                    },
                    "spec": dict(t.get("spec") or {}),
                }
            )
    return out


def pytorchjob_objects(job: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The PodGroup and pods the Kubeflow training operator creates for a PyTorchJob with
    ``--gang-scheduler-name=volcano``: a PodGroup named after the job, carrying its annotations
    (minMember every replica, the queue of ``runPolicy.schedulingPolicy``), and pods
    ``<job>-master-0``, ``<job>-worker-<i>`` already in it."""
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    name, ns = str(meta.get("name")), meta.get("namespace") or "default"
    specs = spec.get("pytorchReplicaSpecs") or {}
    policy = (spec.get("runPolicy") or {}).get("schedulingPolicy") or {}
    total = sum(int((r or {}).get("replicas", 1) or 0) for r in specs.values())
    pg_spec: dict[str, Any] = {"minMember": int(policy.get("minAvailable") or total)}
    if policy.get("queue"):
        pg_spec["queue"] = policy["queue"]
    if policy.get("priorityClass"):
        pg_spec["priorityClassName"] = policy["priorityClass"]
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [_owner_ref(job)],
        },
        "spec": pg_spec,
    }
    pods = []
    for rtype in sorted(specs, key=lambda t: (t.lower() != "master", t)):
        rs = specs[rtype] or {}
        t = rs.get("template") or {}
        tmeta = t.get("metadata") or {}
        for i in range(int(rs.get("replicas", 1) or 0)):
            labels = {
                **(tmeta.get("labels") or {}),
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-type": rtype.lower(),
                "training.kubeflow.org/replica-index": str(i),
            }
            if rtype.lower() == "master":
                labels["training.kubeflow.org/job-role"] = "master"
            pspec = dict(t.get("spec") or {})
            pspec["schedulerName"] = "volcano"
            if rtype.lower() == "worker" and "Master" in specs:
                # The operator's init container that waits for the master's DNS name (v1.8 default).
                pspec["initContainers"] = [*(pspec.get("initContainers") or []), PYTORCH_INIT_CONTAINER]
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{rtype.lower()}-{i}",
                        "namespace": ns,
                        "labels": labels,
                        "annotations": {
                            **(tmeta.get("annotations") or {}),
                            "scheduling.k8s.io/group-name": name,
                            "volcano.sh/task-spec": rtype.lower(),  # as the operator's Volcano client
                        },
                        "ownerReferences": [_owner_ref(job)],
                    },
                    "spec": pspec,
                }
            )
    return pg, pods
