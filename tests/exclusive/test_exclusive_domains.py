"""Exclusive domains: a job marked ``hyperplace.io/exclusive-topology: "true"`` takes whole
leaves, and nobody else lands in them while it runs."""

from __future__ import annotations

from typing import Any

from hyperplace.api import PodGroup
from hyperplace.api.podgroup import NetworkTopologySpec
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import SessionResult, run_session
from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, racks, running_gang
from tests.scheduler.builders import hypernode, job_pods, node, pod, podgroup
from webhooks.admission import admit
from webhooks.job import validate_job

from ..webhooks.builders import job

LEAF = {"mode": "hard", "highestTierAllowed": 1}
FIELD = "metadata.annotations[hyperplace.io/exclusive-topology]"


def exclusive(pg: PodGroup) -> PodGroup:
    pg.metadata.annotations = {"hyperplace.io/exclusive-topology": "true"}
    return pg


def cluster() -> tuple[list[dict[str, Any]], list[Any]]:
    """Three leaves of two 4-cpu nodes each, under one spine."""
    nodes = [node(f"n{i}", cpu=4) for i in range(6)]
    tree = [
        hypernode("leaf0", 1, nodes=["n0", "n1"]),
        hypernode("leaf1", 1, nodes=["n2", "n3"]),
        hypernode("leaf2", 1, nodes=["n4", "n5"]),
        hypernode("spine", 2, children=["leaf0", "leaf1", "leaf2"]),
    ]
    return nodes, tree


def session(pods: list[dict[str, Any]], pgs: list[PodGroup]) -> SessionResult:
    nodes, tree = cluster()
    return run_session(build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs))


def leaves_of(result: SessionResult, prefix: str) -> set[str]:
    leaf = {"n0": "leaf0", "n1": "leaf0", "n2": "leaf1", "n3": "leaf1", "n4": "leaf2", "n5": "leaf2"}
    return {leaf[n] for k, n in result.bindings.items() if k.startswith(prefix)}


def test_an_exclusive_job_gets_a_leaf_no_other_job_uses() -> None:
    # leaf0 and leaf1 each run a small 1-cpu pod of another job: only leaf2 is clean.
    pods = [pod("a-t0-0", "a", cpu=1, node_name="n0"), pod("b-t0-0", "b", cpu=1, node_name="n2")]
    pgs = [podgroup("a", 1), podgroup("b", 1)]
    pods += job_pods("train", 2, cpu=2)
    pgs.append(exclusive(podgroup("train", 2, topology=LEAF)))
    result = session(pods, pgs)
    assert leaves_of(result, "default/train-") == {"leaf2"}


def test_pods_of_no_job_do_not_make_a_leaf_unclean() -> None:
    pods = [pod(f"ds-{i}", None, cpu=1, node_name=f"n{i}") for i in range(6)]  # a DaemonSet
    pods += job_pods("train", 2, cpu=2)
    result = session(pods, [exclusive(podgroup("train", 2, topology=LEAF))])
    assert len(leaves_of(result, "default/train-")) == 1


def test_a_later_job_does_not_land_in_the_exclusive_leaf_although_there_is_room() -> None:
    # train runs alone in leaf0 using half of it; the other leaves are full.
    pods = job_pods("train", 2, cpu=2)
    pods[0]["spec"]["nodeName"], pods[0]["status"]["phase"] = "n0", "Running"
    pods[1]["spec"]["nodeName"], pods[1]["status"]["phase"] = "n1", "Running"
    pgs = [exclusive(podgroup("train", 2, topology=LEAF))]
    for i in range(2, 6):
        pods.append(pod(f"full{i}-t0-0", f"full{i}", cpu=4, node_name=f"n{i}"))
        pgs.append(podgroup(f"full{i}", 1))
    pods += job_pods("small", 1, cpu=1, created="2026-01-01T00:01:00Z")
    pgs.append(podgroup("small", 1, created="2026-01-01T00:01:00Z"))
    result = session(pods, pgs)
    assert result.bindings == {}
    expl = result.jobs["default/small"].explanation
    assert expl is not None and "held exclusively: leaf0 by default/train" in expl.message()
    # A job that fits no node at all is not told of the fence: it is not what keeps it out.
    pods += job_pods("huge", 1, cpu=8, created="2026-01-01T00:02:00Z")
    pgs.append(podgroup("huge", 1, created="2026-01-01T00:02:00Z"))
    result = session(pods, pgs)
    huge = result.jobs["default/huge"].explanation
    assert huge is not None and "held exclusively" not in huge.message()
    assert "held exclusively: leaf0 by default/train" in result.jobs["default/small"].explanation.message()
    pods, pgs = pods[:-1], pgs[:-1]
    # Once train has finished, leaf0 is open again.
    for p in pods[:2]:
        p["status"]["phase"] = "Succeeded"
    assert session(pods, pgs).bindings.get("default/small-t0-0") in {"n0", "n1"}


