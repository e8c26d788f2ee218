"""The shared-cluster trace (``bench/quality/queues.py``): its measures are right on hand-made
cases, and a tiny trace runs both schedulers to the end."""

from __future__ import annotations

import numpy as np

from bench.quality.generators import clos_cluster
from bench.quality.model import JobSpec, NetTopology, Task
from bench.quality.queues import (
    NODE_REQ,
    OursDriver,
    QJob,
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


def test_a_tiny_trace_runs_both_schedulers_to_the_end() -> None:
    state = clos_cluster(4, 2, 1)  # 8 nodes
    trace = queue_trace(3, state, 24, 3 * 3600.0)
    assert {j.queue for j in trace} == {"team-a", "team-b"}
    for driver in (OursDriver(state), VolcanoDriver(state, 3)):
        run = simulate_queues(driver, state, trace)
        assert all(j.first_start is not None and j.done is not None for j in run.jobs), driver.name
        s = summarize_queues(run)
        assert 0.0 < s["share_team-a"] <= 1.0
