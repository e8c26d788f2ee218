"""Small builders for scheduler tests: nodes, pods, HyperNodes, PodGroups in wire form."""

from __future__ import annotations

from typing import Any

from bench.quality.ours import reservation_wait_config
from hyperplace.api import HyperNode, PodGroup, Queue
from hyperplace.api.constants import GROUP_NAME_ANNOTATION, PARTITION_ID_KEY, TASK_INDEX_KEY, TASK_SPEC_KEY
from scheduler_plugin.cache.cluster_state import ClusterState
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.storage import StorageListing
from scheduler_plugin.cache.verify import verify_snapshot
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG, SchedulerConfig
from scheduler_plugin.cycle import SessionResult, run_session
from scheduler_plugin.model.snapshot import ClusterSnapshot

# The reservation stories' cluster: room is held for a gang that has waited ten minutes.
TEN_MINUTE_HOLDS = reservation_wait_config("10m")


def node(
    name: str,
    cpu: int | str = 4,
    memory: str = "16Gi",
    gpu: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    pods: int = 110,
) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    if gpu:
        alloc["nvidia.com/gpu"] = str(gpu)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def hypernode(
    name: str,
    tier: int,
    nodes: list[str] | None = None,
    children: list[str] | None = None,
    regex: str | None = None,
    tier_name: str | None = None,
) -> HyperNode:
    members: list[dict[str, Any]] = []
    for n in nodes or []:
        members.append({"type": "Node", "selector": {"exactMatch": {"name": n}}})
    for c in children or []:
        members.append({"type": "HyperNode", "selector": {"exactMatch": {"name": c}}})
    if regex is not None:
        members.append({"type": "Node", "selector": {"regexMatch": {"pattern": regex}}})
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return HyperNode.model_validate({"metadata": {"name": name}, "spec": spec})


def pod(
    name: str,
    group: str | None,
    cpu: int | str = 1,
    gpu: int = 0,
    memory: str | None = None,
    task: str = "t0",
    index: int | None = None,
    partition: int | None = None,
    node_name: str | None = None,
    phase: str | None = None,
    ns: str = "default",
    scheduler: str = "volcano",
    extra_spec: dict[str, Any] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    requests: dict[str, Any] = {}
    if cpu:
        requests["cpu"] = str(cpu)
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    if memory:
        requests["memory"] = memory
    labels = {TASK_SPEC_KEY: task}
    if index is not None:
        labels[TASK_INDEX_KEY] = str(index)
    if partition is not None:
        labels[PARTITION_ID_KEY] = str(partition)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
        **(extra_spec or {}),
    }
    if node_name:
        spec["nodeName"] = node_name
    annotations = {GROUP_NAME_ANNOTATION: group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "creationTimestamp": created,
            "uid": f"uid-{ns}-{name}",
        },
        "spec": spec,
        "status": {"phase": phase or ("Running" if node_name else "Pending")},
    }


def started(p: dict[str, Any], at: str) -> dict[str, Any]:
    """``p`` as the kubelet reports it once its containers run (scheduled and started at ``at``)."""
    p["status"]["startTime"] = at
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}]
    return p


def podgroup(
    name: str,
    min_member: int,
    topology: dict[str, Any] | None = None,
    sub_groups: list[dict[str, Any]] | None = None,
    min_task_member: dict[str, int] | None = None,
    queue: str | None = None,
    priority_class: str | None = None,
    ns: str = "default",
    created: str = "2026-01-01T00:00:00Z",
) -> PodGroup:
    spec: dict[str, Any] = {"minMember": min_member}
    if topology:
        spec["networkTopology"] = topology
    if sub_groups:
        spec["subGroupPolicy"] = sub_groups
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    if queue:
        spec["queue"] = queue
    if priority_class:
        spec["priorityClassName"] = priority_class
    return PodGroup.model_validate(
        {"metadata": {"name": name, "namespace": ns, "creationTimestamp": created}, "spec": spec}
    )


