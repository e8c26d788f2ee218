"""The benchmark's gang of P one-GPU pods (networkTopology hard up to the lowest tier whose domain
holds it) as each workload kind: a Volcano Job, an indexed batch Job, a JobSet, a PyTorchJob; and
the real controller (and its flags) each kind needs."""

from __future__ import annotations

from bench.live.cluster import GPUS_PER_NODE, LEAVES_PER_SPINE, NODES_PER_LEAF
from hyperplace.runtime.api import Obj


def highest_tier(pods: int) -> int:
    """The lowest tier whose one domain holds ``pods`` pods of one GPU."""
    per_leaf = NODES_PER_LEAF * GPUS_PER_NODE
    if pods <= per_leaf:
        return 1
    return 2 if pods <= per_leaf * LEAVES_PER_SPINE else 3


def job_manifest(namespace: str, pods: int) -> list[Obj]:
    """The namespace and the gang as a Volcano Job (the default workload)."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    res = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "gang", "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": pods,
            "networkTopology": {"mode": "hard", "highestTierAllowed": highest_tier(pods)},
            "tasks": [
                {
                    "name": "worker",
                    "replicas": pods,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "w",
                                    "image": "example.com/worker:latest",
                                    "resources": {"requests": res, "limits": res},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }
    return [ns, job]


def indexed_job_manifest(namespace: str, pods: int) -> list[Obj]:
    """``--workload indexed-job``: the same gang as an indexed batch/v1 Job (kube-controller-manager's
    Job controller makes its pods; hyperplace-controller its PodGroup, from the annotations)."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    res = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "gang",
            "namespace": namespace,
            "annotations": {"scheduling.volcano.sh/group-min-member": str(pods)},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "template": {
                "metadata": {
                    "annotations": {
                        "volcano.sh/network-topology-mode": "hard",
                        "volcano.sh/network-topology-highest-tier": str(highest_tier(pods)),
                    }
                },
                "spec": {
                    "schedulerName": "volcano",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "w",
                            "image": "example.com/worker:latest",
                            "resources": {"requests": res, "limits": res},
                        }
                    ],
                },
            },
        },
    }
    return [ns, job]


def _worker_pod_spec(pods: int) -> tuple[Obj, Obj]:
    """The worker pod template's metadata and spec: the same pod as the Volcano Job's, with the
    networkTopology as the pod annotations hyperplace-controller reads for a PodGroup of any owner."""
    res = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    metadata = {
        "annotations": {
            "volcano.sh/network-topology-mode": "hard",
            "volcano.sh/network-topology-highest-tier": str(highest_tier(pods)),
        }
    }
    spec = {
        "schedulerName": "volcano",
        "restartPolicy": "Never",
        "containers": [
            {"name": "w", "image": "example.com/worker:latest", "resources": {"requests": res, "limits": res}}
        ],
    }
    return metadata, spec


def jobset_manifest(namespace: str, pods: int) -> list[Obj]:
    """``--workload jobset``: the same gang as a JobSet (v1alpha2) of indexed Jobs of GPUS_PER_NODE
    pods each (one Job per node's worth, as JobSet users slice a pod set), or one Job when the
    gang does not divide. The JobSet controller creates the Jobs, kube-controller-manager's Job
    controller their pods, hyperplace-controller one PodGroup over all of them
    (``podgroup-<jobset uid>``, minMember = every pod)."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    per_job = GPUS_PER_NODE if pods % GPUS_PER_NODE == 0 else pods
    metadata, spec = _worker_pod_spec(pods)
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "gang", "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": pods // per_job,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": per_job,
                            "parallelism": per_job,
                            "backoffLimit": 0,
                            "template": {"metadata": metadata, "spec": spec},
                        }
                    },
                }
            ]
        },
    }
    return [ns, js]


def pytorchjob_manifest(namespace: str, pods: int) -> list[Obj]:
    """``--workload pytorchjob``: the same gang as a Kubeflow PyTorchJob (1 Master, pods-1
    Workers). The training operator (``--gang-scheduler-name=volcano``) creates the PodGroup
    (minMember = every pod; its networkTopology from the Job's annotations) and the pods."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    metadata, spec = _worker_pod_spec(pods)
    spec = {**spec, "containers": [{**spec["containers"][0], "name": "pytorch"}]}
    tpl = {"metadata": metadata, "spec": spec}
    replicas: dict[str, Obj] = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": tpl}}
    if pods > 1:
        replicas["Worker"] = {"replicas": pods - 1, "restartPolicy": "Never", "template": tpl}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "gang", "namespace": namespace, "annotations": metadata["annotations"]},
        "spec": {"pytorchReplicaSpecs": replicas},
    }
    return [ns, job]


WORKLOADS = {
    "indexed-job": indexed_job_manifest,
    "jobset": jobset_manifest,
    "pytorchjob": pytorchjob_manifest,
}
# The real controller each workload needs (hyperplace.localup --with; hack/workload-bin.sh builds it).
WORKLOAD_CONTROLLERS = {"jobset": "jobset", "pytorchjob": "training-operator"}
# Client rate limits of the controllers that make the workload's objects, passed explicitly where
# the controller has flags for them. JobSet v0.12.0: --kube-api-qps/--kube-api-burst (its defaults,
# 500/500, passed so the figure says what it ran with); it creates only the Jobs, their pods come
# from kube-controller-manager's Job controller (client QPS 20, burst 30 unless --kcm-qps). The
# training operator v1.8.1 has no such flags: its client runs at controller-runtime's defaults
# (QPS 20, burst 30) and it creates every pod (and its Services) itself, one worker thread
# by default (--controller-threads).
CONTROLLER_FLAGS = {"jobset": ["--kube-api-qps=500", "--kube-api-burst=500"]}
