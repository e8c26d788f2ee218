"""Workloads other than Volcano Jobs on a real control plane: Kubernetes' own Job and StatefulSet
controllers (kube-controller-manager) make the pods, hyperplace-controller gives them the PodGroup
Volcano's podgroup controller would, and hyperplace-scheduler starts each whole, inside its tier,
in index order. The garbage collector removes the PodGroup with its owner.

A fake kubelet keeps the Nodes Ready (their Leases renewed, so the node lifecycle controller does
not taint them) and marks bound pods Running; there are no containers. This module runs its own
control plane: kube-controller-manager must not run beside the session's, whose tests play the
kubelet themselves.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from hyperplace.localup import controlplane

from . import components
from .kube import PODGROUPS, Kubectl, exact, hypernode, node, pod_node, wait_for

pytestmark = pytest.mark.apiserver

LEASE_NAMESPACE = "hyperplace-system"
SELECT = "hyperplace.io/workload-test"
# Every rack's nodes carry its name: a tier-1 HyperNode is exactly one value of this label, so
# Kubernetes' own PodGroups can name it as their topology key.
RACK_KEY = "example.com/rack"  # not a label the HyperNode discovery presets read


Plane = components.Plane


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    with components.plane_with_kcm(
        tmp_path_factory.mktemp("workload-components"), lease_namespace=LEASE_NAMESPACE
    ) as p:
        yield p


@dataclass
class Racks:
    label: str
    racks: dict[str, list[str]]

    def rack_of(self, node_name: str | None) -> str | None:
        return next((r for r, ns in self.racks.items() if node_name in ns), None)


def blocker_pod(namespace: str, racks: Racks) -> dict[str, Any]:
    """A pod bound to the first node of rack 0, taking its 4 CPUs: only rack 1 can then take a
    gang of four whole-node pods."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "blocker", "namespace": namespace},
        "spec": {
            "nodeName": racks.racks[f"{racks.label}-rack0"][0],
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "4"}}}],
        },
    }


def two_racks(kubectl: Kubectl, per_rack: int = 4) -> Racks:
    """Two tier-1 HyperNodes of ``per_rack`` 4-CPU nodes under a tier-2 one, labelled for this
    test alone."""
    label = f"w{uuid.uuid4().hex[:6]}"
    racks = {f"{label}-rack{r}": [f"{label}-r{r}-n{i}" for i in range(per_rack)] for r in range(2)}
    objs: list[dict[str, Any]] = [
        node(n, {SELECT: label, RACK_KEY: r}, cpu="4") for r, ns in racks.items() for n in ns
    ]
    objs += [hypernode(r, 1, [exact("Node", n) for n in ns]) for r, ns in racks.items()]
    objs.append(hypernode(f"{label}-spine", 2, [exact("HyperNode", r) for r in racks]))
    kubectl.create(objs)
    return Racks(label, racks)


def template(racks: Racks, cpu: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": racks.label}, "annotations": annotations or {}},
        "spec": {
            "schedulerName": "volcano",
            "nodeSelector": {SELECT: racks.label},
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


TOPOLOGY = {"volcano.sh/network-topology-mode": "hard", "volcano.sh/network-topology-highest-tier": "1"}


@pytest.fixture
def namespace(plane: Plane) -> Iterator[str]:
    name = f"w-{uuid.uuid4().hex[:8]}"
    plane.kubectl.run("create", "namespace", name)
    yield name
    plane.kubectl.run("delete", "jobs.batch,statefulsets", "--all", "-n", name, "--wait=false", check=False)


def pods(kubectl: Kubectl, ns: str) -> list[dict[str, Any]]:
    return kubectl.items("pods", "-n", ns)


def all_bound(kubectl: Kubectl, ns: str, count: int) -> list[dict[str, Any]] | None:
    got = pods(kubectl, ns)
    return got if len(got) == count and all(pod_node(p) for p in got) else None


def indexed_job(ns: str, racks: Racks, n: int, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "allreduce",
            "namespace": ns,
            "annotations": {"scheduling.volcano.sh/group-min-member": str(n)},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": n,
            "parallelism": n,
            "template": {
                **template(racks, cpu, TOPOLOGY),
                "spec": {**template(racks, cpu)["spec"], "restartPolicy": "Never"},
            },
        },
    }


def test_an_indexed_job_starts_whole_in_one_rack_in_completion_index_order(
    plane: Plane, namespace: str
) -> None:
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    # Rack 0 loses a node to a running pod: only rack 1 can take the whole gang of 4.
    kubectl.create([blocker_pod(namespace, racks)])
    job = kubectl.create([indexed_job(namespace, racks, 4)])
    assert job.returncode == 0
    uid = kubectl.get("jobs.batch", "-n", namespace, "allreduce")["metadata"]["uid"]
    got = wait_for(
        partial(all_bound, kubectl, namespace, 5), "the Job's 4 pods bound", describe=plane.describe
    )
    workers = [p for p in got if p["metadata"]["name"] != "blocker"]
    by_index = {
        int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]): pod_node(p) for p in workers
    }
    rack1 = racks.racks[f"{racks.label}-rack1"]
    assert sorted(by_index) == [0, 1, 2, 3]
    assert {racks.rack_of(n) for n in by_index.values()} == {f"{racks.label}-rack1"}
    assert [by_index[i] for i in range(4)] == rack1  # rank i on the rack's node i
    pg = kubectl.get(PODGROUPS, "-n", namespace, f"podgroup-{uid}")
    assert pg["spec"]["minMember"] == 4
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert pg["metadata"]["ownerReferences"][0]["uid"] == uid
    assert all(
        p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"podgroup-{uid}" for p in workers
    )

    # Deleting the Job takes its PodGroup with it (the garbage collector, by ownerReferences).
    kubectl.run("delete", "jobs.batch", "-n", namespace, "allreduce", "--wait=false")
    wait_for(
        lambda: (
            kubectl.run("get", PODGROUPS, "-n", namespace, f"podgroup-{uid}", check=False).returncode != 0
        ),
        "the PodGroup to go with its Job",
        describe=plane.describe,
    )


