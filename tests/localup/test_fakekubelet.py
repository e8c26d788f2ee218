"""The fake kubelet of hack/local-up.sh, against the in-memory API server: nodes turn Ready and
keep a Lease, bound pods start, unbound pods wait, a deleted pod goes once "its containers stop";
a node whose kubelet is stopped (a dead machine) goes silent, and comes back when started."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from hyperplace.localup.cluster import GPU, cluster_objects
from hyperplace.localup.fakekubelet import (
    NODE_LEASE_NAMESPACE,
    STOP_ANNOTATION,
    STOPPED,
    FakeKubelet,
    running_status,
)
from hyperplace.runtime.api import LEASES, NODES, PODS
from hyperplace.runtime.fakeapi import FakeApi


async def eventually(cond: Callable[[], Any], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def pod(name: str, node: str | None, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", **meta},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


class Kubelet:
    def __init__(self) -> None:
        self.api = FakeApi()
        self.deleted: list[tuple[str, str, str]] = []

        async def delete_pod(namespace: str, name: str, uid: str) -> bool:
            self.deleted.append((namespace, name, uid))
            await self.api.delete(PODS, name, namespace)
            return True

        self.kubelet = FakeKubelet(self.api, delete_pod=delete_pod, renew_seconds=0.05)


@pytest.fixture
async def k() -> AsyncIterator[Kubelet]:
    k = Kubelet()
    for obj in cluster_objects(2, 8, "none"):
        k.api.seed(NODES, obj)
    task = asyncio.create_task(k.kubelet.run())
    yield k
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def ready(k: Kubelet, name: str) -> bool:
    node = k.api.peek(NODES, name) or {}
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", [])
    )


async def test_every_node_turns_ready_and_its_lease_is_renewed(k: Kubelet) -> None:
    await eventually(lambda: ready(k, "node-0") and ready(k, "node-1"))
    node = k.api.peek(NODES, "node-0") or {}
    assert node["status"]["allocatable"][GPU] == "8", "capacity is left as created"
    await eventually(lambda: k.api.peek(LEASES, f"{NODE_LEASE_NAMESPACE}/node-0") is not None)
    first = (k.api.peek(LEASES, f"{NODE_LEASE_NAMESPACE}/node-0") or {})["spec"]["renewTime"]
    await eventually(
        lambda: (k.api.peek(LEASES, f"{NODE_LEASE_NAMESPACE}/node-0") or {})["spec"]["renewTime"] != first
    )
    lease = k.api.peek(LEASES, f"{NODE_LEASE_NAMESPACE}/node-0") or {}
    assert lease["spec"]["holderIdentity"] == "node-0"
    assert lease["metadata"]["ownerReferences"][0]["kind"] == "Node"


async def test_a_node_marked_not_ready_is_reported_ready_again(k: Kubelet) -> None:
    await eventually(lambda: ready(k, "node-1"))
    await k.api.patch(
        NODES,
        "node-1",
        {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
        subresource="status",
    )
    await eventually(lambda: ready(k, "node-1"))


async def test_a_bound_pod_runs_and_an_unbound_one_waits(k: Kubelet) -> None:
    await k.api.create(PODS, pod("bound", "node-0"), "team")
    await k.api.create(PODS, pod("waiting", None), "team")
    await k.api.create(PODS, pod("elsewhere", "no-such-node"), "team")
    await eventually(lambda: (k.api.peek(PODS, "team/bound") or {})["status"]["phase"] == "Running")
    status = (k.api.peek(PODS, "team/bound") or {})["status"]
    assert {c["type"] for c in status["conditions"] if c["status"] == "True"} >= {"Ready", "ContainersReady"}
    assert status["containerStatuses"][0]["state"]["running"]
    await asyncio.sleep(0.2)
    assert (k.api.peek(PODS, "team/waiting") or {})["status"]["phase"] == "Pending"
    assert (k.api.peek(PODS, "team/elsewhere") or {})["status"]["phase"] == "Pending"


async def test_a_bound_pod_being_deleted_is_removed_as_its_containers_stop(k: Kubelet) -> None:
    await k.api.create(PODS, pod("old", "node-1"), "team")
    await eventually(lambda: (k.api.peek(PODS, "team/old") or {})["status"]["phase"] == "Running")
    uid = (k.api.peek(PODS, "team/old") or {})["metadata"]["uid"]
    k.api.begin_graceful_delete(PODS, "old", "team")
    await eventually(lambda: k.api.peek(PODS, "team/old") is None)
    assert k.deleted == [("team", "old", uid)]


def renewed(k: Kubelet, node: str) -> str:
    return str((k.api.peek(LEASES, f"{NODE_LEASE_NAMESPACE}/{node}") or {}).get("spec", {}).get("renewTime"))


def phase(k: Kubelet, name: str) -> str | None:
    p = k.api.peek(PODS, f"team/{name}")
    return None if p is None else str(p["status"]["phase"])


async def node_lifecycle_marks_unknown(k: Kubelet, node: str) -> None:
    """What kube-controller-manager's node lifecycle controller writes for a silent node."""
    await k.api.patch(
        NODES,
        node,
        {"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}},
        subresource="status",
    )


async def test_a_stopped_node_goes_silent_and_its_pods_are_left_as_they_are(k: Kubelet) -> None:
    """A node dies under a running pod: its Lease is no longer renewed, nothing reports it Ready
    again once the node lifecycle controller marks it Unknown, a pod bound there is never
    started, and a pod deleted there stays Terminating, as with a real dead kubelet. The other
    node carries on."""
    await k.api.create(PODS, pod("running", "node-1"), "team")
    await eventually(lambda: phase(k, "running") == "Running" and bool(renewed(k, "node-1")))
    k.kubelet.stop_node("node-1")
    last = renewed(k, "node-1")
    await node_lifecycle_marks_unknown(k, "node-1")
    await k.api.create(PODS, pod("late", "node-1"), "team")
    await k.api.create(PODS, pod("healthy", "node-0"), "team")
    k.api.begin_graceful_delete(PODS, "running", "team")
    await eventually(lambda: phase(k, "healthy") == "Running")
    first_other = renewed(k, "node-0")
    await eventually(lambda: renewed(k, "node-0") != first_other)  # a few heartbeats later
    await asyncio.sleep(0.2)
    assert renewed(k, "node-1") == last
    assert not ready(k, "node-1")
    assert phase(k, "late") == "Pending"
    terminating = k.api.peek(PODS, "team/running") or {}
    assert terminating["metadata"].get("deletionTimestamp") and k.deleted == []


async def test_a_stopped_node_started_again_reports_ready_and_catches_up_with_its_pods(k: Kubelet) -> None:
    """The machine comes back: the node is Ready and its Lease renewed at once, the pod bound
    while it was down starts, the pod that kept running is reported Ready again, and the
    deletion that waited is finished."""
    await k.api.create(PODS, pod("kept", "node-1"), "team")
    await k.api.create(PODS, pod("doomed", "node-1"), "team")
    await eventually(lambda: phase(k, "kept") == phase(k, "doomed") == "Running")
    k.kubelet.stop_node("node-1")
    await node_lifecycle_marks_unknown(k, "node-1")
    # The node lifecycle controller marks the pods on it not Ready.
    await k.api.patch(
        PODS, "kept", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, "team",
        subresource="status",
    )  # fmt: skip
    await k.api.create(PODS, pod("late", "node-1"), "team")
    k.api.begin_graceful_delete(PODS, "doomed", "team")
    await asyncio.sleep(0.2)
    before = renewed(k, "node-1")
    k.kubelet.start_node("node-1")
    await eventually(lambda: ready(k, "node-1") and renewed(k, "node-1") != before)
    await eventually(lambda: phase(k, "late") == "Running" and phase(k, "doomed") is None)
    kept = (k.api.peek(PODS, "team/kept") or {})["status"]
    await eventually(
        lambda: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (k.api.peek(PODS, "team/kept") or {})["status"]["conditions"]
        )
    )
    assert kept["phase"] == "Running"
    assert [d[1] for d in k.deleted] == ["doomed"]


