"""User stories of the PodGroup controller for pods of any owner, on the in-memory API.

A platform team runs indexed batch Jobs, StatefulSets and bare pods beside Volcano Jobs; each
gets the PodGroup Volcano's podgroup controller would make, kept in step with its owner, and a
bad annotation is reported on the pod and the PodGroup instead of being silently dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controller.manager import ControllerManager, ManagerConfig
from hyperplace.runtime.api import BATCH_JOBS, PODGROUPS, PODS, STATEFULSETS
from hyperplace.runtime.fakeapi import FakeApi

NS = "team"


async def eventually(cond: Callable[[], Any], timeout: float = 3.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not (got := cond()):
        if loop.time() > end:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)
    return got


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakeApi, ControllerManager]]:
    api = FakeApi()
    mgr = ControllerManager(api, ManagerConfig(workers=2, seed=0), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    yield api, mgr
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def owner_ref(kind: str, obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod(
    name: str,
    owner: dict[str, Any] | None = None,
    *,
    scheduler: str = "volcano",
    cpu: str = "2",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "annotations": annotations or {},
        "labels": labels or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def indexed_job(name: str, parallelism: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
        "spec": {"completionMode": "Indexed", "completions": parallelism, "parallelism": parallelism},
    }


def statefulset(name: str, replicas: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
        "status": {"updateRevision": f"{name}-rev1"},
    }


def podgroup(api: FakeApi, name: str) -> dict[str, Any] | None:
    return api.peek(PODGROUPS, f"{NS}/{name}")


def pod_obj(api: FakeApi, name: str) -> dict[str, Any]:
    got = api.peek(PODS, f"{NS}/{name}")
    assert got is not None
    return got


def group_of(api: FakeApi, name: str) -> str | None:
    return (pod_obj(api, name)["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")


def warnings(api: FakeApi, pod_name: str) -> list[str]:
    return [
        e["message"]
        for e in api.objects.get("events", {}).values()
        if e["involvedObject"]["name"] == pod_name and e["type"] == "Warning"
    ]


async def test_an_indexed_job_becomes_one_gang_as_volcano_makes_it(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    job = await api.create(
        BATCH_JOBS,
        indexed_job(
            "train", 4, {"scheduling.volcano.sh/group-min-member": "4", "volcano.sh/team-note": "nlp"}
        ),
        NS,
    )
    ref = owner_ref("Job", job, "batch/v1")
    ann = {
        "scheduling.volcano.sh/queue-name": "research",
        "volcano.sh/network-topology-mode": "hard",
        "volcano.sh/network-topology-highest-tier": "1",
        "volcano.sh/preemptable": "false",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    for i in range(4):
        await api.create(PODS, pod(f"train-{i}", ref, annotations=ann, priority_class="high"), NS)
    name = f"podgroup-{job['metadata']['uid']}"
    pg = await eventually(lambda: podgroup(api, name))
    assert pg["metadata"]["ownerReferences"] == [ref]  # removed with the Job by the garbage collector
    assert pg["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "8", "memory": "4Gi"},
        "priorityClassName": "high",
        "queue": "research",
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    # The owner's volcano.sh/ annotations and the pod's preemptable travel to the PodGroup.
    assert pg["metadata"]["annotations"]["volcano.sh/team-note"] == "nlp"
    assert pg["metadata"]["annotations"]["scheduling.volcano.sh/group-min-member"] == "4"
    assert pg["metadata"]["annotations"]["volcano.sh/preemptable"] == "false"
    assert (pg.get("status") or {}).get("phase", "Pending") == "Pending"
    await eventually(lambda: all(group_of(api, f"train-{i}") == name for i in range(4)))
    assert warnings(api, "train-0") == []


async def test_pods_of_other_schedulers_and_of_volcano_jobs_are_never_touched(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, mgr = cluster
    job = await api.create(BATCH_JOBS, indexed_job("web", 1), NS)
    await api.create(PODS, pod("web-0", owner_ref("Job", job, "batch/v1"), scheduler="default-scheduler"), NS)
    await api.create(
        PODS, pod("vc-0", annotations={"scheduling.k8s.io/group-name": "vc-job-1234"}, labels={}), NS
    )
    assert await mgr.wait_idle()
    assert api.objects.get("podgroups", {}) == {}
    assert group_of(api, "web-0") is None
    assert group_of(api, "vc-0") == "vc-job-1234"
    assert not [c for c in api.calls if c[0] == "patch" and c[1] == "pods"]


async def test_a_bare_pod_gets_its_own_podgroup_owned_by_the_pod(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    p = await api.create(PODS, pod("lonely"), NS)
    name = f"podgroup-{p['metadata']['uid']}"
    pg = await eventually(lambda: podgroup(api, name))
    assert pg["spec"]["minMember"] == 1
    assert pg["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "lonely",
            "uid": p["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    await eventually(lambda: group_of(api, "lonely") == name)


async def test_a_statefulset_podgroup_follows_its_annotations_and_template_and_goes_at_zero(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    sts = await api.create(
        STATEFULSETS, statefulset("db", 3, {"scheduling.volcano.sh/group-min-member": "2"}), NS
    )
    ref = owner_ref("StatefulSet", sts, "apps/v1")
    for i in range(3):
        labels = {"controller-revision-hash": "db-rev1", "apps.kubernetes.io/pod-index": str(i)}
        await api.create(PODS, pod(f"db-{i}", ref, labels=labels), NS)
    name = f"podgroup-{sts['metadata']['uid']}"
    pg = await eventually(lambda: podgroup(api, name))
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["minResources"]["cpu"] == "4"

    # The user raises the gang to all three pods.
    await api.patch(
        STATEFULSETS, "db", {"metadata": {"annotations": {"scheduling.volcano.sh/group-min-member": "3"}}}, NS
    )
    await eventually(lambda: (podgroup(api, name) or {})["spec"]["minMember"] == 3)

    # A new template (4 CPUs) rolls out: the PodGroup is built from the update revision's pod.
    await api.patch(STATEFULSETS, "db", {"status": {"updateRevision": "db-rev2"}}, NS)
    await api.delete(PODS, "db-2", NS)
    labels = {"controller-revision-hash": "db-rev2", "apps.kubernetes.io/pod-index": "2"}
    await api.create(PODS, pod("db-2", ref, labels=labels, cpu="4"), NS)
    await eventually(lambda: (podgroup(api, name) or {})["spec"]["minResources"]["cpu"] == "12")
    assert pg["metadata"]["uid"] == (podgroup(api, name) or {})["metadata"]["uid"]  # updated, not remade

    # Scaled to zero, the StatefulSet loses its PodGroup (Volcano deletes it).
    await api.patch(STATEFULSETS, "db", {"spec": {"replicas": 0}}, NS)
    await eventually(lambda: podgroup(api, name) is None)


async def test_a_podgroup_deleted_while_its_pods_wait_is_made_again(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    job = await api.create(BATCH_JOBS, indexed_job("again", 2), NS)
    ref = owner_ref("Job", job, "batch/v1")
    for i in range(2):
        await api.create(PODS, pod(f"again-{i}", ref), NS)
    name = f"podgroup-{job['metadata']['uid']}"
    first = await eventually(lambda: podgroup(api, name))
    await api.delete(PODGROUPS, name, NS)
    second = await eventually(lambda: podgroup(api, name))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]


async def test_a_deleted_job_does_not_get_its_podgroup_back_as_a_gang_of_one(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    # The garbage collector removes a deleted Job's PodGroup and pods in no set order, and the
    # Job controller's finalizer keeps each pod a while, marked. A PodGroup made again then
    # (minMember 1: the Job and its annotation are gone) would start the leaving pods one by one.
    api, _ = cluster
    job = await api.create(
        BATCH_JOBS, indexed_job("gone", 4, {"scheduling.volcano.sh/group-min-member": "4"}), NS
    )
    ref = owner_ref("Job", job, "batch/v1")
    for i in range(4):
        p = pod(f"gone-{i}", ref)
        p["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
        await api.create(PODS, p, NS)
    name = f"podgroup-{job['metadata']['uid']}"
    await eventually(lambda: podgroup(api, name))
    await api.delete(BATCH_JOBS, "gone", NS)
    await api.delete(PODGROUPS, name, NS)  # the PodGroup first, its pods not marked yet
    await asyncio.sleep(0.5)
    assert podgroup(api, name) is None
    for i in range(4):
        await api.delete(PODS, f"gone-{i}", NS)
    await eventually(
        lambda: all(pod_obj(api, f"gone-{i}")["metadata"].get("deletionTimestamp") for i in range(4))
    )
    await asyncio.sleep(0.5)
    assert podgroup(api, name) is None


async def test_pods_all_leaving_get_no_podgroup(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, _ = cluster
    job = await api.create(BATCH_JOBS, indexed_job("late", 2), NS)
    ref = owner_ref("Job", job, "batch/v1")
    for i in range(2):
        p = pod(f"late-{i}", ref)
        p["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
        await api.create(PODS, p, NS)
    name = f"podgroup-{job['metadata']['uid']}"
    await eventually(lambda: podgroup(api, name))
    for i in range(2):
        await api.delete(PODS, f"late-{i}", NS)
    await api.delete(PODGROUPS, name, NS)  # deleted by hand while every pod is leaving
    await asyncio.sleep(0.5)
    assert podgroup(api, name) is None


@pytest.mark.parametrize(
    ("value", "words", "min_member"),
    [
        ("abc", "is not a number; minMember stays 1", 1),
        ("-2", "is negative; minMember stays 1", 1),
        ("9", "asks for more pods than the Job runs (3)", 9),
    ],
)
async def test_a_bad_group_min_member_is_named_on_the_pod_and_the_podgroup(
    cluster: tuple[FakeApi, ControllerManager], value: str, words: str, min_member: int
) -> None:
    api, _ = cluster
    job = await api.create(
        BATCH_JOBS, indexed_job("bad", 3, {"scheduling.volcano.sh/group-min-member": value}), NS
    )
    ref = owner_ref("Job", job, "batch/v1")
    for i in range(3):
        await api.create(PODS, pod(f"bad-{i}", ref), NS)
    name = f"podgroup-{job['metadata']['uid']}"
    pg = await eventually(lambda: podgroup(api, name))
    assert pg["spec"]["minMember"] == min_member  # as Volcano's controller sets it
    (cond,) = [c for c in pg["status"]["conditions"] if c["type"] == "InvalidAnnotation"]
    assert cond["status"] == "True"
    assert "scheduling.volcano.sh/group-min-member" in cond["message"] and words in cond["message"]
    for i in range(3):
        msgs = await eventually(lambda i=i: warnings(api, f"bad-{i}"))
        assert len(msgs) == 1 and "scheduling.volcano.sh/group-min-member" in msgs[0] and words in msgs[0]
    await eventually(lambda: all(group_of(api, f"bad-{i}") == name for i in range(3)))

    # Fixed by the user: the condition goes, minMember follows.
    await api.patch(
        BATCH_JOBS, "bad", {"metadata": {"annotations": {"scheduling.volcano.sh/group-min-member": "3"}}}, NS
    )

    def fixed() -> bool:
        got = podgroup(api, name) or {}
        conds = (got.get("status") or {}).get("conditions") or []
        return got["spec"]["minMember"] == 3 and not any(c["type"] == "InvalidAnnotation" for c in conds)

    await eventually(fixed)


async def test_bad_topology_annotations_fall_back_as_volcano_does_and_say_so(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    ann = {"volcano.sh/network-topology-mode": "diagonal", "volcano.sh/network-topology-highest-tier": "two"}
    p = await api.create(PODS, pod("topo", annotations=ann), NS)
    name = f"podgroup-{p['metadata']['uid']}"
    pg = await eventually(lambda: podgroup(api, name))
    assert pg["spec"]["networkTopology"] == {"mode": "hard"}
    (cond,) = [c for c in pg["status"]["conditions"] if c["type"] == "InvalidAnnotation"]
    assert "volcano.sh/network-topology-mode" in cond["message"]
    assert "volcano.sh/network-topology-highest-tier" in cond["message"]
    msgs = await eventually(lambda: len(warnings(api, "topo")) == 2 and warnings(api, "topo"))
    assert any("network-topology-mode" in m for m in msgs) and any("highest-tier" in m for m in msgs)
    await eventually(lambda: group_of(api, "topo") == name)


async def test_a_scheduler_name_flag_chooses_the_pods_served() -> None:
    api = FakeApi()
    mgr = ControllerManager(
        api, ManagerConfig(workers=1, seed=0, scheduler_names=("hyperplace",)), now=lambda: "T"
    )
    task = asyncio.create_task(mgr.run())
    try:
        a = await api.create(PODS, pod("mine", scheduler="hyperplace"), NS)
        await api.create(PODS, pod("volcanos"), NS)
        await eventually(lambda: podgroup(api, f"podgroup-{a['metadata']['uid']}"))
        assert await mgr.wait_idle()
        assert len(api.objects.get("podgroups", {})) == 1
        assert group_of(api, "volcanos") is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
