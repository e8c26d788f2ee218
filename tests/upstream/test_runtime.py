"""The scheduler process on the in-memory API server reads Kubernetes' own PodGroups
(scheduling.k8s.io/v1beta1) and writes back as kube-scheduler 1.37 does: the user stories of
issue 36 (the state is verified against a full rebuild every cycle in the tests)."""

from __future__ import annotations

from typing import Any

from hyperplace.kube import milli_value
from hyperplace.runtime.api import K8S_PODGROUPS, NODES, PODGROUPS, PODS, QUEUES, WORKLOADS
from tests.scheduler_runtime.helpers import (
    ClusterApi,
    condition,
    cycles_pass,
    events_for,
    eventually,
    node_of,
    pod,
    running,
)

NS = "train"
RACK = "topology.kubernetes.io/rack"


def seed_labelled_racks(api: ClusterApi, racks: int = 2, per_rack: int = 4, cpu: int = 4) -> None:
    """Racks told apart by a node label only (no HyperNodes)."""
    for r in range(racks):
        for i in range(per_rack):
            alloc = {"cpu": str(cpu), "memory": "16Gi", "pods": "110"}
            api.seed(
                NODES,
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"n{r}-{i}", "labels": {RACK: f"rack{r}"}},
                    "status": {
                        "allocatable": alloc,
                        "capacity": alloc,
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                },
            )
    api.seed(
        QUEUES,
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}},
    )


def k8s_podgroup(name: str, min_count: int, key: str | None = RACK) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def seed_pods(api: ClusterApi, group: str, n: int, cpu: int = 4) -> list[str]:
    for i in range(n):
        api.seed(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{group}-{i}", "namespace": NS},
                "spec": {
                    "schedulerName": "volcano",
                    "schedulingGroup": {"podGroupName": group},
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}],
                },
                "status": {"phase": "Pending"},
            },
        )
    return [f"{NS}/{group}-{i}" for i in range(n)]


def initially(api: ClusterApi, group: str) -> dict[str, Any] | None:
    obj = api.peek(K8S_PODGROUPS, f"{NS}/{group}")
    return condition(obj, "PodGroupInitiallyScheduled") if obj else None


def test_the_fake_api_serves_both_kinds_beside_volcanos_podgroups() -> None:
    api = ClusterApi()
    api.seed(K8S_PODGROUPS, k8s_podgroup("same", 2))
    api.seed(
        PODGROUPS,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "same", "namespace": NS},
        },
    )
    api.seed(
        WORKLOADS,
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": NS},
        },
    )
    k8s, volcano = api.peek(K8S_PODGROUPS, f"{NS}/same"), api.peek(PODGROUPS, f"{NS}/same")
    assert k8s is not None and k8s["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert volcano is not None and volcano["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert api.peek(WORKLOADS, f"{NS}/w") is not None


async def test_a_gang_no_rack_can_hold_is_not_bound_across_two_racks_and_says_why() -> None:
    # The story: 5 pods of minCount 5, racks of 4 whole nodes: nothing is bound.
    api = ClusterApi()
    seed_labelled_racks(api)
    api.seed(K8S_PODGROUPS, k8s_podgroup("big", 5))
    keys = seed_pods(api, "big", 5)
    async with running(api) as (sched, _):
        await eventually(lambda: (initially(api, "big") or {}).get("status") == "False", what="Unschedulable")
        await cycles_pass(sched, 3)
        assert all(node_of(api, k) is None for k in keys)
        assert api.bound == []
        c = initially(api, "big")
        assert c is not None and c["reason"] == "Unschedulable"
        assert "cannot place 5 pods" in c["message"] and f"{RACK}=rack" in c["message"]
        # Each pod: PodScheduled=False and a FailedScheduling Event, as for our other pods.
        await eventually(
            lambda: all(
                (condition(pod(api, k), "PodScheduled") or {}).get("status") == "False" for k in keys
            ),
            what="PodScheduled=False on every pod",
        )
        await eventually(lambda: events_for(api, "big-0", "FailedScheduling"), what="FailedScheduling")
        assert api.violations == []


async def test_a_gang_one_rack_holds_is_bound_whole_in_one_rack_and_marked_scheduled() -> None:
    api = ClusterApi()
    seed_labelled_racks(api)
    api.seed(K8S_PODGROUPS, k8s_podgroup("fits", 4))
    keys = seed_pods(api, "fits", 4)
    async with running(api) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="the gang bound")
        assert len({str(node_of(api, k)).split("-")[0] for k in keys}) == 1  # one rack
        await eventually(lambda: (initially(api, "fits") or {}).get("status") == "True", what="Scheduled")
        c = initially(api, "fits")
        assert c is not None and c["reason"] == "Scheduled"
        # Never back from True: a pod of it deleted leaves the condition as it is.
        await api.delete(PODS, "fits-0", NS)
        await cycles_pass(sched, 3)
        assert (initially(api, "fits") or {}).get("status") == "True"
        assert api.violations == []


async def test_pods_wait_for_their_podgroup_and_start_once_it_is_made() -> None:
    api = ClusterApi()
    seed_labelled_racks(api)
    keys = seed_pods(api, "late", 2)
    async with running(api) as (sched, _):
        await cycles_pass(sched, 3)
        assert all(node_of(api, k) is None for k in keys)
        await eventually(
            lambda: (
                "PodGroup train/late not found"
                in str((condition(pod(api, keys[0]), "PodScheduled") or {}).get("message"))
            ),
            what="the pod says its PodGroup is not found",
        )
        await api.create(K8S_PODGROUPS, k8s_podgroup("late", 2), NS)
        await eventually(lambda: all(node_of(api, k) for k in keys), what="bound once the group exists")


async def test_a_volcano_podgroup_and_a_kubernetes_one_run_side_by_side() -> None:
    api = ClusterApi()
    seed_labelled_racks(api)
    api.seed(K8S_PODGROUPS, k8s_podgroup("k8s", 4))
    k8s_keys = seed_pods(api, "k8s", 4)
    api.seed(
        PODGROUPS,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "vc", "namespace": NS},
            "spec": {"minMember": 2},
        },
    )
    for i in range(2):
        api.seed(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"vc-{i}",
                    "namespace": NS,
                    "annotations": {"scheduling.k8s.io/group-name": "vc"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}],
                },
                "status": {"phase": "Pending"},
            },
        )
    async with running(api):
        await eventually(
            lambda: all(node_of(api, k) for k in [*k8s_keys, f"{NS}/vc-0", f"{NS}/vc-1"]), what="both bound"
        )
        await eventually(
            lambda: ((api.peek(PODGROUPS, f"{NS}/vc") or {}).get("status") or {}).get("phase") == "Running",
            what="the Volcano PodGroup Running",
        )
        # Kubernetes' own PodGroup gets kube-scheduler's condition only, no Volcano phase.
        await eventually(lambda: (initially(api, "k8s") or {}).get("status") == "True", what="Scheduled")
        assert "phase" not in ((api.peek(K8S_PODGROUPS, f"{NS}/k8s") or {}).get("status") or {})
        assert api.violations == []
        used = sum(milli_value("4") for k in k8s_keys if node_of(api, k))
        assert used == 16000
