"""User stories of a Volcano Job whose node fails under it, with the controller manager on the
in-memory API server: a node deleted, NotReady past the grace, or tainted NoExecute by a GPU
health tool loses the pods on it, which are replaced as the Job's policy says."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from controller.__main__ import parse_args
from controller.manager import ControllerManager, ManagerConfig
from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import JOBS, NODES, PODS
from hyperplace.runtime.fakeapi import FakeApi

from .test_job_lifecycle import NS, phase, pods, run_all, status, training_job, uids, versions
from .test_manager import eventually

RESTART_ON_EVICTION = [{"event": "PodEvicted", "action": "RestartJob"}]
GPU_HEALTH = {"key": "nvidia.com/gpu-health", "value": "unhealthy", "effect": "NoExecute"}
# Where the running gang's pods are; n5 is a healthy spare.
PLACEMENT = {"train-master-0": "n1", "train-worker-0": "n2", "train-worker-1": "n3", "train-worker-2": "n4"}

Start = Callable[..., Awaitable[FakeApi]]


def node(name: str) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"conditions": [ready]}}


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """Starts the controller manager with the given settings on a cluster of five Ready nodes."""
    tasks: list[asyncio.Task[None]] = []

    async def go(**settings: Any) -> FakeApi:
        api = FakeApi()
        api.clock = rfc3339  # real time: the graces are measured from the objects' timestamps
        for n in ("n1", "n2", "n3", "n4", "n5"):
            await api.create(NODES, node(n))
        mgr = ControllerManager(api, ManagerConfig(workers=2, seed=0, **settings), now=rfc3339)
        tasks.append(asyncio.create_task(mgr.run()))
        return api

    yield go
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def bind(api: FakeApi, placement: dict[str, str]) -> None:
    """The scheduler binds the pods."""
    for pod, where in placement.items():
        binding = {"metadata": {"name": pod}, "target": {"kind": "Node", "name": where}}
        await api.create(PODS, binding, NS, subresource="binding")


async def running_on_nodes(api: FakeApi, job: dict[str, Any]) -> None:
    """Submit ``job``; its four pods are bound as in PLACEMENT and run."""
    await api.create(JOBS, job, NS)
    await eventually(lambda: len(pods(api)) == 4)
    await bind(api, PLACEMENT)
    await run_all(api)
    await eventually(lambda: phase(api) == "Running")


async def set_ready(api: FakeApi, name: str, ready: str) -> None:
    """The node lifecycle controller (or the kubelet) writes the node's Ready condition."""
    cond = {"type": "Ready", "status": ready, "lastTransitionTime": rfc3339()}
    await api.patch(NODES, name, {"status": {"conditions": [cond]}}, subresource="status")


async def taint(api: FakeApi, name: str, *taints: dict[str, Any]) -> None:
    await api.patch(NODES, name, {"spec": {"taints": list(taints)}})


