"""Gangs are bound all-or-nothing through the binding subresource, bind failures are rolled
back and re-decided, and a restart half-way finishes the gang without over-committing."""

from __future__ import annotations

import asyncio
import functools

import pytest

from hyperplace.runtime.api import PODGROUPS, PODS
from scheduler_plugin.runtime.binder import GangBinds
from scheduler_plugin.runtime.scheduler import Scheduler
from tests.scheduler.builders import job_pods
from tests.scheduler.builders import pod as make_pod

from .helpers import (
    NS,
    ClusterApi,
    condition,
    cycles_pass,
    events_for,
    eventually,
    node_of,
    options,
    pod,
    rack_of,
    running,
    seed_gang,
    seed_racks,
)


async def test_a_gang_of_eight_is_bound_whole_in_one_rack_with_uid_preconditions() -> None:
    api = ClusterApi()
    seed_racks(api)  # 2 racks x 4 nodes x 4 cpu: one rack holds 8 pods of 2 cpu exactly
    keys = seed_gang(api, "g", 8)
    async with running(api) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        await eventually(lambda: len(sched.assumed) == 0, what="assumptions settled")
        # The informer confirmed the gang, and later cycles do not touch it again.
        await cycles_pass(sched, 3)
    assert api.violations == []
    assert len({rack_of(node_of(api, k)) for k in keys}) == 1
    binds = [c for c in api.calls if c[0] == "create/binding"]
    assert sorted(c[2] for c in binds) == sorted(k.split("/")[1] for k in keys)  # each pod once
    for k in keys:
        p = pod(api, k)
        assert condition(p, "PodScheduled") == {
            "type": "PodScheduled",
            "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    pg = api.peek(PODGROUPS, f"{NS}/g")
    assert pg is not None
    assert pg["metadata"]["annotations"]["volcano.sh/job-allocated-hypernode"] == rack_of(
        node_of(api, keys[0])
    )
    assert pg["status"]["phase"] == "Running"
    assert condition(pg, "Scheduled") is not None and condition(pg, "Unschedulable") is None
    assert sched.metrics.binds.labels("ok")._value.get() == 8


async def test_a_gang_missing_a_member_binds_nothing_until_it_is_complete() -> None:
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "g", 8)
    last = api.objects["pods"].pop(keys[-1])  # the 8th pod does not exist yet
    # No grace period for gangs being created: the lack of a member is reported at once.
    async with running(api, gang_creation_grace=0) as (sched, _):
        await eventually(lambda: condition(pod(api, keys[0]), "PodScheduled") is not None, what="report")
        await cycles_pass(sched, 5)
        assert not any(node_of(api, k) for k in keys[:-1])
        assert [c for c in api.calls if c[0] == "create/binding"] == []
        await api.create(PODS, last, NS)  # the Job controller creates the last member
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
    assert api.violations == []


async def test_an_unplaceable_job_is_reported_once_per_pod_across_cycles() -> None:
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "big", 10, tier=1)  # 10 x 2 cpu cannot fit one rack of 16 cpu
    async with running(api) as (sched, _):
        await eventually(
            lambda: all(condition(pod(api, k), "PodScheduled") for k in keys), what="conditions written"
        )
        await cycles_pass(sched, 8)
        await eventually(
            lambda: all(len(events_for(api, k.split("/")[1])) == 1 for k in keys), what="events written"
        )
        await cycles_pass(sched, 3)
    assert not any(node_of(api, k) for k in keys)
    for k in keys:
        name = k.split("/")[1]
        cond = condition(pod(api, k), "PodScheduled")
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
        assert "within tier <= 1" in cond["message"], cond["message"]  # the kind and the scope
        events = events_for(api, name)
        assert [(e["type"], e["reason"]) for e in events] == [("Warning", "FailedScheduling")]
        assert events[0]["message"] == cond["message"][: len(events[0]["message"])]
        # Written once however many cycles said the same thing.
        assert sum(1 for c in api.calls if c == ("patch/status", "pods", name)) == 1
    pg = api.peek(PODGROUPS, f"{NS}/big")
    assert pg is not None
    unsched = condition(pg, "Unschedulable")
    assert pg["status"]["phase"] == "Inqueue" and unsched is not None and unsched["status"] == "True"
    assert len(unsched["message"]) <= 4096
    assert sum(1 for c in api.calls if c == ("patch/status", "podgroups", "big")) == 1
    assert sched.metrics.pending_jobs._value.get() == 1


