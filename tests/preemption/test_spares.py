"""Hot spares: an operator keeps a node free per leaf (``hyperplace.io/spare-nodes`` on a
HyperNode), so a gang that loses a node is whole again in its own leaf at once, evicting nobody."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from hyperplace.api import HyperNode
from hyperplace.api.spares import SpareError, spare_policy
from hyperplace.api.times import parse_rfc3339
from scheduler_plugin.cache.cluster_state import ClusterState
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.verify import snapshot_differences
from scheduler_plugin.cycle import SessionResult, run_session
from scheduler_plugin.runtime.metrics import Metrics
from tests.scheduler.builders import hypernode, job_pods, node, pod, podgroup, started
from webhooks.hypernode import validate_hypernode

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


def annotated(hn: HyperNode, **marks: str) -> HyperNode:
    data: dict[str, Any] = hn.model_dump(by_alias=True, exclude_none=True)
    data["metadata"]["annotations"] = {f"hyperplace.io/{k.replace('_', '-')}": v for k, v in marks.items()}
    return HyperNode.model_validate(data)


def tree(**spine_marks: str) -> list[HyperNode]:
    """Two leaves of eight nodes (n00-n07, n08-n15) under a spine carrying ``spine_marks``."""
    return [
        hypernode("leaf0", 1, nodes=[f"n{i:02d}" for i in range(8)]),
        hypernode("leaf1", 1, nodes=[f"n{i:02d}" for i in range(8, 16)]),
        annotated(hypernode("spine", 2, children=["leaf0", "leaf1"]), **spine_marks),
    ]


def veteran(lost: int = 1) -> tuple[list[dict[str, Any]], Any]:
    """A 7-pod one-leaf training gang on leaf0 (n00-..), ``lost`` of whose pods were lost with
    their nodes and made again."""
    pods = job_pods("veteran", 7, cpu=8, gpu=8, created=LONG_AGO)
    for i, p in enumerate(pods[: 7 - lost]):
        p["spec"]["nodeName"] = f"n{i:02d}"
        p["status"]["phase"] = "Running"
        started(p, LONG_AGO)
    for p in pods[7 - lost :]:
        p["metadata"]["creationTimestamp"] = FAILED
    return pods, podgroup("veteran", 7, topology=LEAF, priority_class="training", created=LONG_AGO)


def stream(n: int, prefix: str = "s", **marks: str) -> tuple[list[dict[str, Any]], list[Any]]:
    pods, pgs = [], []
    for i in range(n):
        p = pod(f"{prefix}{i}-t0-0", f"{prefix}{i}", cpu=8, gpu=8, index=0, created=FAILED)
        p["metadata"]["annotations"].update(marks)
        pods.append(p)
        pgs.append(podgroup(f"{prefix}{i}", 1, priority_class="batch", created=FAILED))
    return pods, pgs


def session(
    pods: list[dict[str, Any]], pgs: list[Any], hns: list[HyperNode], down: tuple[str, ...] = ()
) -> SessionResult:
    nodes = [node(f"n{i:02d}", cpu=64, memory="512Gi", gpu=8) for i in range(16)]
    for n in nodes:
        if n["metadata"]["name"] in down:
            n["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=hns, podgroups=pgs, priority_classes=CLASSES)
    return run_session(snap, now=NOW)


def test_each_leaf_keeps_its_spare_node_free_of_the_stream() -> None:
    pods, pgs = stream(20)
    result = session(pods, pgs, tree(spare_nodes="1"))
    used = set(result.bindings.values())
    assert len(used) == 14  # sixteen nodes, one spare per leaf
    assert "n00" not in used and "n08" not in used  # the first free node of each leaf by name
    assert result.spares.wanted == {"leaf0": 1, "leaf1": 1}
    assert result.spares.held == {"leaf0": 1, "leaf1": 1}
    assert not result.spares.used
    waiting = [o for o in result.jobs.values() if o.phase != "Running"]
    assert len(waiting) == 6
    assert all(
        o.explanation is not None and "2 spare node(s) kept for replacements" in o.explanation.message()
        for o in waiting
    )


def before_and_after_the_failure(hns: list[HyperNode]) -> tuple[SessionResult, SessionResult]:
    """Before: the veteran runs whole on n00-n06 while a stream of 12 batch jobs arrives. After:
    n06 fails (NotReady), the veteran's pod is made again, the stream runs where it was put."""
    vpods, vpg = veteran(lost=0)
    more, more_pgs = stream(12, prefix="late")
    before = session(vpods + more, [vpg, *more_pgs], hns)
    vpods, vpg = veteran(lost=1)
    for p in more:
        if p["metadata"]["namespace"] + "/" + p["metadata"]["name"] in before.bindings:
            p["spec"]["nodeName"] = before.bindings[p["metadata"]["namespace"] + "/" + p["metadata"]["name"]]
            p["status"]["phase"] = "Running"
            started(p, FAILED)
    after = session(vpods + more, [vpg, *more_pgs], hns, down=("n06",))
    return before, after