def test_with_no_clean_leaf_the_exclusive_job_waits_with_the_reason() -> None:
    pods = [pod(f"s{i}-t0-0", f"s{i}", cpu=1, node_name=f"n{2 * i}") for i in range(3)]
    pgs = [podgroup(f"s{i}", 1) for i in range(3)]
    pods += job_pods("train", 2, cpu=2)
    pgs.append(exclusive(podgroup("train", 2, topology=LEAF)))
    result = session(pods, pgs)
    assert not any(k.startswith("default/train-") for k in result.bindings)
    expl = result.jobs["default/train"].explanation
    assert (
        expl is not None and "exclusive: needs a tier-1 HyperNode free of other jobs' pods" in expl.message()
    )


def test_a_job_placed_after_an_exclusive_one_in_the_same_cycle_keeps_out_of_its_leaf() -> None:
    pods = job_pods("train", 2, cpu=1)
    pgs = [exclusive(podgroup("train", 2, topology=LEAF))]
    for i in range(4):
        created = f"2026-01-01T00:0{i + 1}:00Z"
        pods += job_pods(f"s{i}", 1, cpu=4, created=created)
        pgs.append(podgroup(f"s{i}", 1, created=created))
    result = session(pods, pgs)
    [mine] = leaves_of(result, "default/train-")
    others = {
        leaves_of(result, f"default/s{i}-").pop() for i in range(4) if leaves_of(result, f"default/s{i}-")
    }
    assert mine not in others and len(others) == 2  # the two other leaves, two nodes each


def test_two_exclusive_jobs_never_share_a_leaf() -> None:
    pods = job_pods("a", 1, cpu=1) + job_pods("b", 1, cpu=1, created="2026-01-01T00:01:00Z")
    pgs = [
        exclusive(podgroup("a", 1, topology=LEAF)),
        exclusive(podgroup("b", 1, topology=LEAF, created="2026-01-01T00:01:00Z")),
    ]
    result = session(pods, pgs)
    assert len(result.bindings) == 2
    assert leaves_of(result, "default/a-") != leaves_of(result, "default/b-")


def test_the_webhook_refuses_a_bad_value_and_an_exclusive_job_without_a_hard_tier() -> None:
    def annotated(obj: dict[str, Any], value: str) -> dict[str, Any]:
        obj.setdefault("metadata", {}).setdefault("annotations", {})["hyperplace.io/exclusive-topology"] = (
            value
        )
        return obj

    good = annotated(job(network_topology={"mode": "hard", "highestTierAllowed": 1}), "true")
    assert admit(good).allowed
    out = validate_job(annotated(job(network_topology={"mode": "hard", "highestTierAllowed": 1}), "yes"))
    assert any(m.startswith(FIELD) and 'must be "true" or "false"' in m for m in out.messages)
    out = validate_job(annotated(job(), "true"))
    assert any(m.startswith(FIELD) and "needs spec.networkTopology with mode hard" in m for m in out.messages)
    assert admit(annotated(job(), "false")).allowed


# ------------------------------------------------------------------ against eviction
def test_preemption_never_nominates_a_gang_into_a_domain_held_exclusively():
    """rack0 is held by an exclusive gang (two of its four nodes busy, two idle); rack1 runs a
    low-priority gang. An urgent rack-limited gang must not take rack0's idle nodes: preempt
    evicts the low-priority gang of rack1 instead."""
    nodes, hns = racks(n_racks=2, per_rack=4, cpu=4)
    ex = running_gang("ex", ["r0n0", "r0n1"], priority="high")
    ex[0].metadata.annotations = {"hyperplace.io/exclusive-topology": "true"}
    ex[0].spec.network_topology = NetworkTopologySpec.model_validate(
        {"mode": "hard", "highestTierAllowed": 1}
    )
    lo = running_gang("lo", [f"r1n{i}" for i in range(4)], priority="low")
    urgent = pending_gang("urgent", 2, tier=1, priority="high")
    groups = [ex, lo, urgent]
    snap = build_snapshot(
        nodes=nodes,
        pods=[p for _, ps in groups for p in ps],
        hypernodes=hns,
        podgroups=[pg for pg, _ in groups],
        priority_classes=PRIORITY_CLASSES,
    )
    res = run_session(snap, PREEMPT_CONF)
    assert {e.victim_job for e in res.evictions} == {"default/lo"}
    nominated = set(res.nominations["default/urgent"].pods.values())
    assert nominated <= {f"r1n{i}" for i in range(4)}
