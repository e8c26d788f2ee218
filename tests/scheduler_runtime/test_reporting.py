"""What the scheduler says on a live cluster: quiet while a Job controller is still creating
a gang, the reason on the PodGroup when pods of a placed gang wait, and a refused
configuration file reported (Event, /readyz detail) while the last good one stays."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from hyperplace.runtime.api import EVENTS, PODGROUPS, PODS
from hyperplace.runtime.fakeapi import merge_patch
from scheduler_plugin.__main__ import health_app, parse_args
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT
from scheduler_plugin.cycle import JobOutcome
from scheduler_plugin.model.explanation import Explanation
from scheduler_plugin.runtime.config_source import ConfigHolder, ConfigSource
from scheduler_plugin.runtime.status import GangFormation, podgroup_status_patch
from tests.scheduler.builders import pod as make_pod

from .helpers import (
    NS,
    ClusterApi,
    condition,
    cycles_pass,
    events_for,
    eventually,
    node_of,
    pod,
    running,
    seed_gang,
    seed_racks,
)


def _all_event_messages(api: ClusterApi) -> list[str]:
    return [str(e["message"]) for e in api.objects.get(EVENTS.plural, {}).values()]


async def test_a_gang_whose_pods_are_still_being_created_raises_no_warnings() -> None:
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "g", 4)
    later = [api.objects["pods"].pop(k) for k in keys[1:]]  # the Job controller made one so far
    async with running(api) as (sched, _):  # the default grace period
        for p in later:
            await cycles_pass(sched, 5)
            await api.create(PODS, p, NS)
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        await cycles_pass(sched, 3)
        await sched.events.flush()
    assert not [m for m in _all_event_messages(api) if "not enough valid tasks" in m]
    # Nor was the half-made gang written down as unschedulable on its pods or PodGroup.
    assert not [c for c in api.calls if c[:2] == ("patch/status", "pods")]
    pg = api.peek(PODGROUPS, f"{NS}/g")
    assert pg is not None and condition(pg, "Unschedulable") is None
    assert not events_for(api, "g", "Unschedulable")


async def test_a_gang_that_stays_short_of_pods_is_reported_after_the_grace_period() -> None:
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "g", 4)
    for k in keys[2:]:
        api.objects["pods"].pop(k)
    async with running(api, gang_creation_grace=0.3):
        await eventually(lambda: events_for(api, "g", "Unschedulable"), what="PodGroup warning")
        await eventually(
            lambda: all(events_for(api, k.split("/")[1], "FailedScheduling") for k in keys[:2]),
            what="pod warnings",
        )
    (event,) = events_for(api, "g", "Unschedulable")
    assert event["type"] == "Warning"
    assert event["message"].startswith("not enough valid tasks: 2 pods, minMember 4")


def test_gang_formation_counts_from_the_last_change_of_its_pod_count() -> None:
    now = [0.0]
    forming = GangFormation(10.0, lambda: now[0])
    short = JobOutcome(
        phase="Pending", allocated_hypernode=None, explanation=Explanation("x", "NotEnoughPods")
    )
    other = JobOutcome(phase="Pending", allocated_hypernode=None, explanation=Explanation("y"))
    assert forming.forming("ns/g", short, lambda: 1)  # first sighting
    now[0] = 8.0
    assert forming.forming("ns/g", short, lambda: 2)
    now[0] = 17.0
    assert forming.forming("ns/g", short, lambda: 2)  # 9 s since the last new pod
    now[0] = 18.5
    assert not forming.forming("ns/g", short, lambda: 2)  # stood still for the grace period
    assert not forming.forming("ns/h", other, lambda: 1)  # lacking resources is news at once
    assert not GangFormation(0.0, lambda: 0.0).forming("ns/g", short, lambda: 1)
    forming.forget([])
    assert forming.forming("ns/g", short, lambda: 2)  # forgotten: a new sighting


async def test_a_placed_gang_with_waiting_pods_says_why_on_the_podgroup() -> None:
    api = ClusterApi()
    seed_racks(api)  # a rack holds 8 pods of 2 cpu
    keys = seed_gang(api, "g", 10, min_member=8)
    async with running(api) as (sched, _):
        await eventually(lambda: sum(1 for k in keys if node_of(api, k)) == 8, what="gang minimum bound")

        def pods_pending() -> dict[str, str] | None:
            pg = api.peek(PODGROUPS, f"{NS}/g")
            return condition(pg, "PodsPending") if pg is not None else None

        await eventually(pods_pending, what="PodsPending condition")
        await cycles_pass(sched, 3)
    cond = pods_pending()
    assert cond is not None and cond["status"] == "True"
    assert cond["message"].startswith("2 of 10 pods wait: ")
    waiting = [k for k in keys if not node_of(api, k)]
    for k in waiting:
        pod_cond = condition(pod(api, k), "PodScheduled")
        assert pod_cond is not None and pod_cond["status"] == "False"
        # The pod says the kind and the scope; the PodGroup has the numbers.
        assert pod_cond["message"].startswith(
            "gang minimum placed; this pod waits beyond it: no domain within tier <= 1 has room"
        ), pod_cond["message"]
        assert "hyperplace explain default/g" in pod_cond["message"]
    assert "best rack0 fits 0 of 2 pods" in cond["message"]
    pg = api.peek(PODGROUPS, f"{NS}/g")
    assert pg is not None and pg["status"]["phase"] == "Running"
    assert condition(pg, "Scheduled") is not None


def test_the_podspending_condition_goes_once_every_pod_is_placed() -> None:
    pending = {"type": "PodsPending", "status": "True", "reason": "NotEnoughResources", "message": "1 of 2"}
    scheduled = {"type": "Scheduled", "status": "True", "reason": "GangReady", "message": "ok"}
    pg = {"metadata": {"name": "g", "namespace": NS}, "spec": {"minMember": 1}, "status": {}}
    pods = [make_pod("a", "g", node_name="n1"), make_pod("b", "g")]
    outcome = JobOutcome(phase="Running", allocated_hypernode=None, conditions=[scheduled, pending])
    patch = podgroup_status_patch(pg, outcome, pods, "T1")
    assert patch is not None
    pg = merge_patch(pg, patch)
    assert [c["type"] for c in pg["status"]["conditions"]] == ["Scheduled", "PodsPending"]
    done = JobOutcome(phase="Running", allocated_hypernode=None, conditions=[scheduled])
    patch = podgroup_status_patch(pg, done, [make_pod("a", "g", node_name="n1")] * 2, "T2")
    assert patch is not None
    assert [c["type"] for c in patch["status"]["conditions"]] == ["Scheduled"]


async def test_a_refused_configuration_file_keeps_the_last_good_one_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAME", "hyperplace-scheduler-0")
    monkeypatch.setenv("POD_NAMESPACE", "hyperplace-system")
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(DEFAULT_CONFIG_TEXT)
    api = ClusterApi()
    seed_racks(api)
    async with running(api, ConfigSource.parse(str(conf))) as (sched, _):
        await cycles_pass(sched, 2)
        assert sched.readiness_detail() is None
        generation = sched.conf.generation
        # Volcano refuses an unknown action; so do we, keeping what we have.
        conf.write_text(DEFAULT_CONFIG_TEXT.replace("backfill", "backfil"))
        await eventually(lambda: sched.conf.error is not None, what="refused")
        assert sched.conf.generation == generation
        assert sched.config.actions == ["enqueue", "allocate", "backfill"]
        detail = sched.readiness_detail()
        assert detail is not None and "running on the previous configuration" in detail
        assert "unknown action 'backfil'" in detail
        # /readyz stays 200 (the last good configuration runs) and says why.
        client = TestClient(TestServer(health_app(sched, None)))
        await client.start_server()
        try:
            resp = await client.get("/readyz")
            text = await resp.text()
        finally:
            await client.close()
        assert resp.status == 200 and text.startswith("ok (leader); ") and "unknown action 'backfil'" in text
        await eventually(
            lambda: events_for(api, "hyperplace-scheduler-0", "InvalidConfiguration"), what="event"
        )
        # Scheduling goes on with the last good configuration.
        keys = seed_gang(api, "g", 2)
        await eventually(lambda: all(node_of(api, k) for k in keys), what="bound")
    (event,) = events_for(api, "hyperplace-scheduler-0", "InvalidConfiguration")
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Pod"
    assert event["metadata"]["namespace"] == "hyperplace-system"
    assert "unknown action 'backfil'" in event["message"]


def test_a_configuration_file_caught_half_written_is_never_used(tmp_path: Path) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(DEFAULT_CONFIG_TEXT)
    holder = ConfigHolder(ConfigSource.parse(str(conf)))
    assert holder.poll_file() is True  # start-up: taken at once
    # An editor rewriting the file in place, caught after its first line: that parses (an
    # enqueue-only scheduler), but the next read sees the rest, so it is never taken.
    conf.write_text('actions: "enqueue"\n')
    assert holder.poll_file() is False
    conf.write_text(DEFAULT_CONFIG_TEXT.replace("- name: binpack\n", "- name: gang\n  - name: binpack\n"))
    assert holder.poll_file() is False  # changed again since the last read: wait
    assert holder.config.actions == ["enqueue", "allocate", "backfill"] and holder.generation == 1
    assert holder.poll_file() is True  # two reads agree
    assert holder.generation == 2 and holder.config.actions == ["enqueue", "allocate", "backfill"]


def test_the_gang_creation_grace_is_a_flag() -> None:
    assert parse_args([]).gang_creation_grace == 10.0
    assert parse_args(["--gang-creation-grace", "2.5"]).gang_creation_grace == 2.5