def test_with_a_spare_in_its_leaf_the_replacement_is_bound_there_at_once_evicting_nobody() -> None:
    before, after = before_and_after_the_failure(tree(spare_nodes="1"))
    assert "n07" not in before.bindings.values()  # leaf0's spare: the stream could not take it
    assert after.bindings["default/veteran-t0-6"] == "n07"
    assert not after.evictions
    assert after.spares.used == {"leaf0": 1}
    # Leaf1's spare (n08) stayed free for leaf1's gangs.
    assert "n08" not in before.bindings.values() and "n08" not in after.bindings.values()


def test_without_spares_the_stream_took_the_room_and_the_repair_step_must_evict() -> None:
    before, after = before_and_after_the_failure(tree())
    assert before.bindings.get("default/late0-t0-0") is not None
    assert "n07" in before.bindings.values()
    assert [e.node for e in after.evictions] == ["n07"]
    assert after.nominations["default/veteran"].pods == {"default/veteran-t0-6": "n07"}


def test_lent_spares_go_to_preemptable_pods_and_come_back_through_the_repair_step() -> None:
    spot, spot_pgs = stream(16, prefix="spot", **{"volcano.sh/preemptable": "true"})
    result = session(spot, spot_pgs, tree(spare_nodes="1", spare_nodes_lend="preemptable"))
    assert len(result.bindings) == 16  # lent: every node runs a spot pod
    # Then a node under the veteran fails and a spot pod sits on the leaf's last free node.
    vpods, vpg = veteran()
    spot, spot_pgs = stream(1, prefix="spot", **{"volcano.sh/preemptable": "true"})
    spot[0]["spec"]["nodeName"] = "n07"
    spot[0]["status"]["phase"] = "Running"
    started(spot[0], FAILED)
    result = session(
        vpods + spot, [vpg, *spot_pgs], tree(spare_nodes="1", spare_nodes_lend="preemptable"), down=("n06",)
    )
    assert [e.victim for e in result.evictions] == ["default/spot0-t0-0"]
    assert result.nominations["default/veteran"].pods == {"default/veteran-t0-6": "n07"}


def test_spares_kept_for_one_queue_are_not_for_anothers_gangs() -> None:
    before, after = before_and_after_the_failure(tree(spare_nodes="1", spare_nodes_queues="inference"))
    assert "n07" not in before.bindings.values()  # kept, but for the inference queue's gangs
    assert "default/veteran-t0-6" not in after.bindings
    assert not after.evictions


@pytest.mark.parametrize(
    ("marks", "field"),
    [
        ({"hyperplace.io/spare-nodes": "one"}, "metadata.annotations[hyperplace.io/spare-nodes]"),
        ({"hyperplace.io/spare-nodes": "1000"}, "metadata.annotations[hyperplace.io/spare-nodes]"),
        (
            {"hyperplace.io/spare-nodes": "1", "hyperplace.io/spare-nodes-lend": "everyone"},
            "metadata.annotations[hyperplace.io/spare-nodes-lend]",
        ),
        ({"hyperplace.io/spare-nodes-queues": "a"}, "metadata.annotations[hyperplace.io/spare-nodes-queues]"),
    ],
)
def test_a_bad_spare_annotation_is_refused_at_admission_naming_the_field(
    marks: dict[str, str], field: str
) -> None:
    with pytest.raises(SpareError, match=field.replace("[", r"\[").replace("]", r"\]")):
        spare_policy(marks)
    hn = hypernode("leaf0", 1, nodes=["n00"]).model_dump(by_alias=True, exclude_none=True)
    hn["metadata"]["annotations"] = marks
    verdict = validate_hypernode(hn)
    assert not verdict.allowed and verdict.messages[0].startswith(field)


