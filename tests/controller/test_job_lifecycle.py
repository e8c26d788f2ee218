"""User stories of a Volcano Job's lifecycle: policies, retries, restarts and Commands, with the
controller manager on the in-memory API server (the same YAML restarts as it does on Volcano)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.manager import ControllerManager, ManagerConfig
from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import COMMANDS, JOBS, PODGROUPS, PODS, ApiError
from hyperplace.runtime.fakeapi import FakeApi

from .test_manager import eventually

NS = "default"
KEY = f"{NS}/train"
VERSION = "volcano.sh/job-version"


def training_job(
    *,
    policies: list[dict[str, Any]] | None = None,
    worker_policies: list[dict[str, Any]] | None = None,
    master_policies: list[dict[str, Any]] | None = None,
    max_retry: int = 3,
    workers: int = 3,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A 1-master training Job (3 workers unless told) as admission leaves it (names,
    minAvailable, maxRetry)."""

    def task(name: str, replicas: int, policies: list[dict[str, Any]] | None) -> dict[str, Any]:
        t: dict[str, Any] = {
            "name": name,
            "replicas": replicas,
            "minAvailable": replicas,
            "maxRetry": 3,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "trainer", "resources": {"requests": {"cpu": "1"}}}
                    ],
                }
            },
        }
        if policies:
            t["policies"] = policies
        return t

    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": "default",
        "minAvailable": 1 + workers,
        "maxRetry": max_retry,
        "tasks": [task("master", 1, master_policies), task("worker", workers, worker_policies)],
    }
    if policies:
        spec["policies"] = policies
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", **({"namespace": namespace} if namespace else {})},
        "spec": spec,
    }


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakeApi, ControllerManager]]:
    api = FakeApi()
    api.clock = rfc3339  # real time: the PodPending timeout is measured from creationTimestamp
    mgr = ControllerManager(api, ManagerConfig(workers=2, seed=0), now=rfc3339)
    task = asyncio.create_task(mgr.run())
    yield api, mgr
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def pods(api: FakeApi) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in api.objects.get("pods", {}).values()}


def status(api: FakeApi) -> dict[str, Any]:
    return dict((api.peek(JOBS, KEY) or {}).get("status") or {})


def phase(api: FakeApi) -> str | None:
    return (status(api).get("state") or {}).get("phase")


def versions(api: FakeApi) -> dict[str, str]:
    return {n: p["metadata"]["labels"][VERSION] for n, p in pods(api).items()}


def uids(api: FakeApi) -> dict[str, str]:
    return {n: p["metadata"]["uid"] for n, p in pods(api).items()}


async def run_all(api: FakeApi) -> None:
    """The kubelet starts every pod that is not running yet."""
    for name, pod in pods(api).items():
        if (pod.get("status") or {}).get("phase") != "Running" and not pod["metadata"].get(
            "deletionTimestamp"
        ):
            await api.patch(PODS, name, {"status": {"phase": "Running"}}, NS, subresource="status")


async def finish(api: FakeApi, name: str, phase: str, exit_code: int = 0) -> None:
    """The kubelet reports the pod's container finished."""
    terminated = {"exitCode": exit_code, "finishedAt": rfc3339()}
    body = {"phase": phase, "containerStatuses": [{"name": "c", "state": {"terminated": terminated}}]}
    await api.patch(PODS, name, {"status": body}, NS, subresource="status")


async def running_job(api: FakeApi, job: dict[str, Any]) -> dict[str, Any]:
    """Submit ``job`` and wait until its four pods run; the PodGroup."""
    created = await api.create(JOBS, job, NS)
    await eventually(lambda: len(pods(api)) == 4)
    await run_all(api)
    await eventually(lambda: phase(api) == "Running")
    pg = api.peek(PODGROUPS, f"{NS}/train-{created['metadata']['uid']}")
    assert pg is not None
    return pg


async def evict(api: FakeApi, name: str) -> None:
    await api.create(PODS, {"metadata": {"name": name, "namespace": NS}}, NS, subresource="eviction")


