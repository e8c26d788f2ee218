"""`hyperplace simulate` on workloads other than Volcano Jobs: an indexed batch Job and a
StatefulSet get the pods Kubernetes' controllers make and the PodGroup Volcano's podgroup
controller makes, and are placed whole, inside their tier, in index order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from simulator.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# The indexed-job example without its Job: two racks, one node of rack 0 taken.
CLUSTER = (EXAMPLES / "indexed-job" / "00-cluster.yaml", EXAMPLES / "indexed-job" / "05-running.yaml")


def simulate(*paths: Path) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["simulate", *map(str, paths), "--output", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def bound(out: dict[str, Any], namespace: str) -> dict[str, str | None]:
    return {k.split("/", 1)[1]: v["node"] for k, v in out["pods"].items() if k.startswith(f"{namespace}/")}


def test_an_indexed_job_starts_whole_in_the_one_rack_with_room_in_rank_order() -> None:
    out = simulate(EXAMPLES / "indexed-job")
    pods = {name: node for name, node in bound(out, "ml").items() if name.startswith("allreduce-")}
    assert len(pods) == 4
    by_rank = {int(name.split("-")[1]): node for name, node in pods.items()}
    # Rack 0 has one node taken, so the gang of 4 goes to rack 1, rank i on node i.
    assert by_rank == {i: f"ij-r1-n{i}" for i in range(4)}
    [(pg_key, pg)] = out["podgroups"].items()
    assert pg_key.startswith("ml/podgroup-") and pg["allocatedHyperNode"] == "ij-rack1"


def test_a_statefulset_starts_whole_inside_one_rack_in_ordinal_order() -> None:
    out = simulate(EXAMPLES / "statefulset")
    pods = bound(out, "serving")
    assert set(pods) == {"shard-0", "shard-1", "shard-2"}
    racks = {str(node).split("-")[1] for node in pods.values()}
    assert len(racks) == 1
    assert [pods[f"shard-{i}"] for i in range(3)] == sorted(pods.values())


def test_a_gang_bigger_than_a_rack_waits_instead_of_starting_a_pod_at_a_time(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "indexed-job" / "10-job.yaml").read_text()))
    job = next(d for d in docs if d)
    job["spec"]["parallelism"] = job["spec"]["completions"] = 5
    job["metadata"]["annotations"]["scheduling.volcano.sh/group-min-member"] = "5"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    out = simulate(*CLUSTER, tmp_path / "job.yaml")
    pods = {n: node for n, node in bound(out, "ml").items() if n.startswith("allreduce-")}
    assert len(pods) == 5 and all(node is None for node in pods.values())


def test_a_bad_min_member_is_reported_and_the_pods_placed_as_volcano_would(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "indexed-job" / "10-job.yaml").read_text()))
    job = next(d for d in docs if d)
    job["metadata"]["annotations"]["scheduling.volcano.sh/group-min-member"] = "four"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    res = CliRunner().invoke(
        app,
        ["simulate", *map(str, CLUSTER), str(tmp_path / "job.yaml")],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.stderr
    assert "scheduling.volcano.sh/group-min-member='four' is not a number; minMember stays 1" in (
        res.stdout + res.stderr
    )
    out = simulate(*CLUSTER, tmp_path / "job.yaml")
    [pg] = out["podgroups"].values()
    assert any(c["type"] == "InvalidAnnotation" for c in pg["conditions"])
    # minMember 1 (Volcano's fallback): the pods start one by one where one fits, the first three
    # in rack 0, and the fourth finds no room left in that rack: no gang, as the condition warns.
    nodes = [node for n, node in bound(out, "ml").items() if n.startswith("allreduce-")]
    assert sorted(str(n)[:5] for n in nodes if n) == ["ij-r0"] * 3 and nodes.count(None) == 1


def test_a_jobset_is_one_gang_in_one_rack_in_global_rank_order() -> None:
    out = simulate(EXAMPLES / "jobset")
    pods = bound(out, "training")
    assert len(pods) == 4 and all(pods.values())
    assert len({str(n).split("-")[1] for n in pods.values()}) == 1  # one rack
    # pretrain-workers-<job>-<completion index>-<suffix>: ranks follow (job, index).
    ranked = sorted(pods, key=lambda n: (int(n.split("-")[2]), int(n.split("-")[3])))
    assert [pods[n] for n in ranked] == sorted(str(v) for v in pods.values())
    [key] = out["podgroups"]
    assert key.startswith("training/podgroup-")


def test_leaderworkerset_groups_each_take_a_rack_of_their_own(tmp_path: Path) -> None:
    out = simulate(EXAMPLES / "leaderworkerset")
    racks = {
        g: {out["pods"][f"inference/llm-{g}{w}"]["node"].split("-")[1] for w in ("", "-1", "-2")}
        for g in (0, 1)
    }
    assert all(len(r) == 1 for r in racks.values())
    assert racks[0] != racks[1]  # exclusive: one group per rack although one rack holds both
    # The same LWS with only a tier limit: both groups share a rack (bin packing).
    for f in (EXAMPLES / "leaderworkerset").glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    lws_file = tmp_path / "20-leaderworkerset.yaml"
    doc = next(d for d in yaml.safe_load_all(lws_file.read_text()) if d)
    doc["metadata"]["annotations"] = {
        "volcano.sh/network-topology-mode": "hard",
        "volcano.sh/network-topology-highest-tier": "1",
    }
    lws_file.write_text(yaml.safe_dump(doc))
    shared = simulate(tmp_path)
    racks = {
        shared["pods"][f"inference/llm-{g}{w}"]["node"].split("-")[1]
        for g in (0, 1)
        for w in ("", "-1", "-2")
    }
    assert len(racks) == 1


def test_a_pytorchjob_keeps_the_operators_gang_and_gets_its_rack() -> None:
    # As live (tests/integration/test_workload_controllers.py): the workers carry the operator's
    # init container, so they are another shape than the master and are placed first.
    out = simulate(EXAMPLES / "pytorchjob")
    pods = bound(out, "research")
    assert set(pods) == {"bert-master-0", "bert-worker-0", "bert-worker-1", "bert-worker-2"}
    assert len({str(n).split("-")[1] for n in pods.values()}) == 1
    workers = [pods[f"bert-worker-{i}"] for i in range(3)]
    assert workers == sorted(str(w) for w in workers)  # workers in replica-index order
    assert list(out["podgroups"]) == ["research/bert"]
    assert out["podgroups"]["research/bert"]["allocatedHyperNode"].startswith("pt-rack")