async def test_repeated_failures_raise_the_count_of_one_event() -> None:
    api = ClusterApi()
    seed_racks(api, racks=1, per_rack=1)
    api.seed(PODS, job_pods("solo", 1, cpu=64)[0])  # no PodGroup: a standalone pod
    async with running(api, event_interval=0.0):
        await eventually(
            lambda: any(
                int(e.get("count", 0)) >= 3 for e in events_for(api, "solo-t0-0", "FailedScheduling")
            ),
            what="event count rising",
        )
    events = events_for(api, "solo-t0-0", "FailedScheduling")
    assert len(events) == 1
    assert events[0]["count"] >= 3 and events[0]["lastTimestamp"] >= events[0]["firstTimestamp"]


async def test_pods_whose_binds_are_in_flight_keep_their_room_taken() -> None:
    api = ClusterApi()
    seed_racks(api)
    # Named so that the later gang sorts first: a session that forgot "z" was decided
    # would give "a" the very rack "z" is being bound to.
    first = seed_gang(api, "z", 8)
    api.hold_before_bind = asyncio.Event()  # a slow API server: binds do not land yet
    async with running(api) as (sched, _):
        await eventually(lambda: api.waiting == 8, what="gang z's binds in flight")
        # Another gang arrives while a's pods are still pending in the informer. Only the
        # assumptions say that rack is taken.
        second = seed_gang(api, "a", 8)
        await eventually(lambda: api.waiting == 16, what="gang a's binds in flight")
        await cycles_pass(sched, 3)
        assert api.waiting == 16  # nothing decided twice while waiting
        api.hold_before_bind.set()
        await eventually(lambda: all(node_of(api, k) for k in first + second), what="both bound")
    assert api.violations == []
    assert {rack_of(node_of(api, k)) for k in first} != {rack_of(node_of(api, k)) for k in second}


@pytest.mark.parametrize(("status", "reason"), [(409, "Conflict"), (404, "NotFound"), (500, "InternalError")])
async def test_a_failed_bind_forgets_the_assumption_and_the_next_cycle_finishes_the_gang(
    status: int, reason: str
) -> None:
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "g", 8)
    victim = keys[3].split("/")[1]
    api.fail_next("create/binding", status, reason, name=victim)
    # One bind at a time: the gang's binds after the failure are dropped, not sent.
    async with running(api, bind_concurrency=1, bind_backoff=(0.01, 0.05)) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        await eventually(lambda: len(sched.assumed) == 0, what="assumptions settled")
    assert api.violations == []
    assert len({rack_of(node_of(api, k)) for k in keys}) == 1  # finished in the same rack
    attempts = [c[2] for c in api.calls if c[0] == "create/binding"]
    assert attempts.count(victim) == 2
    assert len(attempts) == 9  # every other pod exactly once: nothing was bound twice
    assert sched.metrics.binds.labels("failed")._value.get() == 1
    if status != 404:
        assert any("Binding rejected" in e["message"] for e in events_for(api, victim, "FailedScheduling"))


