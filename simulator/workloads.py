"""Workload controllers of the simulated control plane: the pods Kubernetes' own controllers
would create for an indexed batch Job and a StatefulSet, stamped as they stamp them.

No kubelet runs and no pod completes, so a Job has ``min(parallelism, completions)`` pods at
once and a StatefulSet its replicas; an ``OrderedReady`` StatefulSet creates ordinal *i* only
once every lower ordinal runs (is bound), as the StatefulSet controller waits for Ready.
Pure functions of wire objects; the engine admits and stores what they return.
"""

from __future__ import annotations

import hashlib
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
