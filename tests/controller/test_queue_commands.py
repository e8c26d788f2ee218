"""A team lead closes and opens a queue the way Volcano users do: ``vcctl queue operate --name
q --action close|open`` creates a ``bus.volcano.sh`` Command, the admission webhook marks it
(its creator may update the queue), and the queue controller deletes it and applies it, once.
A Command the webhook did not admit (unmarked, forged, moved to another queue, replayed) is
deleted without effect."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.manager import ControllerManager, ManagerConfig
from controller.queue.command import judge
from controller.queue.status import queue_status, state_after
from hyperplace.api import Command, Queue
from hyperplace.pki import commandmark
from hyperplace.runtime.api import COMMANDS, JOBS, PODGROUPS, QUEUES
from hyperplace.runtime.fakeapi import FakeApi
from tests.webhooks.builders import job
from webhooks.admission import AdmissionContext
from webhooks.command import command_patch as webhook_command_patch
from webhooks.job import validate_job

from .test_manager import eventually
from .test_queue_controller import pg, q, set_phase, status_of

KEY = b"k" * 32
FAKE_API_NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()  # FakeApi's creationTimestamp


def admitted(cmd: dict[str, Any], key: bytes = KEY, now: float = FAKE_API_NOW) -> dict[str, Any]:
    """``cmd`` as the mutating webhook leaves it after the SubjectAccessReview allowed it."""
    out = copy.deepcopy(cmd)
    answer = webhook_command_patch(
        out, out["metadata"]["namespace"], AdmissionContext(command_key=key, now=now)
    )
    for op in answer:
        assert op["op"] == "add"
        if op["path"] == "/metadata/annotations":
            out["metadata"]["annotations"] = op["value"]
        else:
            out["metadata"].setdefault("annotations", {})[commandmark.ANNOTATION] = op["value"]
    return out


def vcctl_command(queue: dict[str, Any], action: str, *, signed: bool = True) -> dict[str, Any]:
    """The Command ``vcctl queue operate --name <queue> --action open|close`` creates
    (pkg/cli/queue/util.go: createQueueCommand): in namespace ``default``, named from
    ``generateName``, owned by and targeting the Queue through a controller reference."""
    ref = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": queue["metadata"]["name"],
        "uid": queue["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    cmd = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "generateName": f"{queue['metadata']['name']}-{action.lower()}-",
            "namespace": "default",
            "ownerReferences": [ref],
        },
        "target": ref,
        "action": action,
    }
    return admitted(cmd) if signed else cmd


def command_for(name: str, action: str, uid: str = "uid-x") -> dict[str, Any]:
    return vcctl_command({"metadata": {"name": name, "uid": uid}}, action)


def commands_left(api: FakeApi) -> list[str]:
    return sorted(api.objects.get("commands", {}))


def job_admission(api: FakeApi, queue: str, name: str = "next") -> list[str]:
    """What the Job webhook says to a new Job naming ``queue``, from the queues as stored."""
    queues = {n: Queue.model_validate(o) for n, o in api.objects.get("queues", {}).items()}
    return validate_job(job(name, queue=queue), ctx=AdmissionContext(queues=queues)).messages


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakeApi, ControllerManager]]:
    api = FakeApi()
    mgr = ControllerManager(api, ManagerConfig(workers=2, seed=0, command_key=KEY), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    yield api, mgr
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


# -- the state an action leaves (Volcano's queue state machine) --------------------------------


def test_close_drains_through_closing_and_open_opens_from_any_state() -> None:
    assert state_after("Open", "CloseQueue", podgroups=2) == "Closing"
    assert state_after("Open", "CloseQueue", podgroups=0) == "Closed"
    assert state_after(None, "CloseQueue", podgroups=0) == "Closed"
    assert state_after("Unknown", "CloseQueue", podgroups=1) == "Closing"
    assert state_after("Closing", "CloseQueue", podgroups=0) == "Closed"
    # Volcano's closed state keeps a Closed queue Closed even while PodGroups remain.
    assert state_after("Closed", "CloseQueue", podgroups=3) == "Closed"
    for current in (None, "Open", "Closing", "Closed", "Unknown"):
        assert state_after(current, "OpenQueue", podgroups=5) == "Open"
    with pytest.raises(ValueError, match="unknown queue action"):
        state_after("Open", "Pause", podgroups=0)


def test_an_action_goes_with_the_counts_in_one_status() -> None:
    pgs = [pg("a", "team", "Running")]
    assert queue_status(q("team", "Open"), pgs, "CloseQueue")["state"] == "Closing"
    assert queue_status(q("team", "Open"), pgs, "CloseQueue")["running"] == 1
    assert queue_status(q("team", "Closed"), pgs, "OpenQueue")["state"] == "Open"


def test_only_queue_commands_are_judged_and_bad_ones_are_dropped_with_the_reason() -> None:
    exists = {"team", "root"}.__contains__
    ok = judge(Command.model_validate(command_for("team", "CloseQueue")), exists)
    assert ok is not None and (ok.queue, ok.action, ok.dropped) == ("team", "CloseQueue", False)
    missing = judge(Command.model_validate(command_for("gone", "CloseQueue")), exists)
    assert missing is not None and missing.reason == 'queues.scheduling.volcano.sh "gone" not found'
    unknown = judge(Command.model_validate(command_for("team", "Pause")), exists)
    assert unknown is not None
    assert unknown.reason == "action 'Pause' is not a queue action (use OpenQueue or CloseQueue)"
    root = judge(Command.model_validate(command_for("root", "CloseQueue")), exists)
    assert root is not None and root.reason == "the root queue cannot be closed"
    # A Job's Command (vcctl job suspend) is the job controller's business, not ours.
    abort = command_for("train", "AbortJob")
    abort["target"].update(apiVersion="batch.volcano.sh/v1alpha1", kind="Job")
    assert judge(Command.model_validate(abort), exists) is None


# -- on the fake API server ---------------------------------------------------------------------


async def test_a_team_lead_closes_a_queue_drains_it_and_opens_it_again(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, mgr = cluster
    team = await api.create(QUEUES, q("team"))
    await eventually(lambda: status_of(api, "team").get("state") == "Open")
    # A training job runs in the queue.
    await api.create(JOBS, job("train", queue="team", minAvailable=4), "default")
    await eventually(lambda: len(api.objects.get("podgroups", {})) == 1)
    (pg_key,) = api.objects["podgroups"]
    pg_name = pg_key.split("/")[1]
    await set_phase(api, pg_name, "Running")
    await eventually(lambda: status_of(api, "team").get("running") == 1)
    assert job_admission(api, "team") == []

    # vcctl queue operate --name team --action close
    await api.create(COMMANDS, vcctl_command(team, "CloseQueue"), "default")
    await eventually(lambda: status_of(api, "team").get("state") == "Closing")
    assert commands_left(api) == [], "a Command is deleted once served"
    # New jobs are refused; the running one keeps its PodGroup and its pods.
    assert job_admission(api, "team") == [
        "spec.queue: can only submit job to queue with state `Open`, queue `team` status is `Closing`"
    ]
    await asyncio.sleep(0.05)
    assert api.peek(PODGROUPS, pg_key) is not None
    assert len(api.objects.get("pods", {})) == 4
    assert status_of(api, "team")["state"] == "Closing"

    # The job finishes and is cleaned up: the last PodGroup goes, the queue is Closed.
    await api.delete(JOBS, "train", "default")
    await api.delete(PODGROUPS, pg_name, "default")
    await eventually(lambda: status_of(api, "team").get("state") == "Closed")
    assert "status is `Closed`" in job_admission(api, "team")[0]

    # vcctl queue operate --name team --action open
    await api.create(COMMANDS, vcctl_command(team, "OpenQueue"), "default")
    await eventually(lambda: status_of(api, "team").get("state") == "Open")
    assert commands_left(api) == []
    assert job_admission(api, "team") == []
    assert mgr.queue_ctl.queue_actions == {}


async def test_closing_an_idle_queue_closes_it_at_once(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, _ = cluster
    idle = await api.create(QUEUES, q("idle"))
    await api.create(COMMANDS, vcctl_command(idle, "CloseQueue"), "default")
    await eventually(lambda: status_of(api, "idle").get("state") == "Closed")
    assert commands_left(api) == []


async def test_a_command_naming_a_missing_queue_is_dropped_with_the_reason(
    cluster: tuple[FakeApi, ControllerManager], caplog: pytest.LogCaptureFixture
) -> None:
    api, mgr = cluster
    await api.create(QUEUES, q("team"))
    with caplog.at_level(logging.WARNING, logger="controller.queue.command_sync"):
        await api.create(COMMANDS, command_for("gone", "CloseQueue"), "default")
        await api.create(COMMANDS, command_for("team", "Pause"), "default")
        await eventually(lambda: commands_left(api) == [])
        await eventually(lambda: len(caplog.records) >= 2)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert (
        'CloseQueue on queue gone) deleted without effect: queues.scheduling.volcano.sh "gone" not found'
        in text
    )
    assert "Pause on queue team) deleted without effect: action 'Pause' is not a queue action" in text
    await asyncio.sleep(0.05)
    assert status_of(api, "team").get("state") == "Open"
    assert mgr.queue_ctl.queue_actions == {}


async def test_a_job_command_is_left_for_the_job_controller(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, mgr = cluster
    suspend = command_for("train", "AbortJob")
    suspend["target"].update(apiVersion="batch.volcano.sh/v1alpha1", kind="Job")
    await api.create(COMMANDS, suspend, "default")
    await api.create(QUEUES, q("team"))
    await eventually(lambda: status_of(api, "team").get("state") == "Open")
    # The job controller consumes it (tests/controller/test_job_lifecycle.py); the queue
    # controller neither applies it nor counts it.
    await eventually(lambda: commands_left(api) == [])
    assert mgr.queue_ctl.queue_actions == {}
    assert mgr.metrics.commands._metrics == {}


async def test_a_command_for_a_queue_the_cache_has_not_seen_yet_is_not_lost() -> None:
    api = FakeApi()
    mgr = ControllerManager(api, ManagerConfig(workers=1, seed=0, command_key=KEY), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    try:
        await eventually(mgr.synced)
        # The queue's informer event is held back; the Command's arrives first.
        real = mgr.queue_objs.get
        mgr.queue_objs.get = lambda key: None  # type: ignore[method-assign]
        fresh = await api.create(QUEUES, q("fresh"))
        await api.create(COMMANDS, vcctl_command(fresh, "CloseQueue"), "default")
        await eventually(lambda: commands_left(api) == [])
        assert "fresh" in mgr.queue_ctl.queue_actions, "accepted, waiting for the queue to show up"
        mgr.queue_objs.get = real  # type: ignore[method-assign]
        mgr.queue_ctl.queue.add("fresh")
        await eventually(lambda: status_of(api, "fresh").get("state") == "Closed")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_command_is_applied_once_however_often_it_is_seen() -> None:
    api = FakeApi()
    team = await api.create(QUEUES, q("team"))
    # Created while no controller runs: the next one to start serves it (not lost).
    await api.create(COMMANDS, vcctl_command(team, "CloseQueue"), "default")
    (key,) = commands_left(api)
    seen = api.peek(COMMANDS, key)
    assert seen is not None
    mgr = ControllerManager(api, ManagerConfig(workers=1, seed=0, command_key=KEY), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    try:
        await eventually(lambda: status_of(api, "team").get("state") == "Closed")
        # The user opens the queue by hand; the same Command seen again (a re-list or a
        # stale cache) finds nothing to delete and closes nothing.
        await api.patch(QUEUES, "team", {"status": {"state": "Open"}}, None, subresource="status")
        await mgr.command_ctl.reconcile(key)
        mgr.commands.store[key] = seen
        await mgr.command_ctl.reconcile(key)
        await asyncio.sleep(0.05)
        assert status_of(api, "team")["state"] == "Open"
        assert mgr.queue_ctl.queue_actions == {}
        accepted = mgr.registry.get_sample_value(
            "hyperplace_controller_queue_commands_total", {"action": "CloseQueue", "result": "accepted"}
        )
        assert accepted == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    # A restart finds no Command left: the queue stays as the user left it.
    again = ControllerManager(api, ManagerConfig(workers=1, seed=0, command_key=KEY), now=lambda: "T")
    task = asyncio.create_task(again.run())
    try:
        await eventually(again.synced)
        await asyncio.sleep(0.05)
        assert status_of(api, "team")["state"] == "Open"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_failed_status_write_keeps_the_accepted_action_until_it_lands(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, mgr = cluster
    team = await api.create(QUEUES, q("team"))
    await eventually(lambda: status_of(api, "team").get("state") == "Open")
    api.fail_next("patch", 500, "InternalError", times=2, name="team")
    await api.create(COMMANDS, vcctl_command(team, "CloseQueue"), "default")
    await eventually(lambda: commands_left(api) == [])
    # The Command is gone, but the action is not: it is retried with backoff.
    await eventually(lambda: status_of(api, "team").get("state") == "Closed")
    assert mgr.queue_ctl.queue_actions == {}


async def test_a_stale_read_does_not_undo_a_close(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, mgr = cluster
    team = await api.create(QUEUES, q("team"))
    await api.create(PODGROUPS, pg("a", "team", None), "default")
    await set_phase(api, "a", "Running")
    await eventually(lambda: status_of(api, "team").get("running") == 1)
    stale = dict(mgr.queue_objs.get("team") or {})
    await api.create(COMMANDS, vcctl_command(team, "CloseQueue"), "default")
    await eventually(lambda: status_of(api, "team").get("state") == "Closing")
    # A reconcile from the queue as it was before the close (the cache behind our own write)
    # must not write Open back: the state change is conditional on the version read.
    mgr.queue_objs.store["team"] = stale
    await set_phase(api, "a", "Pending")
    await asyncio.sleep(0.05)
    assert status_of(api, "team")["state"] == "Closing"
    assert status_of(api, "team")["pending"] == 1


# -- only admitted Commands are obeyed ----------------------------------------------------------


async def test_a_command_the_webhook_did_not_admit_is_deleted_without_effect(
    cluster: tuple[FakeApi, ControllerManager], caplog: pytest.LogCaptureFixture
) -> None:
    """The webhook disabled or bypassed: an unmarked Command, a forged marker and a marker moved
    to another queue all change nothing."""
    api, mgr = cluster
    shared = await api.create(QUEUES, q("shared"))
    other = await api.create(QUEUES, q("other"))
    await eventually(lambda: status_of(api, "shared").get("state") == "Open")
    forged = vcctl_command(shared, "CloseQueue", signed=False)
    forged["metadata"]["annotations"] = {commandmark.ANNOTATION: "v1.1767225600.abc." + "0" * 64}
    moved = vcctl_command(other, "CloseQueue")  # admitted for "other" ...
    moved["target"]["name"] = "shared"  # ... then pointed at "shared"
    with caplog.at_level(logging.WARNING):
        for cmd in (vcctl_command(shared, "CloseQueue", signed=False), forged, moved):
            await api.create(COMMANDS, cmd, "default")
        await eventually(lambda: commands_left(api) == [])
    await asyncio.sleep(0.05)
    assert status_of(api, "shared")["state"] == "Open"
    assert status_of(api, "other")["state"] == "Open"
    text = caplog.text
    assert "not admitted: no hyperplace.io/command-admission annotation" in text
    assert text.count("does not match this Command") == 2
    assert mgr.queue_ctl.queue_actions == {}


async def test_a_replayed_admission_marker_is_obeyed_once() -> None:
    api = FakeApi()
    mgr = ControllerManager(api, ManagerConfig(workers=1, seed=0, command_key=KEY), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    try:
        team = await api.create(QUEUES, q("team"))
        await eventually(lambda: status_of(api, "team").get("state") == "Open")
        close = vcctl_command(team, "CloseQueue")
        await api.create(COMMANDS, close, "default")
        await eventually(lambda: status_of(api, "team").get("state") == "Closed")
        await api.create(COMMANDS, vcctl_command(team, "OpenQueue"), "default")
        await eventually(lambda: status_of(api, "team").get("state") == "Open")
        # Someone who read the first Command creates a copy of it, marker and all.
        await api.create(COMMANDS, copy.deepcopy(close), "default")
        await eventually(lambda: commands_left(api) == [])
        await asyncio.sleep(0.05)
        assert status_of(api, "team")["state"] == "Open"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_marker_issued_long_before_the_command_was_created_is_refused() -> None:
    api = FakeApi()
    mgr = ControllerManager(api, ManagerConfig(workers=1, seed=0, command_key=KEY), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    try:
        team = await api.create(QUEUES, q("team"))
        await eventually(lambda: status_of(api, "team").get("state") == "Open")
        old = vcctl_command(team, "CloseQueue", signed=False)
        await api.create(COMMANDS, admitted(old, now=FAKE_API_NOW - 3600), "default")
        await eventually(lambda: commands_left(api) == [])
        await asyncio.sleep(0.05)
        assert status_of(api, "team")["state"] == "Open"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_volcanos_permissive_behaviour_is_an_explicit_choice() -> None:
    api = FakeApi()
    mgr = ControllerManager(
        api, ManagerConfig(workers=1, seed=0, accept_unadmitted_commands=True), now=lambda: "T"
    )
    task = asyncio.create_task(mgr.run())
    try:
        team = await api.create(QUEUES, q("team"))
        await eventually(lambda: status_of(api, "team").get("state") == "Open")
        await api.create(COMMANDS, vcctl_command(team, "CloseQueue", signed=False), "default")
        await eventually(lambda: status_of(api, "team").get("state") == "Closed")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
