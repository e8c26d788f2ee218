"""The CRDs in manifests/crds, installed in a real kube-apiserver, accept what the design documents
write and refuse what the API forbids, with the apiserver's own schema and CEL messages."""

from __future__ import annotations

import json
import uuid

import pytest

from .kube import REPO, Kubectl, exact, hypernode, in_namespace, load_yaml

pytestmark = pytest.mark.apiserver

FIXTURES = REPO / "tests" / "webhooks" / "fixtures"


def test_the_design_hypernodes_and_selector_examples_are_accepted(kubectl: Kubectl) -> None:
    # Example 1 of the design (a spine-leaf tree s0..s6) and the three MemberSelector examples
    # of the API doc comment, exactly as a user would apply them.
    docs = load_yaml(FIXTURES / "design_hypernodes.yaml") + load_yaml(FIXTURES / "selector_examples.yaml")
    names = [d["metadata"]["name"] for d in docs]
    try:
        out = kubectl.apply(docs)
        for name in names:
            assert f"hypernode.topology.volcano.sh/{name} created" in out.stdout
        stored = {h["metadata"]["name"]: h for h in kubectl.items("hypernodes")}
        assert stored["s6"]["spec"]["tier"] == 3
        assert stored["regex-example"]["spec"]["members"][0]["selector"] == {
            "regexMatch": {"pattern": "^node-[0-9]+$"}
        }
        assert stored["label-example"]["spec"]["members"][0]["selector"]["labelMatch"] == {
            "matchLabels": {"topology-rack": "rack1"}
        }
    finally:
        kubectl.run("delete", "hypernodes", "--ignore-not-found", *names)


def test_the_user_guide_jobs_are_accepted(kubectl: Kubectl, namespace: str) -> None:
    # The three Jobs of the user guide §3.3 share one name; give each its own.
    jobs = [in_namespace(j, namespace) for j in load_yaml(FIXTURES / "user_guide_jobs.yaml")]
    for i, job in enumerate(jobs):
        job["metadata"]["name"] = f"{job['metadata']['name']}-{i}"
    kubectl.apply(jobs)
    stored = kubectl.items("jobs.batch.volcano.sh", "-n", namespace)
    by_name = {j["metadata"]["name"]: j for j in stored}
    assert sorted(by_name) == sorted(j["metadata"]["name"] for j in jobs)
    partitioned = by_name["network-topology-job-1"]["spec"]["tasks"][0]["partitionPolicy"]
    assert partitioned["totalPartitions"] == 2
    assert partitioned["partitionSize"] == 4
    assert partitioned["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


def test_a_negative_tier_is_refused_naming_spec_tier(kubectl: Kubectl) -> None:
    name = f"bad-tier-{uuid.uuid4().hex[:6]}"
    out = kubectl.apply([hypernode(name, -1, [exact("Node", "n0")])], check=False)
    assert out.returncode != 0
    assert "spec.tier" in out.stderr
    assert "greater than or equal to 0" in out.stderr
    assert kubectl.run("get", "hypernode", name, check=False).returncode != 0


def test_a_member_with_two_selectors_is_refused_by_the_cel_rule(kubectl: Kubectl) -> None:
    name = f"two-selectors-{uuid.uuid4().hex[:6]}"
    member = {"type": "Node", "selector": {"exactMatch": {"name": "n0"}, "regexMatch": {"pattern": "^n"}}}
    out = kubectl.apply([hypernode(name, 1, [member])], check=False)
    assert out.returncode != 0
    assert "spec.members[0].selector" in out.stderr
    assert "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified" in out.stderr


def test_a_job_with_an_unknown_topology_mode_is_refused(kubectl: Kubectl, namespace: str) -> None:
    job = in_namespace(load_yaml(FIXTURES / "user_guide_jobs.yaml")[0], namespace)
    job["spec"]["networkTopology"]["mode"] = "sometimes"
    out = kubectl.apply([job], check=False)
    assert out.returncode != 0
    assert "spec.networkTopology.mode" in out.stderr


def test_kubectl_get_hn_shows_the_printer_columns(kubectl: Kubectl) -> None:
    name = f"columns-{uuid.uuid4().hex[:6]}"
    kubectl.apply([hypernode(name, 2, [exact("Node", "n0")], tier_name="spine")])
    try:
        # READY comes from the controller's Ready condition (here written by hand).
        cond = {"type": "Ready", "status": "True", "reason": "MembersResolved", "message": "1 node(s)"}
        cond["lastTransitionTime"] = "2026-01-01T00:00:00Z"
        status = json.dumps({"status": {"nodeCount": 1, "conditions": [cond]}})
        kubectl.run("patch", "hn", name, "--subresource=status", "--type=merge", "-p", status)
        lines = kubectl.run("get", "hn", name).stdout.splitlines()
        assert lines[0].split() == ["NAME", "TIER", "TIERNAME", "NODECOUNT", "READY", "AGE"]
        assert lines[1].split()[:5] == [name, "2", "spine", "1", "True"]
    finally:
        kubectl.run("delete", "hn", name)
