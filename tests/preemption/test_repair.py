"""The repair step: a gang that lost a pod with its node is made whole inside its own leaf,
taking room from pods that yield to it, with only Volcano's default actions configured."""

from __future__ import annotations

from typing import Any

from hyperplace.api import Queue
from hyperplace.api.times import parse_rfc3339
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG, load_scheduler_config
from scheduler_plugin.cycle import SessionResult, run_session
from tests.scheduler.builders import hypernode, job_pods, node, pod, podgroup, started

LONG_AGO = "2025-02-01T00:00:00Z"
FAILED = "2026-01-01T00:00:00Z"
NOW = (parse_rfc3339(FAILED) or 0.0) + 30
LEAF = {"mode": "hard", "highestTierAllowed": 1}
CLASSES = [
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "training"},
        "value": 1000,
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch"},
        "value": 10,
    },
]


def running_job(
    name: str,
    node_name: str,
    *,
    priority_class: str | None = None,
    queue: str | None = None,
    preemptable: str | None = None,
) -> tuple[dict[str, Any], Any]:
    """A one-pod 8-GPU job running on ``node_name`` since the failure."""
    p = started(pod(f"{name}-t0-0", name, cpu=8, gpu=8, index=0, node_name=node_name), FAILED)
    if preemptable is not None:
        p["metadata"]["annotations"]["volcano.sh/preemptable"] = preemptable
    return p, podgroup(name, 1, priority_class=priority_class, queue=queue)


def world(*others: tuple[dict[str, Any], Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The veteran: an 8-pod training gang on leaf0 (n00-n07) for a year; n07 failed and its pod
    was recreated; ``others`` run on n07's replacement room and elsewhere."""
    pods = job_pods("veteran", 8, cpu=8, gpu=8, created=LONG_AGO)
    for i, p in enumerate(pods[:7]):
        p["spec"]["nodeName"] = f"n{i:02d}"
        p["status"]["phase"] = "Running"
        started(p, LONG_AGO)
    pods[7]["metadata"]["creationTimestamp"] = FAILED
    pgs = [podgroup("veteran", 8, topology=LEAF, priority_class="training", created=LONG_AGO)]
    for p, g in others:
        pods.append(p)
        pgs.append(g)
    return pods, pgs


def session(pods: list[dict[str, Any]], pgs: list[Any], config: Any = DEFAULT_CONFIG) -> SessionResult:
    nodes = [node(f"n{i:02d}", cpu=64, memory="512Gi", gpu=8) for i in range(16)]
    tree = [
        hypernode("leaf0", 1, nodes=[f"n{i:02d}" for i in range(8)]),
        hypernode("leaf1", 1, nodes=[f"n{i:02d}" for i in range(8, 16)]),
        hypernode("spine", 2, children=["leaf0", "leaf1"]),
    ]
    queues = [Queue.model_validate({"metadata": {"name": "scavenger"}, "spec": {"weight": 1}})]
    snap = build_snapshot(
        nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs, priority_classes=CLASSES, queues=queues
    )
    return run_session(snap, config, now=NOW)


def full_leaf1(queue: str | None = None) -> list[tuple[dict[str, Any], Any]]:
    return [running_job(f"leaf1-{i}", f"n{i:02d}", priority_class="batch", queue=queue) for i in range(8, 16)]


def test_a_lower_priority_pod_in_the_gangs_leaf_makes_room_for_the_replacement() -> None:
    pods, pgs = world(running_job("batch", "n07", priority_class="batch"), *full_leaf1())
    result = session(pods, pgs)
    assert [e.victim for e in result.evictions] == ["default/batch-t0-0"]
    assert "repair step" in result.evictions[0].reason
    nom = result.nominations["default/veteran"]
    assert nom.pods == {"default/veteran-t0-7": "n07"}
    assert nom.action == "repair"
    # Nothing outside the gang's leaf was touched, though leaf1 is full of the same batch jobs.
    assert all(e.node == "n07" for e in result.evictions)


def test_a_pod_marked_preemptable_yields_from_any_queue_whatever_its_priority() -> None:
    """The scavenger queue fills what the training queue leaves, with spot pods that say they
    may go; the queue's share is respected (the training queue stays within its own)."""
    spot = running_job("spot", "n07", priority_class="training", queue="scavenger", preemptable="true")
    pods, pgs = world(spot, *full_leaf1("scavenger"))
    result = session(pods, pgs)
    assert [e.victim for e in result.evictions] == ["default/spot-t0-0"]


def test_an_equal_priority_pod_that_did_not_say_it_may_go_is_left_alone() -> None:
    pods, pgs = world(running_job("peer", "n07", priority_class="training"), *full_leaf1())
    result = session(pods, pgs)
    assert not result.evictions
    assert "default/veteran" not in result.nominations


def test_a_pod_protected_by_preemptable_false_is_never_taken() -> None:
    pods, pgs = world(running_job("keep", "n07", priority_class="batch", preemptable="false"), *full_leaf1())
    assert not session(pods, pgs).evictions


def test_a_gang_that_was_never_whole_is_not_repaired() -> None:
    """A gang half-bound after a failed bind waits for room as Volcano's does: only a gang that
    lost pods it had is repaired."""
    pods, pgs = world(running_job("batch", "n07", priority_class="batch"), *full_leaf1())
    pods[7]["metadata"]["creationTimestamp"] = LONG_AGO
    assert not session(pods, pgs).evictions


def test_with_room_in_its_leaf_the_replacement_is_simply_bound() -> None:
    pods, pgs = world(*full_leaf1())
    result = session(pods, pgs)
    assert result.bindings == {"default/veteran-t0-7": "n07"}
    assert not result.evictions


def test_an_operator_can_turn_the_step_off() -> None:
    conf = load_scheduler_config(
        'actions: "enqueue, allocate, backfill"\n'
        "configurations:\n"
        "- name: repair\n"
        "  arguments:\n"
        "    enabled: false\n"
        "tiers:\n"
        "- plugins:\n"
        "  - name: priority\n"
        "  - name: gang\n"
        "- plugins:\n"
        "  - name: predicates\n"
        "  - name: proportion\n"
        "  - name: nodeorder\n"
    )
    pods, pgs = world(running_job("batch", "n07", priority_class="batch"), *full_leaf1())
    assert not session(pods, pgs, conf).evictions
