"""The real workload controllers on a real control plane: the Kubeflow training operator
(``--gang-scheduler-name=volcano``), JobSet and LeaderWorkerSet, built from source by
``hack/workload-bin.sh``, beside kube-controller-manager, hyperplace-controller and
hyperplace-scheduler. A PyTorchJob, a JobSet and a LeaderWorkerSet each start whole, inside their
tier, in index order.

A controller that could not be built is skipped with hack/workload-bin.sh's reason; the rest run.
"""

from __future__ import annotations

import sys
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperplace.api import NetworkTopologySpec, PodGroup
from hyperplace.localup import controlplane, workloads

from ..go_bin import go_built
from . import components
from .kube import PODGROUPS, Kubectl, node, pod_node, wait_for
from .test_workloads import (
    LEASE_NAMESPACE,
    RACK_KEY,
    SELECT,
    TOPOLOGY,
    Plane,
    Racks,
    blocker_pod,
    initially_scheduled,
    plane,
    two_racks,
)

pytestmark = pytest.mark.apiserver
__all__ = ["plane"]  # the module's control plane (a fixture)


def workload_bin() -> Path:
    """``$HYPERPLACE_WORKLOAD_BIN`` (hack/test.sh exports it), else what hack/workload-bin.sh prints."""
    return go_built("workload-bin.sh", "WORKLOAD CONTROLLERS NOT BUILT", "HYPERPLACE_WORKLOAD_BIN")


