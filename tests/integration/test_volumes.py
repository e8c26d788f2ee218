"""Claims on a real control plane: ``examples/dataset-volume`` applied as a user would, with
kube-controller-manager's PersistentVolume controller (persistentvolume-binder) binding the
WaitForFirstConsumer claim after hyperplace-scheduler's PreBind wrote the chosen volume's
claimRef, and the gang bound only then, in the rack of that volume.

A fake kubelet keeps the Nodes Ready and marks bound pods Running; there are no containers and
nothing is mounted. This module runs its own control plane with kube-controller-manager (the
session's has none)."""

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
EXAMPLE = REPO / "examples" / "dataset-volume"


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
                    "get", "podgroups.scheduling.volcano.sh,hypernodes,queues", "-A", check=False
                ).returncode
                == 0
            ),
            "the CRDs to be served",
        )
        kubectl.run("apply", "-f", str(REPO / "manifests" / "default-queue.yaml"))
        kubectl.run("create", "namespace", LEASE_NAMESPACE)
        logs = tmp_path_factory.mktemp("volume-components")
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


def test_the_dataset_claim_is_bound_by_the_pv_controller_after_prebind_and_the_gang_then_runs_in_its_rack(
    plane: Plane,
) -> None:
    kubectl = plane.kubectl
    out = kubectl.run("apply", "-f", f"{EXAMPLE}/", check=False)
    assert out.returncode == 0, out.stderr  # kubectl apply accepts the example as it is

    def gang() -> list[dict[str, Any]] | None:
        pods = kubectl.items("pods", "-n", "datasets")
        return pods if len(pods) == 4 and all(pod_node(p) for p in pods) else None

    pods = wait_for(gang, "the resnet gang bound", timeout=120, describe=plane.describe)
    assert {pod_node(p) for p in pods} == {"ds-r1-n0", "ds-r1-n1"}  # the rack of the chosen cache

    claim = kubectl.get("pvc", "-n", "datasets", "imagenet")
    # Bound by kube-controller-manager's PersistentVolume controller, to the smallest cache that
    # holds 300Gi (rack1's 400Gi one), which the scheduler's PreBind claimed for it.
    assert claim["status"]["phase"] == "Bound", claim
    assert claim["spec"]["volumeName"] == "imagenet-cache-rack1"
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    volume = kubectl.get("pv", "imagenet-cache-rack1")
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert volume["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    for other in ("imagenet-cache-rack0", "imagenet-cache-rack1-large"):
        assert "claimRef" not in kubectl.get("pv", other)["spec"]
    # No pod was bound before its claim: the controller-manager's last write of the claim (the
    # bind) is no later than the first pod's PodScheduled (both to the second).
    fields = kubectl.get("pvc", "-n", "datasets", "imagenet", "--show-managed-fields")["metadata"][
        "managedFields"
    ]
    bound_at = max(f["time"] for f in fields if f["manager"].startswith("kube-controller-manager"))
    scheduled_at = min(
        c["lastTransitionTime"]
        for p in pods
        for c in p["status"]["conditions"]
        if c["type"] == "PodScheduled" and c["status"] == "True"
    )
    assert bound_at <= scheduled_at, (bound_at, scheduled_at)
    events = kubectl.items("events", "-n", "datasets", "--field-selector", "reason=FailedScheduling")
    assert not [e for e in events if "PreBind" in (e.get("message") or "")], events
