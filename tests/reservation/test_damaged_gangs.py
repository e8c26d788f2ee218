"""A gang that ran for months and lost a pod with its node waits since then, not since its
creation, and only where its remainder runs: its hold and its topology relaxation follow."""

from __future__ import annotations

from typing import Any

from hyperplace.api import PodGroup
from hyperplace.api.constants import JOB_VERSION_KEY
from hyperplace.api.times import parse_rfc3339
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import SessionResult, run_session
from scheduler_plugin.model.gang_damage import stopped_whole_at, waiting_since
from tests.scheduler.builders import TEN_MINUTE_HOLDS, hypernode, job_pods, node, pod, podgroup, started

LONG_AGO = "2025-02-01T00:00:00Z"  # the veteran gang started then, and ran ever since
FAILED = "2026-01-01T00:00:00Z"  # its node failed; the controller made the replacement then
LEAF = {"mode": "hard", "highestTierAllowed": 1}
TRAINING = [
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "training"},
        "value": 1000,
    }
]


def cluster() -> tuple[list[dict[str, Any]], list[Any]]:
    """Two leaves of eight 8-GPU nodes under one spine."""
    nodes = [node(f"n{i:02d}", cpu=64, memory="512Gi", gpu=8) for i in range(16)]
    tree = [
        hypernode("leaf0", 1, nodes=[f"n{i:02d}" for i in range(8)]),
        hypernode("leaf1", 1, nodes=[f"n{i:02d}" for i in range(8, 16)]),
        hypernode("spine", 2, children=["leaf0", "leaf1"]),
    ]
    return nodes, tree


def veteran() -> tuple[list[dict[str, Any]], PodGroup]:
    """An 8-pod one-leaf gang running since long ago on leaf0; the node of its pod 7 failed and
    a small job took that node's place (n07): its replacement waits."""
    pods = job_pods("veteran", 8, cpu=8, gpu=8, created=LONG_AGO)
    for i, p in enumerate(pods[:7]):
        p["spec"]["nodeName"] = f"n{i:02d}"
        p["status"]["phase"] = "Running"
        started(p, LONG_AGO)
    pods[7]["metadata"]["creationTimestamp"] = FAILED
    # The platform's training tier: above the stream, so the veteran heads the queue.
    return pods, podgroup("veteran", 8, topology=LEAF, priority_class="training", created=LONG_AGO)


def world() -> tuple[list[dict[str, Any]], list[Any]]:
    """The veteran, the filler on n07, and a stream of one-pod 8-GPU jobs that came later."""
    pods, pg = veteran()
    pods.append(started(pod("filler-t0-0", "filler", cpu=8, gpu=8, index=0, node_name="n07"), FAILED))
    pgs = [pg, podgroup("filler", 1)]
    for i in range(4):
        pods.append(pod(f"s{i}-t0-0", f"s{i}", cpu=8, gpu=8, index=0, created="2026-01-01T00:15:00Z"))
        pgs.append(podgroup(f"s{i}", 1, created="2026-01-01T00:15:00Z"))
    return pods, pgs


def session(at: str) -> SessionResult:
    nodes, tree = cluster()
    pods, pgs = world()
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs, priority_classes=TRAINING)
    return run_session(snap, TEN_MINUTE_HOLDS, now=parse_rfc3339(at))


def small_jobs_on(result: SessionResult) -> set[str]:
    return {n for k, n in result.bindings.items() if k.startswith("default/s")}


def test_a_gang_that_lost_a_pod_waits_since_the_loss_not_since_it_was_created() -> None:
    nodes, tree = cluster()
    pods, pg = veteran()
    job = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=[pg]).jobs["default/veteran"]
    assert stopped_whole_at(job) == parse_rfc3339(FAILED)
    assert waiting_since(job) == parse_rfc3339(FAILED)


def test_a_gang_never_whole_waits_since_its_creation_even_when_half_bound() -> None:
    """Pods bound after a failed bind of the rest are no remainder: the rest are as old."""
    nodes, tree = cluster()
    pods = job_pods("half", 8, cpu=8, gpu=8, created=LONG_AGO)
    for i, p in enumerate(pods[:3]):
        p["spec"]["nodeName"] = f"n{i:02d}"
        p["status"]["phase"] = "Running"
        started(p, FAILED)
    pg = podgroup("half", 8, topology=LEAF, created=LONG_AGO)
    job = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=[pg]).jobs["default/half"]
    assert stopped_whole_at(job) is None
    assert waiting_since(job) == parse_rfc3339(LONG_AGO)


def test_a_job_restarted_whole_waits_since_its_new_pods_were_made() -> None:
    nodes, tree = cluster()
    pods = job_pods("again", 8, cpu=8, gpu=8, created=FAILED)
    for p in pods:
        p["metadata"]["labels"][JOB_VERSION_KEY] = "1"  # RestartJob made version 1
    pg = podgroup("again", 8, topology=LEAF, created=LONG_AGO)
    job = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=[pg]).jobs["default/again"]
    assert waiting_since(job) == parse_rfc3339(FAILED)


def test_minutes_after_the_loss_nothing_is_held_for_the_damaged_gang() -> None:
    """Reproduced before the fix: the veteran "had waited 7,938 h" and got leaf1 held, where
    its remainder can never go."""
    result = session("2026-01-01T00:06:00Z")
    assert "default/veteran" not in result.reservations
    assert len(small_jobs_on(result)) == 4


def test_past_the_threshold_the_hold_is_in_the_remainders_leaf_and_never_elsewhere() -> None:
    result = session("2026-01-01T00:20:00Z")
    hold = result.reservations["default/veteran"]
    assert hold.hypernode == "leaf0"
    assert "waited 20m since it stopped being whole" in hold.reason
    # The leaf it cannot use stays open to the stream.
    assert small_jobs_on(result) <= {f"n{i:02d}" for i in range(8, 16)}
    assert len(small_jobs_on(result)) == 4


def annotated(pg: PodGroup, relax: str) -> PodGroup:
    data: dict[str, Any] = pg.model_dump(by_alias=True, exclude_none=True)
    data["metadata"]["annotations"] = {"hyperplace.io/relax-topology": relax}
    return PodGroup.model_validate(data)


def test_a_damaged_gangs_relaxation_clock_starts_again_at_the_loss() -> None:
    """A gang that may spread to the spine after 10 minutes of waiting for a leaf: a day-old
    gang that lost a pod a minute ago is told tier 1 until ten minutes after the loss."""
    nodes, tree = cluster()
    pods, pg = veteran()
    pg = annotated(
        podgroup("veteran", 8, topology={"mode": "hard", "highestTierAllowed": 2}, created=LONG_AGO), "1@10m"
    )
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=[pg])
    result = run_session(snap, now=(parse_rfc3339(FAILED) or 0.0) + 60)
    assert result.jobs["default/veteran"].relaxation == {
        "tier": 1,
        "nextDeadline": "2026-01-01T00:10:00Z",
        "nextTier": None,
    }
