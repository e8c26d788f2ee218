"""The shared-cluster trace (``bench/quality/queues.py``): its measures are right on hand-made
cases, and a tiny trace runs both schedulers to the end."""

from __future__ import annotations

import numpy as np
import pytest

from bench.quality.generators import clos_cluster
from bench.quality.model import ClusterState, JobSpec, NetTopology, Task
from bench.quality.queues import (
    NODE_REQ,
    Disruption,
    OursDriver,
    QJob,
    QueueRun,
    VolcanoDriver,
    deserved_gpus,
    queue_trace,
    simulate_queues,
    summarize_queues,
)


def test_two_equal_queues_split_what_both_want_and_the_one_that_asks_more_gets_what_the_other_leaves() -> (
    None
):
    assert deserved_gpus(100.0, {"team-a": 80.0, "team-b": 80.0}) == {"team-a": 50.0, "team-b": 50.0}
    # Deserved never exceeds what a queue asks for (proportion caps it at the request).
    assert deserved_gpus(100.0, {"team-a": 80.0, "team-b": 10.0}) == {"team-a": 80.0, "team-b": 10.0}
    assert deserved_gpus(100.0, {"team-a": 120.0, "team-b": 10.0}) == {"team-a": 90.0, "team-b": 10.0}
    assert deserved_gpus(100.0, {"team-a": 0.0, "team-b": 30.0}) == {"team-a": 0.0, "team-b": 30.0}


def gang(name: str, pods: int, queue: str, prio: str, at: float, dur: float = 3600.0) -> QJob:
    topo = NetTopology("hard", 1) if pods > 1 else None
    return QJob(JobSpec(name, (Task("worker", NODE_REQ, pods),), topo), queue, prio, at, dur)


class Scripted:
    """A scheduler that places the first job at t=0 and then evicts one of its pods."""

    name = "scripted"

    def __init__(self) -> None:
        self.calls = 0

    def cycle(self, state, now, running, pending):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == 1:
            job = next(j for j in pending if j.name == "victim")
            return {"victim": np.arange(job.spec.n_pods, dtype=np.int64)}, {}
        if self.calls == 2:
            return {}, {"urgent": [("preempt", "victim")]}
        return {}, {}


def test_one_evicted_pod_of_a_gang_counts_as_a_broken_gang_that_stops_all_its_pods() -> None:
    state = clos_cluster(4, 2, 1)
    trace = [gang("victim", 4, "team-a", "low", 0.0), gang("urgent", 1, "team-a", "high", 60.0)]
    run = simulate_queues(Scripted(), state, trace)
    [d] = run.disruptions
    assert (d.action, d.victim_pods, d.broken_gangs, d.stopped_pods) == ("preempt", 1, 1, 4)
    victim = next(j for j in run.jobs if j.name == "victim")
    assert victim.restarts == 1 and victim.first_start == 0.0
    s = summarize_queues(run)
    assert s["preempt_count"] == 1 and s["restarts"] == 1 and np.isnan(s["reclaim_victims_mean"])


def test_a_tiny_trace_runs_both_schedulers_to_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every cycle also checks the incremental state's snapshot against a fresh build.
    monkeypatch.setenv("HYPERPLACE_VERIFY_STATE", "1")
    state = clos_cluster(4, 2, 1)  # 8 nodes
    trace = queue_trace(3, state, 24, 3 * 3600.0)
    assert {j.queue for j in trace} == {"team-a", "team-b"}
    for driver in (OursDriver(state), VolcanoDriver(state, 3)):
        run = simulate_queues(driver, state, trace)
        assert all(j.first_start is not None and j.done is not None for j in run.jobs), driver.name
        assert run.anomalies == [], driver.name
        s = summarize_queues(run)
        assert 0.0 < s["share_team-a"] <= 1.0


def running_on(job: QJob, nodes: list[int], state: ClusterState, start: float = 0.0) -> QJob:
    job.placement = np.asarray(nodes, dtype=np.int64)
    job.start = job.first_start = start
    state.apply(job.spec.req, job.placement)
    return job


