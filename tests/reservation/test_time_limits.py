"""Time-aware reservation and EASY backfill: running pods with a time limit
(``activeDeadlineSeconds``) tell the scheduler when a held domain drains, and a job whose own
limit ends before that may run in the held room without delaying the held gang."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hyperplace.api.times import parse_rfc3339
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.records import same_for_scheduling
from scheduler_plugin.cycle import SessionResult, run_session
from scheduler_plugin.model.reservation import RESERVED_CONDITION, Reservation
from scheduler_plugin.model.time_limits import fits_before, job_limit, task_end
from scheduler_plugin.placement.drain_forecast import held_start, node_free_at
from tests.scheduler.builders import TEN_MINUTE_HOLDS, hypernode, job_pods, node, pod, podgroup

T0 = "2026-01-01T00:00:00Z"
NOW = "2026-01-01T00:11:00Z"
LEAF = {"mode": "hard", "highestTierAllowed": 1}


def cluster() -> tuple[list[dict[str, Any]], list[Any]]:
    """Two leaves of eight 8-GPU nodes; a spine above them."""
    nodes = [node(f"n{i:02d}", cpu=64, memory="512Gi", gpu=8) for i in range(16)]
    tree = [
        hypernode("leaf0", 1, nodes=[f"n{i:02d}" for i in range(8)]),
        hypernode("leaf1", 1, nodes=[f"n{i:02d}" for i in range(8, 16)]),
        hypernode("spine", 2, children=["leaf0", "leaf1"]),
    ]
    return nodes, tree


def limited(p: dict[str, Any], limit: int | None, started: str | None = None) -> dict[str, Any]:
    """``p`` with ``activeDeadlineSeconds`` (and, when running, its start time)."""
    if limit is not None:
        p["spec"]["activeDeadlineSeconds"] = limit
    if started is not None:
        p["status"]["startTime"] = started
    return p


def world(
    leaf0_limit: int | None = 3600, stream: tuple[int | None, ...] = (1800, 7200, None)
) -> tuple[list[dict[str, Any]], list[Any]]:
    """A 64-GPU gang (8 pods x 8 GPUs, one leaf) waiting since T0; three nodes of leaf0 run
    one-pod jobs started at T0 with ``leaf0_limit`` (so leaf0 drains by T0 + limit), leaf1 is
    full of jobs without a limit; then one-pod 8-GPU jobs with the limits of ``stream``."""
    pods: list[dict[str, Any]] = []
    pgs: list[Any] = []
    for i in range(3):
        p = pod(f"old{i}-t0-0", f"old{i}", cpu=8, gpu=8, index=0, node_name=f"n{i:02d}")
        pods.append(limited(p, leaf0_limit, T0))
        pgs.append(podgroup(f"old{i}", 1))
    for i in range(8, 16):
        pods.append(
            limited(pod(f"full{i}-t0-0", f"full{i}", cpu=8, gpu=8, index=0, node_name=f"n{i:02d}"), None, T0)
        )
        pgs.append(podgroup(f"full{i}", 1))
    pods += job_pods("big", 8, cpu=8, gpu=8, created=T0)
    pgs.append(podgroup("big", 8, topology=LEAF, created=T0))
    for k, limit in enumerate(stream):
        created = f"2026-01-01T00:0{k + 1}:00Z"
        pods.append(limited(pod(f"s{k}-t0-0", f"s{k}", cpu=8, gpu=8, index=0, created=created), limit))
        pgs.append(podgroup(f"s{k}", 1, created=created))
    return pods, pgs


def session(pods: list[dict[str, Any]], pgs: list[Any], at: str = NOW, previous: Any = None) -> SessionResult:
    nodes, tree = cluster()
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs)
    return run_session(snap, TEN_MINUTE_HOLDS, now=parse_rfc3339(at), reservations=previous)


def reserved(result: SessionResult, job: str) -> dict[str, Any]:
    return next(c for c in result.jobs[job].conditions if c["type"] == RESERVED_CONDITION)


def test_the_held_gang_is_told_when_it_starts_at_the_latest() -> None:
    result = session(*world())
    held = result.reservations["default/big"]
    assert held.hypernode == "leaf0"
    # The three running pods of leaf0 end by T0 + 1 h: the gang starts by then.
    assert held.estimated_start == "2026-01-01T01:00:00Z"
    assert "estimated start 2026-01-01T01:00:00Z" in reserved(result, "default/big")["message"]


def test_a_short_job_backfills_into_the_held_leaf_and_is_told_it_ends_before_the_gang_starts() -> None:
    result = session(*world())
    # s0 (30 min) ends at 00:41, before the gang's 01:00: it runs on a free node of leaf0.
    assert result.bindings["default/s0-t0-0"] in {f"n{i:02d}" for i in range(3, 8)}
    line = result.reservations["default/big"].backfill_line("default/s0")
    assert line is not None
    assert "ends by 2026-01-01T00:41:00Z" in line and "estimated start 2026-01-01T01:00:00Z" in line
    # Its PodGroup's Scheduled condition says so too.
    cond = next(c for c in result.jobs["default/s0"].conditions if c["type"] == "Scheduled")
    assert cond["message"] == f"gang minimum is placed; {line}"


def test_a_job_whose_limit_is_too_long_or_unset_stays_out_of_the_held_leaf() -> None:
    result = session(*world())
    # s1 (2 h) would outlast 01:00; s2 has no limit at all: both wait, told who holds the leaf.
    for job in ("default/s1", "default/s2"):
        assert f"{job}-t0-0" not in result.bindings
        cond = next(c for c in result.jobs[job].conditions if c["type"] == "Unschedulable")
        assert "held for the head of the queue: leaf0 for default/big" in cond["message"]
        assert "(estimated start 2026-01-01T01:00:00Z)" in cond["message"]
        assert "activeDeadlineSeconds ending before a held gang's start may use its room" in cond["message"]
        assert result.reservations["default/big"].backfill_line(job) is None


def test_without_limits_on_the_running_pods_nothing_is_backfilled() -> None:
    # The held leaf's running pods may run for ever: no estimate, so even a 1-minute job waits.
    result = session(*world(leaf0_limit=None, stream=(60,)))
    held = result.reservations["default/big"]
    assert held.hypernode == "leaf0" and held.estimated_start is None
    assert "estimated start" not in reserved(result, "default/big")["message"]
    assert "default/s0-t0-0" not in result.bindings


def test_backfilled_jobs_never_delay_the_gang_across_cycles() -> None:
    pods, pgs = world(stream=(1800, 1800, 1800, 1800, 1800, 1800))
    first = session(pods, pgs)
    took = {k: n for k, n in first.bindings.items() if k.startswith("default/s")}
    # Five free nodes in leaf0, each backfilled by a 30-min job; the sixth waits.
    assert len(took) == 5
    # The next cycle sees them running with their limits: the estimate stands.
    for p in pods:
        key = f"default/{p['metadata']['name']}"
        if key in took:
            p["spec"]["nodeName"] = took[key]
            p["status"] = {"phase": "Running", "startTime": NOW}
    again = session(pods, pgs, at="2026-01-01T00:12:00Z", previous=first.reservations)
    assert again.reservations["default/big"].estimated_start == "2026-01-01T01:00:00Z"
    # At 01:00 every pod of leaf0 is past its limit: the gang is placed there.
    done = [p for p in pods if p["metadata"]["name"].startswith(("old", "s"))]
    rest = [p for p in pods if p not in done]
    late = session(rest, pgs, at="2026-01-01T01:00:10Z", previous=again.reservations)
    assert {late.bindings[f"default/big-t0-{i}"] for i in range(8)} == {f"n{i:02d}" for i in range(8)}


def test_a_backfilled_job_is_still_told_so_in_the_cycles_after_it_started() -> None:
    # The status of a job placed now may be written a few seconds later, from a later cycle's
    # outcome: its backfill line must not be a one-cycle event.
    pods, pgs = world()
    first = session(pods, pgs)
    line = first.reservations["default/big"].backfill_line("default/s0")
    assert line is not None
    for p in pods:
        if p["metadata"]["name"] == "s0-t0-0":
            p["spec"]["nodeName"] = first.bindings["default/s0-t0-0"]
            p["status"] = {"phase": "Running", "startTime": NOW}
    again = session(pods, pgs, at="2026-01-01T00:12:00Z", previous=first.reservations)
    assert again.reservations["default/big"].backfill_line("default/s0") == line
    cond = next(c for c in again.jobs["default/s0"].conditions if c["type"] == "Scheduled")
    assert cond["message"] == f"gang minimum is placed; {line}"
    # Once it is gone, nothing is carried for it.
    gone = [p for p in pods if p["metadata"]["name"] != "s0-t0-0"]
    later = session(gone, pgs, at="2026-01-01T00:13:00Z", previous=again.reservations)
    assert later.reservations["default/big"].backfill_line("default/s0") is None


def test_a_gang_whose_own_pods_lack_a_limit_is_not_backfilled() -> None:
    pods, pgs = world(stream=())
    two = job_pods("pair", 2, cpu=8, gpu=8, created="2026-01-01T00:05:00Z")
    limited(two[0], 600)  # only one of its two pods declares a limit
    result = session([*pods, *two], [*pgs, podgroup("pair", 2, created="2026-01-01T00:05:00Z")])
    assert not any(k.startswith("default/pair") for k in result.bindings)


# ---------------------------------------------------------------- the pure functions


def test_a_pod_past_its_limit_ends_now_and_a_pod_not_started_counts_from_now() -> None:
    pods, pgs = world(leaf0_limit=600)
    nodes, tree = cluster()
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs)
    now = parse_rfc3339(NOW)
    assert now is not None
    old = snap.jobs["default/old0"].tasks[0]
    assert old.deadline == 600 and task_end(old, now) == now  # started at T0, limit 10 min
    s0 = snap.jobs["default/s0"].tasks[0]
    assert task_end(s0, now) == now + 1800  # pending: counted from now
    assert math.isinf(task_end(snap.jobs["default/s2"].tasks[0], now))
    free = node_free_at(snap, now)
    assert (free[:8] == now).all()  # leaf0: empty or past the limits
    assert np.isinf(free[8:]).all()  # leaf1: pods without a limit


def test_held_start_and_fits_before() -> None:
    free = np.asarray([10.0, 50.0, math.inf])
    assert held_start(free, [0, 1], now=5.0) == 50.0
    assert held_start(free, [0, 2], now=5.0) is None
    assert held_start(free, [], now=5.0) == 5.0
    assert fits_before(0.0, 50.0, 50.0) and not fits_before(1.0, 50.0, 50.0)
    assert not fits_before(0.0, None, 50.0) and not fits_before(0.0, 10.0, None)
    assert job_limit([]) == 0.0


def test_reservation_message_without_an_estimate_is_unchanged() -> None:
    r = Reservation("default/big", "leaf0", T0, "it has waited 11m (threshold 10m)")
    assert r.message().endswith("other jobs are placed there only in room the gang will not need")


def test_within_the_held_leaf_the_gang_is_charged_to_the_nodes_that_free_up_soonest() -> None:
    # leaf0: n00-n02 run pods without a limit, n03-n05 pods that end by 01:00 (n05 by 02:00),
    # n06-n07 are empty. A 4-node gang held there waits for the two empty nodes and the two
    # that free up first, not for nodes that may stay busy for ever: its start is known.
    pods: list[dict[str, Any]] = []
    pgs: list[Any] = []
    limits = {0: None, 1: None, 2: None, 3: 3600, 4: 3600, 5: 7200}
    for i, limit in limits.items():
        p = pod(f"old{i}-t0-0", f"old{i}", cpu=8, gpu=8, index=0, node_name=f"n{i:02d}")
        pods.append(limited(p, limit, T0))
        pgs.append(podgroup(f"old{i}", 1))
    for i in range(8, 16):
        pods.append(pod(f"full{i}-t0-0", f"full{i}", cpu=8, gpu=8, index=0, node_name=f"n{i:02d}"))
        pgs.append(podgroup(f"full{i}", 1))
    pods += job_pods("big", 4, cpu=8, gpu=8, created=T0)
    pgs.append(podgroup("big", 4, topology=LEAF, created=T0))
    result = session(pods, pgs)
    held = result.reservations["default/big"]
    assert held.hypernode == "leaf0"
    assert held.estimated_start == "2026-01-01T01:00:00Z"


def test_the_limit_counts_from_the_kubelets_start_time_not_from_binding() -> None:
    # Bound at 00:00 (PodScheduled), started by the kubelet at 00:05 after pulling its image:
    # activeDeadlineSeconds counts from 00:05, so the pod is gone by 01:05, not 01:00.
    pods, pgs = world(stream=())
    for p in pods:
        if p["metadata"]["name"].startswith("old"):
            p["status"]["startTime"] = "2026-01-01T00:05:00Z"
            p["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": T0}]
    result = session(pods, pgs)
    assert result.reservations["default/big"].estimated_start == "2026-01-01T01:05:00Z"


def test_the_cache_sees_a_start_time_arrive_on_a_pod_still_pending() -> None:
    old = pod("p-0", "p", cpu=1, index=0, node_name="n00", phase="Pending")
    new = {**old, "status": {"phase": "Pending", "startTime": NOW}}
    assert not same_for_scheduling(old, new)
