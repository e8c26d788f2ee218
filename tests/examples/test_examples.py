"""Every example runs, and the user-guide examples give the guide's placements."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def simulate(*args: str) -> dict:
    res = CliRunner().invoke(app, ["simulate", *args, "--output", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def pods_of(out: dict, namespace: str, job: str) -> dict[int, str | None]:
    """pod index -> node for the pods of one Volcano Job."""
    prefix = f"{namespace}/{job}-"
    found = {}
    for key, pod in out["pods"].items():
        if key.startswith(prefix):
            found[int(key.rsplit("-", 1)[1])] = pod["node"]
    return dict(sorted(found.items()))


def podgroup_of(out: dict, namespace: str, job: str) -> dict:
    [pg] = [v for k, v in out["podgroups"].items() if k.startswith(f"{namespace}/{job}-")]
    return pg


def test_every_example_has_a_readme_and_runs():
    assert set(ALL) >= {
        "user-guide-3.3",
        "binpack-2.5",
        "usecase1-large-job",
        "usecase2-hccs-partitions",
        "topograph-discovery",
        "volcano-e2e",
    }
    for name in ALL:
        readme = (EXAMPLES / name / "README.md").read_text().strip()
        assert readme and "\n" not in readme, f"{name}: one-line README"
        assert f"examples/{name}" in readme


@pytest.mark.parametrize("name", ALL)
def test_example_simulates_without_refusals(name: str):
    out = simulate(str(EXAMPLES / name))
    assert out["rejected"] == []
    assert out["bindings"], f"{name}: nothing was scheduled"


def _halves(prefix: str) -> tuple[set[str], set[str]]:
    return {f"{prefix}-node{i}" for i in range(4)}, {f"{prefix}-node{i}" for i in range(4, 8)}


def test_user_guide_3_3_placements():
    out = simulate(str(EXAMPLES / "user-guide-3.3"))

    # 3.3.1: hard tier 1, 8 pods of a full node each, minAvailable 4: four pods run on the
    # four nodes of one tier-1 HyperNode, the other four stay Pending.
    job1 = pods_of(out, "section-3-3-1", "network-topology-job-t0")
    assert len(job1) == 8
    running = {i: n for i, n in job1.items() if n is not None}
    assert len(running) == 4
    assert set(running.values()) in _halves("ug1")
    pending = [i for i, n in job1.items() if n is None]
    assert len(pending) == 4
    for i in pending:
        assert out["pods"][f"section-3-3-1/network-topology-job-t0-{i}"]["phase"] == "Pending"
    pg1 = podgroup_of(out, "section-3-3-1", "network-topology-job")
    assert pg1["allocatedHyperNode"] in ("ug1-hypernode0", "ug1-hypernode1")

    # 3.3.2: all 8 run; partition 0 (pods 0-3) in one tier-1 HyperNode, partition 1 in the other.
    job2 = pods_of(out, "section-3-3-2", "network-topology-job-t0")
    assert all(job2.values()) and len(job2) == 8
    part0 = {job2[i] for i in range(4)}
    part1 = {job2[i] for i in range(4, 8)}
    first, second = _halves("ug2")
    assert {frozenset(part0), frozenset(part1)} == {frozenset(first), frozenset(second)}
    pg2 = podgroup_of(out, "section-3-3-2", "network-topology-job")
    assert pg2["allocatedHyperNode"] == "ug2-hypernode2"
    assert sorted(pg2["subGroups"].values()) == ["ug2-hypernode0", "ug2-hypernode1"]

    # 3.3.3: no constraint; bin packing puts both pods in one tier-1 HyperNode.
    job3 = pods_of(out, "section-3-3-3", "network-topology-job-t0")
    assert len(job3) == 2 and all(job3.values())
    assert any(set(job3.values()) <= half for half in _halves("ug3"))
    assert len(set(job3.values())) == 2


def test_binpack_2_5():
    out = simulate(str(EXAMPLES / "binpack-2.5"))
    # Scenario 1: both partitions in the busier tier-1 HyperNode (pa-node0 runs another task).
    part = pods_of(out, "binpack", "partitioned-t0")
    assert set(part.values()) <= {f"pa-node{i}" for i in range(4)}
    pg = podgroup_of(out, "binpack", "partitioned")
    assert set(pg["subGroups"].values()) == {"pa-hypernode0"}
    # Scenario 2: pb-node0/2/4 are busy; the two pods go to pb-node1 and pb-node3.
    assert set(pods_of(out, "binpack", "two-pods-t0").values()) == {"pb-node1", "pb-node3"}


def test_volcano_e2e():
    out = simulate(str(EXAMPLES / "volcano-e2e"))
    leaves = [{f"node{2 * s}", f"node{2 * s + 1}"} for s in range(4)]
    pair = set(pods_of(out, "e2e", "tier1-pair-t0").values())
    assert pair in leaves
    quad = set(pods_of(out, "e2e", "tier2-quad-t0").values())
    assert quad in ({"node0", "node1", "node2", "node3"}, {"node4", "node5", "node6", "node7"})
    assert all(n is None for n in pods_of(out, "e2e", "too-wide-t0").values())
    assert all(pods_of(out, "e2e", "soft-pair-t0").values())


def test_topograph_discovery_builds_the_tree():
    res = CliRunner().invoke(app, ["simulate", str(EXAMPLES / "topograph-discovery"), "-o", "json"])
    # The job names a tier that only discovery creates: admission knows it from the ConfigMap.
    assert res.exit_code == 0 and res.stderr == ""
    out = json.loads(res.stdout)
    discovered = [o for o in out["created"] if o["kind"] == "HyperNode"]
    tiers = sorted(o["spec"]["tier"] for o in discovered)
    assert tiers == [1] * 8 + [2] * 4 + [3] * 2
    assert all(o["metadata"]["labels"]["volcano.sh/network-topology-source"] == "label" for o in discovered)
    # The job asked for one block (tier 2 by name): all its nodes share the block label.
    nodes = set(pods_of(out, "default", "nccl-allreduce-worker").values())
    assert len(nodes) == 4 and None not in nodes
    assert len({n[:-2] for n in nodes}) == 1  # dgx-<spine><block><acc><n>: same spine and block


def test_usecase1_large_job():
    out = simulate(str(EXAMPLES / "usecase1-large-job"))
    pretrain = pods_of(out, "training", "llm-pretrain-worker")
    assert len(pretrain) == 32 and all(pretrain.values())
    # Preferred one tier-1 zone, and zone 0 (partly busy) could not hold it.
    zones = {n.split("-n")[0] for n in pretrain.values()}
    assert len(zones) == 1 and zones != {"gpu-l0"}
    finetune = pods_of(out, "training", "llm-finetune-worker")
    assert len(finetune) == 48 and all(finetune.values())
    assert podgroup_of(out, "training", "llm-finetune")["allocatedHyperNode"] in ("gpu-t2-0", "gpu-t2-1")


def test_usecase2_partitions_each_in_one_hccs_zone():
    out = simulate(str(EXAMPLES / "usecase2-hccs-partitions"))
    pods = pods_of(out, "training", "llm-tp-worker")
    assert len(pods) == 24 and all(pods.values())
    for p in range(6):
        zone = {pods[i].rsplit("-n", 1)[0] for i in range(4 * p, 4 * p + 4)}
        assert len(zone) == 1, f"partition {p} spans {zone}"
    pg = podgroup_of(out, "training", "llm-tp")
    assert len(pg["subGroups"]) == 6 and all(v.startswith("hccs-") for v in pg["subGroups"].values())


def test_gen_large_output_simulates(tmp_path: Path):
    subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "gen_large.py"),
            "--nodes",
            "128",
            "--per-leaf",
            "16",
            "--jobs",
            "4",
            "--out",
            str(tmp_path),
        ],
        check=True,
    )
    out = simulate(str(tmp_path))
    assert out["rejected"] == []
    assert len(out["podgroups"]) == 4
    assert sum(1 for p in out["pods"].values() if p["node"]) >= 8 + 16


def test_ufm_discovery_example_builds_the_fabric_from_a_saved_answer(tmp_path: Path, monkeypatch):
    # Run from elsewhere: the ConfigMap's relative file:// endpoint is resolved next to it.
    monkeypatch.chdir(tmp_path)
    out = simulate(str(EXAMPLES / "ufm-discovery"))
    created = {c["metadata"]["name"]: c for c in out["created"] if c["kind"] == "HyperNode"}
    assert sorted(created) == ["leaf-hn-0", "leaf-hn-1", "spine-hn"]
    assert created["spine-hn"]["status"]["nodeCount"] == 8
    nodes = set(pods_of(out, "default", "ib-allreduce").values())
    assert nodes in ({f"gpu-0{i}" for i in range(4)}, {f"gpu-0{i}" for i in range(4, 8)})
    assert podgroup_of(out, "default", "ib-allreduce")["allocatedHyperNode"] in ("leaf-hn-0", "leaf-hn-1")


def test_tree_previews_ufm_discovery_from_the_saved_answer():
    res = CliRunner().invoke(app, ["tree", str(EXAMPLES / "ufm-discovery"), "--output", "json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ready"] is True
    [spine] = doc["roots"]
    assert (spine["name"], spine["tier"], spine["nodeCount"]) == ("spine-hn", 2, 8)
    assert [c["name"] for c in spine["children"]] == ["leaf-hn-0", "leaf-hn-1"]


# Namespaces that exist wherever hyperplace runs: Kubernetes' own and the one the manifests create.
PRESENT_NAMESPACES = {"default", "hyperplace-system"}


@pytest.mark.parametrize("name", ALL)
def test_example_applies_to_a_fresh_cluster_namespaces_first(name: str):
    """`kubectl apply -f examples/<name>/` reads the files in name order: every namespace an
    object lives in is created by the example before its first use."""
    import yaml

    declared: set[str] = set()
    for path in sorted((EXAMPLES / name).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if doc["kind"] == "Namespace":
                declared.add(doc["metadata"]["name"])
            ns = doc["metadata"].get("namespace")
            if ns is not None:
                assert ns in declared | PRESENT_NAMESPACES, (
                    f"{path.name}: {doc['kind']} {doc['metadata']['name']} uses namespace {ns} "
                    "before the example creates it"
                )


@pytest.mark.parametrize("name", ALL)
def test_the_simulator_takes_namespace_objects_without_a_word(name: str):
    res = CliRunner().invoke(
        app, ["simulate", str(EXAMPLES / name), "--output", "json"], catch_exceptions=False
    )
    assert res.exit_code == 0
    assert "Namespace" not in res.stderr


def test_two_queues_of_equal_weight_each_get_half_the_cluster():
    out = simulate(str(EXAMPLES / "two-queues"))
    running = {
        name.split("/")[1].split("-")[0]: pg["phase"]
        for name, pg in out["podgroups"].items()
        if name.startswith("teams/")
    }
    assert running == {
        "a0": "Running",
        "a1": "Running",
        "a2": "Inqueue",
        "a3": "Inqueue",
        "b0": "Running",
        "b1": "Running",
    }
    queues = out["queues"]
    assert queues["team-a"]["deserved"]["cpu"] == queues["team-b"]["deserved"]["cpu"] == "16"
    assert queues["team-a"]["allocated"]["cpu"] == queues["team-b"]["allocated"]["cpu"] == "16"
    assert (queues["team-a"]["running"], queues["team-a"]["inqueue"]) == (2, 2)


def test_dataset_volume_claim_gets_the_smallest_cache_that_holds_it_and_the_gang_its_rack():
    from simulator.engine import simulate as run
    from simulator.loader import load_paths

    res = run(load_paths([EXAMPLES / "dataset-volume"]))
    assert not [w for w in res.warnings if "not simulated" in w]
    # rack0's cache is too small; of rack1's two, the smaller that holds 300Gi is chosen.
    claim = res.objects[("PersistentVolumeClaim", "datasets", "imagenet")]
    assert claim["spec"]["volumeName"] == "imagenet-cache-rack1"
    assert claim["status"]["phase"] == "Bound"
    volume = res.objects[("PersistentVolume", "", "imagenet-cache-rack1")]
    assert volume["spec"]["claimRef"]["name"] == "imagenet"
    assert (
        res.objects[("PersistentVolume", "", "imagenet-cache-rack1-large")]["status"]["phase"] == "Available"
    )
    workers = {k: n for k, n in res.bindings.items() if k.startswith("datasets/resnet-worker-")}
    assert len(workers) == 4 and {n.split("-")[1] for n in workers.values()} == {"r1"}
