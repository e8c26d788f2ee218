"""The queue controller keeps a queue's state and PodGroup counts, as Volcano's does, and
leaves ``status.allocated`` to the scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.manager import ControllerManager, ManagerConfig
from controller.queue.status import next_state, queue_status
from hyperplace.runtime.api import PODGROUPS, QUEUES
from hyperplace.runtime.fakeapi import FakeApi

from .test_manager import eventually


def pg(name: str, queue: str | None, phase: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 1}
    if queue:
        spec["queue"] = queue
    out: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    if phase:
        out["status"] = {"phase": phase}
    return out


def q(name: str, state: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1},
    }
    if state:
        out["status"] = {"state": state}
    return out


def test_counts_podgroups_per_phase_and_opens_a_new_queue() -> None:
    pgs = [
        pg("a", "team", "Pending"),
        pg("b", "team", "Inqueue"),
        pg("c", "team", "Running"),
        pg("d", "team", None),
    ]
    assert queue_status(q("team"), pgs) == {
        "state": "Open",
        "pending": 1,
        "inqueue": 1,
        "running": 1,
        "unknown": 0,
        "completed": 0,
    }


def test_closing_drains_to_closed_and_closed_stays_closed() -> None:
    assert next_state("Closing", podgroups=2) == "Closing"
    assert next_state("Closing", podgroups=0) == "Closed"
    assert next_state("Closed", podgroups=3) == "Closed"
    assert next_state(None, podgroups=0) == "Open"
    assert next_state("Weird", podgroups=0) == "Unknown"


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakeApi, ControllerManager]]:
    api = FakeApi()
    mgr = ControllerManager(api, ManagerConfig(workers=1, seed=0), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    yield api, mgr
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def add_pg(api: FakeApi, name: str, queue: str | None, phase: str) -> None:
    # As on a real apiserver, a custom resource's status is written through /status.
    await api.create(PODGROUPS, pg(name, queue, None), "default")
    await set_phase(api, name, phase)


async def set_phase(api: FakeApi, name: str, phase: str) -> None:
    await api.patch(PODGROUPS, name, {"status": {"phase": phase}}, "default", subresource="status")


def status_of(api: FakeApi, name: str) -> dict[str, Any]:
    return dict((api.peek(QUEUES, name) or {}).get("status") or {})


async def test_the_controller_keeps_counts_on_the_fake_api(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    await api.create(QUEUES, q("team"))
    await eventually(lambda: status_of(api, "team").get("state") == "Open")
    await add_pg(api, "a", "team", "Pending")
    await add_pg(api, "b", "team", "Pending")
    await add_pg(api, "other", None, "Pending")  # the default queue's
    await eventually(lambda: status_of(api, "team").get("pending") == 2)
    # The scheduler admits one job: the counts follow the PodGroup's phase.
    await set_phase(api, "a", "Inqueue")
    await eventually(
        lambda: status_of(api, "team").get("inqueue") == 1 and status_of(api, "team").get("pending") == 1
    )
    # The scheduler's allocated is left alone.
    await api.patch(QUEUES, "team", {"status": {"allocated": {"cpu": "2"}}}, None, subresource="status")
    await set_phase(api, "b", "Running")
    await eventually(lambda: status_of(api, "team").get("running") == 1)
    assert status_of(api, "team")["allocated"] == {"cpu": "2"}


async def test_a_closing_queue_closes_once_its_podgroups_are_gone(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    await api.create(QUEUES, q("old"))
    await add_pg(api, "last", "old", "Running")
    await eventually(lambda: status_of(api, "old").get("running") == 1)
    await api.patch(QUEUES, "old", {"status": {"state": "Closing"}}, None, subresource="status")
    await asyncio.sleep(0.05)
    assert status_of(api, "old")["state"] == "Closing"
    await api.delete(PODGROUPS, "last", "default")
    await eventually(lambda: status_of(api, "old").get("state") == "Closed")
    assert status_of(api, "old")["running"] == 0
