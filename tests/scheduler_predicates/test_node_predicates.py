"""Static node predicates: taints, node affinity, unschedulable and not-ready nodes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hyperplace.kube.requests import ResourceError
from hyperplace.kube.tolerations import tolerates_taint as toleration_tolerates_taint
from scheduler_plugin.filters.node_affinity import REASON_NODE_AFFINITY
from scheduler_plugin.filters.node_ready import REASON_NOT_READY
from scheduler_plugin.filters.node_unschedulable import REASON_UNSCHEDULABLE
from scheduler_plugin.filters.nodes import node_static_from_dict
from scheduler_plugin.filters.pod_constraints import compile_pod_constraints, static_feasibility_mask

from .helpers import KWOK_TAINT, KWOK_TOLERATION, make_node, make_pod

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def reason(pod: dict[str, Any], node: dict[str, Any]) -> str | None:
    return compile_pod_constraints(pod).node_reason(node_static_from_dict(node))


# --- nodes ---------------------------------------------------------------------------


def test_node_static_reads_allocatable_in_milli_units() -> None:
    n = node_static_from_dict(make_node("n1", labels={"zone": "a"}))
    assert n.name == "n1"
    assert n.labels == {"zone": "a"}
    assert n.allocatable == {"cpu": 8000, "memory": 8 * 2**30 * 1000, "pods": 110_000}
    assert n.ready and not n.unschedulable


def test_node_without_allocatable_falls_back_to_capacity() -> None:
    node = make_node(allocatable={})
    node["status"]["capacity"] = {"cpu": "4", "pods": "10"}
    assert node_static_from_dict(node).allocatable == {"cpu": 4000, "pods": 10_000}


def test_node_without_conditions_counts_as_ready() -> None:
    assert node_static_from_dict(make_node(ready=None)).ready


@pytest.mark.parametrize("status", ["False", "Unknown"])
def test_node_whose_ready_condition_is_not_true_is_not_ready(status: str) -> None:
    assert not node_static_from_dict(make_node(ready=status)).ready
    assert reason(make_pod(), make_node(ready=status)) == REASON_NOT_READY


def test_other_conditions_do_not_make_a_node_unready() -> None:
    node = make_node()
    node["status"]["conditions"].append({"type": "MemoryPressure", "status": "True"})
    assert node_static_from_dict(node).ready


# --- taints and tolerations ---------------------------------------------------------------


def test_pod_tolerating_gpu_taint_fits_tainted_node() -> None:
    pod = make_pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert reason(pod, make_node(taints=[GPU_TAINT])) is None


def test_pod_without_toleration_is_kept_off_tainted_node_with_kube_message() -> None:
    assert (
        reason(make_pod(), make_node(taints=[GPU_TAINT]))
        == "node(s) had untolerated taint {nvidia.com/gpu: present}"
    )


def test_e2e_kwok_nodes_need_the_kwok_toleration() -> None:
    node = make_node(taints=[KWOK_TAINT])
    assert reason(make_pod(), node) == "node(s) had untolerated taint {kwok.x-k8s.io/node: fake}"
    assert reason(make_pod(tolerations=[KWOK_TOLERATION]), node) is None


def test_no_execute_taint_must_be_tolerated_too() -> None:
    taint = {"key": "maintenance", "value": "", "effect": "NoExecute"}
    assert reason(make_pod(), make_node(taints=[taint])) == "node(s) had untolerated taint {maintenance: }"
    tol = {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
    assert reason(make_pod(tolerations=[tol]), make_node(taints=[taint])) is None


def test_prefer_no_schedule_taint_does_not_block() -> None:
    taint = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
    assert reason(make_pod(), make_node(taints=[taint])) is None


def test_equal_toleration_needs_the_same_value() -> None:
    tol = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent", "effect": "NoSchedule"}
    assert reason(make_pod(tolerations=[tol]), make_node(taints=[GPU_TAINT])) is not None
    tol["value"] = "present"
    assert reason(make_pod(tolerations=[tol]), make_node(taints=[GPU_TAINT])) is None


def test_toleration_without_operator_means_equal() -> None:
    tol = {"key": "nvidia.com/gpu", "value": "present"}
    assert reason(make_pod(tolerations=[tol]), make_node(taints=[GPU_TAINT])) is None


def test_toleration_for_another_effect_does_not_help() -> None:
    tol = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}
    assert reason(make_pod(tolerations=[tol]), make_node(taints=[GPU_TAINT])) is not None


def test_empty_key_exists_toleration_tolerates_every_taint() -> None:
    taints = [GPU_TAINT, KWOK_TAINT, {"key": "x", "value": "y", "effect": "NoExecute"}]
    assert reason(make_pod(tolerations=[{"operator": "Exists"}]), make_node(taints=taints)) is None


def test_first_untolerated_taint_is_reported() -> None:
    pod = make_pod(tolerations=[KWOK_TOLERATION])
    node = make_node(taints=[KWOK_TAINT, GPU_TAINT, {"key": "b", "value": "c", "effect": "NoSchedule"}])
    assert reason(pod, node) == "node(s) had untolerated taint {nvidia.com/gpu: present}"


# --- unschedulable ------------------------------------------------------------------------


def test_cordoned_node_is_unschedulable() -> None:
    assert reason(make_pod(), make_node(unschedulable=True)) == REASON_UNSCHEDULABLE


def test_pod_tolerating_the_unschedulable_taint_may_use_a_cordoned_node() -> None:
    tol = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    assert reason(make_pod(tolerations=[tol]), make_node(unschedulable=True)) is None


# --- node selector and node affinity --------------------------------------------------------


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)} if values else {"key": key, "operator": op}


def test_node_selector_must_match_every_label() -> None:
    pod = make_pod(nodeSelector={"zone": "a", "gpu": "h100"})
    assert reason(pod, make_node(labels={"zone": "a", "gpu": "h100", "x": "y"})) is None
    assert reason(pod, make_node(labels={"zone": "a"})) == REASON_NODE_AFFINITY


@pytest.mark.parametrize(
    ("requirement", "labels", "fits"),
    [
        (expr("zone", "In", "a", "b"), {"zone": "b"}, True),
        (expr("zone", "In", "a", "b"), {"zone": "c"}, False),
        (expr("zone", "In", "a"), {}, False),
        (expr("zone", "NotIn", "a"), {"zone": "b"}, True),
        (expr("zone", "NotIn", "a"), {}, True),
        (expr("zone", "NotIn", "a"), {"zone": "a"}, False),
        (expr("gpu", "Exists"), {"gpu": ""}, True),
        (expr("gpu", "Exists"), {}, False),
        (expr("gpu", "DoesNotExist"), {}, True),
        (expr("gpu", "DoesNotExist"), {"gpu": "1"}, False),
        (expr("gpus", "Gt", "4"), {"gpus": "8"}, True),
        (expr("gpus", "Gt", "8"), {"gpus": "8"}, False),
        (expr("gpus", "Lt", "8"), {"gpus": "4"}, True),
        (expr("gpus", "Lt", "8"), {"gpus": "many"}, False),
        (expr("gpus", "Gt", "4"), {}, False),
        (expr("gpus", "Gt", "four"), {"gpus": "8"}, False),  # invalid term matches nothing
    ],
)
def test_required_node_affinity_operators(
    requirement: dict[str, Any], labels: dict[str, str], fits: bool
) -> None:
    pod = make_pod(affinity=affinity({"matchExpressions": [requirement]}))
    assert (reason(pod, make_node(labels=labels)) is None) is fits


@pytest.mark.parametrize(
    ("gen", "requirement", "fits"),
    [
        ("007", ("Gt", "5"), True),  # leading zeros are a number to Go too
        ("3_0", ("Gt", "5"), False),  # Python's int reads 30; Go's ParseInt no number
        ("99999999999999999999", ("Gt", "5"), False),  # beyond int64: no number to Go
        ("9", ("Lt", "3_0"), False),  # the pod's value likewise: the term matches nothing
        ("9", ("Lt", "99999999999999999999"), False),
    ],
)
def test_gt_and_lt_read_numbers_as_kube_scheduler_does(
    gen: str, requirement: tuple[str, str], fits: bool
) -> None:
    """A cluster labels nodes with a generation and a pod asks for ``gen Gt 5`` or ``gen Lt N``.
    Both sides are valid label values, and kube-scheduler compares them with Go's
    strconv.ParseInt: a value it cannot read (``3_0``, twenty digits) matches no node, so ours
    must not place the pod there either (found by tests/oracle against the real kube-scheduler)."""
    op, value = requirement
    pod = make_pod(affinity=affinity({"matchExpressions": [expr("gen", op, value)]}))
    assert (reason(pod, make_node(labels={"gen": gen})) is None) is fits


def test_expressions_in_one_term_are_anded() -> None:
    pod = make_pod(affinity=affinity({"matchExpressions": [expr("zone", "In", "a"), expr("gpu", "Exists")]}))
    assert reason(pod, make_node(labels={"zone": "a", "gpu": "1"})) is None
    assert reason(pod, make_node(labels={"zone": "a"})) == REASON_NODE_AFFINITY


def test_terms_are_ored() -> None:
    pod = make_pod(
        affinity=affinity(
            {"matchExpressions": [expr("zone", "In", "a")]},
            {"matchExpressions": [expr("zone", "In", "b")]},
        )
    )
    assert reason(pod, make_node(labels={"zone": "b"})) is None
    assert reason(pod, make_node(labels={"zone": "c"})) == REASON_NODE_AFFINITY


def test_match_fields_selects_a_node_by_name() -> None:
    pod = make_pod(affinity=affinity({"matchFields": [expr("metadata.name", "In", "n7")]}))
    assert reason(pod, make_node("n7")) is None
    assert reason(pod, make_node("n8")) == REASON_NODE_AFFINITY
    avoid = make_pod(affinity=affinity({"matchFields": [expr("metadata.name", "NotIn", "n7")]}))
    assert reason(avoid, make_node("n7")) == REASON_NODE_AFFINITY
    assert reason(avoid, make_node("n8")) is None


def test_match_fields_and_expressions_are_anded() -> None:
    term = {"matchFields": [expr("metadata.name", "In", "n7")], "matchExpressions": [expr("zone", "In", "a")]}
    pod = make_pod(affinity=affinity(term))
    assert reason(pod, make_node("n7", labels={"zone": "a"})) is None
    assert reason(pod, make_node("n7", labels={"zone": "b"})) == REASON_NODE_AFFINITY


def test_invalid_match_fields_term_matches_nothing_but_other_terms_still_count() -> None:
    bad = {"matchFields": [expr("metadata.name", "Exists")]}
    good = {"matchExpressions": [expr("zone", "In", "a")]}
    pod = make_pod(affinity=affinity(bad, good))
    assert reason(pod, make_node("n1", labels={"zone": "a"})) is None
    assert reason(pod, make_node("n1", labels={"zone": "b"})) == REASON_NODE_AFFINITY


def test_empty_term_matches_no_node() -> None:
    assert reason(make_pod(affinity=affinity({})), make_node()) == REASON_NODE_AFFINITY


def test_required_affinity_without_terms_matches_no_node() -> None:
    assert reason(make_pod(affinity=affinity()), make_node()) == REASON_NODE_AFFINITY


def test_preferred_node_affinity_is_ignored_for_feasibility() -> None:
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [expr("zone", "In", "a")]}}
            ]
        }
    }
    assert reason(make_pod(affinity=pref), make_node(labels={"zone": "b"})) is None


def test_node_selector_and_affinity_must_both_hold() -> None:
    pod = make_pod(
        nodeSelector={"gpu": "h100"}, affinity=affinity({"matchExpressions": [expr("zone", "In", "a")]})
    )
    assert reason(pod, make_node(labels={"gpu": "h100", "zone": "a"})) is None
    assert reason(pod, make_node(labels={"gpu": "a100", "zone": "a"})) == REASON_NODE_AFFINITY
    assert reason(pod, make_node(labels={"gpu": "h100", "zone": "b"})) == REASON_NODE_AFFINITY


# --- filter order -------------------------------------------------------------------------


def test_reasons_follow_kube_filter_order() -> None:
    pod = make_pod(nodeSelector={"zone": "a"})
    everything_wrong = make_node(taints=[GPU_TAINT], unschedulable=True, ready="False")
    assert reason(pod, everything_wrong) == REASON_NOT_READY
    everything_wrong["status"]["conditions"][0]["status"] = "True"
    assert reason(pod, everything_wrong) == REASON_UNSCHEDULABLE
    del everything_wrong["spec"]["unschedulable"]
    assert reason(pod, everything_wrong) == "node(s) had untolerated taint {nvidia.com/gpu: present}"
    del everything_wrong["spec"]["taints"]
    assert reason(pod, everything_wrong) == REASON_NODE_AFFINITY


# --- mask and signature ----------------------------------------------------------------------


def test_mask_marks_exactly_the_feasible_nodes() -> None:
    nodes = [
        node_static_from_dict(make_node("a", labels={"zone": "a"})),
        node_static_from_dict(make_node("b", labels={"zone": "b"})),
        node_static_from_dict(make_node("c", labels={"zone": "a"}, taints=[GPU_TAINT])),
        node_static_from_dict(make_node("d", labels={"zone": "a"}, ready="False")),
    ]
    mask = static_feasibility_mask(compile_pod_constraints(make_pod(nodeSelector={"zone": "a"})), nodes)
    assert mask.dtype == np.bool_
    assert mask.tolist() == [True, False, False, False]


def test_mask_of_no_nodes_is_empty() -> None:
    assert static_feasibility_mask(compile_pod_constraints(make_pod()), []).shape == (0,)


def test_replicas_of_one_task_share_a_signature() -> None:
    a = compile_pod_constraints(make_pod("t0-0", requests={"cpu": "4"}, tolerations=[KWOK_TOLERATION]))
    b = compile_pod_constraints(make_pod("t0-1", requests={"cpu": "4"}, tolerations=[KWOK_TOLERATION]))
    assert a.signature == b.signature
    assert hash(a.signature) == hash(b.signature)


def test_toleration_order_and_seconds_do_not_change_the_signature() -> None:
    t1 = {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
    t2 = dict(KWOK_TOLERATION)
    a = compile_pod_constraints(make_pod(tolerations=[t1, t2]))
    b = compile_pod_constraints(make_pod(tolerations=[t2, {**t1, "tolerationSeconds": 300}]))
    assert a.signature == b.signature


def test_different_selectors_give_different_signatures() -> None:
    a = compile_pod_constraints(make_pod(nodeSelector={"zone": "a"}))
    b = compile_pod_constraints(make_pod(nodeSelector={"zone": "b"}))
    assert a.signature != b.signature


# --- gated and unsupported -----------------------------------------------------------------


def test_pod_with_scheduling_gates_is_gated() -> None:
    assert compile_pod_constraints(make_pod(schedulingGates=[{"name": "example.com/quota"}])).gated
    assert not compile_pod_constraints(make_pod(schedulingGates=[])).gated


def test_constraints_we_do_not_evaluate_are_reported() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    pod = make_pod(
        affinity={
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
        },
        topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}],
    )
    # Inter-pod affinity, topology spread, volumes and resource claims have filters of their own.
    assert compile_pod_constraints(pod).unsupported == ()


def test_scoring_only_constraints_are_not_unsupported() -> None:
    term = {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}
    pod = make_pod(
        affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}},
        topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
        volumes=[{"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "tmp", "emptyDir": {}}],
    )
    assert compile_pod_constraints(pod).unsupported == ()


def test_claims_are_judged_by_the_volume_filters_not_reported_unsupported() -> None:
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    scratch = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    compiled = compile_pod_constraints(make_pod(volumes=[claim, scratch]))
    assert compiled.unsupported == ()
    # The generic ephemeral volume's claim is named after the pod and the volume.
    assert [(c.name, c.ephemeral) for c in compiled.volumes.claims] == [("data", False), ("p-scratch", True)]


def test_node_with_invalid_allocatable_is_refused_naming_node_and_field() -> None:
    with pytest.raises(ResourceError, match=r"node n9: status\.allocatable\.cpu"):
        node_static_from_dict(make_node("n9", allocatable={"cpu": "eight", "pods": "110"}))


def test_toleration_with_unknown_operator_tolerates_nothing() -> None:
    tol = {"key": "nvidia.com/gpu", "operator": "Gt", "value": "1", "effect": "NoSchedule"}
    assert not toleration_tolerates_taint(tol, GPU_TAINT)