def partition_policy(
    task: str, size: int, tier: int | None = None, min_groups: int | None = None
) -> dict[str, Any]:
    """The subGroupPolicy entry the Job controller derives from a task's partitionPolicy."""
    out: dict[str, Any] = {
        "name": task,
        "subGroupSize": size,
        "labelSelector": {"matchLabels": {TASK_SPEC_KEY: task}},
        "matchLabelKeys": [PARTITION_ID_KEY],
    }
    if tier is not None:
        out["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
    if min_groups is not None:
        out["minSubGroups"] = min_groups
    return out


def job_pods(
    job: str,
    replicas: int,
    cpu: int | str = 1,
    gpu: int = 0,
    task: str = "t0",
    partition_size: int | None = None,
    **kw: Any,
) -> list[dict[str, Any]]:
    """Pods named like the Job controller names them: ``<job>-<task>-<index>``."""
    return [
        pod(
            f"{job}-{task}-{i}",
            job,
            cpu=cpu,
            gpu=gpu,
            task=task,
            index=i,
            partition=(i // partition_size) if partition_size else None,
            **kw,
        )
        for i in range(replicas)
    ]


def schedule(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    hypernodes: list[HyperNode] | None = None,
    podgroups: list[PodGroup] | None = None,
    queues: list[Queue] | None = None,
    priority_classes: list[dict[str, Any]] | None = None,
    config: SchedulerConfig = DEFAULT_CONFIG,
) -> tuple[SessionResult, ClusterSnapshot]:
    snap = build_snapshot(
        nodes=nodes,
        pods=pods,
        hypernodes=hypernodes or [],
        podgroups=podgroups or [],
        queues=queues or [],
        priority_classes=priority_classes or [],
    )
    return run_session(snap, config), snap


def schedule_verified(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    storage: StorageListing,
    hypernodes: list[HyperNode] | None = None,
    podgroups: list[PodGroup] | None = None,
) -> SessionResult:
    """One session on the incremental state (with storage and DRA objects), held against a
    from-scratch build of the same."""
    state = ClusterState(("volcano",))
    state.replace_all(nodes, pods, hypernodes or [], podgroups or [], storage=storage)
    snap = state.snapshot()
    rebuilt = build_snapshot(
        nodes=nodes,
        pods=pods,
        hypernodes=hypernodes or [],
        podgroups=podgroups or [],
        scheduler_names=("volcano",),
        storage=storage,
    )
    verify_snapshot(state, snap, rebuilt)
    return run_session(snap, DEFAULT_CONFIG)


def guide_tree() -> list[HyperNode]:
    """User guide §3.3: HyperNode0 = node0-3, HyperNode1 = node4-7 (tier 1), HyperNode2 = both (tier 2)."""
    return [
        hypernode("hypernode0", 1, nodes=[f"node{i}" for i in range(4)]),
        hypernode("hypernode1", 1, nodes=[f"node{i}" for i in range(4, 8)]),
        hypernode("hypernode2", 2, children=["hypernode0", "hypernode1"]),
    ]


def seven_tree() -> list[HyperNode]:
    """User guide §2.1 / Volcano e2e: s0..s3 tier 1 (2 nodes each), s4 = {s0, s1}, s5 = {s2, s3}, s6 tier 3."""
    return [
        *(hypernode(f"s{i}", 1, nodes=[f"node{2 * i}", f"node{2 * i + 1}"]) for i in range(4)),
        hypernode("s4", 2, children=["s0", "s1"]),
        hypernode("s5", 2, children=["s2", "s3"]),
        hypernode("s6", 3, children=["s4", "s5"]),
    ]


def eight_nodes(cpu: int = 4) -> list[dict[str, Any]]:
    return [node(f"node{i}", cpu=cpu) for i in range(8)]


def nodes_of(result: SessionResult, prefix: str) -> dict[str, str]:
    return {k: v for k, v in result.bindings.items() if k.startswith(prefix)}
