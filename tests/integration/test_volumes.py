"""Claims on a real control plane: ``examples/dataset-volume`` applied as a user would, with
kube-controller-manager's PersistentVolume controller (persistentvolume-binder) binding the
WaitForFirstConsumer claim after hyperplace-scheduler's PreBind wrote the chosen volume's
claimRef, and the gang bound only then, in the rack of that volume.

A fake kubelet keeps the Nodes Ready and marks bound pods Running; there are no containers and
nothing is mounted. This module runs its own control plane with kube-controller-manager (the
session's has none)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from . import components
from .kube import REPO, pod_node, wait_for

pytestmark = [pytest.mark.apiserver, pytest.mark.gobuilt]

EXAMPLE = REPO / "examples" / "dataset-volume"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[components.Plane]:
    with components.plane_with_kcm(tmp_path_factory.mktemp("volume-components")) as p:
        yield p


def test_the_dataset_claim_is_bound_by_the_pv_controller_after_prebind_and_the_gang_then_runs_in_its_rack(
    plane: components.Plane,
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
