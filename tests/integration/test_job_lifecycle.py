"""Volcano Job lifecycle against a real apiserver, with the real ``hyperplace-controller``: the
same YAML that restarts on Volcano (``event: PodEvicted, action: RestartJob``) restarts here,
and ``vcctl job suspend`` (an ``AbortJob`` Command) aborts a running Job.

No scheduler runs: the Job's pods stay unbound, so deleting one is immediate, as an eviction of
a pod whose node is gone is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ..controller.test_job_lifecycle import training_job
from . import components
from .conftest import Cluster
from .kube import PODGROUPS, Kubectl, wait_for

pytestmark = pytest.mark.apiserver

LEASE_NAMESPACE = "hyperplace-system"
VERSION = "volcano.sh/job-version"


def leading_controller(cluster: Cluster, log_dir: Path, *flags: str) -> Iterator[components.Component]:
    """The real controller with ``flags``, once it holds its Lease; stopped afterwards."""
    kubectl = cluster.kubectl
    if kubectl.run("get", "namespace", LEASE_NAMESPACE, check=False).returncode != 0:
        kubectl.run("create", "namespace", LEASE_NAMESPACE)
    ctl = components.controller(cluster.kubeconfig, log_dir / "controller.log", LEASE_NAMESPACE, *flags)
    try:
        wait_for(partial(_leader, kubectl), "the controller to hold its Lease", describe=ctl.tail)
        yield ctl
    finally:
        ctl.stop()


@pytest.fixture(scope="module")
def controller(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[components.Component]:
    yield from leading_controller(cluster, tmp_path_factory.mktemp("lifecycle"))


def _leader(kubectl: Kubectl) -> bool:
    out = kubectl.run(
        "get",
        "lease",
        "-n",
        LEASE_NAMESPACE,
        "hyperplace-controller",
        "-o",
        "jsonpath={.spec.holderIdentity}",
        check=False,
    )
    return out.returncode == 0 and bool(out.stdout.strip())


def pods(kubectl: Kubectl, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in kubectl.items("pods", "-n", namespace)}


def pods_when(kubectl: Kubectl, namespace: str, count: int) -> dict[str, dict[str, Any]] | None:
    now = pods(kubectl, namespace)
    return now if len(now) == count else None


def pods_of_version(
    kubectl: Kubectl, namespace: str, count: int, version: str
) -> dict[str, dict[str, Any]] | None:
    """The Job's pods once there are ``count`` of them, all of ``version``."""
    now = pods(kubectl, namespace)
    versions = {p["metadata"]["labels"][VERSION] for p in now.values()}
    return now if len(now) == count and versions == {version} else None


def job_status(kubectl: Kubectl, namespace: str) -> dict[str, Any]:
    return dict(kubectl.get("jobs.batch.volcano.sh", "-n", namespace, "train").get("status") or {})


def submit(
    controller: components.Component, kubectl: Kubectl, namespace: str, policies: list[dict[str, Any]]
) -> tuple[Callable[[], str], dict[str, dict[str, Any]]]:
    """Apply a 1-master, 2-worker Job with ``policies``; what to show on a timeout, and its pods."""
    kubectl.apply([training_job(namespace=namespace, workers=2, policies=policies)])

    def describe() -> str:
        return f"{pods(kubectl, namespace)}\n{job_status(kubectl, namespace)}\n{controller.tail()}"

    return describe, wait_for(partial(pods_when, kubectl, namespace, 3), "3 pods", describe=describe)


def test_an_evicted_pod_restarts_the_whole_job_as_a_new_version(
    controller: components.Component, kubectl: Kubectl, namespace: str
) -> None:
    describe, first = submit(
        controller, kubectl, namespace, [{"event": "PodEvicted", "action": "RestartJob"}]
    )
    assert {p["metadata"]["labels"][VERSION] for p in first.values()} == {"0"}
    [pg] = kubectl.items(PODGROUPS, "-n", namespace)

    kubectl.run("delete", "pod", "-n", namespace, "train-worker-1")

    after = wait_for(
        partial(pods_of_version, kubectl, namespace, 3, "1"), "3 pods of version 1", describe=describe
    )
    assert not {p["metadata"]["uid"] for p in after.values()} & {p["metadata"]["uid"] for p in first.values()}
    status = job_status(kubectl, namespace)
    assert (status["retryCount"], status["version"]) == (1, 1)
    assert status["state"]["message"] == "RestartJob on PodEvicted of pod train-worker-1"
    assert "Restarting" in [c["status"] for c in status["conditions"]]
    [kept] = kubectl.items(PODGROUPS, "-n", namespace)
    assert kept["metadata"]["uid"] == pg["metadata"]["uid"]


def test_a_failed_pod_restarts_the_job_and_a_suspend_command_aborts_it(
    controller: components.Component, kubectl: Kubectl, namespace: str
) -> None:
    describe, _ = submit(controller, kubectl, namespace, [{"event": "PodFailed", "action": "RestartJob"}])

    # The kubelet reports the master's container exited with code 1.
    failed = '{"status":{"phase":"Failed","containerStatuses":[{"name":"c","image":"trainer","imageID":"","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":1,"reason":"Error"}}}]}}'
    kubectl.run(
        "patch",
        "pod",
        "-n",
        namespace,
        "train-master-0",
        "--subresource=status",
        "--type=merge",
        "-p",
        failed,
    )
    wait_for(
        lambda: (
            job_status(kubectl, namespace).get("retryCount") == 1
            and {p["metadata"]["labels"][VERSION] for p in pods(kubectl, namespace).values()} == {"1"}
            and len(pods(kubectl, namespace)) == 3
        ),
        "the job restarted with 3 pods of version 1",
        describe=describe,
    )
    assert (
        job_status(kubectl, namespace)["state"]["message"]
        == "RestartJob on PodFailed of pod train-master-0 (exit code 1)"
    )

    # vcctl job suspend -N train: an AbortJob Command, consumed by the controller.
    command = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": "train-abortjob", "namespace": namespace},
        "action": "AbortJob",
        "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "x"},
    }
    kubectl.create([command])
    wait_for(
        lambda: (job_status(kubectl, namespace).get("state") or {}).get("phase") == "Aborted",
        "the job Aborted",
        describe=describe,
    )
    assert pods(kubectl, namespace) == {}
    assert kubectl.items("commands", "-n", namespace) == []
