"""Which rack to hold for a waiting gang: the one expected to free up soonest.

A hold drains its domain as the pods running there end. Pods with a time limit say when they
end at the latest; for a queue that opts in (``hyperplace.io/runtime-estimate: history``) the
scheduler also learns how long its gangs ran and expects pods without a limit to end as runs
like theirs did. Either only chooses the domain: a learned guess never lets a job into held room
and never becomes the held gang's estimated start.
"""

from __future__ import annotations

from typing import Any

from hyperplace.api import Queue
from hyperplace.api.times import parse_rfc3339
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import SessionResult, run_session
from scheduler_plugin.model.runtime_history import ANNOTATION, RuntimeHistory, size_class
from tests.scheduler.builders import TEN_MINUTE_HOLDS, job_pods, pod, podgroup

from .test_time_limits import LEAF, T0, cluster, limited

NOW = "2026-01-01T00:11:00Z"
MIN = 60.0


def queue(name: str, learns: str | None = "history", uid: str | None = None) -> Queue:
    meta: dict[str, Any] = {"name": name, "uid": uid or f"uid-{name}"}
    if learns is not None:
        meta["annotations"] = {ANNOTATION: learns}
    return Queue.model_validate({"metadata": meta, "spec": {"weight": 1}})


def racks(
    leaf0: tuple[str, int | None], leaf1: tuple[str, int | None], queues: list[Queue]
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Five one-pod 8-GPU jobs running since T0 on each leaf, of the queue and time limit
    given per leaf, and a 64-GPU gang (one leaf, hard) waiting since T0: either leaf lacks the
    same five nodes, so only when the running pods end tells them apart."""
    pods: list[dict[str, Any]] = []
    pgs: list[Any] = []
    for leaf, (q, limit) in enumerate((leaf0, leaf1)):
        for i in range(5):
            name = f"r{leaf}{i}"
            p = pod(f"{name}-t0-0", name, cpu=8, gpu=8, index=0, node_name=f"n{leaf * 8 + i:02d}")
            pods.append(limited(p, limit, T0))
            pgs.append(podgroup(name, 1, queue=q))
    pods += job_pods("big", 8, cpu=8, gpu=8, created=T0)
    pgs.append(podgroup("big", 8, topology=LEAF, created=T0, queue=queues[0].metadata.name))
    return pods, pgs


def session(
    pods: list[dict[str, Any]], pgs: list[Any], queues: list[Queue], history: RuntimeHistory | None
) -> SessionResult:
    nodes, tree = cluster()
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs, queues=queues)
    return run_session(snap, TEN_MINUTE_HOLDS, now=parse_rfc3339(NOW), history=history)


def learned(runs: dict[str, list[float]]) -> RuntimeHistory:
    """A history in which each queue's one-pod gangs ran as long as given (seconds)."""
    h = RuntimeHistory()
    for q, seconds in runs.items():
        for s in seconds:
            h.record(q, 1, s)
    return h


def test_a_hold_takes_the_rack_whose_time_limits_end_first() -> None:
    qs = [queue("default", None)]
    pods, pgs = racks(("default", 3 * 3600), ("default", 1800), qs)
    result = session(pods, pgs, qs, None)
    held = result.reservations["default/big"]
    assert held.hypernode == "leaf1"  # its pods are gone by 00:30, leaf0's only by 03:00
    assert held.estimated_start == "2026-01-01T00:30:00Z"


def test_learned_run_times_pick_the_rack_whose_gangs_usually_end_soon() -> None:
    qs = [queue("default"), queue("slow"), queue("quick")]
    pods, pgs = racks(("slow", None), ("quick", None), qs)
    history = learned({"slow": [5 * 3600.0] * 4, "quick": [10 * MIN, 12 * MIN, 15 * MIN]})

    result = session(pods, pgs, qs, history)

    held = result.reservations["default/big"]
    assert held.hypernode == "leaf1"
    assert "expected to free soonest (learned run times)" in held.reason
    # A guess is not a bound: no estimated start, so nothing may use the held room on it.
    assert held.estimated_start is None and not held.backfilled
    # The next cycle keeps the rack, and says why for as long as it holds it.
    nodes, tree = cluster()
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs, queues=qs)
    start = parse_rfc3339(NOW)
    assert start is not None
    later = run_session(
        snap, TEN_MINUTE_HOLDS, now=start + 10, history=history, reservations=result.reservations
    )
    again = later.reservations["default/big"]
    assert again.hypernode == "leaf1" and "(learned run times)" in again.reason


def test_without_history_or_opt_in_the_choice_is_what_it_was() -> None:
    history = learned({"slow": [5 * 3600.0] * 4, "quick": [10 * MIN] * 4})
    # No history kept by the caller: ties go by shortfall, then load, then name.
    qs = [queue("default"), queue("slow"), queue("quick")]
    pods, pgs = racks(("slow", None), ("quick", None), qs)
    assert session(pods, pgs, qs, None).reservations["default/big"].hypernode == "leaf0"
    # History kept, but the queues running there did not opt in.
    qs = [queue("default", None), queue("slow", None), queue("quick", None)]
    assert session(pods, pgs, qs, history).reservations["default/big"].hypernode == "leaf0"


