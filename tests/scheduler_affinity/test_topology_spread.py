"""Topology spread constraints, as kube-scheduler's PodTopologySpread filters them, for gangs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.scheduler.builders import job_pods, node, pod, podgroup, schedule

from .test_inter_pod_affinity import RACK, ZONE, labelled, racks


def spread(key: str, skew: int = 1, hard: bool = True, **extra: Any) -> dict[str, Any]:
    c = {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"job": "s"}},
        **extra,
    }
    return {"topologySpreadConstraints": [c]}


def zones_of(bindings: dict[str, str], nodes: list[dict[str, Any]]) -> Counter[str]:
    zone = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in nodes}
    return Counter(zone[n] for n in bindings.values())


def test_a_gang_spread_over_two_zones_splits_evenly() -> None:
    nodes = racks(2, 4)  # r0 in z0, r1 in z1
    pods = labelled(job_pods("s", 6, cpu=1, extra_spec=spread(ZONE)), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 6)])
    assert len(result.bindings) == 6
    assert zones_of(result.bindings, nodes) == {"z0": 3, "z1": 3}


def test_running_pods_count_toward_the_skew() -> None:
    nodes = racks(2, 4)
    running = [labelled([pod(f"old-{i}", None, cpu=1, node_name="r0-n0")], job="s")[0] for i in range(2)]
    pods = labelled(job_pods("s", 2, cpu=1, extra_spec=spread(ZONE)), job="s")
    result, _ = schedule(nodes, [*running, *pods], [], [podgroup("s", 2)])
    # z0 already has two: both new pods go to z1 (2 + 0 vs 2 + 2 would be fine, 3 vs 1 not).
    assert zones_of(result.bindings, nodes) == {"z1": 2}


def test_a_spread_the_cluster_cannot_keep_waits_with_kubes_words() -> None:
    # One zone only has room: the second pod would make the skew 2.
    nodes = [node("a", cpu=4, labels={ZONE: "z0"}), node("b", cpu=0, labels={ZONE: "z1"})]
    pods = labelled(job_pods("s", 2, cpu=1, extra_spec=spread(ZONE)), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 2)])
    assert result.bindings == {}
    expl = result.jobs["default/s"].explanation
    assert expl is not None
    text = expl.predicates or ""
    assert "1 node(s) didn't match pod topology spread constraints" in text
    assert "1 Insufficient cpu" in text


def test_a_node_without_the_topology_key_is_refused_as_missing_the_label() -> None:
    nodes = [node("a", cpu=4, labels={ZONE: "z0"}), node("nolabel", cpu=4)]
    pods = labelled(job_pods("s", 2, cpu=1, extra_spec=spread(ZONE, skew=2)), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 2)])
    assert set(result.bindings.values()) == {"a"}


def test_min_domains_holds_the_minimum_at_zero_until_enough_domains_exist() -> None:
    # Two zones exist but minDomains is 3: the global minimum counts as 0, so with maxSkew 1
    # each zone takes one pod and a third cannot go anywhere.
    nodes = racks(2, 4)
    pods = labelled(job_pods("s", 3, cpu=1, extra_spec=spread(ZONE, minDomains=3)), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 3)])
    assert result.bindings == {}
    pods = labelled(job_pods("s", 2, cpu=1, extra_spec=spread(ZONE, minDomains=3)), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 2)])
    assert zones_of(result.bindings, nodes) == {"z0": 1, "z1": 1}


def test_node_affinity_policy_honor_leaves_unselected_nodes_out_of_the_count() -> None:
    # Pods are pinned to rack r1 (zone z1) by nodeSelector. With the default Honor, z0 nodes are
    # not counted, so z1 is the only domain and any number fits.
    nodes = racks(2, 4)
    extra = spread(ZONE)
    extra["nodeSelector"] = {RACK: "r1"}
    pods = labelled(job_pods("s", 3, cpu=1, extra_spec=extra), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 3)])
    assert len(result.bindings) == 3
    # With Ignore, z0 counts as an empty domain and only one pod fits in z1.
    extra = spread(ZONE, nodeAffinityPolicy="Ignore")
    extra["nodeSelector"] = {RACK: "r1"}
    pods = labelled(job_pods("s", 2, cpu=1, extra_spec=extra), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 2)])
    assert result.bindings == {}


def test_schedule_anyway_never_keeps_a_pod_out() -> None:
    nodes = [node("a", cpu=4, labels={ZONE: "z0"}), node("b", cpu=0, labels={ZONE: "z1"})]
    pods = labelled(job_pods("s", 3, cpu=1, extra_spec=spread(ZONE, hard=False)), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 3)])
    assert len(result.bindings) == 3


def test_hostname_spread_with_skew_one_is_one_pod_per_node_round_by_round() -> None:
    nodes = racks(1, 3)
    pods = labelled(job_pods("s", 6, cpu=1, extra_spec=spread("kubernetes.io/hostname")), job="s")
    result, _ = schedule(nodes, pods, [], [podgroup("s", 6)])
    assert Counter(result.bindings.values()) == {"r0-n0": 2, "r0-n1": 2, "r0-n2": 2}