def test_volcano_preempt_falls_through_to_drf_and_breaks_a_high_priority_gang_not_the_low_singles() -> None:
    # Gang's tier-1 veto protects every job at its minMember, so tier 1 has no victims and
    # drf decides: only a job whose share stays >= the preemptor's may lose a pod.
    state = clos_cluster(4, 2, 1)  # 8 nodes, one pod each
    big = running_on(gang("big", 4, "team-a", "high", 0.0), [0, 1, 2, 3], state)
    singles = [running_on(gang(f"s{i}", 1, "team-a", "low", 0.0), [4 + i], state) for i in range(4)]
    urgent = gang("urgent", 1, "team-a", "high", 60.0)
    placed, evictions = VolcanoDriver(state, 0).cycle(state, 60.0, [big, *singles], [urgent])
    assert placed == {}
    assert evictions == {"urgent": [("preempt", "big")]}


def test_volcano_reclaim_takes_one_pod_per_pod_of_a_queue_under_its_share_even_for_a_hard_gang() -> None:
    state = clos_cluster(4, 4, 1)  # 16 nodes: overcommit admits 0.2 x 16 = 3.2 nodes' worth
    team_a = [running_on(gang(f"a{i}", 1, "team-a", "low", 0.0), [i], state) for i in range(16)]
    hard = gang("b-gang", 2, "team-b", "low", 60.0)  # hard tier 1: preempt would skip it
    placed, evictions = VolcanoDriver(state, 0).cycle(state, 60.0, team_a, [hard])
    assert placed == {}
    [(action, v1), (action2, v2)] = evictions["b-gang"]
    assert action == action2 == "reclaim" and v1 != v2


def test_volcano_enqueue_holds_a_job_larger_than_the_overcommitted_idle() -> None:
    state = clos_cluster(4, 2, 1)  # full 8 nodes: 1.2 x 8 - 8 = 1.6 nodes may be Inqueue
    team_a = [running_on(gang(f"a{i}", 1, "team-a", "low", 0.0), [i], state) for i in range(8)]
    _, evictions = VolcanoDriver(state, 0).cycle(
        state, 60.0, team_a, [gang("b-gang", 2, "team-b", "low", 60.0)]
    )
    assert evictions == {}


def test_volcano_reclaim_stops_at_the_deserved_share() -> None:
    # team-b already holds 4 of 8 nodes (its deserved half): its new job may not reclaim.
    state = clos_cluster(4, 2, 1)
    run = [running_on(gang(f"a{i}", 1, "team-a", "low", 0.0), [i], state) for i in range(4)]
    run += [running_on(gang(f"b{i}", 1, "team-b", "low", 0.0), [4 + i], state) for i in range(4)]
    _, evictions = VolcanoDriver(state, 0).cycle(state, 60.0, run, [gang("b-more", 1, "team-b", "low", 60.0)])
    assert evictions == {}


def test_per_preemption_measures_on_hand_made_disruptions() -> None:
    run = QueueRun(
        "hand",
        [],
        [
            Disruption("preempt", victim_pods=1, broken_gangs=1, stopped_pods=4),
            Disruption("preempt", victim_pods=4, broken_gangs=0, stopped_pods=4),
            Disruption("preempt", victim_pods=2, broken_gangs=2, stopped_pods=10, preemptor_priority="low"),
            Disruption("reclaim", victim_pods=3, broken_gangs=1, stopped_pods=8, preemptor_pods=4),
        ],
        {"team-a": 0.5, "team-b": 0.5},
        {"team-a": 0.5, "team-b": 0.5},
        0.0,
        0.0,
        timeline=[{"team-a": (1.0, 0.5), "team-b": (0.0, 0.5)}] * 4
        + [{"team-a": (0.5, 0.5), "team-b": (0.5, 0.5)}] * 4,
    )
    s = summarize_queues(run)
    assert s["preempt_count"] == 3 and s["reclaim_count"] == 1 and s["preempt_by_low"] == 1
    assert s["stopped_total"] == 26
    assert s["preempt_stopped_per_pod"] == 6.0 and s["reclaim_stopped_per_pod"] == 2.0
    assert s["preempt_victims_mean"] == 7 / 3 and s["preempt_broken_mean"] == 1.0
    assert s["preempt_broken_total"] == 3 and s["reclaim_broken_total"] == 1
    assert s["preempt_broken_p95"] == np.percentile([1, 0, 2], 95) == 1.9
    assert s["preempt_stopped_mean"] == 6.0
    assert (s["share_team-b_q1"], s["share_team-b_q4"], s["deserved_team-b_q1"]) == (0.0, 0.5, 0.5)