def test_an_annotation_value_not_understood_is_named_in_the_notes() -> None:
    qs = [queue("default"), queue("slow", "magic"), queue("quick")]
    pods, pgs = racks(("slow", None), ("quick", None), qs)
    result = session(pods, pgs, qs, learned({"quick": [10 * MIN] * 3}))
    assert any(ANNOTATION in n and "'magic'" in n and "slow" in n for n in result.notes)


def test_the_scheduler_learns_a_run_when_a_gang_it_saw_running_ends() -> None:
    nodes, tree = cluster()
    qs = [queue("default")]
    running = [
        limited(pod(f"train-t0-{i}", "train", cpu=8, gpu=8, index=i, node_name=f"n0{i}"), None, T0)
        for i in range(2)
    ]
    group = podgroup("train", 2)
    history = RuntimeHistory()

    def cycle(pods: list[dict[str, Any]], groups: list[Any], at: str) -> None:
        snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=groups, queues=qs)
        run_session(snap, TEN_MINUTE_HOLDS, now=parse_rfc3339(at), history=history)

    cycle(running, [group], "2026-01-01T00:05:00Z")
    cycle(running, [group], "2026-01-01T00:10:00Z")  # seen again: nothing ended
    assert not history.runs
    # Its pods ended (they leave the scheduler's view); the PodGroup stays.
    cycle([], [group], "2026-01-01T00:42:00Z")
    assert list(history.runs[("default", size_class(2))]) == [42 * MIN]
    cycle([], [group], "2026-01-01T00:43:00Z")  # observed once
    # A PodGroup deleted with its pods (not seen to end) teaches nothing.
    cycle(running, [group], "2026-01-01T00:50:00Z")
    cycle([], [], "2026-01-01T01:00:00Z")
    assert list(history.by_queue["default"]) == [42 * MIN]


def test_a_queue_deleted_and_made_again_under_its_name_learns_afresh() -> None:
    nodes, tree = cluster()
    history = learned({"research": [10 * MIN, 20 * MIN, 60 * MIN], "default": [5 * MIN]})
    changes = history.changes

    def cycle(queues: list[Queue], at: str) -> None:
        snap = build_snapshot(nodes=nodes, pods=[], hypernodes=tree, podgroups=[], queues=queues)
        run_session(snap, TEN_MINUTE_HOLDS, now=parse_rfc3339(at), history=history)

    cycle([queue("research"), queue("default")], "2026-01-01T00:05:00Z")
    assert history.remaining("research", 1, 0) == 20 * MIN
    # The Queue is deleted: its runs go with it (and the stored history is written without them).
    cycle([queue("default")], "2026-01-01T00:06:00Z")
    assert history.remaining("research", 1, 0) is None
    assert history.document(["research", "default"])["queues"] == {"default": {"0": [5 * MIN]}}
    assert history.changes > changes
    # Another team's queue under the same name starts from nothing; the other queue kept its runs.
    cycle([queue("research"), queue("default")], "2026-01-01T00:07:00Z")
    assert history.remaining("research", 1, 0) is None
    assert list(history.by_queue["default"]) == [5 * MIN]


def test_a_queue_replaced_between_two_cycles_learns_afresh_and_not_from_the_old_queues_gangs() -> None:
    """Deleted and made again faster than a cycle: the name is the same, the Queue is not."""
    nodes, tree = cluster()
    history = learned({"research": [10 * MIN, 20 * MIN, 60 * MIN]})
    history.uids["research"] = "uid-old"
    running = [
        limited(pod(f"train-t0-{i}", "train", cpu=8, gpu=8, index=i, node_name=f"n0{i}"), None, T0)
        for i in range(2)
    ]
    group = podgroup("train", 2, queue="research")

    def cycle(qs: list[Queue], pods: list[dict[str, Any]], at: str) -> None:
        snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=[group], queues=qs)
        run_session(snap, TEN_MINUTE_HOLDS, now=parse_rfc3339(at), history=history)

    cycle([queue("research", uid="uid-old")], running, "2026-01-01T00:05:00Z")
    assert history.remaining("research", 1, 0) == 20 * MIN
    cycle([queue("research", uid="uid-new")], running, "2026-01-01T00:06:00Z")
    assert history.remaining("research", 1, 0) is None
    assert history.document(["research"])["queues"] == {}
    # The gang that ran in the old queue ends now: its run says nothing about the new one.
    cycle([queue("research", uid="uid-new")], [], "2026-01-01T00:30:00Z")
    assert "research" not in history.by_queue
    # A gang of the new queue is learned as usual.
    cycle([queue("research", uid="uid-new")], running, "2026-01-01T00:31:00Z")
    cycle([queue("research", uid="uid-new")], [], "2026-01-01T00:40:00Z")
    assert list(history.by_queue["research"]) == [40 * MIN]


def test_what_is_left_of_a_run_is_read_from_the_runs_that_lasted_longer() -> None:
    h = learned({"q": [10 * MIN, 20 * MIN, 60 * MIN]})
    assert h.remaining("q", 1, 0) == 20 * MIN  # the median run
    assert h.remaining("q", 1, 15 * MIN) == (5 * MIN + 45 * MIN) / 2  # of the two that ran longer
    assert h.remaining("q", 1, 2 * 3600) == 2 * 3600  # outlived them all: as long again
    # Another size falls back to the queue's runs; too few runs give no estimate.
    assert h.remaining("q", 64, 0) == 20 * MIN
    assert learned({"q": [MIN, MIN]}).remaining("q", 1, 0) is None
    assert h.remaining("other", 1, 0) is None