def test_a_bad_annotation_the_webhook_missed_keeps_no_spares_and_says_so() -> None:
    pods, pgs = stream(16)
    result = session(pods, pgs, tree(spare_nodes="lots"))
    assert len(result.bindings) == 16
    assert any("HyperNode spine" in n and "spare-nodes" in n for n in result.notes)


def test_the_incremental_cache_sees_an_annotation_change() -> None:
    nodes = [node(f"n{i:02d}", cpu=64, memory="512Gi", gpu=8) for i in range(16)]
    state = ClusterState()
    state.replace_all(nodes=nodes, pods=[], hypernodes=tree(), podgroups=[])
    assert not state.snapshot().spare_marks
    hns = tree(spare_nodes="1")
    state.set_hypernode(hns[2])
    snap = state.snapshot()
    assert snap.spare_marks == {"spine": {"hyperplace.io/spare-nodes": "1"}}
    rebuilt = build_snapshot(nodes=nodes, pods=[], hypernodes=hns)
    assert not [d for d in snapshot_differences(snap, rebuilt) if "spare" in d]


def test_the_metrics_show_spares_wanted_held_and_used() -> None:
    from scheduler_plugin.runtime.reporter import Reporter

    _, result = before_and_after_the_failure(tree(spare_nodes="1"))
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    reporter = Reporter.__new__(Reporter)  # only the gauges are asked of it here
    reporter.metrics = metrics
    reporter._spare_leaves = False
    reporter._spares_counted = None
    reporter._report_spares(result)
    reporter._report_spares(result)  # the same session reported again counts nothing twice
    value = registry.get_sample_value
    assert value("hyperplace_scheduler_spare_nodes", {"hypernode": "leaf0", "state": "wanted"}) == 1
    assert value("hyperplace_scheduler_spare_nodes", {"hypernode": "leaf1", "state": "held"}) == 1
    assert value("hyperplace_scheduler_spare_pods_placed_total", {"hypernode": "leaf0"}) == 1


def test_replacements_go_back_into_the_leaf_their_lost_pods_ran_in() -> None:
    """A spine-wide gang (tier 2) lost a node in each of leaf0 and leaf1; both leaves keep a
    spare. Each replacement names the node it replaces, and goes back into that node's leaf."""
    pods = job_pods("wide", 12, cpu=8, gpu=8, created=LONG_AGO)
    where = [f"n{i:02d}" for i in (0, 1, 2, 3, 4, 13, 8, 9, 10, 11, 12, 5)]
    for p, n in zip(pods, where, strict=True):
        p["spec"]["nodeName"] = n
        p["status"]["phase"] = "Running"
        started(p, LONG_AGO)
    # wide-t0-5 ran on n13 (leaf1), wide-t0-11 on n05 (leaf0): both lost and made again. (In
    # rank order alone, wide-t0-5 would take the first leaf's spare.)
    for p, lost_on in ((pods[5], "n13"), (pods[11], "n05")):
        del p["spec"]["nodeName"]
        p["status"] = {"phase": "Pending"}
        p["metadata"]["creationTimestamp"] = FAILED
        p["metadata"]["annotations"]["hyperplace.io/replaces-node"] = lost_on
    pg = podgroup(
        "wide",
        12,
        topology={"mode": "hard", "highestTierAllowed": 2},
        priority_class="training",
        created=LONG_AGO,
    )
    fill, fill_pgs = stream(2, prefix="fill")
    for p, n in zip(fill, ("n06", "n14"), strict=True):
        p["spec"]["nodeName"] = n
        p["status"]["phase"] = "Running"
    result = session(pods + fill, [pg, *fill_pgs], tree(spare_nodes="1"), down=("n05", "n13"))
    # Each leaf's spare is its last free node: n07 in leaf0, n15 in leaf1.
    assert result.bindings == {"default/wide-t0-5": "n15", "default/wide-t0-11": "n07"}
