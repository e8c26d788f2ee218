"""A researcher previews "one rack for an hour, then anywhere in the pod" with ``--elapsed``."""

from __future__ import annotations

import json

from .test_simulate_cli import small_cluster

RELAXED_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: wide
  namespace: default
  annotations: {"hyperplace.io/relax-topology": "1@1h"}
spec:
  minAvailable: 3
  networkTopology: {mode: hard, highestTierAllowed: 2}
  tasks:
  - name: t0
    replicas: 3
    template:
      spec:
        containers:
        - name: c
          image: x
          resources: {requests: {cpu: "4"}}
"""


def test_a_relaxed_job_waits_for_one_leaf_and_explain_says_until_when(run_cli, write):
    d = small_cluster(write)  # leaf0 = n0, n1 and leaf1 = n2, n3 (4 cpu each) under "top"
    write("c/wide.yaml", RELAXED_JOB)
    res = run_cli("explain", "default/wide", d, "--output", "json", "--cycles", "2")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["allocatedHyperNode"] is None
    assert doc["relaxation"]["tier"] == 1 and doc["relaxation"]["nextTier"] is None
    assert doc["relaxation"]["nextDeadline"].endswith("Z")
    cond = next(c for c in doc["conditions"] if c["type"] == "TopologyRelaxation")
    assert cond["reason"] == "Tier1"
    text = run_cli("explain", "default/wide", d, "--cycles", "2").stdout
    assert "topology relaxed to tier 1 until" in text


def test_after_the_deadline_the_job_spreads_over_the_spine(run_cli, write):
    d = small_cluster(write)
    write("c/wide.yaml", RELAXED_JOB)
    res = run_cli("explain", "default/wide", d, "--output", "json", "--elapsed", "2h")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["allocatedHyperNode"] == "top"
    assert doc["relaxation"]["tier"] is None


def test_a_malformed_elapsed_is_refused(run_cli, write):
    d = small_cluster(write)
    write("c/wide.yaml", RELAXED_JOB)
    res = run_cli("explain", "default/wide", d, "--elapsed", "two hours")
    assert res.exit_code == 2
    assert "--elapsed" in res.stderr


def test_explain_counts_the_ring_hops_of_a_job_spread_over_two_leaves(run_cli, write):
    from .test_simulate_cli import job_yaml

    d = small_cluster(write)
    # Three 4-cpu ranks on 2-node leaves: ranks 0,1 share a leaf, rank 2 sits in the other.
    write("c/wide.yaml", job_yaml("wide", 3, topology="networkTopology: {mode: hard, highestTierAllowed: 2}"))
    doc = json.loads(run_cli("explain", "default/wide", d, "--output", "json").stdout)
    assert doc["allocatedHyperNode"] == "top"
    assert doc["ringCrossings"] == {"job": 1, "pairs": 2, "partitions": {}}
    assert (
        "ring crossings: 1 of 2 consecutive-rank pairs change leaf"
        in run_cli("explain", "default/wide", d).stdout
    )
