"""``hyperplace tree``, ``validate`` and ``explain``."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from .conftest import hypernode_yaml, nodes_yaml
from .test_simulate_cli import job_yaml, small_cluster

# --- tree ---------------------------------------------------------------------------------


def test_tree_json_tiers_counts_and_capacity(run_cli, write):
    d = small_cluster(write)
    write(
        "c/running.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec: {nodeName: n0, containers: [{name: c, image: x, resources: {requests: {cpu: "1500m"}}}]}
        """,
    )
    res = run_cli("tree", d, "--output", "json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ready"] is True and doc["problems"] == []
    [top] = doc["roots"]
    assert (top["name"], top["tier"], top["nodeCount"]) == ("top", 2, 4)
    assert [c["name"] for c in top["children"]] == ["leaf0", "leaf1"]
    leaf0 = top["children"][0]
    assert leaf0["nodes"] == ["n0", "n1"]
    assert leaf0["allocatable"]["cpu"] == 8000 and leaf0["free"]["cpu"] == 6500
    assert top["free"]["cpu"] == 14500


def test_tree_flags_cycles_double_parents_missing_and_empty(run_cli, write):
    write("nodes.yaml", nodes_yaml(["n0", "n1"]))
    hns = [
        hypernode_yaml("a", 2, ["b"], kind="HyperNode"),
        hypernode_yaml("b", 1, ["a"], kind="HyperNode"),  # a <-> b: a cycle
        hypernode_yaml("leaf", 1, ["n0", "ghost"]),  # ghost does not exist
        hypernode_yaml("p1", 2, ["leaf"], kind="HyperNode"),
        hypernode_yaml("p2", 2, ["leaf", "nowhere"], kind="HyperNode"),  # second parent, missing child
        """apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: empty}
spec:
  tier: 1
  members:
  - {type: Node, selector: {regexMatch: {pattern: "^zzz"}}}
""",
    ]
    d = Path(write("hn.yaml", "---\n".join(hns)).parent)
    res = run_cli("tree", d, "--output", "json")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["ready"] is False
    problems = {(p["hyperNode"], p["message"]) for p in doc["problems"]}
    assert ("a", "cycle: a -> b -> a") in problems
    assert ("b", "cycle: a -> b -> a") in problems
    assert ("leaf", "member 1 names Node ghost, which does not exist") in problems
    assert ("leaf", "has two parents: p1 and p2") in problems
    assert ("p2", "member 1 names HyperNode nowhere, which does not exist") in problems
    assert ("empty", "member 0 (regexMatch) selects no Node") in problems
    assert {c["name"] for c in doc["cycles"]} == {"a", "b"}
    assert doc["nodesWithoutHyperNode"] == ["n1"]
    # The human form shows the same reasons.
    text = run_cli("tree", d).stdout
    assert "NOT READY" in text
    assert "✗ has two parents: p1 and p2" in text
    assert "✗ cycle: a -> b -> a" in text


def test_a_member_naming_a_missing_node_is_a_problem_but_the_tree_stays_ready(run_cli, write):
    # Volcano's cache (and our scheduler) turn not ready only for a cycle or a second parent.
    write("nodes.yaml", nodes_yaml(["n0", "n1"]))
    hns = [
        hypernode_yaml("leaf", 1, ["n0", "ghost"]),
        hypernode_yaml("top", 2, ["leaf"], kind="HyperNode"),
    ]
    d = Path(write("hn.yaml", "---\n".join(hns)).parent)
    doc = json.loads(run_cli("tree", d, "--output", "json").stdout)
    assert doc["ready"] is True
    assert {(p["hyperNode"], p["message"]) for p in doc["problems"]} == {
        ("leaf", "member 1 names Node ghost, which does not exist")
    }
    assert "NOT READY" not in run_cli("tree", d).stdout


def test_tree_reports_schema_invalid_hypernodes(run_cli, write):
    f = write(
        "hn.yaml",
        "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: x}\nspec: {}\n",
    )
    doc = json.loads(run_cli("tree", f, "--output", "json").stdout)
    assert doc["ready"] is False
    assert doc["invalid"] and doc["invalid"][0].startswith(f"HyperNode x ({f}:1): spec.tier")


# --- validate ----------------------------------------------------------------------------------

BAD = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: bad}
spec: {tier: 1, members: []}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j, namespace: team}
spec:
  networkTopology: {mode: hard, highestTierAllowed: 1, highestTierName: leaf}
  tasks:
  - {name: t0, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}
