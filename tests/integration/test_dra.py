"""GPUs as DRA devices on a real control plane: ``examples/dra-gpus`` applied as a user would,
kube-controller-manager's resourceclaim controller making each worker's ResourceClaim from the
template, hyperplace-scheduler allocating the gang's GPUs in one NVLink domain and writing every
claim's allocation and reservation before any pod is bound, and the resourceclaim controller
releasing and deleting the claims when the Job is gone.

A fake kubelet keeps the Nodes Ready and marks bound pods Running (it plays the kubelet: it
checks nothing of the claims, the test does, at the moment of each bind). This module runs its
own control plane with kube-controller-manager (the session's has none)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from hyperplace.localup import components as lc
from hyperplace.localup import controlplane

from ..kube_bin import kube_bin_dir
from . import components
from .kube import REPO, Kubectl, pod_node, wait_for

pytestmark = [pytest.mark.apiserver, pytest.mark.gobuilt]

LEASE_NAMESPACE = "hyperplace-system"
EXAMPLE = REPO / "examples" / "dra-gpus"
FINALIZER = "resource.kubernetes.io/delete-protection"


class Plane:
    def __init__(self, kubectl: Kubectl, procs: list[components.Component], cp: Any) -> None:
        self.kubectl, self.procs, self.cp = kubectl, procs, cp

    def describe(self) -> str:
        procs = sorted(self.procs, key=lambda p: not p.alive())
        return str(self.cp.logs()) + "\n" + "\n".join(p.tail(40) for p in procs)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    bin_dir = kube_bin_dir()
    try:
        cm = controlplane.control_plane(bin_dir, controller_manager=True)
        cp = cm.__enter__()
    except controlplane.ControlPlaneError as exc:
        pytest.fail(f"the control plane did not start:\n{exc}")
    procs: list[components.Component] = []
    try:
        kubectl = Kubectl(cp.kubeconfig)
        kubectl.run("apply", "-f", str(REPO / "manifests" / "crds"))
        wait_for(
            lambda: (
                kubectl.run(
                    "get",
                    "podgroups.scheduling.volcano.sh,hypernodes,queues,jobs.batch.volcano.sh",
                    "-A",
                    check=False,
                ).returncode
                == 0
            ),
            "the CRDs to be served",
        )
        kubectl.run("apply", "-f", str(REPO / "manifests" / "default-queue.yaml"))
        kubectl.run("create", "namespace", LEASE_NAMESPACE)
        logs = tmp_path_factory.mktemp("dra-components")
        env = {"KUBECONFIG": str(cp.kubeconfig)}
        procs.append(
            components.Component(
                "fake-kubelet", lc.fake_kubelet_argv(cp.kubeconfig), logs / "fake-kubelet.log", env=env
            )
        )
        procs.append(components.controller(cp.kubeconfig, logs / "controller.log", LEASE_NAMESPACE))
        procs.append(components.scheduler(cp.kubeconfig, logs / "scheduler.log", LEASE_NAMESPACE))
        yield Plane(kubectl, procs, cp)
    except BaseException:
        print(cp.logs(), file=sys.stderr)
        raise
    finally:
        for p in reversed(procs):
            p.stop()
        cm.__exit__(None, None, None)


def test_a_gangs_gpus_come_from_the_controllers_claims_in_one_nvlink_domain_and_go_back_with_the_job(
    plane: Plane,
) -> None:
    kubectl = plane.kubectl
    out = kubectl.run("apply", "-f", f"{EXAMPLE}/", check=False)
    assert out.returncode == 0, out.stderr  # kubectl apply accepts the example as it is

    def gang() -> list[dict[str, Any]] | None:
        pods = kubectl.items("pods", "-n", "default", "-l", "volcano.sh/job-name=mnnvl")
        return pods if len(pods) == 4 and all(pod_node(p) for p in pods) else None

    pods = wait_for(gang, "the mnnvl gang bound", timeout=120, describe=plane.describe)
    nodes = {pod_node(p) for p in pods}
    assert len({n.rsplit("-", 1)[0] for n in nodes}) == 1, nodes  # one NVLink domain
    claims = {
        (c["metadata"]["ownerReferences"][0]["uid"]): c
        for c in kubectl.items("resourceclaims", "-n", "default")
    }
    taken: set[tuple[str, str]] = set()
    for p in pods:
        c = claims[p["metadata"]["uid"]]  # made by kube-controller-manager for this pod
        status = c["status"]
        assert FINALIZER in c["metadata"]["finalizers"]
        assert [r["uid"] for r in status["reservedFor"]] == [p["metadata"]["uid"]]
        results = status["allocation"]["devices"]["results"]
        assert len(results) == 4 and {r["pool"] for r in results} == {pod_node(p)}
        taken |= {(r["pool"], r["device"]) for r in results}
        term = status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]
        assert term["matchFields"][0]["values"] == [pod_node(p)]
        # The claim was written before the pod was bound (kube-scheduler's PreBind order).
        scheduled = next(
            x["lastTransitionTime"] for x in p["status"]["conditions"] if x["type"] == "PodScheduled"
        )
        written = max(
            f["time"]
            for f in kubectl.get(
                "resourceclaim", "-n", "default", c["metadata"]["name"], "--show-managed-fields"
            )["metadata"]["managedFields"]
            if f.get("subresource") == "status"
        )
        assert written <= scheduled, (written, scheduled)
    assert len(taken) == 16  # 16 distinct GPUs

    # The Job goes: the resourceclaim controller releases and deletes the claims.
    kubectl.run("delete", "jobs.batch.volcano.sh", "-n", "default", "mnnvl", "--wait=false")
    wait_for(
        lambda: not kubectl.items("resourceclaims", "-n", "default"),
        "the claims released and deleted",
        timeout=120,
        describe=plane.describe,
    )
