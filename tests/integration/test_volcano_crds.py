"""A cluster that keeps Volcano's own CRDs: hyperplace runs on them end to end.

A separate etcd + kube-apiserver (so the session's cluster keeps our CRDs) gets the CRDs of
``hack/gen_crds.py --volcano-compatible``: shaped exactly like Volcano's PodGroup (no status
subresource), Queue, Job and HyperNode CRDs. The real controller and scheduler processes
run on it. The stories check what was lost before: PodGroup phase and conditions, the
``volcano.sh/job-allocated-hypernode`` annotation, and Job updates reaching the PodGroup.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from hyperplace.localup import controlplane

from ..kube_bin import kube_bin_dir
from . import components
from .kube import PODGROUPS, REPO, Kubectl, exact, hypernode, node, pod_node, wait_for

pytestmark = pytest.mark.apiserver

NS_SYSTEM = "hyperplace-system"
SELECT_LABEL = "hyperplace.io/volcano-crds"
ALLOCATED = "volcano.sh/job-allocated-hypernode"


class VolcanoCluster:
    def __init__(self, kubectl: Kubectl, kubeconfig: Path, log_dir: Path) -> None:
        self.kubectl = kubectl
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.parts: list[components.Component] = []

    def describe(self) -> str:
        return "\n".join(p.tail() for p in self.parts)


@pytest.fixture(scope="module")
def volcano(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VolcanoCluster]:
    if shutil.which("kubectl") is None:
        pytest.skip("real-apiserver tests skipped: kubectl is not on PATH")
    bin_dir = kube_bin_dir()
    crd_dir = tmp_path_factory.mktemp("volcano-crds")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "hack" / "gen_crds.py"),
            "--volcano-compatible",
            "--out-dir",
            str(crd_dir),
        ],
        check=True,
        capture_output=True,
    )
    with controlplane.control_plane(bin_dir) as cp:
        kubectl = Kubectl(cp.kubeconfig)
        c = VolcanoCluster(kubectl, cp.kubeconfig, tmp_path_factory.mktemp("components"))
        try:
            kubectl.run("apply", "-f", str(crd_dir))
            wait_for(
                lambda: (
                    kubectl.run(
                        "get",
                        "hypernodes,jobs.batch.volcano.sh,podgroups.scheduling.volcano.sh,queues",
                        "-A",
                        check=False,
                    ).returncode
                    == 0
                ),
                "Volcano's CRDs to be served",
            )
            # The point of the exercise: discovery shows no podgroups/status.
            resources = json.loads(kubectl.run("get", "--raw", "/apis/scheduling.volcano.sh/v1beta1").stdout)
            names = {r["name"] for r in resources["resources"]}
            assert "podgroups" in names and "podgroups/status" not in names, names
            kubectl.run("apply", "-f", str(REPO / "manifests" / "default-queue.yaml"))
            kubectl.run("create", "namespace", NS_SYSTEM)
            c.parts.append(components.controller(cp.kubeconfig, c.log_dir / "controller.log", NS_SYSTEM))
            c.parts.append(components.scheduler(cp.kubeconfig, c.log_dir / "scheduler.log", NS_SYSTEM))
            for lease in ("hyperplace-controller", "hyperplace-scheduler"):
                wait_for(partial(_holder, kubectl, lease), f"the {lease} Lease", describe=c.describe)
            yield c
        except BaseException:
            print(cp.logs(), file=sys.stderr)
            raise
        finally:
            for p in reversed(c.parts):
                p.stop()


def _holder(kubectl: Kubectl, name: str) -> str | None:
    out = kubectl.run(
        "get", "lease", "-n", NS_SYSTEM, name, "-o", "jsonpath={.spec.holderIdentity}", check=False
    )
    return out.stdout.strip() if out.returncode == 0 else None


def _topology(kubectl: Kubectl) -> tuple[str, dict[str, list[str]]]:
    label = f"v{uuid.uuid4().hex[:6]}"
    leaves = {f"{label}-leaf{i}": [f"{label}-n{i * 2 + j}" for j in range(2)] for i in range(2)}
    objs: list[dict[str, Any]] = [
        node(n, {SELECT_LABEL: label}, cpu="4") for ns in leaves.values() for n in ns
    ]
    objs += [hypernode(leaf, 1, [exact("Node", n) for n in ns]) for leaf, ns in leaves.items()]
    objs.append(hypernode(f"{label}-spine", 2, [exact("HyperNode", leaf) for leaf in leaves]))
    kubectl.create(objs)
    return label, leaves


def _job(name: str, namespace: str, label: str, replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": replicas,
            "queue": "default",
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "nodeSelector": {SELECT_LABEL: label},
                            "containers": [
                                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}
                            ],
                        }
                    },
                }
            ],
        },
    }


def _podgroups(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    return kubectl.items(PODGROUPS, "-n", namespace)


def _condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None
    )


def test_phase_conditions_and_the_allocated_hypernode_persist_on_volcanos_crds(
    volcano: VolcanoCluster,
) -> None:
    kubectl = volcano.kubectl
    ns = f"t-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", ns)
    label, leaves = _topology(kubectl)
    kubectl.apply([_job("train", ns, label)])

    def placed() -> dict[str, Any] | None:
        pods = kubectl.items("pods", "-n", ns)
        if len(pods) != 2 or not all(pod_node(p) for p in pods):
            return None
        [pg] = _podgroups(kubectl, ns) or [None]
        if not pg or (pg.get("status") or {}).get("phase") != "Running":
            return None
        if ALLOCATED not in (pg["metadata"].get("annotations") or {}):
            return None
        return pg

    pg = wait_for(placed, "the gang bound and its PodGroup Running, annotated", describe=volcano.describe)
    nodes = {pod_node(p) for p in kubectl.items("pods", "-n", ns)}
    leaf = pg["metadata"]["annotations"][ALLOCATED]
    assert leaf in leaves and nodes <= set(leaves[leaf])
    scheduled = _condition(pg, "Scheduled")
    assert scheduled is not None and scheduled["status"] == "True"
    # HyperNode and Job status go through their status subresources (Volcano's have them too).
    hn = kubectl.get("hypernode", f"{label}-spine")
    assert hn["status"]["nodeCount"] == 4 and (_condition(hn, "Ready") or {}).get("status") == "True"
    job = kubectl.get("jobs.batch.volcano.sh", "-n", ns, "train")
    assert (job.get("status") or {}).get("minAvailable") == 2
    assert "podgroups/status is not served" not in volcano.describe()  # detected up front, not by a 404


def test_job_updates_reach_the_podgroup_including_one_under_the_legacy_name(volcano: VolcanoCluster) -> None:
    kubectl = volcano.kubectl
    ns = f"t-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", ns)
    label, _ = _topology(kubectl)
    # A PodGroup under the Job's own name, as Volcano before v1.5 named it, already exists.
    kubectl.create(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "legacy", "namespace": ns},
                "spec": {"minMember": 1, "queue": "default"},
            }
        ]
    )
    kubectl.apply([_job("legacy", ns, label), _job("fresh", ns, label)])
    uid = kubectl.get("jobs.batch.volcano.sh", "-n", ns, "fresh")["metadata"]["uid"]

    def two_running() -> list[dict[str, Any]] | None:
        pgs = {g["metadata"]["name"]: g for g in _podgroups(kubectl, ns)}
        want = {"legacy", f"fresh-{uid}"}
        if set(pgs) != want or any((g.get("status") or {}).get("phase") != "Running" for g in pgs.values()):
            return None
        return list(pgs.values())

    wait_for(two_running, "both gangs Running, the legacy PodGroup reused", describe=volcano.describe)
    legacy_pods = kubectl.items("pods", "-n", ns, "-l", "volcano.sh/job-name=legacy")
    assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in legacy_pods} == {"legacy"}

    # Update both Jobs the way Volcano allows: minAvailable, a task's minAvailable, priorityClassName.
    patch = [
        {"op": "replace", "path": "/spec/minAvailable", "value": 1},
        {"op": "add", "path": "/spec/tasks/0/minAvailable", "value": 1},
        {"op": "add", "path": "/spec/priorityClassName", "value": "high"},
    ]
    for job in ("legacy", "fresh"):
        kubectl.run("patch", "jobs.batch.volcano.sh", "-n", ns, job, "--type=json", "-p", json.dumps(patch))

    def synced() -> list[dict[str, Any]] | None:
        pgs = _podgroups(kubectl, ns)
        ok = all(
            g["spec"].get("minMember") == 1
            and g["spec"].get("minTaskMember") == {"worker": 1}
            and g["spec"].get("priorityClassName") == "high"
            for g in pgs
        )
        return pgs if ok and len(pgs) == 2 else None

    pgs = wait_for(synced, "the Job updates on both PodGroups", describe=volcano.describe)
    # The controller's update of the whole object kept the status the scheduler wrote.
    for g in pgs:
        assert g["status"]["phase"] == "Running", g["metadata"]["name"]
        assert _condition(g, "Scheduled") is not None
