"""Reservation for the head of the queue: a large gang that waited too long gets a domain held."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperplace.api.times import parse_rfc3339
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG, load_scheduler_config
from scheduler_plugin.cycle import SessionResult, run_session
from scheduler_plugin.model.reservation import RESERVED_CONDITION, Reservation
from tests.scheduler.builders import TEN_MINUTE_HOLDS, hypernode, job_pods, node, pod, podgroup

T0 = "2026-01-01T00:00:00Z"
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


def running(name: str, node_name: str) -> dict[str, Any]:
    """An 8-GPU one-pod job already running on ``node_name``."""
    return pod(f"{name}-t0-0", name, cpu=8, gpu=8, index=0, node_name=node_name)


def small(name: str, created: str, gpu: int = 8, cpu: int = 8) -> tuple[dict[str, Any], Any]:
    return pod(f"{name}-t0-0", name, cpu=cpu, gpu=gpu, index=0, created=created), podgroup(
        name, 1, created=created
    )


def session(
    pods: list[dict[str, Any]],
    pgs: list[Any],
    at: str | None,
    previous: dict[str, Reservation] | None = None,
    config: Any = TEN_MINUTE_HOLDS,
) -> SessionResult:
    nodes, tree = cluster()
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs)
    return run_session(snap, config, now=parse_rfc3339(at) if at else None, reservations=previous)


def world(stream: int = 5) -> tuple[list[dict[str, Any]], list[Any]]:
    """A 64-GPU gang (8 pods x 8 GPUs, one leaf) created at T0, three nodes of leaf0 and five of
    leaf1 busy, and a stream of one-pod 8-GPU jobs that arrived after it."""
    pods = [running(f"old{i}", f"n{i:02d}") for i in range(3)]
    pods += [running(f"old{i}", f"n{i + 5:02d}") for i in range(3, 8)]
    pgs = [podgroup(f"old{i}", 1) for i in range(8)]
    pods += job_pods("big", 8, cpu=8, gpu=8, created=T0)
    pgs.append(podgroup("big", 8, topology=LEAF, created=T0))
    for i in range(stream):
        p, g = small(f"s{i}", f"2026-01-01T00:0{i + 1}:00Z")
        pods.append(p)
        pgs.append(g)
    return pods, pgs


def gpu_jobs_on(result: SessionResult, leaf_nodes: range) -> list[str]:
    names = {f"n{i:02d}" for i in leaf_nodes}
    return sorted(k for k, n in result.bindings.items() if n in names and k.startswith("default/s"))


def test_before_the_threshold_small_jobs_take_every_free_node() -> None:
    pods, pgs = world()
    result = session(pods, pgs, at="2026-01-01T00:09:00Z")
    assert not result.reservations
    assert len([k for k in result.bindings if k.startswith("default/s")]) == 5
    assert "default/big" not in result.reservations
    assert not any(c["type"] == RESERVED_CONDITION for c in result.jobs["default/big"].conditions)


def test_by_default_a_gang_waits_two_hours_before_room_is_held_for_it() -> None:
    # Holding room idles it while it drains; by default that starts only after two hours.
    pods, pgs = world()
    assert not session(pods, pgs, at="2026-01-01T00:11:00Z", config=DEFAULT_CONFIG).reservations
    assert not session(pods, pgs, at="2026-01-01T01:59:00Z", config=DEFAULT_CONFIG).reservations
    held = session(pods, pgs, at="2026-01-01T02:01:00Z", config=DEFAULT_CONFIG).reservations
    assert held["default/big"].hypernode == "leaf0"
    assert "threshold 2.0h" in held["default/big"].reason


def test_without_a_clock_nothing_is_reserved() -> None:
    pods, pgs = world()
    result = session(pods, pgs, at=None)
    assert not result.reservations
    assert len([k for k in result.bindings if k.startswith("default/s")]) == 5


def test_a_64_gpu_gang_waiting_past_the_threshold_gets_the_leaf_that_drains_soonest() -> None:
    pods, pgs = world()
    result = session(pods, pgs, at="2026-01-01T00:11:00Z")
    # leaf0 lacks 3 nodes, leaf1 lacks 5: leaf0 is held.
    held = result.reservations["default/big"]
    assert held.hypernode == "leaf0"
    assert held.since == "2026-01-01T00:11:00Z"
    # The stream keeps flowing outside the held leaf, and only there.
    assert gpu_jobs_on(result, range(0, 8)) == []
    assert len(gpu_jobs_on(result, range(8, 16))) == 3
    cond = next(c for c in result.jobs["default/big"].conditions if c["type"] == RESERVED_CONDITION)
    assert cond["status"] == "True"
    assert "HyperNode leaf0 is held" in cond["message"] and "since 2026-01-01T00:11:00Z" in cond["message"]
    assert result.jobs["default/big"].phase == "Pending"


def test_a_job_kept_out_of_the_held_leaf_is_told_who_holds_it() -> None:
    pods, pgs = world()
    result = session(pods, pgs, at="2026-01-01T00:11:00Z")
    waiting = [k for k, o in result.jobs.items() if k.startswith("default/s") and o.phase == "Pending"]
    assert len(waiting) == 2
    for key in waiting:
        cond = next(c for c in result.jobs[key].conditions if c["type"] == "Unschedulable")
        assert (
            "held for the head of the queue: leaf0 for default/big since 2026-01-01T00:11:00Z"
            in cond["message"]
        )
    # The gang holding the leaf is not told about its own hold that way.
    big = next(c for c in result.jobs["default/big"].conditions if c["type"] == "Unschedulable")
    assert "held for the head of the queue" not in big["message"]


def test_a_job_the_hold_does_not_keep_out_is_not_told_of_it() -> None:
    # A 16-GPU pod fits no node, held leaf or not: its explanation says so and names no hold.
    pods, pgs = world()
    p, g = small("huge", "2026-01-01T00:06:30Z", gpu=16)
    result = session([*pods, p], [*pgs, g], at="2026-01-01T00:11:00Z")
    assert result.reservations["default/big"].hypernode == "leaf0"
    huge = next(c for c in result.jobs["default/huge"].conditions if c["type"] == "Unschedulable")
    assert "held for the head of the queue" not in huge["message"]
    assert "nvidia.com/gpu" in huge["message"]
    # The one-pod jobs that would fit in the held leaf are still told who holds it.
    told = [
        k
        for k, o in result.jobs.items()
        if k.startswith("default/s")
        and any("held for the head of the queue: leaf0" in c["message"] for c in o.conditions)
    ]
    assert len(told) == 2


@settings(max_examples=25, deadline=None)
@given(
    stream=st.integers(0, 8),
    extra=st.lists(st.tuples(st.sampled_from([1, 2, 4, 6, 8, 9]), st.sampled_from([8, 16, 24])), max_size=4),
)
def test_what_a_job_is_told_of_the_holds_does_not_depend_on_the_skipped_dry_run(
    stream: int, extra: list[tuple[int, int]]
) -> None:
    # The dry run "would it fit with nothing held" is skipped when no domain could take the job
    # even then (by per-shape counts); what every job is told must be what the dry run would say.
    from scheduler_plugin.placement import head_of_queue as reservation

    pods, pgs = world(stream)
    for i, (n, gpu) in enumerate(extra):
        pods += job_pods(f"x{i}", n, cpu=8, gpu=gpu, created="2026-01-01T00:06:00Z")
        pgs.append(podgroup(f"x{i}", n, topology=LEAF, created="2026-01-01T00:06:00Z"))
    skipped: list[str] = []
    real = reservation.Holder.may_be_kept_out

    def spy(self: Any, job: Any, tasks: Any) -> bool:
        got = real(self, job, tasks)
        if not got:
            skipped.append(job.key)
        return got

    reservation.Holder.may_be_kept_out = spy  # type: ignore[method-assign]
    try:
        pruned = session(pods, pgs, at="2026-01-01T00:11:00Z")
        reservation.Holder.may_be_kept_out = lambda self, job, tasks: True  # type: ignore[method-assign]
        always = session(pods, pgs, at="2026-01-01T00:11:00Z")
    finally:
        reservation.Holder.may_be_kept_out = real  # type: ignore[method-assign]
    assert pruned.bindings == always.bindings
    for key, outcome in always.jobs.items():
        assert pruned.jobs[key].conditions == outcome.conditions, key
    # A 16- or 24-GPU pod fits no 8-GPU node: such jobs never need the dry run.
    assert {f"default/x{i}" for i, (_, gpu) in enumerate(extra) if gpu > 8} <= set(skipped)


def test_a_pod_that_leaves_the_gang_its_room_is_still_placed_in_the_held_leaf() -> None:
    pods, pgs = world(stream=0)
    # leaf1 full: the only room for this CPU-only job is next to the gang's share in leaf0.
    pods += [running(f"fill{i}", f"n{i:02d}") for i in range(8, 16) if i < 13]
    pgs += [podgroup(f"fill{i}", 1) for i in range(8, 13)]
    p, g = small("cpu", "2026-01-01T00:05:00Z", gpu=0, cpu=4)
    result = session([*pods, p], [*pgs, g], at="2026-01-01T00:11:00Z")
    assert result.reservations["default/big"].hypernode == "leaf0"
    assert "default/cpu-t0-0" in result.bindings


def test_the_hold_survives_cycles_and_the_gang_starts_once_its_leaf_drains() -> None:
    pods, pgs = world()
    first = session(pods, pgs, at="2026-01-01T00:11:00Z")
    since = first.reservations["default/big"].since
    # Next cycle: more small jobs arrived; the hold stays, with its start time.
    p, g = small("s9", "2026-01-01T00:12:00Z")
    second = session([*pods, p], [*pgs, g], at="2026-01-01T00:13:00Z", previous=first.reservations)
    assert second.reservations["default/big"].hypernode == "leaf0"
    assert second.reservations["default/big"].since == since
    assert gpu_jobs_on(second, range(0, 8)) == []
    # The three jobs running in leaf0 finish: the gang starts there and the hold ends.
    drained = [x for x in pods if x["spec"].get("nodeName") not in ("n00", "n01", "n02")]
    third = session(drained, pgs, at="2026-01-01T00:20:00Z", previous=second.reservations)
    big = {k: n for k, n in third.bindings.items() if k.startswith("default/big")}
    assert len(big) == 8 and set(big.values()) == {f"n{i:02d}" for i in range(8)}
    assert not third.reservations
    assert not any(c["type"] == RESERVED_CONDITION for c in third.jobs["default/big"].conditions)


def test_a_deleted_gang_holds_nothing() -> None:
    pods, pgs = world()
    first = session(pods, pgs, at="2026-01-01T00:11:00Z")
    gone_pods = [x for x in pods if not x["metadata"]["name"].startswith("big-")]
    gone_pgs = [g for g in pgs if g.metadata.name != "big"]
    after = session(gone_pods, gone_pgs, at="2026-01-01T00:12:00Z", previous=first.reservations)
    assert not after.reservations
    assert len(gpu_jobs_on(after, range(0, 8))) == 2  # leaf0's free nodes are open again


def test_the_threshold_is_configurable_globally_and_per_queue() -> None:
    pods, pgs = world()
    conf = load_scheduler_config(
        """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: network-topology-aware}]
