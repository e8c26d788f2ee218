"""Wire-format objects (Node, Pod dicts; HyperNode, PodGroup models) for the array model.

Our scheduler is driven through its public contract (``build_snapshot`` +
``run_session``) with the same objects a cluster would hold, built the way Volcano's Job
controller builds them: PodGroup ``minMember``/``minTaskMember``/
``minResources``, one ``subGroupPolicy`` per partitioned task keyed on
``volcano.sh/partition-id``, pod labels ``volcano.sh/task-spec``/``task-index``.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import numpy as np

from hyperplace.api import HyperNode, PodGroup
from hyperplace.api.constants import (
    GROUP_NAME_ANNOTATION,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    PARTITION_ID_KEY,
    QUEUE_NAME_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
)

from .model import RESOURCES, IntArray, JobSpec, NetTopology, Topology

NAMESPACE = "bench"
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TIER_NAMES = ("leaf", "spine", "core", "zone", "region")


def quantities(row: IntArray | tuple[int, ...]) -> dict[str, str]:
    """``(cpu milli, memory MiB, gpus)`` -> Kubernetes quantities (zeros omitted)."""
    cpu, mem, gpu = (int(v) for v in row)
    out = {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}
    if gpu:
        out[RESOURCES[2]] = str(gpu)
    return out


def timestamp(seconds: float) -> str:
    return (EPOCH + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_dicts(topo: Topology, alloc: IntArray) -> list[dict[str, Any]]:
    out = []
    for i, name in enumerate(topo.node_names):
        res = quantities(alloc[i]) | {"pods": "110"}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {
                    "capacity": res,
                    "allocatable": res,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return out


def hypernodes(topo: Topology) -> list[HyperNode]:
    """Tier-1 HyperNodes list their nodes by exactMatch; higher tiers list their children."""
    out = []
    for t in range(1, topo.n_tiers + 1):
        for d, name in enumerate(topo.domain_names[t - 1]):
            if t == 1:
                members = [
                    {"type": "Node", "selector": {"exactMatch": {"name": topo.node_names[n]}}}
                    for n in topo.members[0][d].tolist()
                ]
            else:
                kids = np.flatnonzero(topo.parent[t - 2] == d)
                members = [
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": topo.domain_names[t - 2][k]}}}
                    for k in kids.tolist()
                ]
            out.append(
                HyperNode.model_validate(
                    {
                        "metadata": {"name": name},
                        "spec": {"tier": t, "tierName": TIER_NAMES[t - 1], "members": members},
                    }
                )
            )
    return out


def _topology(spec: NetTopology | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    out: dict[str, Any] = {"mode": spec.mode}
    if spec.highest_tier is not None:
        out["highestTierAllowed"] = spec.highest_tier
    return out


def podgroup(job: JobSpec, created: float = 0.0, running: bool = False, phase: str | None = None) -> PodGroup:
    """The job's PodGroup: Running when ``running``, else with the status ``phase`` the
    scheduler wrote (``Inqueue`` once enqueue admitted it), or none (Pending)."""
    spec: dict[str, Any] = {
        "minMember": job.n_pods,
        "minTaskMember": {t.name: t.replicas for t in job.tasks},
        "queue": "default",
        "minResources": quantities(job.req.sum(axis=0)),
    }
    if job.topology is not None:
        spec["networkTopology"] = _topology(job.topology)
    policies = []
    for t in job.tasks:
        if t.partition_size:
            policy: dict[str, Any] = {
                "name": t.name,
                "subGroupSize": t.partition_size,
                # Every partition is required: the gang is all-or-nothing.
                "minSubGroups": -(-t.replicas // t.partition_size),
                "labelSelector": {"matchLabels": {TASK_SPEC_KEY: t.name}},
                "matchLabelKeys": [PARTITION_ID_KEY],
            }
            if t.partition_topology is not None:
                policy["networkTopology"] = _topology(t.partition_topology)
            policies.append(policy)
    if policies:
        spec["subGroupPolicy"] = policies
    obj: dict[str, Any] = {
        "metadata": {"name": job.name, "namespace": NAMESPACE, "creationTimestamp": timestamp(created)},
        "spec": spec,
    }
    if running:
        obj["status"] = {"phase": "Running", "running": job.n_pods}
    elif phase is not None:
        obj["status"] = {"phase": phase}
    return PodGroup.model_validate(obj)


def pod_name(job: JobSpec, i: int) -> str:
    task = job.tasks[int(job.pod_task[i])]
    return f"{job.name}-{task.name}-{int(job.pod_index[i])}"


def pod_dicts(
    job: JobSpec,
    created: float = 0.0,
    placement: IntArray | None = None,
    topo: Topology | None = None,
    started: float | None = None,
) -> list[dict[str, Any]]:
    """The job's pods; pending, or running on ``placement`` (node indexes into ``topo``) since
    ``started``. A job whose ``meta`` has ``limit_s`` (the time limit its user declared) gives
    every pod ``activeDeadlineSeconds``, as a Volcano Job's task template passes it through."""
    limit = job.meta.get("limit_s")
    out = []
    for i in range(job.n_pods):
        task = job.tasks[int(job.pod_task[i])]
        index = int(job.pod_index[i])
        labels = {
            TASK_SPEC_KEY: task.name,
            TASK_INDEX_KEY: str(index),
            JOB_NAME_KEY: job.name,
            JOB_NAMESPACE_KEY: NAMESPACE,
            QUEUE_NAME_KEY: "default",
        }
        if task.partition_size:
            labels[PARTITION_ID_KEY] = str(index // task.partition_size)
        req = quantities(job.req[i])
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "main",
                    "image": "trainer",
                    "resources": {
                        "requests": req,
                        "limits": {k: v for k, v in req.items() if k == RESOURCES[2]},
                    },
                }
            ],
        }
        if limit is not None:
            spec["activeDeadlineSeconds"] = max(1, math.ceil(limit))
        status = {"phase": "Pending"}
        if placement is not None and topo is not None:
            spec["nodeName"] = topo.node_names[int(placement[i])]
            status = {"phase": "Running"}
            if started is not None:
                status["startTime"] = timestamp(started)
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name(job, i),
                    "namespace": NAMESPACE,
                    "uid": f"{job.name}-{i}",
                    "creationTimestamp": timestamp(created),
                    "labels": labels,
                    "annotations": {GROUP_NAME_ANNOTATION: job.name, TASK_SPEC_KEY: task.name},
                },
                "spec": spec,
                "status": status,
            }
        )
    return out


def background_pods(topo: Topology, used: IntArray) -> list[dict[str, Any]]:
    """One running, group-less pod per loaded node carrying that node's background usage."""
    out = []
    for n in np.flatnonzero(used.any(axis=1)).tolist():
        name = f"bg-{topo.node_names[n]}"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "background", "uid": name},
                "spec": {
                    "schedulerName": "default-scheduler",
                    "nodeName": topo.node_names[n],
                    "containers": [
                        {"name": "bg", "image": "bg", "resources": {"requests": quantities(used[n])}}
                    ],
                },
                "status": {"phase": "Running"},
            }
        )
    return out
