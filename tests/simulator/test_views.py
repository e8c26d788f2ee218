"""Compact display helpers: name ranges and big-job tables."""

from __future__ import annotations

from simulator.views import compress_names, short_pod_name, subgroup_label

from .conftest import hypernode_yaml, nodes_yaml


def test_compress_names_ranges_and_limits():
    assert compress_names([]) == "-"
    assert compress_names(["node3", "node1", "node0", "node2", "x", "node7"]) == "node0..node3, node7, x"
    # Natural order, and two consecutive names are not worth a range.
    assert compress_names(["n10", "n9", "n2"]) == "n2, n9, n10"
    assert compress_names([f"a{i}" for i in range(1, 16, 2)], limit=3) == "a1, a3, a5, +5 more"
    assert compress_names([f"n{i}" for i in range(100)]) == "n0..n99"


def test_short_names():
    assert short_pod_name("network-topology-job-t0-3", "ns/network-topology-job") == "t0-3"
    assert short_pod_name("other-0", "ns/job") == "other-0"
    assert subgroup_label("ns/pg/t0-1", "ns/pg") == "t0-1"


def test_big_job_table_uses_ranges(run_cli, write):
    names = [f"n{i}" for i in range(40)]
    write("nodes.yaml", nodes_yaml(names, cpu=1))
    write("hn.yaml", hypernode_yaml("a", 1, names[:20]) + "---\n" + hypernode_yaml("b", 1, names[20:]))
    d = write(
        "job.yaml",
        """
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata: {name: big}
        spec:
          minAvailable: 30
          networkTopology: {mode: soft}
          tasks:
          - name: w
            replicas: 30
            template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
        """,
    ).parent
    res = run_cli("simulate", d)
    assert res.exit_code == 0
    lines = [ln for ln in res.stdout.splitlines() if ln.strip().startswith("w-")]
    # 30 pods over two leaves: one row per leaf, not one per pod.
    assert len(lines) == 2
    assert "w-0..w-19 (20)" in lines[0] and "20 nodes" in lines[0]
    assert "w-20..w-29 (10)" in lines[1]
