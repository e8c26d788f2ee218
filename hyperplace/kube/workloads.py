"""What the common training and serving workloads stamp on their pods, read in one place.

Every workload controller writes the pod's place in its workload on the pod: Volcano's Job
controller ``volcano.sh/task-index``, an indexed batch Job its completion index, a StatefulSet
the ordinal, the Kubeflow training operator the replica type and index, JobSet the child Job's
index beside that Job's completion index, LeaderWorkerSet the group and the worker. Collective
libraries build their rings in that order, so it is the order the scheduler places a gang in
(rank-contiguous) and the order ``ringCrossings`` counts in. The scheduler's cache, the
simulator and the PodGroup controller all read it through :func:`rank_index`, so they cannot
disagree about a pod's rank.

Two-level indices (JobSet job + completion index, LWS group + worker, training-operator
replica type + index) fold into one integer, ``major * RANK_STRIDE + minor``, which sorts the
same way as the pair and stays readable (job 3, pod 5 -> ``300005``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from hyperplace.api.constants import TASK_INDEX_KEY

# Two-level indices fold into major * RANK_STRIDE + minor (a minor index never reaches it).
RANK_STRIDE: Final = 100_000

# batch/v1 Job, completionMode Indexed (label since Kubernetes 1.28, annotation always).
JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
# StatefulSet ordinal (label since Kubernetes 1.28).
STATEFULSET_POD_INDEX: Final = "apps.kubernetes.io/pod-index"
# Kubeflow training operator (PyTorchJob, TFJob, MPIJob, ...).
TRAINING_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
TRAINING_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
TRAINING_JOB_NAME: Final = "training.kubeflow.org/job-name"
# JobSet: the child Job's index within its replicatedJob, and the names that identify it.
JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
JOBSET_JOB_KEY: Final = "jobset.sigs.k8s.io/job-key"
JOBSET_UID: Final = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_GLOBAL_INDEX: Final = "jobset.sigs.k8s.io/job-global-index"
JOBSET_GLOBAL_REPLICAS: Final = "jobset.sigs.k8s.io/global-replicas"
# LeaderWorkerSet: the group (leader + its workers) and the worker within it (leader = 0).
LWS_NAME: Final = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX: Final = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX: Final = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_EXCLUSIVE_TOPOLOGY: Final = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_SIZE: Final = "leaderworkerset.sigs.k8s.io/size"
LWS_GROUP_KEY: Final = "leaderworkerset.sigs.k8s.io/group-key"

# Replica types whose pod is rank 0 of its job (the master, the launcher, the chief).
_FIRST_REPLICA_TYPES: Final = frozenset({"master", "launcher", "chief", "driver", "leader"})


def _index(value: Any) -> int | None:
    """A non-negative decimal index, else None (a malformed label names no rank)."""
    if value is None:
        return None
    s = str(value).strip()
    if not s.isdigit():
        return None
    return int(s)


def _lookup(labels: Mapping[str, Any], annotations: Mapping[str, Any], key: str) -> int | None:
    got = _index(labels.get(key))
    return got if got is not None else _index(annotations.get(key))


def _fold(major: int, minor: int) -> int | None:
    return major * RANK_STRIDE + minor if minor < RANK_STRIDE else None


def rank_index(labels: Mapping[str, Any] | None, annotations: Mapping[str, Any] | None) -> int | None:
    """The pod's rank within its workload, from the index its controller stamped, or None.

    Checked from the most specific workload to the least: a JobSet pod also carries its
    Job's completion index, a LeaderWorkerSet pod also its StatefulSet's ordinal."""
    lab = labels or {}
    ann = annotations or {}
    got = _lookup(lab, ann, TASK_INDEX_KEY)
    if got is not None:
        return got
    if JOBSET_JOB_INDEX in lab:
        # The index across all of the JobSet's Jobs when stamped (JobSet >= 0.8), else within
        # its replicatedJob.
        job = _lookup(lab, ann, JOBSET_GLOBAL_INDEX)
        job = job if job is not None else _lookup(lab, ann, JOBSET_JOB_INDEX)
        pod = _lookup(lab, ann, JOB_COMPLETION_INDEX)
        if job is not None:
            return _fold(job, pod or 0)
    if LWS_GROUP_INDEX in lab:
        group, worker = _lookup(lab, ann, LWS_GROUP_INDEX), _lookup(lab, ann, LWS_WORKER_INDEX)
        if group is not None:
            return _fold(group, worker or 0)
    if TRAINING_REPLICA_INDEX in lab:
        idx = _lookup(lab, ann, TRAINING_REPLICA_INDEX)
        if idx is not None:
            kind = str(lab.get(TRAINING_REPLICA_TYPE, "")).lower()
            return _fold(0 if kind in _FIRST_REPLICA_TYPES else 1, idx)
    got = _lookup(lab, ann, JOB_COMPLETION_INDEX)
    if got is not None:
        return got
    return _lookup(lab, ann, STATEFULSET_POD_INDEX)


def lws_group(labels: Mapping[str, Any]) -> tuple[str, int] | None:
    """(LeaderWorkerSet name, group index) of a pod of a LeaderWorkerSet group, else None."""
    name, group = labels.get(LWS_NAME), _index(labels.get(LWS_GROUP_INDEX))
    return (str(name), group) if name and group is not None else None


def controlled_podgroup_name(pod: Mapping[str, Any]) -> str | None:
    """The PodGroup the PodGroup controller makes for a pod of a controlling owner, or None for
    a pod of none: one per JobSet (``podgroup-<jobset uid>``, all of its Jobs in one gang), one
    per LeaderWorkerSet group (``<lws>-<group index>``, Volcano's name for it), else Volcano's
    ``podgroup-<controller uid>`` (``GeneratePodgroupName``)."""
    meta = pod.get("metadata") or {}
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping) and r.get("controller")]
    if not refs or not refs[0].get("uid"):
        return None
    labels = meta.get("labels") or {}
    if labels.get(JOBSET_UID) and refs[0].get("kind") == "Job":
        return f"podgroup-{labels[JOBSET_UID]}"
    group = lws_group(labels)
    if group is not None:
        return f"{group[0]}-{group[1]}"
    return f"podgroup-{refs[0]['uid']}"


def pod_rank_index(pod: Mapping[str, Any]) -> int | None:
    """:func:`rank_index` of a pod object."""
    meta = pod.get("metadata") or {}
    return rank_index(meta.get("labels"), meta.get("annotations"))


def lws_exclusive_affinity_key(pod: Mapping[str, Any]) -> str | None:
    """The node label key of the required pod affinity and anti-affinity LeaderWorkerSet's pod
    webhook injects for ``leaderworkerset.sigs.k8s.io/exclusive-topology`` (v0.10.0,
    ``SetExclusiveAffinities``), when those are exactly the pod's required inter-pod terms:
    affinity to pods whose ``group-key`` label is In [the pod's own group key], anti-affinity to
    pods where it Exists and is NotIn [that key], both with that ``topologyKey`` and no namespace
    fields. None for any other shape (the pod's terms are then not an LWS exclusive placement)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    own = labels.get(LWS_GROUP_KEY)
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    aff = (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
    anti = (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
    if not isinstance(own, str) or not own or len(aff) != 1 or len(anti) != 1:
        return None
    a, b = aff[0], anti[0]
    key = a.get("topologyKey")
    if not isinstance(key, str) or not key or b.get("topologyKey") != key:
        return None
    want_aff = [{"key": LWS_GROUP_KEY, "operator": "In", "values": [own]}]
    want_anti = [
        {"key": LWS_GROUP_KEY, "operator": "Exists"},
        {"key": LWS_GROUP_KEY, "operator": "NotIn", "values": [own]},
    ]
    for term, want in ((a, want_aff), (b, want_anti)):
        if set(term) - {"labelSelector", "topologyKey"}:
            return None  # namespaces, namespaceSelector, matchLabelKeys...: another shape
        sel = term.get("labelSelector") or {}
        if set(sel) - {"matchExpressions"} or sel.get("matchLabels"):
            return None
        got = [{k: v for k, v in e.items() if v not in (None, [])} for e in sel.get("matchExpressions") or []]
        if got != want:
            return None
    return key


__all__ = [
    "JOBSET_GLOBAL_INDEX",
    "JOBSET_GLOBAL_REPLICAS",
    "JOBSET_JOB_INDEX",
    "JOBSET_JOB_KEY",
    "JOBSET_NAME",
    "JOBSET_REPLICATED_JOB",
    "JOBSET_UID",
    "JOB_COMPLETION_INDEX",
    "LWS_EXCLUSIVE_TOPOLOGY",
    "LWS_GROUP_INDEX",
    "LWS_GROUP_KEY",
    "LWS_NAME",
    "LWS_SIZE",
    "LWS_WORKER_INDEX",
    "RANK_STRIDE",
    "STATEFULSET_POD_INDEX",
    "TRAINING_JOB_NAME",
    "TRAINING_REPLICA_INDEX",
    "TRAINING_REPLICA_TYPE",
    "controlled_podgroup_name",
    "lws_exclusive_affinity_key",
    "lws_group",
    "pod_rank_index",
    "rank_index",
]
