"""The real workload controllers on a real control plane: the Kubeflow training operator
(``--gang-scheduler-name=volcano``), JobSet and LeaderWorkerSet, built from source by
``hack/workload-bin.sh``, beside kube-controller-manager, hyperplace-controller and
hyperplace-scheduler. A PyTorchJob, a JobSet and a LeaderWorkerSet each start whole, inside their
tier, in index order.

A controller that could not be built is skipped with hack/workload-bin.sh's reason; the rest run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from hyperplace.api import NetworkTopologySpec, PodGroup
from hyperplace.localup import workloads

from . import components
from .kube import REPO, Kubectl, pod_node, wait_for
from .test_workloads import SELECT, TOPOLOGY, Plane, Racks, plane, two_racks

pytestmark = pytest.mark.apiserver
__all__ = ["plane"]  # the module's control plane (a fixture)


def workload_bin() -> Path:
    """``$HYPERPLACE_WORKLOAD_BIN`` (hack/test.sh exports it), else what hack/workload-bin.sh prints."""
    reason = os.environ.get("HYPERPLACE_WORKLOAD_BIN_ERROR")
    if reason:
        pytest.skip(f"WORKLOAD CONTROLLERS NOT BUILT: hack/workload-bin.sh failed: {reason}")
    env = os.environ.get("HYPERPLACE_WORKLOAD_BIN")
    if env:
        return Path(env)
    out = subprocess.run(
        ["bash", str(REPO / "hack" / "workload-bin.sh")], capture_output=True, text=True, timeout=3600
    )
    if out.returncode != 0:
        pytest.skip(f"WORKLOAD CONTROLLERS NOT BUILT: hack/workload-bin.sh: {out.stderr.strip()[-400:]}")
    return Path(out.stdout.strip().splitlines()[-1])


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
            kubectl.run("get", "podgroups,pods", "-n", namespace, "-o", "yaml").stdout + plane.describe()
        ),
    )
    nodes = {p["metadata"]["name"]: pod_node(p) for p in pods}
    assert len({racks.rack_of(n) for n in nodes.values()}) == 1
    workers = [nodes[f"bert-worker-{i}"] for i in range(3)]
    assert workers == sorted(str(n) for n in workers), nodes  # workers in replica-index order
    pg = kubectl.get("podgroups", "-n", namespace, "bert")  # the operator's PodGroup, no other
    # The operator's Volcano client knows no networkTopology: its annotations stand for it.
    assert "networkTopology" not in pg["spec"]
    assert PodGroup.model_validate(pg).spec.network_topology == NetworkTopologySpec(
        mode="hard", highest_tier_allowed=1
    )
    assert [p["metadata"]["name"] for p in kubectl.items("podgroups", "-n", namespace)] == ["bert"]


def test_a_jobset_starts_whole_in_one_rack_as_one_gang(
    plane: Plane, started: dict[str, str], namespace: str
) -> None:
    need(started, "jobset")
    kubectl = plane.kubectl
    racks = two_racks(kubectl)
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "pretrain", "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": 2,
                            "parallelism": 2,
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"annotations": TOPOLOGY},
                                "spec": {**pod_spec(racks), "restartPolicy": "Never"},
                            },
                        }
                    },
                }
            ]
        },
    }
    kubectl.create([js])
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
    [pg] = kubectl.items("podgroups", "-n", namespace)
    assert pg["metadata"]["name"] == f"podgroup-{uid}" and pg["spec"]["minMember"] == 4
    assert [s["name"] for s in pg["spec"]["subGroupPolicy"]] == ["workers"]


def test_leaderworkerset_groups_each_start_whole_inside_one_rack(
    plane: Plane, started: dict[str, str], namespace: str
) -> None:
    """Each group (leader + workers) is one gang inside one rack. (Not exclusive-topology here:
    LWS's pod webhook turns it into required pod (anti-)affinity, which the scheduler refuses
    as unsupported; see manifests/README.md.)"""
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
    pgs = {pg["metadata"]["name"]: pg for pg in kubectl.items("podgroups", "-n", namespace)}
    assert set(pgs) == {"llm-0", "llm-1"}
    assert all(pg["spec"]["minMember"] == 3 for pg in pgs.values())