configurations:
- name: allocate
  arguments: {reservationWait: 30m}
"""
    )
    assert not session(pods, pgs, at="2026-01-01T00:11:00Z", config=conf).reservations
    assert session(pods, pgs, at="2026-01-01T00:31:00Z", config=conf).reservations


def test_a_queue_annotation_overrides_the_threshold_or_turns_it_off() -> None:
    from hyperplace.api import Queue

    pods, pgs = world()
    nodes, tree = cluster()

    def with_queue(wait: str) -> SessionResult:
        q = Queue.model_validate(
            {
                "metadata": {"name": "default", "annotations": {"hyperplace.io/reservation-wait": wait}},
                "spec": {},
            }
        )
        snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs, queues=[q])
        return run_session(snap, now=parse_rfc3339("2026-01-01T00:11:00Z"))

    assert not with_queue("off").reservations
    assert not with_queue("1h").reservations
    assert with_queue("2m").reservations["default/big"].hypernode == "leaf0"


def test_a_restarted_scheduler_keeps_the_hold_its_podgroup_condition_names() -> None:
    from hyperplace.api import PodGroup

    pods, pgs = world()
    # Before the restart leaf1 was held (since 00:11); nothing is carried in memory.
    big = next(g for g in pgs if g.metadata.name == "big").to_dict()
    big["status"] = {
        "conditions": [
            {
                "type": RESERVED_CONDITION,
                "status": "True",
                "lastTransitionTime": "2026-01-01T00:11:00Z",
                "message": Reservation("default/big", "leaf1", "2026-01-01T00:11:00Z").message(),
            }
        ]
    }
    pgs = [PodGroup.model_validate(big) if g.metadata.name == "big" else g for g in pgs]
    result = session(pods, pgs, at="2026-01-01T00:15:00Z")
    held = result.reservations["default/big"]
    assert (held.hypernode, held.since) == ("leaf1", "2026-01-01T00:11:00Z")
    assert gpu_jobs_on(result, range(8, 16)) == []


def test_a_spine_hold_takes_whole_leaves_and_leaves_the_others_whole() -> None:
    # A spine of two 4-node leaves. leaf-a: two empty nodes, two full; leaf-b: one empty, two
    # full, one half busy. A 4 x 8-GPU gang (one spine) finds only 3 empty nodes: held. Its
    # room is charged to leaf-a (the emptier) as a whole, so leaf-b's empty node and half node
    # still take a later 2 x 4-GPU job bound to one leaf; charged to the emptiest nodes of
    # both leaves, the hold would have covered both of them and that job would wait.
    nodes = [node(f"m{i}", cpu=64, memory="512Gi", gpu=8) for i in range(8)]
    tree = [
        hypernode("leaf-a", 1, nodes=[f"m{i}" for i in range(4)]),
        hypernode("leaf-b", 1, nodes=[f"m{i}" for i in range(4, 8)]),
        hypernode("spine", 2, children=["leaf-a", "leaf-b"]),
    ]
    pods = [running("fa2", "m2"), running("fa3", "m3"), running("fb5", "m5"), running("fb6", "m6")]
    pods.append(pod("hb7-t0-0", "hb7", cpu=4, gpu=4, index=0, node_name="m7"))
    pgs = [podgroup(n, 1) for n in ("fa2", "fa3", "fb5", "fb6", "hb7")]
    pods += job_pods("big", 4, cpu=8, gpu=8, created=T0)
    pgs.append(podgroup("big", 4, topology={"mode": "hard", "highestTierAllowed": 2}, created=T0))
    pods += job_pods("pair", 2, cpu=4, gpu=4, created="2026-01-01T00:05:00Z")
    pgs.append(podgroup("pair", 2, topology=LEAF, created="2026-01-01T00:05:00Z"))
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs)
    result = run_session(snap, TEN_MINUTE_HOLDS, now=parse_rfc3339("2026-01-01T00:11:00Z"))
    assert result.reservations["default/big"].hypernode == "spine"
    pair = {k: n for k, n in result.bindings.items() if k.startswith("default/pair")}
    assert len(pair) == 2 and set(pair.values()) <= {"m4", "m7"}  # in leaf-b, outside the held room


def _fill_pod_by_pod(room, order, pods, requests, masks):  # type: ignore[no-untyped-def]
    """The charging rule said plainly: each pod tries the nodes in order from where the last one
    went, and takes the first with room."""
    shapes, rows, k = [], [], 0
    for sid in pods:
        while k < len(order):
            i = order[k]
            if masks[sid][i] and (room[i] >= requests[sid]).all():
                room[i] -= requests[sid]
                shapes.append(sid)
                rows.append(int(i))
                break
            k += 1
    return shapes, rows


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_held_gang_is_charged_to_the_nodes_exactly_as_pod_by_pod(data: st.DataObject) -> None:
    import numpy as np

    from scheduler_plugin.placement.head_of_queue import fill_in_order

    n = data.draw(st.integers(1, 12))
    room = np.array(
        data.draw(st.lists(st.lists(st.integers(-1, 9), min_size=3, max_size=3), min_size=n, max_size=n))
    )
    order = np.array(data.draw(st.permutations(list(range(n)))), dtype=np.int64)
    requests = {
        sid: np.array(data.draw(st.lists(st.integers(0, 4), min_size=3, max_size=3))) for sid in range(3)
    }
    masks = {sid: np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n))) for sid in range(3)}
    pods = data.draw(st.lists(st.integers(0, 2), max_size=30))
    want_room = room.copy()
    want = _fill_pod_by_pod(want_room, order, pods, requests, masks)
    got = fill_in_order(room, order, pods, requests, masks)
    assert got == want and (room == want_room).all()
