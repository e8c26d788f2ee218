"""The CRDs in manifests/crds, installed in a real kube-apiserver, accept what the design documents
write and refuse what the API forbids, with the apiserver's own schema and CEL messages."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

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


def test_validate_says_what_kubectl_apply_is_told(kubectl: Kubectl, namespace: str, tmp_path: Any) -> None:
    """``hyperplace validate`` and ``kubectl apply`` of the same file refuse the same objects in
    the same words: strict field validation for an unknown field, kube-openapi for the schema."""
    from typer.testing import CliRunner

    from simulator.cli import app

    def pg(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }

    objs = [
        pg("typo", {"minMembr": 2}),
        pg("negative", {"minMember": -1, "minResources": {"memory": "4 cores"}}),
        hypernode(f"typo-{uuid.uuid4().hex[:6]}", 1, [exact("Node", "n0")]),
    ]
    objs[2]["spec"]["teir"] = 1
    f = tmp_path / "objs.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    res = CliRunner().invoke(app, ["validate", str(f)])
    assert res.exit_code == 1, res.stdout
    refusals = res.stdout.splitlines()[:-1]
    assert len(refusals) == 4, refusals
    for obj in objs:
        out = kubectl.apply([obj], check=False)
        assert out.returncode != 0
        label = f"{obj['kind']} " + (
            f"{namespace}/{obj['metadata']['name']}" if obj["kind"] == "PodGroup" else obj["metadata"]["name"]
        )
        mine = [line.split(f": {label}: ", 1)[1] for line in refusals if f": {label}: " in line]
        assert mine, (label, refusals)
        for message in mine:
            # Unknown fields: the apiserver's "strict decoding error: unknown field ..." after our path.
            text = message.split(": ", 1)[1] if "unknown field" in message else message
            assert text in out.stderr, (text, out.stderr)
