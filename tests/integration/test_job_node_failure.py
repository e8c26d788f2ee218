"""A node that fails under a running Volcano Job's pod, against a real apiserver, with the real
``hyperplace-controller``: the Node goes NotReady, the controller counts the pod on it as evicted
and restarts the Job per its ``event: PodEvicted, action: RestartJob`` policy; the lost pod, which
no kubelet will ever finish deleting, is force-deleted once its grace period and the
controller's ``--force-delete-unreachable-after`` passed, so the new version is created.

No kube-controller-manager runs (nothing else evicts the pod) and no scheduler: the test binds
the pod itself and plays the node lifecycle controller by patching the Node's Ready condition."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from hyperplace.api.times import rfc3339

from ..controller.test_job_lifecycle import training_job
from . import components
from .conftest import Cluster
from .kube import Kubectl, node, wait_for
from .test_job_lifecycle import job_status, leading_controller, pods, pods_of_version, pods_when

pytestmark = pytest.mark.apiserver


@pytest.fixture(scope="module")
def controller(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[components.Component]:
    yield from leading_controller(
        cluster,
        tmp_path_factory.mktemp("node-failure"),
        "--node-not-ready-grace=1s",
        "--force-delete-unreachable-after=1s",
    )


@pytest.fixture
def doomed(kubectl: Kubectl) -> Iterator[str]:
    """A Ready node the test fails; deleted afterwards, so no other test sees it."""
    name = f"doomed-{uuid.uuid4().hex[:6]}"
    kubectl.create([node(name)])
    yield name
    kubectl.run("delete", "node", name, "--wait=false", check=False)


def test_a_node_gone_not_ready_under_a_running_pod_restarts_the_job_and_frees_the_pod_stuck_on_it(
    controller: components.Component, kubectl: Kubectl, namespace: str, doomed: str
) -> None:
    job = training_job(
        namespace=namespace, workers=2, policies=[{"event": "PodEvicted", "action": "RestartJob"}]
    )
    for task in job["spec"]["tasks"]:
        task["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    kubectl.apply([job])

    def describe() -> str:
        return f"{pods(kubectl, namespace)}\n{job_status(kubectl, namespace)}\n{controller.tail()}"

    first = wait_for(partial(pods_when, kubectl, namespace, 3), "3 pods", describe=describe)
    # The scheduler bound train-worker-1 to the node, and its kubelet started it.
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "train-worker-1"}}
    binding["target"] = {"apiVersion": "v1", "kind": "Node", "name": doomed}
    kubectl.run(
        "create",
        "--raw",
        f"/api/v1/namespaces/{namespace}/pods/train-worker-1/binding",
        "-f",
        "-",
        input=json.dumps(binding),
    )
    kubectl.run(
        "patch", "pod", "-n", namespace, "train-worker-1", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Running"}}),
    )  # fmt: skip

    # The node lifecycle controller: the kubelet stopped posting, Ready is Unknown.
    unknown: dict[str, Any] = {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": rfc3339(),
        "lastTransitionTime": rfc3339(),
    }
    kubectl.run(
        "patch", "node", doomed, "--subresource=status", "--type=strategic",
        "-p", json.dumps({"status": {"conditions": [unknown]}}),
    )  # fmt: skip

    after = wait_for(
        partial(pods_of_version, kubectl, namespace, 3, "1"), "3 pods of version 1", describe=describe
    )
    assert not {p["metadata"]["uid"] for p in after.values()} & {p["metadata"]["uid"] for p in first.values()}
    status = job_status(kubectl, namespace)
    assert (status["retryCount"], status["version"]) == (1, 1)
    assert status["state"]["message"].startswith(
        f"RestartJob on PodEvicted of pod train-worker-1 (node {doomed} Ready=Unknown for "
    )
    assert "force-deleting pod train-worker-1" in controller.log.read_text()