async def test_the_node_annotation_stops_and_starts_its_kubelet_from_another_process(k: Kubelet) -> None:
    """``hack/local-up.sh node stop NAME`` annotates the Node; the fake kubelet, another
    process, obeys; removing the annotation (``node start``) brings the node back."""
    await eventually(lambda: ready(k, "node-0") and bool(renewed(k, "node-0")))
    await k.api.patch(NODES, "node-0", {"metadata": {"annotations": {STOP_ANNOTATION: STOPPED}}})
    await eventually(lambda: "node-0" in k.kubelet.stopped)
    await node_lifecycle_marks_unknown(k, "node-0")
    last = renewed(k, "node-0")
    await asyncio.sleep(0.3)
    assert renewed(k, "node-0") == last and not ready(k, "node-0")
    await k.api.patch(NODES, "node-0", {"metadata": {"annotations": {STOP_ANNOTATION: None}}})
    await eventually(lambda: ready(k, "node-0") and renewed(k, "node-0") != last)
    assert k.kubelet.stopped == set()


def test_running_status_names_every_container_and_the_node_address() -> None:
    p = pod("x", "node-3")
    p["spec"]["containers"].append({"name": "sidecar", "image": "envoy"})
    status = running_status(p)
    assert status["phase"] == "Running"
    assert [c["name"] for c in status["containerStatuses"]] == ["c", "sidecar"]
    assert status["hostIP"] == running_status(pod("y", "node-3"))["hostIP"]
    assert status["podIP"] != running_status(pod("y", "node-3"))["podIP"]


def test_sixteen_nodes_make_four_leaves_two_spines_and_a_core() -> None:
    objs = cluster_objects(16, 8, "leaf-spine")
    nodes = [o for o in objs if o["kind"] == "Node"]
    hns = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "HyperNode"}
    assert len(nodes) == 16 and nodes[0]["metadata"]["name"] == "node-00"
    assert nodes[0]["status"]["capacity"][GPU] == "8"
    assert {n: s["tier"] for n, s in hns.items()} == {
        "leaf-0": 1,
        "leaf-1": 1,
        "leaf-2": 1,
        "leaf-3": 1,
        "spine-0": 2,
        "spine-1": 2,
        "core": 3,
    }
    assert [m["selector"]["exactMatch"]["name"] for m in hns["leaf-1"]["members"]] == [
        "node-04",
        "node-05",
        "node-06",
        "node-07",
    ]
    assert [m["selector"]["exactMatch"]["name"] for m in hns["spine-1"]["members"]] == ["leaf-2", "leaf-3"]
    assert [o["kind"] for o in cluster_objects(3, 0, "none")] == ["Node"] * 3
    assert GPU not in cluster_objects(1, 0, "none")[0]["status"]["capacity"]


def test_every_generated_object_passes_admission(tmp_path: Path) -> None:
    import yaml

    from simulator.validation import validate_files

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(cluster_objects(10, 4, "leaf-spine", nodes_per_leaf=3)))
    report = validate_files([path])
    assert report.refusals == [] and report.unreadable == []
    assert report.exit_code == 0