def test_a_gang_no_rack_can_hold_starts_no_pod_at_all(plane: Plane, namespace: str) -> None:
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    kubectl.create([indexed_job(namespace, racks, 5)])
    uid = kubectl.get("jobs.batch", "-n", namespace, "allreduce")["metadata"]["uid"]

    def waiting() -> dict[str, Any] | None:
        pg = kubectl.run("get", PODGROUPS, "-n", namespace, f"podgroup-{uid}", "-o", "json", check=False)
        if pg.returncode != 0:
            return None
        got = pods(kubectl, namespace)
        conds = [
            c.get("type")
            for c in (kubectl.get(PODGROUPS, "-n", namespace, f"podgroup-{uid}").get("status") or {}).get(
                "conditions"
            )
            or []
        ]
        return {"pods": got} if len(got) == 5 and "Unschedulable" in conds else None

    state = wait_for(waiting, "the gang of 5 to be judged unschedulable", describe=plane.describe)
    assert not any(pod_node(p) for p in state["pods"])  # never a partial start


def test_a_statefulset_starts_whole_in_one_rack_in_ordinal_order(plane: Plane, namespace: str) -> None:
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "shard",
            "namespace": namespace,
            "annotations": {"scheduling.volcano.sh/group-min-member": "3", **TOPOLOGY},
        },
        "spec": {
            "replicas": 3,
            "podManagementPolicy": "Parallel",
            "serviceName": "shard",
            "selector": {"matchLabels": {"app": racks.label}},
            "template": template(racks, "3"),
        },
    }
    kubectl.create([sts])
    uid = kubectl.get("statefulsets", "-n", namespace, "shard")["metadata"]["uid"]
    got = wait_for(
        partial(all_bound, kubectl, namespace, 3), "the StatefulSet's 3 pods bound", describe=plane.describe
    )
    by_ordinal = {int(p["metadata"]["labels"]["apps.kubernetes.io/pod-index"]): pod_node(p) for p in got}
    assert len({racks.rack_of(n) for n in by_ordinal.values()}) == 1
    assert [by_ordinal[i] for i in range(3)] == sorted(by_ordinal.values(), key=lambda n: str(n))
    pg = kubectl.get(PODGROUPS, "-n", namespace, f"podgroup-{uid}")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["networkTopology"]["highestTierAllowed"] == 1

    # Scaled to zero, the StatefulSet's PodGroup goes (Volcano deletes it).
    kubectl.run("scale", "statefulset", "-n", namespace, "shard", "--replicas=0")
    wait_for(
        lambda: (
            kubectl.run("get", PODGROUPS, "-n", namespace, f"podgroup-{uid}", check=False).returncode != 0
        ),
        "the scaled-to-zero StatefulSet's PodGroup to go",
        describe=plane.describe,
    )


def test_pods_of_another_scheduler_get_no_podgroup(plane: Plane, namespace: str) -> None:
    kubectl = plane.kubectl
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "theirs", "namespace": namespace},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {SELECT: "nowhere"},
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }
    kubectl.create([job])
    wait_for(lambda: len(pods(kubectl, namespace)) == 1, "the Job's pod", describe=plane.describe)
    # The controller had time to see the pod (a pod of ours gets its PodGroup in well under this).
    ours = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "nodeSelector": {SELECT: "nowhere"},
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }
    kubectl.create([ours])
    wait_for(
        lambda: (
            "scheduling.k8s.io/group-name"
            in (kubectl.get("pods", "-n", namespace, "probe")["metadata"].get("annotations") or {})
        ),
        "the probe pod (ours) to get its PodGroup",
        describe=plane.describe,
    )
    theirs = next(p for p in pods(kubectl, namespace) if p["metadata"]["name"] != "probe")
    assert "scheduling.k8s.io/group-name" not in (theirs["metadata"].get("annotations") or {})
    assert len(kubectl.items(PODGROUPS, "-n", namespace)) == 1