async def test_a_pod_recreated_under_the_same_name_is_not_bound_with_the_old_decision() -> None:
    api = ClusterApi()
    seed_racks(api, racks=1, per_rack=1)
    api.seed(PODS, job_pods("solo", 1, cpu=1)[0])
    sched = Scheduler(api, options())
    tasks = await sched.start_informers()
    try:
        await eventually(sched.synced, what="sync")
        snap_pods = sched.pods.objects()
        # Recreate the pod between the snapshot and the bind: the UID precondition refuses.
        old = snap_pods[0]
        await api.delete(PODS, "solo-t0-0", NS)
        await api.create(PODS, {**old, "metadata": {**old["metadata"], "uid": None}}, NS)
        sched.assumed.assume(f"{NS}/solo-t0-0", old["metadata"]["uid"], "n0-0", f"{NS}/podgroup-solo-t0-0")
        await sched.binder.bind(sched.assumed.get(f"{NS}/solo-t0-0"), old, GangBinds("j"))  # type: ignore[arg-type]
        assert node_of(api, f"{NS}/solo-t0-0") is None
        assert f"{NS}/solo-t0-0" not in sched.assumed
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_restart_mid_gang_finishes_it_without_overcommitting() -> None:
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "g", 8)
    api.hold_after_bind = asyncio.Event()
    # The first scheduler binds one pod at a time and "crashes" while its 4th bind is
    # in flight: that bind has landed on the server, but the answer never comes back.
    first = Scheduler(api, options(bind_concurrency=1, bind_drain_timeout=0.01))
    task = asyncio.create_task(first.run())
    for released in range(3):
        await eventually(functools.partial(lambda n: api.held > n, released), what="a bind")
        gate, api.hold_after_bind = api.hold_after_bind, asyncio.Event()
        gate.set()
    await eventually(lambda: api.held == 4, what="4th bind in flight")
    task.cancel()  # crash: nothing is written on the way out
    await asyncio.gather(task, return_exceptions=True)
    bound_before = [k for k in keys if node_of(api, k)]
    assert len(bound_before) == 4
    assert api.violations == []

    api.hold_after_bind = None
    # A fresh process: empty caches, no assumptions; everything comes from the API.
    async with running(api) as (second, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang finished")
        await eventually(lambda: len(second.assumed) == 0, what="assumptions settled")
        await cycles_pass(second, 3)
    assert api.violations == []
    assert len({rack_of(node_of(api, k)) for k in keys}) == 1  # the rack the first one chose
    attempts = [c[2] for c in api.calls if c[0] == "create/binding"]
    assert len(attempts) == 8 and len(set(attempts)) == 8  # nobody bound twice


async def test_gated_pods_wait_quietly_and_terminating_pods_are_not_placed() -> None:
    api = ClusterApi()
    seed_racks(api, racks=1, per_rack=1)
    # Pods without a PodGroup: each is its own one-member gang.
    api.seed(
        PODS, make_pod("gated-t0-0", None, extra_spec={"schedulingGates": [{"name": "example.com/wait"}]})
    )
    leaving = make_pod("leaving-t0-0", None)
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    api.seed(PODS, leaving)
    api.seed(PODS, make_pod("placed-t0-0", None))
    async with running(api) as (sched, _):
        await eventually(lambda: node_of(api, f"{NS}/placed-t0-0"), what="the ordinary pod bound")
        await eventually(lambda: condition(pod(api, f"{NS}/gated-t0-0"), "PodScheduled"), what="gated report")
        await cycles_pass(sched, 3)
    cond = condition(pod(api, f"{NS}/gated-t0-0"), "PodScheduled")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "SchedulingGated")
    assert events_for(api, "gated-t0-0") == []
    assert node_of(api, f"{NS}/gated-t0-0") is None and node_of(api, f"{NS}/leaving-t0-0") is None
    assert condition(pod(api, f"{NS}/leaving-t0-0"), "PodScheduled") is None


