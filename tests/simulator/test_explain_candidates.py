"""``explain`` shows the scheduler's own domain search: candidates per tier, scores, what each lacked."""

from __future__ import annotations

import json

from .test_simulate_cli import job_yaml, small_cluster

RUNNING_ON_N0 = """
apiVersion: v1
kind: Pod
metadata: {name: busy}
spec: {nodeName: n0, containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]}
"""


def test_a_job_too_big_for_any_leaf_goes_to_the_spine_and_explain_says_what_each_leaf_lacked(run_cli, write):
    d = small_cluster(write)  # leaf0 = n0, n1 and leaf1 = n2, n3 (4 cpu each) under "top"
    write("c/busy.yaml", RUNNING_ON_N0)
    write("c/wide.yaml", job_yaml("wide", 3, topology="networkTopology: {mode: hard, highestTierAllowed: 2}"))
    res = run_cli("explain", "default/wide", d, "--output", "json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["allocatedHyperNode"] == "top" and doc["chosen"] == "top"
    cands = doc["candidates"]
    # Tiers in gradient order: both leaves were tried first and failed the counts.
    assert [(c["hyperNode"], c["tier"], c["feasible"]) for c in cands] == [
        ("leaf1", 1, False),  # fits more pods than leaf0: listed first
        ("leaf0", 1, False),
        ("top", 2, True),
    ]
    leaf1, leaf0, top = cands
    assert leaf1["reason"].startswith("fits 2 of 3 pods") and "cpu" in leaf1["reason"]
    assert leaf0["reason"].startswith("fits 1 of 3 pods") and "short 6 cpu" in leaf0["reason"]
    assert leaf0["score"] is None and leaf1["score"] is None
    assert top["score"] is None  # the only feasible domain: nothing to rank, so not scored
    assert top["reason"] is None
    assert doc["candidateTiers"] == [
        {"tier": 1, "domains": 2, "feasible": 0, "omitted": 0},
        {"tier": 2, "domains": 1, "feasible": 1, "omitted": 0},
    ]
    assert [s["unit"] for s in doc["searches"]] == ["gang minimum (3 pods)"]
    # The table shows the same search.
    text = run_cli("explain", "default/wide", d).stdout
    assert "Domain search for the gang minimum (3 pods)" in text
    assert "tier 1: 2 domains, 0 pass the fit counts" in text
    assert "fits 1 of 3 pods" in text and "chosen" in text


def test_candidates_are_listed_in_the_schedulers_order_best_score_first(run_cli, write):
    d = small_cluster(write)
    write("c/busy.yaml", RUNNING_ON_N0)
    write(
        "c/one.yaml",
        job_yaml("one", 1, cpu=1, topology="networkTopology: {mode: hard, highestTierAllowed: 1}"),
    )
    doc = json.loads(run_cli("explain", "default/one", d, "--output", "json").stdout)
    cands = doc["candidates"]
    assert [c["feasible"] for c in cands] == [True, True]
    # Bin packing prefers the fuller leaf: leaf0 (2 cpu already used) scores higher and won.
    assert cands[0]["hyperNode"] == "leaf0" == doc["chosen"] == doc["allocatedHyperNode"]
    assert cands[0]["score"] > cands[1]["score"]
    assert cands[1]["reason"] == "ranked after leaf0"


def test_a_job_without_hard_topology_says_there_was_no_domain_search(run_cli, write):
    d = small_cluster(write)
    write("c/flat.yaml", job_yaml("flat", 2))
    doc = json.loads(run_cli("explain", "default/flat", d, "--output", "json").stdout)
    assert doc["candidates"] == [] and doc["chosen"] is None
    [search] = doc["searches"]
    assert "no domain search" in search["note"]