def test_a_job_asking_for_a_gang_gets_its_kubernetes_workload_and_podgroup(
    plane: Plane, namespace: str
) -> None:
    """Kubernetes 1.37's own side of issue 36: kube-controller-manager runs with WorkloadWithJob, so
    a Job with ``spec.scheduling`` gets a scheduling.k8s.io Workload and PodGroup (a gang of its
    parallelism), controlled by the Job. The Job stays suspended: no pod, nothing to schedule."""
    if not controlplane.has_workload_api(plane.cp.bin_dir):
        pytest.skip(f"the Workload API needs Kubernetes 1.{controlplane.WORKLOAD_API_MINOR} or newer")
    kubectl = plane.kubectl
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "gang", "namespace": namespace},
        "spec": {
            "parallelism": 3,
            "completions": 3,
            "suspend": True,
            "scheduling": {"schedulingPolicy": {"gang": {}}},
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            },
        },
    }
    kubectl.create([job])
    uid = kubectl.get("job", "-n", namespace, "gang")["metadata"]["uid"]
    [workload] = wait_for(
        lambda: kubectl.items("workloads.scheduling.k8s.io", "-n", namespace),
        "the Job's Workload",
        describe=plane.describe,
    )
    assert workload["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job", "name": "gang"}
    assert [o["uid"] for o in workload["metadata"]["ownerReferences"]] == [uid]
    [group] = wait_for(
        lambda: kubectl.items("podgroups.scheduling.k8s.io", "-n", namespace),
        "the Job's PodGroup",
        describe=plane.describe,
    )
    assert group["spec"]["workloadRef"]["workloadName"] == workload["metadata"]["name"]
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    # Volcano's PodGroups are another kind: the Job's pods, when it runs, get none from hyperplace
    # (it is no pod of ours), and the Kubernetes one is not listed under Volcano's name.
    assert kubectl.items("podgroups.scheduling.volcano.sh", "-n", namespace) == []


def gang_job(ns: str, racks: Racks, n: int) -> dict[str, Any]:
    """An indexed Job asking Kubernetes 1.37 for a gang of ``n`` in one rack (``spec.scheduling``):
    kube-controller-manager makes its Workload and PodGroup, and its pods name the group."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "allreduce", "namespace": ns},
        "spec": {
            "completionMode": "Indexed",
            "completions": n,
            "parallelism": n,
            "scheduling": {
                "schedulingPolicy": {"gang": {}},
                "schedulingConstraints": {"topology": [{"key": RACK_KEY}]},
            },
            "template": {
                **template(racks, "4"),
                "spec": {**template(racks, "4")["spec"], "restartPolicy": "Never"},
            },
        },
    }


def initially_scheduled(kubectl: Kubectl, ns: str) -> dict[str, Any] | None:
    groups = kubectl.items("podgroups.scheduling.k8s.io", "-n", ns)
    for g in groups:
        for c in (g.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodGroupInitiallyScheduled":
                return c
    return None


def test_a_job_with_kubernetes_gang_scheduling_is_placed_by_us_whole_in_one_rack(
    plane: Plane, namespace: str
) -> None:
    """Issue 36's interop: kube-controller-manager's Job controller (WorkloadWithJob) makes the
    Workload and PodGroup; hyperplace-scheduler reads the PodGroup (gang.minCount, the rack key)
    and binds the four pods whole in the one rack that holds them, then says so on the group."""
    if not controlplane.has_workload_api(plane.cp.bin_dir):
        pytest.skip(f"the Workload API needs Kubernetes 1.{controlplane.WORKLOAD_API_MINOR} or newer")
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    kubectl.create([blocker_pod(namespace, racks)])
    kubectl.create([gang_job(namespace, racks, 4)])
    got = wait_for(
        partial(all_bound, kubectl, namespace, 5), "the Job's 4 pods bound", describe=plane.describe
    )
    workers = [p for p in got if p["metadata"]["name"] != "blocker"]
    assert all(p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in workers)
    assert {racks.rack_of(pod_node(p)) for p in workers} == {f"{racks.label}-rack1"}
    cond = wait_for(
        lambda: initially_scheduled(kubectl, namespace), "PodGroupInitiallyScheduled", describe=plane.describe
    )
    assert (cond["status"], cond["reason"]) == ("True", "Scheduled")
    # The group is Kubernetes' own: hyperplace-controller made no Volcano PodGroup for these pods.
    assert kubectl.items(PODGROUPS, "-n", namespace) == []


def test_a_kubernetes_gang_no_rack_can_hold_binds_no_pod(plane: Plane, namespace: str) -> None:
    """The issue's report: kube-scheduler bound a 5-pod gang that no rack holds across two racks.
    Ours binds none and says why on the PodGroup."""
    if not controlplane.has_workload_api(plane.cp.bin_dir):
        pytest.skip(f"the Workload API needs Kubernetes 1.{controlplane.WORKLOAD_API_MINOR} or newer")
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    kubectl.create([gang_job(namespace, racks, 5)])

    def judged() -> dict[str, Any] | None:
        cond = initially_scheduled(kubectl, namespace)
        return cond if cond is not None and len(pods(kubectl, namespace)) == 5 else None

    cond = wait_for(judged, "the gang of 5 judged unschedulable", describe=plane.describe)
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert "tier" in cond["message"] or "rack" in cond["message"]
    assert not any(pod_node(p) for p in pods(kubectl, namespace))
