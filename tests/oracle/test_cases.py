"""The differential test's case generator and our side of it, with no apiserver: a case is a pure
function of its seed, index and features, and our verdict reads the objects alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from .cases import DEFAULT_FEATURES, FEATURES, generate
from .differential import reason_counts
from .ours import our_verdict, prefilter_node_names


def test_the_same_seed_and_index_give_the_same_case() -> None:
    assert generate(7, 3).yaml() == generate(7, 3).yaml()
    assert generate(7, 3).yaml() != generate(7, 4).yaml()


def test_a_feature_nobody_knows_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown features"):
        generate(1, 0, frozenset({"gpu-sharing"}))


def test_every_flag_our_filters_judge_is_a_known_one() -> None:
    assert set(FEATURES) >= DEFAULT_FEATURES


def test_a_case_holds_small_clusters_with_pods_bound_to_its_nodes() -> None:
    for index in range(20):
        case = generate(5, index, frozenset())
        names = {n["metadata"]["name"] for n in case.nodes}
        assert 3 <= len(names) <= 12
        assert {p["spec"]["nodeName"] for p in case.bound} <= names
        assert all("nodeName" not in p["spec"] for p in case.pods)
        assert not case.claims  # volumes only behind their flag
        assert {o["kind"] for o in case.cluster} == {"RuntimeClass"}


def test_bound_pods_carry_terms_that_score_incoming_pods_only_behind_their_flag() -> None:
    def scoring_terms(features: frozenset[str]) -> int:
        found = 0
        for index in range(10):
            for pod in generate(5, index, features).bound:
                for kind in (pod["spec"].get("affinity") or {}).values():
                    found += "preferredDuringSchedulingIgnoredDuringExecution" in kind
        return found

    assert scoring_terms(frozenset({"existing-preferred"})) > 0
    assert scoring_terms(frozenset({"existing-anti-affinity"})) == 0


def test_our_verdict_reads_the_objects_alone() -> None:
    case = generate(5, 0)
    pod = {**case.pods[0], "metadata": {**case.pods[0]["metadata"], "uid": "u"}}
    others = [*case.namespaces, *case.cluster, *case.claims, *case.dra]
    verdict = our_verdict(case.nodes, case.bound, pod, others)
    assert verdict.refused is None
    assert verdict.nodes <= {n["metadata"]["name"] for n in case.nodes}
    assert set(verdict.reasons) == {n["metadata"]["name"] for n in case.nodes} - verdict.nodes


def test_a_pod_whose_resource_claim_does_not_exist_is_refused_on_every_node() -> None:
    case = generate(5, 1, frozenset())
    pod = copy.deepcopy(case.pods[0])
    pod["metadata"]["uid"] = "u"
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    verdict = our_verdict(case.nodes, case.bound, pod)
    assert verdict.nodes == frozenset()


def test_kube_schedulers_reason_text_is_read_reason_by_reason() -> None:
    text = (
        "0/5 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s), "
        "2 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate"
    )
    assert reason_counts(text) == {
        "Insufficient cpu": 1,
        "node(s) had untolerated taint(s)": 2,
        "node(s) didn't match Pod's node affinity/selector": 2,
    }
    # Ours joins a node's reasons and names the taint; read in kube-scheduler's words.
    ours = "0/3 nodes are available: 2 node(s) had untolerated taint {a: b}, 1 Insufficient cpu, Insufficient memory."
    assert reason_counts(ours) == {
        "node(s) had untolerated taint(s)": 2,
        "Insufficient cpu": 1,
        "Insufficient memory": 1,
    }


def test_matchfields_on_every_term_narrow_the_nodes_as_kube_schedulers_prefilter_does() -> None:
    def pod(*terms: Any) -> dict[str, Any]:
        required = {"nodeSelectorTerms": list(terms)}
        return {
            "spec": {
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
            }
        }

    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
    by_label = {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}
    assert prefilter_node_names(pod(by_name)) == frozenset({"a"})
    assert prefilter_node_names(pod(by_name, by_label)) is None  # a term with no names: every node
    assert prefilter_node_names({"spec": {}}) is None


def test_dra_objects_come_only_behind_their_flag_and_every_claim_a_pod_names_is_in_the_case() -> None:
    for index in range(10):
        assert not generate(5, index, frozenset()).dra
    named = kinds = rules = 0
    for index in range(10):
        case = generate(5, index, frozenset({"dra"}))
        claims = {
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for o in case.dra
            if o["kind"] == "ResourceClaim"
        }
        drawn = {o["kind"] for o in case.dra}
        kinds += {"DeviceClass", "ResourceSlice", "ResourceClaim"} <= drawn
        assert drawn <= {"DeviceClass", "ResourceSlice", "ResourceClaim", "DeviceTaintRule"}
        rules += "DeviceTaintRule" in drawn
        for p in [*case.bound, *case.pods]:
            for ref in p["spec"].get("resourceClaims") or []:
                assert (p["metadata"]["namespace"], ref["resourceClaimName"]) in claims
                named += 1
    assert named > 10 and kinds > 5 and rules > 3