def quick_to_stop(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` with a 1 s termination grace period (a stuck pod's deletionTimestamp is 1 s on)."""
    for task in job["spec"]["tasks"]:
        task["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    return job


def message(api: FakeApi) -> str:
    return str((status(api).get("state") or {}).get("message") or "")


def nodes_of(api: FakeApi) -> dict[str, str | None]:
    return {n: (p.get("spec") or {}).get("nodeName") for n, p in pods(api).items()}


async def test_a_node_dies_under_a_running_training_job_which_restarts_as_version_1_and_waits_for_a_healthy_node(
    start: Start,
) -> None:
    api = await start()
    await running_on_nodes(api, training_job(policies=RESTART_ON_EVICTION))
    before = uids(api)

    await api.delete(NODES, "n3")

    # The pod on n3 is lost: PodEvicted, so RestartJob replaces every pod by one of version 1.
    await eventually(lambda: set(pods(api)) == set(before) and set(versions(api).values()) == {"1"})
    assert not set(uids(api).values()) & set(before.values())
    st = status(api)
    assert (st["retryCount"], st["version"], st["state"]["phase"]) == (1, 1, "Pending")
    assert message(api) == "RestartJob on PodEvicted of pod train-worker-1 (node n3 is gone)"
    # The new pods wait for the scheduler, which places them on the nodes that are left.
    assert set(nodes_of(api).values()) == {None}
    await bind(
        api, {"train-master-0": "n1", "train-worker-0": "n2", "train-worker-1": "n5", "train-worker-2": "n4"}
    )
    await run_all(api)
    await eventually(lambda: phase(api) == "Running")
    await asyncio.sleep(0.05)
    assert (status(api)["retryCount"], status(api)["version"]) == (1, 1)


async def test_a_gpu_health_tool_taints_a_node_no_execute_and_the_pod_on_it_is_replaced(start: Start) -> None:
    # No PodEvicted policy: the pod is deleted and created again, as any missing pod, same version.
    api = await start()
    await running_on_nodes(api, training_job())
    before = uids(api)

    await taint(api, "n2", GPU_HEALTH)

    await eventually(
        lambda: "train-worker-0" in pods(api) and uids(api)["train-worker-0"] != before["train-worker-0"]
    )
    assert {n: u for n, u in uids(api).items() if n != "train-worker-0"} == {
        n: u for n, u in before.items() if n != "train-worker-0"
    }
    assert nodes_of(api)["train-worker-0"] is None and set(versions(api).values()) == {"0"}
    assert status(api)["retryCount"] == 0
    assert (
        "PodEvicted of pod train-worker-0 (node n2 tainted nvidia.com/gpu-health=unhealthy:NoExecute)"
        in message(api)
    )


async def test_a_pod_that_tolerates_the_taint_stays(start: Start) -> None:
    api = await start()
    tolerant = training_job()
    worker = tolerant["spec"]["tasks"][1]["template"]["spec"]
    worker["tolerations"] = [{"key": GPU_HEALTH["key"], "operator": "Exists", "effect": "NoExecute"}]
    await running_on_nodes(api, tolerant)
    before = uids(api)

    # Both the master's node and a worker's are tainted: only the master does not tolerate it.
    await taint(api, "n1", GPU_HEALTH)
    await taint(api, "n2", GPU_HEALTH)

    await eventually(lambda: uids(api).get("train-master-0") not in (None, before["train-master-0"]))
    await asyncio.sleep(0.1)
    assert uids(api)["train-worker-0"] == before["train-worker-0"]
    assert nodes_of(api)["train-worker-0"] == "n2"


async def test_a_not_ready_node_that_comes_back_within_the_grace_changes_nothing(start: Start) -> None:
    api = await start(not_ready_grace=1.0)
    await running_on_nodes(api, training_job(policies=RESTART_ON_EVICTION))
    before = uids(api)

    await set_ready(api, "n3", "Unknown")
    await asyncio.sleep(0.3)
    await set_ready(api, "n3", "True")
    await asyncio.sleep(1.2)  # past the grace counted from the first transition

    assert uids(api) == before and phase(api) == "Running"
    assert status(api)["retryCount"] == 0

    # The same node staying NotReady past the grace loses its pod.
    await set_ready(api, "n3", "False")
    await eventually(lambda: status(api).get("retryCount") == 1, timeout=3.0)
    assert message(api).startswith("RestartJob on PodEvicted of pod train-worker-1 (node n3 Ready=False for ")


async def test_a_pod_terminating_on_an_unreachable_node_is_force_deleted_after_the_grace(
    start: Start,
) -> None:
    api = await start(not_ready_grace=0.2, force_delete_unreachable_after=0.5)
    api.unreachable_nodes.add("n3")  # its kubelet never confirms a deletion
    await running_on_nodes(api, quick_to_stop(training_job(policies=RESTART_ON_EVICTION)))

    await set_ready(api, "n3", "Unknown")

    # The restart is recorded and the lost pod deleted, but it stays Terminating on n3: the pods
    # of version 1 wait for it (two versions never run side by side).
    def stuck() -> bool:
        old = pods(api).get("train-worker-1") or {}
        return status(api).get("retryCount") == 1 and bool(old.get("metadata", {}).get("deletionTimestamp"))

    await eventually(stuck)
    assert set(pods(api)) == {"train-worker-1"}

    # Once its grace period and the force-delete grace passed, it goes and the job comes back.
    await eventually(lambda: len(pods(api)) == 4 and set(versions(api).values()) == {"1"}, timeout=6.0)
    assert (status(api)["retryCount"], status(api)["version"]) == (1, 1)


async def test_without_the_force_delete_flag_a_pod_stuck_on_an_unreachable_node_stays(start: Start) -> None:
    api = await start(not_ready_grace=0.2)
    api.unreachable_nodes.add("n3")
    await running_on_nodes(api, training_job())

    await set_ready(api, "n3", "False")
    await eventually(
        lambda: bool((pods(api).get("train-worker-1") or {}).get("metadata", {}).get("deletionTimestamp"))
    )
    await asyncio.sleep(1.0)
    # Deleted with its grace period and left to the kubelet (or an operator): its name is not free.
    assert pods(api)["train-worker-1"]["metadata"]["deletionTimestamp"]
    assert status(api)["terminating"] == 1


async def test_a_controller_restarted_while_the_lost_pod_is_stuck_does_not_count_the_restart_twice(
    start: Start,
) -> None:
    api = await start(not_ready_grace=0.2)
    api.unreachable_nodes.add("n3")
    await running_on_nodes(api, quick_to_stop(training_job(policies=RESTART_ON_EVICTION)))
    await set_ready(api, "n3", "Unknown")
    await eventually(lambda: status(api).get("retryCount") == 1 and set(pods(api)) == {"train-worker-1"})

    # A second controller (the first still runs, as after a lost Lease) finds the restart
    # recorded and the old pod stuck on the node that is still unreachable: it force-deletes it
    # and creates version 1, without a second retry.
    config = ManagerConfig(workers=2, seed=0, not_ready_grace=0.2, force_delete_unreachable_after=0.1)
    second = asyncio.create_task(ControllerManager(api, config, now=rfc3339).run())
    try:
        await eventually(lambda: len(pods(api)) == 4 and set(versions(api).values()) == {"1"}, timeout=6.0)
    finally:
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)
    assert (status(api)["retryCount"], status(api)["version"]) == (1, 1)


def test_the_node_failure_flags_default_to_a_30s_grace_and_no_force_delete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = parse_args([])
    assert (args.node_not_ready_grace, args.force_delete_unreachable_after) == (30.0, None)
    args = parse_args(["--node-not-ready-grace=1m", "--force-delete-unreachable-after=90s"])
    assert (args.node_not_ready_grace, args.force_delete_unreachable_after) == (60.0, 90.0)
    monkeypatch.setenv("HYPERPLACE_FORCE_DELETE_UNREACHABLE_AFTER", "2m")
    assert parse_args([]).force_delete_unreachable_after == 120.0
    assert parse_args(["--force-delete-unreachable-after=off"]).force_delete_unreachable_after is None
    monkeypatch.setenv("HYPERPLACE_NODE_NOT_READY_GRACE", "soon")
    with pytest.raises(SystemExit):
        parse_args([])  # a usage error, not a traceback


async def test_the_pod_made_again_names_the_node_its_predecessor_was_lost_with(start: Start) -> None:
    """The scheduler puts it back into that node's leaf when it can (hyperplace.io/replaces-node)."""
    api = await start()
    await running_on_nodes(api, training_job())
    before = uids(api)

    await taint(api, "n2", GPU_HEALTH)

    await eventually(
        lambda: "train-worker-0" in pods(api) and uids(api)["train-worker-0"] != before["train-worker-0"]
    )
    made = pods(api)["train-worker-0"]
    assert made["metadata"]["annotations"]["hyperplace.io/replaces-node"] == "n2"
    # The other pods, never lost, say nothing of the kind.
    assert all(
        "hyperplace.io/replaces-node" not in (p["metadata"].get("annotations") or {})
        for n, p in pods(api).items()
        if n != "train-worker-0"
    )