async def test_a_member_deleted_while_its_bind_is_in_flight_frees_its_room_and_stops_nothing() -> None:
    # The Job controller's pods carry a finalizer: a deleted one stays, marked, until the
    # finalizer goes. Its room is free at once (the apiserver refuses its bind), in the state the
    # sessions read as in a rebuild from the informer (the tests run with --verify-state: a
    # difference stops the scheduler).
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "g", 8)
    for k in keys:
        api.objects["pods"][k]["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    api.hold_before_bind = asyncio.Event()
    async with running(api) as (sched, task):
        await eventually(lambda: api.waiting == 8, what="the gang's binds in flight")
        leaving = keys[0].split("/", 1)[1]
        await api.delete(PODS, leaving, NS)
        await eventually(lambda: pod(api, keys[0])["metadata"].get("deletionTimestamp"), what="marked")
        await still_scheduling(sched, task, 5)
        api.hold_before_bind.set()
        # The gang's other binds land or are dropped with the refused one; the gang then waits
        # for a member that will not come back, with no partial start left behind.
        await still_scheduling(sched, task, 5)
    assert api.violations == []
    assert node_of(api, keys[0]) is None


async def still_scheduling(sched: Scheduler, task: asyncio.Task[None], cycles: int) -> None:
    """``cycles`` more cycles pass, or the scheduler stopped: then the test fails with why."""
    target = sched.cycles + cycles
    await eventually(lambda: task.done() or sched.cycles >= target, what=f"{cycles} cycles")
    if task.done():
        raise AssertionError(f"the scheduler stopped: {task.exception()!r}")


async def test_a_relist_after_410_keeps_binds_in_flight_counted() -> None:
    api = ClusterApi()
    seed_racks(api)
    first = seed_gang(api, "z", 8)
    api.hold_before_bind = asyncio.Event()
    async with running(api) as (sched, _):
        await eventually(lambda: api.waiting == 8, what="gang z's binds in flight")
        relists = sched.pods.relists
        api.compact()  # etcd compaction: every watch ends with 410 Gone, informers relist
        await eventually(lambda: sched.pods.relists > relists, what="pods relisted")
        second = seed_gang(api, "a", 8)
        await eventually(lambda: api.waiting == 16, what="gang a's binds in flight")
        api.hold_before_bind.set()
        await eventually(lambda: all(node_of(api, k) for k in first + second), what="both bound")
    assert api.violations == []


async def test_a_conflicting_status_write_is_retried_from_the_newer_object() -> None:
    api = ClusterApi()
    seed_racks(api, racks=1, per_rack=1)
    api.seed(PODS, make_pod("big", None, cpu=64))
    api.fail_next("patch/status", 409, "Conflict", name="big")  # someone wrote first
    async with running(api):
        await eventually(lambda: condition(pod(api, f"{NS}/big"), "PodScheduled"), what="condition written")
    assert sum(1 for c in api.calls if c == ("patch/status", "pods", "big")) == 2


async def test_on_volcanos_podgroup_crd_phase_conditions_and_annotation_persist() -> None:
    # Volcano's PodGroup CRD serves no podgroups/status: the status goes through the object.
    api = ClusterApi()
    api.no_status_subresource = {"podgroups"}
    seed_racks(api)
    keys = seed_gang(api, "g", 8)
    async with running(api) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        await eventually(
            lambda: (api.peek(PODGROUPS, f"{NS}/g") or {}).get("status", {}).get("phase") == "Running",
            what="PodGroup Running",
        )
        await cycles_pass(sched, 3)
    pg = api.peek(PODGROUPS, f"{NS}/g")
    assert pg is not None
    assert condition(pg, "Scheduled") is not None
    assert pg["metadata"]["annotations"]["volcano.sh/job-allocated-hypernode"] == rack_of(
        node_of(api, keys[0])
    )
    assert not any(c[:2] == ("patch/status", "podgroups") for c in api.calls)  # discovery said so


async def test_binds_are_bounded_in_flight_and_status_is_written_while_they_wait() -> None:
    api = ClusterApi()
    seed_racks(api)
    keys = seed_gang(api, "g", 8)
    api.hold_before_bind = asyncio.Event()  # a slow API server
    async with running(api, bind_concurrency=3) as (sched, _):
        await eventually(lambda: api.waiting == 3, what="the first three binds in flight")
        await cycles_pass(sched, 3)
        assert api.waiting == 3  # never more than --bind-concurrency at once
        # The PodGroup's status does not queue behind the binds: its own workers write it.
        await eventually(
            lambda: any(c[1] == "podgroups" and c[2] == "g" for c in api.calls if c[0].startswith("patch")),
            what="the PodGroup status written while the binds wait",
        )
        api.hold_before_bind.set()
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
    assert api.violations == []
    assert sched.metrics.bind_latency._sum.get() > 0
    assert sum(b.get() for b in sched.metrics.bind_latency._buckets) == 8