def _served(kubectl: Kubectl, names: list[str]) -> bool:
    return kubectl.run("get", ",".join(names), "-A", check=False).returncode == 0


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def started(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each controller that could be built, running: name -> "" (or the reason it is not)."""
    root = workload_bin()
    work = tmp_path_factory.mktemp("workload-controllers")
    kubeconfig = Path(plane.cp.kubeconfig)
    state: dict[str, str] = {}
    procs: list[components.Component] = []
    for name in workloads.NAMES:
        try:
            plan = workloads.prepare(name, root, kubeconfig, work)
        except workloads.Unavailable as exc:
            print(f"\n##### {exc}: its tests SKIP #####", file=sys.stderr)
            state[name] = str(exc)
            continue
        for crd in plan.crds:
            plane.kubectl.run("apply", "--server-side", "-f", str(crd))
        if plan.objects:
            plane.kubectl.apply(plan.objects)
        names = workloads.crd_names(plan)
        wait_for(
            partial(_served, plane.kubectl, names),
            f"the {name} CRDs to be served",
        )
        proc = components.Component(name, plan.argv, work / f"{name}.log", env=plan.env)
        procs.append(proc)
        plane.procs.append(proc)
        wait_for(partial(_ready, plan.health), f"{name} to be ready", timeout=180, describe=proc.tail)
        state[name] = ""
    try:
        yield state
    finally:
        for p in procs:
            p.stop()


def need(started: dict[str, str], name: str) -> None:
    if started.get(name):
        pytest.skip(started[name])


@pytest.fixture
def namespace(plane: Plane) -> Iterator[str]:
    name = f"wc-{uuid.uuid4().hex[:8]}"
    plane.kubectl.run("create", "namespace", name)
    yield name
    plane.kubectl.run(
        "delete", "pytorchjobs,jobsets,leaderworkersets", "--all", "-n", name, "--wait=false", check=False
    )


def bound_pods(kubectl: Kubectl, ns: str, count: int) -> list[dict[str, Any]] | None:
    got = kubectl.items("pods", "-n", ns)
    return got if len(got) == count and all(pod_node(p) for p in got) else None


def pod_spec(racks: Racks, cpu: str = "4") -> dict[str, Any]:
    return {
        "schedulerName": "volcano",
        "nodeSelector": {SELECT: racks.label},
        "containers": [
            {
                "name": "pytorch",
                "image": "busybox",
                "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
            }
        ],
    }


def test_a_pytorchjob_starts_whole_in_one_rack_workers_in_index_order(
    plane: Plane, started: dict[str, str], namespace: str
) -> None:
    need(started, "training-operator")
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    tpl = {"spec": pod_spec(racks)}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": namespace, "annotations": TOPOLOGY},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "Never", "template": tpl},
                "Worker": {"replicas": 3, "restartPolicy": "Never", "template": tpl},
            }
        },
    }
    kubectl.create([job])
    pods = wait_for(
        lambda: bound_pods(kubectl, namespace, 4),
        "the PyTorchJob's 4 pods bound",
        describe=lambda: (
            kubectl.run("get", "podgroups.scheduling.volcano.sh,pods", "-n", namespace, "-o", "yaml").stdout
            + plane.describe()
        ),
    )
    nodes = {p["metadata"]["name"]: pod_node(p) for p in pods}
    assert len({racks.rack_of(n) for n in nodes.values()}) == 1
    workers = [nodes[f"bert-worker-{i}"] for i in range(3)]
    assert workers == sorted(str(n) for n in workers), nodes  # workers in replica-index order
    pg = kubectl.get(PODGROUPS, "-n", namespace, "bert")  # the operator's PodGroup, no other
    # The operator's Volcano client knows no networkTopology: its annotations stand for it.
    assert "networkTopology" not in pg["spec"]
    assert PodGroup.model_validate(pg).spec.network_topology == NetworkTopologySpec(
        mode="hard", highest_tier_allowed=1
    )
    assert [p["metadata"]["name"] for p in kubectl.items(PODGROUPS, "-n", namespace)] == ["bert"]


def pretrain_jobset(namespace: str, pod_template: dict[str, Any]) -> dict[str, Any]:
    """The JobSet ``pretrain``: one replicated job ``workers`` of 2 Indexed Jobs of 2 pods each,
    never retried, its pods made from ``pod_template``."""
    job = {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 0}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "pretrain", "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {"name": "workers", "replicas": 2, "template": {"spec": {**job, "template": pod_template}}}
            ]
        },
    }


def test_a_jobset_starts_whole_in_one_rack_as_one_gang(
    plane: Plane, started: dict[str, str], namespace: str
) -> None:
    need(started, "jobset")
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    template = {"metadata": {"annotations": TOPOLOGY}, "spec": {**pod_spec(racks), "restartPolicy": "Never"}}
    kubectl.create([pretrain_jobset(namespace, template)])
    uid = kubectl.get("jobsets", "-n", namespace, "pretrain")["metadata"]["uid"]
    pods = wait_for(
        lambda: bound_pods(kubectl, namespace, 4), "the JobSet's 4 pods bound", describe=plane.describe
    )
    assert len({racks.rack_of(pod_node(p)) for p in pods}) == 1
    by_rank = sorted(
        pods,
        key=lambda p: (
            int(p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]),
            int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]),
        ),
    )
    assert [pod_node(p) for p in by_rank] == sorted(str(pod_node(p)) for p in pods)
    [pg] = kubectl.items(PODGROUPS, "-n", namespace)
    assert pg["metadata"]["name"] == f"podgroup-{uid}" and pg["spec"]["minMember"] == 4
    assert [s["name"] for s in pg["spec"]["subGroupPolicy"]] == ["workers"]


def test_a_jobset_in_a_kubernetes_podgroup_is_placed_by_us_whole_in_one_rack(
    plane: Plane, started: dict[str, str], namespace: str
) -> None:
    """JobSet's own way into Kubernetes' gang API: no release has ``spec.scheduling`` (v0.12.0
    makes no Workload or PodGroup; docs/scheduling.md), so, as JobSet's "Workload Aware
    Scheduling" guide does, the user makes the Workload (``controllerRef`` the JobSet) and its
    PodGroup (a gang of 4 in one rack), and the JobSet's pod template names the PodGroup in
    ``spec.schedulingGroup.podGroupName`` (the v0.12.0 CRD keeps the field). hyperplace-scheduler
    binds the four pods whole in the one rack that holds them, says so on the group, and
    hyperplace-controller makes no Volcano PodGroup for them."""
    need(started, "jobset")
    if not controlplane.has_workload_api(plane.cp.bin_dir):
        pytest.skip(f"the Workload API needs Kubernetes 1.{controlplane.WORKLOAD_API_MINOR} or newer")
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    gang = {"gang": {"minCount": 4}}
    kubectl.create(
        [
            blocker_pod(namespace, racks),
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "Workload",
                "metadata": {"name": "pretrain", "namespace": namespace},
                "spec": {
                    "controllerRef": {"apiGroup": "jobset.x-k8s.io", "kind": "JobSet", "name": "pretrain"},
                    "podGroupTemplates": [{"name": "workers", "schedulingPolicy": gang}],
                },
            },
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "pretrain-workers", "namespace": namespace},
                "spec": {
                    "workloadRef": {"workloadName": "pretrain", "templateName": "workers"},
                    "schedulingPolicy": gang,
                    "schedulingConstraints": {"topology": [{"key": RACK_KEY}]},
                },
            },
        ]
    )
    spec = {
        **pod_spec(racks),
        "restartPolicy": "Never",
        "schedulingGroup": {"podGroupName": "pretrain-workers"},
    }
    kubectl.create([pretrain_jobset(namespace, {"spec": spec})])
    got = wait_for(
        lambda: bound_pods(kubectl, namespace, 5), "the JobSet's 4 pods bound", describe=plane.describe
    )
    workers = [p for p in got if p["metadata"]["name"] != "blocker"]
    assert all(p["spec"].get("schedulingGroup") == {"podGroupName": "pretrain-workers"} for p in workers)
    assert {racks.rack_of(pod_node(p)) for p in workers} == {f"{racks.label}-rack1"}
    cond = wait_for(
        lambda: initially_scheduled(kubectl, namespace), "PodGroupInitiallyScheduled", describe=plane.describe
    )
    assert (cond["status"], cond["reason"]) == ("True", "Scheduled")
    assert kubectl.items(PODGROUPS, "-n", namespace) == []  # no Volcano PodGroup: the group is theirs


def test_leaderworkerset_groups_each_start_whole_inside_one_rack(
    plane: Plane, started: dict[str, str], namespace: str
) -> None:
    """Each group (leader + workers) is one gang inside one rack (exclusive-topology: the next test)."""
    need(started, "lws")
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    spec = {
        "schedulerName": "volcano",
        "nodeSelector": {SELECT: racks.label},
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}],
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": namespace, "annotations": TOPOLOGY},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 3,
                "workerTemplate": {"metadata": {"annotations": TOPOLOGY}, "spec": spec},
            },
        },
    }
    kubectl.create([lws])
    pods = wait_for(
        lambda: bound_pods(kubectl, namespace, 6), "the LWS's 6 pods bound", describe=plane.describe
    )
    groups: dict[str, dict[int, str]] = {}
    for p in pods:
        labels = p["metadata"]["labels"]
        groups.setdefault(labels["leaderworkerset.sigs.k8s.io/group-index"], {})[
            int(labels["leaderworkerset.sigs.k8s.io/worker-index"])
        ] = str(pod_node(p))
    for nodes in groups.values():
        assert len({racks.rack_of(n) for n in nodes.values()}) == 1, groups  # each group in one rack
        assert [nodes[w] for w in sorted(nodes)] == sorted(nodes.values())  # leader first, workers in order
    pgs = {pg["metadata"]["name"]: pg for pg in kubectl.items(PODGROUPS, "-n", namespace)}
    assert set(pgs) == {"llm-0", "llm-1"}
    assert all(pg["spec"]["minMember"] == 3 for pg in pgs.values())


def test_an_exclusive_topology_leaderworkerset_takes_one_rack_per_group_live(
    plane: Plane, started: dict[str, str], namespace: str
) -> None:
    """``leaderworkerset.sigs.k8s.io/exclusive-topology: <rack label>``: LWS's own pod webhook
    injects required pod affinity to the group and anti-affinity to other groups, by the rack
    label; label discovery builds the racks from that label and the PodGroup controller makes
    each group's PodGroup exclusive at that tier, so the scheduler keeps those terms by
    placement. Three racks, four groups that would all fit in one: three start, one rack each,
    and the fourth waits."""
    need(started, "lws")
    kubectl = plane.kubectl
    prefix = f"x{uuid.uuid4().hex[:6]}"
    rack_key = f"{prefix}.hyperplace.io/rack"
    names = [f"{prefix}-n{i}" for i in range(6)]
    kubectl.create([node(n, {SELECT: prefix, rack_key: f"r{i // 2}"}) for i, n in enumerate(names)])
    conf = {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "interval": "10m",
                "config": {
                    "networkTopologyTypes": {
                        prefix: [{"nodeLabel": rack_key}, {"nodeLabel": "kubernetes.io/hostname"}]
                    }
                },
            }
        ]
    }
    kubectl.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "volcano-controller-configmap", "namespace": LEASE_NAMESPACE},
                "data": {"volcano-controller.conf": yaml.safe_dump(conf)},
            }
        ]
    )

    def racks() -> dict[str, frozenset[str]] | None:
        got = {
            h["metadata"]["labels"][rack_key]: frozenset(
                m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]
            )
            for h in kubectl.items("hypernodes")
            if rack_key in (h["metadata"].get("labels") or {})
        }
        return got if len(got) == 3 and sum(len(v) for v in got.values()) == 6 else None

    # The controller has read the discovery config once the racks exist.
    rack_nodes = wait_for(racks, "the three racks discovered from the label", describe=plane.describe)
    rack_of = {n: r for r, ns in rack_nodes.items() for n in ns}
    spec = {
        "schedulerName": "volcano",
        "nodeSelector": {SELECT: prefix},
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": "excl",
            "namespace": namespace,
            "annotations": {"leaderworkerset.sigs.k8s.io/exclusive-topology": rack_key},
        },
        "spec": {
            "replicas": 4,
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": spec}},
        },
    }
    kubectl.create([lws])

    def three_groups_bound() -> list[dict[str, Any]] | None:
        got = kubectl.items("pods", "-n", namespace)
        bound = [p for p in got if pod_node(p)]
        # The waiting group is its leader alone: LWS makes its workers once the leader is bound.
        return got if len(got) == 7 and len(bound) == 6 else None

    def describe() -> str:
        pgs = [
            (pg["metadata"]["name"], pg["metadata"].get("annotations"), pg.get("spec"), pg.get("status"))
            for pg in kubectl.items(PODGROUPS, "-n", namespace)
        ]
        conds = [
            (p["metadata"]["name"], pod_node(p), (p.get("status") or {}).get("conditions"))
            for p in kubectl.items("pods", "-n", namespace)
        ]
        return f"{pgs}\n{conds}\n{plane.describe()}"

    pods = wait_for(three_groups_bound, "three of the four LWS groups bound", describe=describe)
    # The pods carry what LWS's webhook injects (else this test proves nothing).
    affinity = pods[0]["spec"]["affinity"]
    assert (
        affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"]
        == rack_key
    )
    assert (
        affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"]
        == rack_key
    )
    groups: dict[str, set[str]] = {}
    for p in pods:
        if pod_node(p):
            group = p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"]
            groups.setdefault(group, set()).add(rack_of[str(pod_node(p))])
    assert len(groups) == 3 and all(len(r) == 1 for r in groups.values()), groups  # each group in one rack
    assert len(set().union(*groups.values())) == 3, groups  # no two groups share a rack
    pgs = {pg["metadata"]["name"]: pg for pg in kubectl.items(PODGROUPS, "-n", namespace)}
    assert set(pgs) == {f"excl-{g}" for g in range(4)}
    for pg in pgs.values():
        assert pg["metadata"]["annotations"]["hyperplace.io/exclusive-topology-key"] == rack_key
        assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    waiting = next(p for p in pods if not pod_node(p))
    assert waiting["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] not in groups