"""


def test_validate_prints_file_line_and_the_webhooks_words_then_a_summary(run_cli, write):
    f = write("bad.yaml", BAD)
    res = run_cli("validate", f)
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [
        f"{f}:4: HyperNode bad: spec.members: member must have at least one member",
        f"{f}:10: Job team/j: spec.networkTopology: must not specify 'highestTierAllowed' and "
        "'highestTierName' in networkTopology simultaneously",
        "0 objects accepted, 2 refused, 1 warning",
    ]
    # Warnings go to stderr, as kubectl prints them.
    assert res.stderr.startswith(f"Warning: {f}:10: Job team/j: spec.networkTopology.highestTierName: ")


def test_validate_accepts_good_input_with_one_summary_line(run_cli, write):
    d = small_cluster(write)
    write("c/job.yaml", job_yaml("j", 1, topology="networkTopology: {mode: hard, highestTierName: rack}"))
    res = run_cli("validate", d)
    assert res.exit_code == 0, res.stdout
    assert res.stdout == "8 objects accepted, 0 refused, 1 warning\n"
    assert '"rack"' in res.stderr and res.stderr.startswith("Warning: ")


def test_validate_update_with_old(run_cli, write):
    old = write("old.yaml", job_yaml("j", 2))
    new = write(
        "new.yaml",
        job_yaml("j", 2).replace("name: t0", "name: t0\n  - name: extra\n    replicas: 1\n    template: {}"),
    )
    assert run_cli("validate", new).exit_code == 0
    res = run_cli("validate", new, "--old", old)
    assert res.exit_code == 1
    assert res.stdout.startswith(f"{new}:7: Job default/j: spec.tasks: ")  # the line of spec.tasks


def test_validate_unreadable_input_exit_2_and_the_other_files_are_still_checked(run_cli, tmp_path, write):
    assert run_cli("validate", tmp_path / "missing.yaml").exit_code == 2
    broken = write("x.yaml", "kind: [\n")
    bad = write("bad.yaml", BAD)
    res = run_cli("validate", broken, tmp_path / "missing.yaml", bad)
    assert res.exit_code == 2
    assert f"{broken}:2: malformed YAML" in res.stderr
    assert f"{tmp_path / 'missing.yaml'}: no such file or directory" in res.stderr
    # bad.yaml was validated all the same.
    assert f"{bad}:4: HyperNode bad: spec.members: " in res.stdout
    assert res.stdout.splitlines()[-1] == "0 objects accepted, 2 refused, 1 warning, 2 files not readable"


def test_validate_refuses_unknown_kinds_and_fields_as_the_apiserver_does(run_cli, write):
    f = write(
        "objs.yaml",
        """
        apiVersion: v1
        kind: Namespace
        metadata: {name: team}
        ---
        apiVersion: example.com/v1
        kind: Widget
        metadata: {name: w, namespace: team}
        ---
        apiVersion: topology.volcano.sh/v1alpha1
        kind: HyperNode
        metadata: {name: rack0}
        spec:
          teir: 1
          tier: 1
          members:
          - type: Node
            selector: {regexMatch: {pattern: "^n"}}
        ---
        apiVersion: topology.volcano.sh/v1beta1
        kind: HyperNode
        metadata: {name: rack1}
        spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^m"}}}]}
        """,
    )
    res = run_cli("validate", f)
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [
        f'{f}:5: Widget team/w: no matches for kind "Widget" in version "example.com/v1" '
        "(ensure CRDs are installed first)",
        f'{f}:13: HyperNode rack0: spec.teir: unknown field "spec.teir"',
        f'{f}:19: HyperNode rack1: no matches for kind "HyperNode" in version "topology.volcano.sh/v1beta1" '
        "(ensure CRDs are installed first)",
        "1 object accepted, 3 refused, 0 warnings",
    ]


def test_validate_says_what_the_crd_schema_refuses_in_the_apiservers_words(run_cli, write):
    f = write(
        "objs.yaml",
        """
        apiVersion: topology.volcano.sh/v1alpha1
        kind: HyperNode
        metadata: {name: rack0}
        spec:
          tier: -1
          tierName: "%s"
          members:
          - type: Switch
            selector: {regexMatch: {pattern: "^n"}}
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: pg, namespace: team}
        spec:
          minMember: 1
          minResources: {cpu: "4 cores"}
        """
        % ("x" * 254),
    )
    res = run_cli("validate", f)
    assert res.exit_code == 1
    quantity = (
        r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
        r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
    )
    assert res.stdout.splitlines() == [
        f"{f}:5: HyperNode rack0: spec.tier: Invalid value: -1: spec.tier in body should be greater than or equal to 0",
        f"{f}:6: HyperNode rack0: spec.tierName: Too long: may not be more than 253 bytes",
        f'{f}:8: HyperNode rack0: spec.members[0].type: Unsupported value: "Switch": '
        'supported values: "Node", "HyperNode"',
        f'{f}:16: PodGroup team/pg: spec.minResources.cpu: Invalid value: "4 cores": '
        f"spec.minResources.cpu in body should match '{quantity}'",
        "0 objects accepted, 2 refused, 0 warnings",
    ]


# --- explain ------------------------------------------------------------------------------------


def test_explain_placed_and_waiting_jobs(run_cli, write):
    d = small_cluster(write)
    write("c/fits.yaml", job_yaml("fits", 2, topology="networkTopology: {mode: hard, highestTierAllowed: 1}"))
    write(
        "c/waits.yaml", job_yaml("waits", 3, topology="networkTopology: {mode: hard, highestTierAllowed: 1}")
    )
    res = run_cli("explain", "default/fits", d, "--output", "json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["job"] == "default/fits" and doc["kind"] == "Job" and doc["phase"] == "Running"
    assert doc["allocatedHyperNode"] in ("leaf0", "leaf1") and doc["tier"] == 1
    assert list(doc["domains"]) == [doc["allocatedHyperNode"]]
    assert doc["waiting"] is False
    # The other tier-1 domain, with what it has free now (milli-units).
    [other] = doc["otherDomains"]
    assert other["hyperNode"] == ({"leaf0", "leaf1"} - {doc["allocatedHyperNode"]}).pop()
    assert other["tier"] == 1 and other["allocatable"]["cpu"] == 8000
    res = run_cli("explain", "default/waits", d, "--output", "json")
    doc = json.loads(res.stdout)
    assert doc["waiting"] is True and doc["allocatedHyperNode"] is None
    tiers = doc["explanation"]["tiers"]
    assert tiers and tiers[0]["tier"] == 1
    text = run_cli("explain", "waits", d).stdout
    assert "Why waiting" in text and "tier 1" in text


def test_explain_json_shows_each_plugins_scores_of_the_waiting_job(run_cli, write):
    # An operator asks why a waiting gang's pods would go where they go: explain shows, per pod
    # and node, each node-order plugin's score, per SubJob each HyperNode's, and the arguments.
    d = small_cluster(write)
    write(
        "c/waits.yaml", job_yaml("waits", 3, topology="networkTopology: {mode: hard, highestTierAllowed: 1}")
    )
    doc = json.loads(run_cli("explain", "default/waits", d, "--output", "json").stdout)
    scores = doc["scores"]
    # The three pods are alike: one is scored, the others say whose scores they share.
    (pod,) = scores["nodeScores"]
    assert pod.startswith("default/waits-")
    assert sorted(scores["sameScoresAs"].values()) == [pod, pod]
    by_node = scores["nodeScores"][pod]
    assert set(by_node) == {p["metadata"]["name"] for p in _nodes(d)}
    plugins = set(next(iter(by_node.values())))
    assert "binpack" in plugins and "network-topology-aware" in plugins
    assert scores["arguments"]["binpack"]["weight"] == 1  # Volcano's default
    (subjob,) = scores["hyperNodeScores"].values()
    assert {"leaf0", "leaf1"} <= set(subjob)


def _nodes(d) -> list[dict]:
    return [
        o
        for f in sorted(Path(d).rglob("*.yaml"))
        for o in yaml.safe_load_all(f.read_text())
        if o and o.get("kind") == "Node"
    ]


def test_explain_unknown_job_exit_2(run_cli, write):
    d = small_cluster(write)
    res = run_cli("explain", "default/nope", d)
    assert res.exit_code == 2
    assert "no Job or PodGroup default/nope" in res.stderr


def test_tree_shows_what_label_discovery_builds(run_cli):
    example = Path(__file__).resolve().parents[2] / "examples" / "topograph-discovery"
    doc = json.loads(run_cli("tree", example, "--output", "json").stdout)
    assert doc["ready"] is True
    assert len(doc["roots"]) == 2  # two spines
    spine = doc["roots"][0]
    assert spine["tier"] == 3 and spine["tierName"] == "network.topology.nvidia.com/spine"
    assert spine["nodeCount"] == 8
    assert [c["tier"] for c in spine["children"]] == [2, 2]
    # The same seed gives the same names as the simulation's discovery.
    sim = json.loads(run_cli("simulate", example, "--output", "json").stdout)
    simulated = {o["metadata"]["name"] for o in sim["created"] if o["kind"] == "HyperNode"}
    assert {r["name"] for r in doc["roots"]} <= simulated