async def test_a_training_job_whose_pod_is_evicted_restarts_whole_and_keeps_its_podgroup(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    pg = await running_job(api, training_job(policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    before = uids(api)

    await evict(api, "train-worker-1")

    # Every pod of version 0 is replaced by one of version 1, the restart counted once.
    await eventually(
        lambda: versions(api) == dict.fromkeys(before, "1") and status(api).get("retryCount") == 1
    )
    assert not set(uids(api).values()) & set(before.values())
    st = status(api)
    assert (st["version"], st["state"]["phase"], st["state"]["reason"]) == (1, "Pending", "RestartJob")
    assert "PodEvicted of pod train-worker-1" in st["state"]["message"]
    assert [c["status"] for c in st["conditions"]][-3:] == ["Running", "Restarting", "Pending"]
    kept = api.peek(PODGROUPS, f"{NS}/{pg['metadata']['name']}")
    assert kept is not None and kept["metadata"]["uid"] == pg["metadata"]["uid"]

    # The restarted gang runs again.
    await run_all(api)
    await eventually(lambda: phase(api) == "Running")
    assert status(api)["retryCount"] == 1


async def test_a_job_that_used_up_max_retry_fails(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, _ = cluster
    await running_job(
        api, training_job(policies=[{"event": "PodEvicted", "action": "RestartJob"}], max_retry=2)
    )

    await evict(api, "train-worker-0")
    await eventually(lambda: status(api).get("retryCount") == 1 and set(versions(api).values()) == {"1"})
    await run_all(api)
    await eventually(lambda: phase(api) == "Running")

    # The second eviction is the last try: the job fails and nothing is recreated.
    await evict(api, "train-master-0")
    await eventually(lambda: phase(api) == "Failed")
    st = status(api)
    assert (st["retryCount"], st["state"]["reason"]) == (2, "MaxRetryReached")
    await eventually(lambda: pods(api) == {})
    await asyncio.sleep(0.05)
    assert pods(api) == {} and phase(api) == "Failed"


async def test_an_exit_code_policy_restarts_only_its_task_and_overrides_the_job_policy(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    job = training_job(
        policies=[{"event": "PodFailed", "action": "AbortJob"}],
        worker_policies=[{"exitCode": 3, "action": "RestartTask"}],
    )
    await running_job(api, job)
    before = uids(api)

    # A worker exits with code 3: its task's policy wins over the job's PodFailed -> AbortJob.
    await finish(api, "train-worker-2", "Failed", exit_code=3)
    workers = {n for n in before if "worker" in n}
    await eventually(
        lambda: (
            set(pods(api)) == set(before)
            and all(uids(api)[n] != before[n] for n in workers)
            and status(api).get("retryCount") == 1
        )
    )
    assert uids(api)["train-master-0"] == before["train-master-0"]
    assert set(versions(api).values()) == {"0"}  # a task restart keeps the job's version
    await run_all(api)
    await eventually(lambda: phase(api) == "Running")

    # The master fails with another code: no task policy, so the job's own aborts the job.
    await finish(api, "train-master-0", "Failed", exit_code=1)
    await eventually(lambda: phase(api) == "Aborted")
    assert set(pods(api)) == {"train-master-0"}  # the failed pod stays, for its logs


async def test_an_aborted_job_resumes_on_a_resume_command(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, _ = cluster
    await running_job(api, training_job(policies=[{"event": "PodFailed", "action": "AbortJob"}]))

    await finish(api, "train-worker-0", "Failed", exit_code=1)
    await eventually(lambda: phase(api) == "Aborted")
    assert set(pods(api)) == {"train-worker-0"}

    # vcctl job resume -N train
    command = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": "train-resumejob-"},
        "action": "ResumeJob",
        "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "u"},
    }
    await api.create(COMMANDS, command, NS)
    await eventually(lambda: len(pods(api)) == 4 and set(versions(api).values()) == {"2"})
    assert api.objects.get("commands", {}) == {}  # consumed
    st = status(api)
    assert (st["retryCount"], st["version"], st["state"]["phase"]) == (1, 2, "Pending")
    assert [c["status"] for c in st["conditions"]][-4:] == ["Aborting", "Aborted", "Restarting", "Pending"]


async def test_a_suspend_command_aborts_a_running_job_and_an_unknown_action_is_dropped(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    await running_job(api, training_job())

    def command(action: str) -> dict[str, Any]:
        return {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"generateName": "train-"},
            "action": action,
            "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "u"},
        }

    await api.create(COMMANDS, command("Reboot"), NS)
    await eventually(lambda: api.objects.get("commands", {}) == {})
    await asyncio.sleep(0.05)
    assert phase(api) == "Running" and len(pods(api)) == 4

    await api.create(COMMANDS, command("AbortJob"), NS)  # vcctl job suspend -N train
    await eventually(lambda: phase(api) == "Aborted")
    assert pods(api) == {} and status(api)["retryCount"] == 0


async def test_a_completed_task_completes_the_job(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, _ = cluster
    await running_job(
        api, training_job(master_policies=[{"event": "TaskCompleted", "action": "CompleteJob"}])
    )

    # The master finished: the workers are stopped and the job is Completed.
    await finish(api, "train-master-0", "Succeeded")
    await eventually(lambda: phase(api) == "Completed")
    assert set(pods(api)) == {"train-master-0"}
    assert [c["status"] for c in status(api)["conditions"]][-2:] == ["Completing", "Completed"]


async def test_a_pod_pending_past_its_timeout_triggers_its_action(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    job = training_job(policies=[{"event": "PodPending", "action": "AbortJob", "timeout": "1s"}])
    await api.create(JOBS, job, NS)
    await eventually(lambda: len(pods(api)) == 4)
    await asyncio.sleep(0.3)
    assert phase(api) == "Pending"  # not yet: the pods have waited less than a second
    await eventually(lambda: phase(api) == "Aborted", timeout=5.0)
    assert "PodPending of pod train-master-0" in status(api)["state"]["message"]


async def test_a_pod_failure_without_a_policy_leaves_the_job_running(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    await running_job(api, training_job(policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    await finish(api, "train-worker-0", "Failed", exit_code=1)
    await eventually(lambda: status(api).get("failed") == 1)
    await asyncio.sleep(0.05)
    st = status(api)
    assert (st["state"]["phase"], st["retryCount"], len(pods(api))) == ("Running", 0, 4)


async def test_a_controller_that_stopped_mid_restart_finishes_it_without_two_versions_running() -> None:
    api = FakeApi()
    first = ControllerManager(api, ManagerConfig(workers=2, seed=0), now=rfc3339)
    run = asyncio.create_task(first.run())
    await running_job(api, training_job(policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    # What the stopped controller left: the restart recorded (the status is written first), the
    # pods of version 0 not deleted yet.
    await api.patch(
        JOBS,
        "train",
        {"status": {"state": {"phase": "Restarting", "reason": "RestartJob"}, "version": 1, "retryCount": 1}},
        NS,
        subresource="status",
    )
    old = uids(api)

    second = ControllerManager(api, ManagerConfig(workers=2, seed=0), now=rfc3339)
    run = asyncio.create_task(second.run())
    seen: list[set[str]] = []

    def done() -> bool:
        live = {p["metadata"]["labels"][VERSION] for p in pods(api).values()}
        seen.append(live)
        return live == {"1"} and len(pods(api)) == 4

    try:
        await eventually(done)
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    assert all(len(versions_seen) <= 1 for versions_seen in seen)
    assert not set(uids(api).values()) & set(old.values())
    st = status(api)
    assert (st["retryCount"], st["version"], st["state"]["phase"]) == (1, 1, "Pending")


async def test_a_restart_whose_pod_deletes_fail_is_retried_and_counted_once(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, mgr = cluster
    await running_job(api, training_job(policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    api.fail_next("delete", 500, "InternalError", times=2)
    await evict(api, "train-worker-2")
    await eventually(lambda: set(versions(api).values()) == {"1"} and len(pods(api)) == 4)
    assert status(api)["retryCount"] == 1
    assert mgr.metrics.reconciles.labels("job", "retry")._value.get() >= 1


async def test_the_status_is_written_only_onto_the_job_it_was_computed_from(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    # Two passes that both read the Job at retryCount 0 must not both count a restart, and a pass
    # from a stale cache must not write an older phase back: every status patch carries the
    # resourceVersion it was computed from, so the API server refuses one made from a stale read.
    api, _ = cluster
    sent: list[dict[str, Any]] = []
    patch = api.patch

    async def recording(res: Any, name: str, body: Any, namespace: Any = None, **kw: Any) -> Any:
        if res is JOBS and kw.get("subresource") == "status":
            sent.append(body)
        return await patch(res, name, body, namespace, **kw)

    api.patch = recording  # type: ignore[method-assign]
    await running_job(api, training_job(policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    before = len(sent)
    await evict(api, "train-worker-0")
    await eventually(lambda: status(api).get("retryCount") == 1)
    restart = next(b for b in sent[before:] if (b["status"] or {}).get("retryCount") == 1)
    assert restart["status"]["state"]["phase"] == "Restarting"
    assert all(b["metadata"]["resourceVersion"] for b in sent)
    # A write from the Job as it was before the restart is refused.
    stale = {"metadata": {"resourceVersion": sent[before]["metadata"]["resourceVersion"]}, "status": {}}
    with pytest.raises(ApiError) as refused:
        await patch(JOBS, "train", stale, NS, subresource="status")
    assert refused.value.conflict
