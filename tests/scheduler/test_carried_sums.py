"""Opening a session costs what changed since the last one, not every job.

Proportion's per-queue sums, the queue status and drf's per-job shares add up every job of the
cluster. A scheduler with a thousand running jobs and one that just finished should not redo a
thousand jobs' sums each cycle: the sums are carried from the previous snapshot and patched
for the jobs that changed, and ``--verify-state`` holds them against a fresh sum.
"""

from __future__ import annotations

import pytest

import scheduler_plugin.algorithms.queue_sums as queue_sums
import scheduler_plugin.plugins.drf as drf
from scheduler_plugin.cache.verify import StateDriftError
from scheduler_plugin.cycle import run_session
from scheduler_plugin.cycle.carried import carried_differences, verify_carried

from .test_cluster_state import World


def busy_world(jobs: int) -> World:
    """``jobs`` one-pod gangs, each running on its own node."""
    world = World()
    for i in range(jobs):
        world.apply(("node", f"n{i}", 4, "s0", True))
        world.apply(("pg", f"g{i}", 1, None, None, 1, "Running"))
        world.apply(("pod", f"p{i}", f"g{i}", 1, 0, False, False))
        world.apply(("bind", f"p{i}", f"n{i}"))
    return world


def test_after_one_job_ends_and_one_arrives_the_next_session_sums_only_those(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = busy_world(40)
    first = run_session(world.state.snapshot())
    assert first.queues["default"].allocated.cpu == 40_000

    summed: list[str] = []
    real = queue_sums.job_sums

    def counting(snap, job):  # type: ignore[no-untyped-def]
        summed.append(job.key)
        return real(snap, job)

    monkeypatch.setattr(queue_sums, "job_sums", counting)
    monkeypatch.setattr(drf, "job_sums", counting)
    world.apply(("finish", "p3"))
    world.apply(("pg", "late", 1, None, None, 1, None))
    world.apply(("pod", "late-0", "late", 2, 0, False, False))
    snap = world.state.snapshot()
    second = run_session(snap)

    assert list(second.bindings) == ["default/late-0"]
    assert second.queues["default"].allocated.cpu == 39_000 + 2_000  # p3 gone, late-0 bound now
    # Only the two jobs that changed were summed at open (queue sums and drf each), and the
    # enqueue and allocate steps asked about the newcomer only.
    assert set(summed) == {"default/g3", "default/late"}
    assert carried_differences(snap) == []


def test_a_carried_sum_that_went_wrong_stops_the_scheduler_naming_it() -> None:
    world = busy_world(3)
    run_session(world.state.snapshot())
    world.apply(("finish", "p1"))
    snap = world.state.snapshot()
    # What a missed patch would look like: the queue still counts the finished pod.
    sums = queue_sums.queue_job_sums(snap)
    sums["default"].allocated.cpu += 1000
    with pytest.raises(StateDriftError, match="queue job sums"):
        verify_carried(snap)


def test_a_rebuilt_snapshot_sums_afresh_and_agrees() -> None:
    world = busy_world(5)
    world.apply(("finish", "p0"))
    incremental, rebuilt = world.state.snapshot(), world.rebuild()
    assert queue_sums.queue_job_sums(incremental).keys() == queue_sums.queue_job_sums(rebuilt).keys()
    assert drf.job_shares(incremental) == drf.job_shares(rebuilt)


def test_a_settled_jobs_outcome_is_made_once_and_a_result_changes_only_its_own_copy() -> None:
    world = busy_world(3)
    first = run_session(world.state.snapshot())
    world.apply(("pod", "late-0", "late", 1, 0, False, False))  # something else changes
    world.apply(("pg", "late", 1, None))
    second = run_session(world.state.snapshot())
    # g0 had nothing to decide: both results hold the outcome made once.
    assert second.jobs["default/g0"] is first.jobs["default/g0"]
    mine = second.own_job("default/g0")
    mine.conditions.append({"type": "Note", "status": "True"})
    mine.phase = "Pending"
    assert first.jobs["default/g0"].phase == "Running"
    assert [c["type"] for c in first.jobs["default/g0"].conditions] == ["Scheduled"]
    third = run_session(world.state.snapshot())
    assert third.jobs["default/g0"].phase == "Running"
    assert [c["type"] for c in third.jobs["default/g0"].conditions] == ["Scheduled"]
