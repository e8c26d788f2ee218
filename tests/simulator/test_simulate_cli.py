"""``hyperplace simulate``: the JSON/YAML contract, exit codes and the cycle semantics."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from simulator.output import RESULT_KEYS

from .conftest import hypernode_yaml, nodes_yaml

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, namespace: {ns}}}
spec:
  minAvailable: {min}
  {topology}
  tasks:
  - name: t0
    replicas: {replicas}
    template:
      spec:
        containers:
        - name: c
          image: x
          resources: {{requests: {{cpu: "{cpu}"}}}}
"""


def job_yaml(name, replicas, cpu=4, ns="default", min_available=None, topology=""):
    return JOB.format(
        name=name,
        ns=ns,
        replicas=replicas,
        cpu=cpu,
        min=min_available if min_available is not None else replicas,
        topology=topology,
    )


def small_cluster(write) -> Path:
    write("c/nodes.yaml", nodes_yaml(["n0", "n1", "n2", "n3"]))
    write(
        "c/hn.yaml",
        hypernode_yaml("leaf0", 1, ["n0", "n1"])
        + "---\n"
        + hypernode_yaml("leaf1", 1, ["n2", "n3"])
        + "---\n"
        + hypernode_yaml("top", 2, ["leaf0", "leaf1"], kind="HyperNode"),
    )
    return Path(write("c/.keep", "").parent)


def simulate_json(run_cli, *args):
    res = run_cli("simulate", *args, "--output", "json")
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_json_contract_keys_and_values(run_cli, write):
    d = small_cluster(write)
    write("c/job.yaml", job_yaml("j", 2, topology="networkTopology: {mode: hard, highestTierAllowed: 1}"))
    out = simulate_json(run_cli, d)
    assert tuple(out) == RESULT_KEYS
    assert set(out["bindings"]) == {"default/j-t0-0", "default/j-t0-1"}
    # Both pods in one tier-1 HyperNode.
    nodes = set(out["bindings"].values())
    assert nodes in ({"n0", "n1"}, {"n2", "n3"})
    assert out["pods"]["default/j-t0-0"] == {"phase": "Running", "node": out["bindings"]["default/j-t0-0"]}
    assert out["evictions"] == []
    assert out["rejected"] == []
    [(pg_key, pg)] = out["podgroups"].items()
    assert pg_key.startswith("default/j-")
    assert list(pg) == ["phase", "allocatedHyperNode", "subGroups", "conditions", "reasons"]
    assert pg["reasons"] == []  # nothing waits
    assert pg["phase"] == "Running"
    assert pg["allocatedHyperNode"] in ("leaf0", "leaf1")
    created = {(o["kind"], o["metadata"]["name"]) for o in out["created"]}
    assert ("PodGroup", pg_key.split("/")[1]) in created
    assert ("Pod", "j-t0-0") in created and ("Pod", "j-t0-1") in created
    updated = {(o["kind"], o["metadata"]["name"]) for o in out["updated"]}
    # The Job was mutated (defaults) and got a status; HyperNodes got their status.
    assert ("Job", "j") in updated
    assert {("HyperNode", "leaf0"), ("HyperNode", "leaf1"), ("HyperNode", "top")} <= updated
    job = next(o for o in out["updated"] if o["kind"] == "Job")
    assert job["status"]["state"]["phase"] == "Running"
    assert job["spec"]["maxRetry"] == 3  # the mutating webhook's default


def test_same_input_same_output_and_yaml_matches_json(run_cli, write):
    d = small_cluster(write)
    write("c/job.yaml", job_yaml("j", 3))
    first = run_cli("simulate", d, "--output", "json").stdout
    assert run_cli("simulate", d, "--output", "json").stdout == first
    as_yaml = run_cli("simulate", d, "--output", "yaml")
    assert as_yaml.exit_code == 0
    assert yaml.safe_load(as_yaml.stdout) == json.loads(first)


def test_refused_objects_are_reported_not_fatal(run_cli, write):
    d = small_cluster(write)
    write(
        "c/bad-job.yaml",
        """
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata: {name: bad, namespace: team}
        spec:
          tasks:
          - name: t0
            replicas: 3
            partitionPolicy: {totalPartitions: 2, partitionSize: 2}
            template: {spec: {containers: [{name: c, image: x}]}}
        """,
    )
    out = simulate_json(run_cli, d)
    assert out["rejected"] == [
        {
            "kind": "Job",
            "namespace": "team",
            "name": "bad",
            "message": "spec.tasks[0].replicas: 'Replicas' are not equal to TotalPartitions*PartitionSize "
            "in task: t0, job: bad",
        }
    ]
    assert out["podgroups"] == {} and out["pods"] == {}


def test_pods_beyond_replicas_are_evicted(run_cli, write):
    d = small_cluster(write)
    write("c/job.yaml", job_yaml("j", 1))
    write(
        "c/stale.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata:
          name: j-t0-5
          labels: {volcano.sh/job-name: j, volcano.sh/task-spec: t0, volcano.sh/task-index: "5"}
        spec: {nodeName: n3, containers: [{name: c, image: x}]}
        """,
    )
    out = simulate_json(run_cli, d)
    assert out["evictions"] == ["default/j-t0-5"]
    assert "default/j-t0-5" not in out["pods"]
    assert out["pods"]["default/j-t0-0"]["phase"] == "Running"


def test_cycles_and_running_pods_count(run_cli, write):
    write("nodes.yaml", nodes_yaml(["n0"], cpu=4))
    # A pod already running on the only node takes all of its cpu.
    write(
        "running.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: busy}
        spec:
          nodeName: n0
          containers: [{name: c, image: x, resources: {requests: {cpu: "4"}}}]
        """,
    )
    d = Path(write("job.yaml", job_yaml("j", 1)).parent)
    out = simulate_json(run_cli, d, "--cycles", "2")
    assert out["bindings"] == {}
    pod = out["pods"]["default/j-t0-0"]
    assert pod["phase"] == "Pending" and pod["node"] is None
    assert "0/1 nodes are available: 1 Insufficient cpu." in pod["reason"]
    assert out["pods"]["default/busy"] == {"phase": "Running", "node": "n0"}
    assert next(iter(out["podgroups"].values()))["phase"] in ("Pending", "Inqueue")


def test_pods_of_other_schedulers_are_left_alone(run_cli, write):
    write("nodes.yaml", nodes_yaml(["n0"]))
    d = Path(
        write(
            "pods.yaml",
            """
            apiVersion: v1
            kind: Pod
            metadata: {name: mine}
            spec: {schedulerName: volcano, containers: [{name: c, image: x}]}
            ---
            apiVersion: v1
            kind: Pod
            metadata: {name: theirs}
            spec: {schedulerName: default-scheduler, containers: [{name: c, image: x}]}
            """,
        ).parent
    )
    out = simulate_json(run_cli, d)
    assert out["pods"]["default/theirs"] == {
        "phase": "Pending",
        "node": None,
        "reason": "schedulerName 'default-scheduler' is not 'volcano': left to that scheduler",
    }
    assert "default/theirs" not in out["bindings"]


def test_malformed_yaml_exit_2_names_file_and_line(run_cli, write):
    f = write("broken.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name: [oops\n")
    res = run_cli("simulate", f)
    assert res.exit_code == 2
    assert res.stdout == ""
    assert f"{f}:" in res.stderr and "malformed YAML" in res.stderr
    line = int(res.stderr.split(f"{f}:")[1].split(":")[0])
    assert 3 <= line <= 5


def test_duplicate_objects_exit_2_naming_both_places(run_cli, write):
    a = write("a.yaml", nodes_yaml(["n0"]))
    b = write("b.yaml", nodes_yaml(["n0"]))
    res = run_cli("simulate", a, b)
    assert res.exit_code == 2
    assert "Node n0 is defined twice" in res.stderr
    assert f"{a}:1" in res.stderr and f"{b}:1" in res.stderr


def test_usage_errors_exit_2(run_cli, tmp_path, write):
    assert run_cli("simulate").exit_code == 2
    assert run_cli("simulate", tmp_path / "missing.yaml").exit_code == 2
    f = write("n.yaml", nodes_yaml(["n0"]))
    assert run_cli("simulate", f, "--output", "xml").exit_code == 2
    assert run_cli("simulate", f, "--cycles", "0").exit_code == 2


def test_scheduler_config_from_directory_and_option(run_cli, tmp_path, write):
    write("n.yaml", nodes_yaml(["n0"]))
    write("scheduler.conf", "actions: [unclosed\n")
    res = run_cli("simulate", tmp_path)
    # The directory's scheduler.conf is used: it is malformed, so the run fails naming it.
    assert res.exit_code == 2
    assert "scheduler.conf" in res.stderr
    good = write("other/good.conf", 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    res = run_cli("simulate", tmp_path, "--scheduler-config", good, "--output", "json")
    assert res.exit_code == 0, res.stderr


def test_table_output_shows_jobs_and_tree(run_cli, write):
    d = small_cluster(write)
    write("c/job.yaml", job_yaml("j", 3, topology="networkTopology: {mode: hard, highestTierAllowed: 1}"))
    res = run_cli("simulate", d)
    assert res.exit_code == 0
    text = res.stdout
    assert "Job default/j" in text and "Pending" in text
    assert "why waiting:" in text and "tier 1" in text
    assert "Topology" in text and "leaf0" in text and "top" in text


def test_input_podgroup_is_scheduled_and_reported_updated(run_cli, write):
    d = small_cluster(write)
    pods = "---".join(
        f"""
apiVersion: v1
kind: Pod
metadata:
  name: w{i}
  namespace: ml
  annotations: {{scheduling.k8s.io/group-name: pg}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "4"}}}}}}]
"""
        for i in range(2)
    )
    write(
        "c/pg.yaml",
        """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: pg, namespace: ml}
        spec:
          minMember: 2
          networkTopology: {mode: hard, highestTierAllowed: 1}
        """,
    )
    write("c/pods.yaml", pods)
    out = simulate_json(run_cli, d)
    assert set(out["bindings"]) == {"ml/w0", "ml/w1"}
    assert out["podgroups"]["ml/pg"]["phase"] == "Running"
    updated = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in out["updated"]}
    assert updated[("PodGroup", "ml", "pg")]["status"]["phase"] == "Running"
    # Input pods that got bound are input objects the run changed.
    assert updated[("Pod", "ml", "w0")]["spec"]["nodeName"] == out["bindings"]["ml/w0"]
    assert out["created"] == []


def test_seed_changes_discovered_names_only(run_cli):
    example = Path(__file__).resolve().parents[2] / "examples" / "topograph-discovery"
    a = simulate_json(run_cli, example, "--seed", "1")
    b = simulate_json(run_cli, example, "--seed", "2")
    names_a = sorted(o["metadata"]["name"] for o in a["created"] if o["kind"] == "HyperNode")
    names_b = sorted(o["metadata"]["name"] for o in b["created"] if o["kind"] == "HyperNode")
    assert names_a != names_b
    assert [n.rsplit("-", 1)[0] for n in names_a] == [n.rsplit("-", 1)[0] for n in names_b]
    assert simulate_json(run_cli, example, "--seed", "1") == a


def _table_lines_under(table: str, heading: str) -> list[str]:
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("    ") or not line.strip():
            break
        out.append(line.strip())
    return out


def test_json_says_why_every_pending_pod_waits_exactly_as_the_table(run_cli, write):
    # 4 pods, gang minimum 2, hard within one 2-node leaf of 4-cpu nodes: 2 run, 2 wait.
    d = small_cluster(write)
    write(
        "c/job.yaml",
        job_yaml("j", 4, min_available=2, topology="networkTopology: {mode: hard, highestTierAllowed: 1}"),
    )
    out = simulate_json(run_cli, d)
    table = run_cli("simulate", d).stdout
    why = _table_lines_under(table, "why 2 pods wait:")
    assert why and any("tier 1" in line for line in why)

    pending = {k: v for k, v in out["pods"].items() if v["node"] is None}
    assert len(pending) == 2
    for pod in pending.values():
        assert pod["phase"] == "Pending"
        assert pod["reason"].split("; ") == why
    running = [v for v in out["pods"].values() if v["node"]]
    assert running and all("reason" not in v for v in running)

    [pg] = out["podgroups"].values()
    assert pg["phase"] == "Running" and pg["reasons"] == why
    # The gang minimum is placed, and the PodGroup says why the rest waits.
    conds = {c["type"]: c for c in pg["conditions"]}
    assert conds["Scheduled"]["status"] == "True"
    assert conds["PodsPending"]["status"] == "True"
    assert conds["PodsPending"]["message"] == "2 of 4 pods wait: " + "; ".join(why)


def test_scheduler_notes_are_in_the_json_and_yaml(run_cli, write):
    d = small_cluster(write)
    write("c/job.yaml", job_yaml("j", 1))
    write(
        "c/scheduler.conf",
        'actions: "enqueue, allocate, shuffle"\ntiers:\n- plugins:\n  - name: gang\n  - name: gnag\n',
    )
    out = simulate_json(run_cli, d)
    assert tuple(out)[-1] == "notes"
    assert any("action 'shuffle' not run" in n for n in out["notes"])
    assert any("plugin 'gnag' is unknown" in n for n in out["notes"])
    table = run_cli("simulate", d).stdout
    assert [
        line.removeprefix("scheduler: ") for line in table.splitlines() if line.startswith("scheduler: ")
    ] == (out["notes"])
    assert yaml.safe_load(run_cli("simulate", d, "--output", "yaml").stdout)["notes"] == out["notes"]


def test_a_configuration_volcano_refuses_is_an_error(run_cli, write):
    d = small_cluster(write)
    write("c/job.yaml", job_yaml("j", 1))
    conf = write("c/scheduler.conf", 'actions: "enqueue, allocate, teleport"\n')
    for cmd in (("simulate", d), ("simulate", d, "--output", "json"), ("explain", "default/j", d)):
        res = run_cli(*cmd)
        assert res.exit_code == 2, cmd
        assert res.stdout == ""
        assert f"{conf}: actions (line 1): unknown action 'teleport'" in res.stderr
    conf.write_text('actions: "allocate"\ntiers:\n  plugins: [{name: gang}]\n')  # a map, not a list
    res = run_cli("simulate", d)
    assert res.exit_code == 2 and "tiers (line 3): must be a list" in res.stderr


def test_queues_in_the_input_get_their_share_and_status_in_the_output(run_cli, write):
    d = small_cluster(write)
    write(
        "c/queues.yaml",
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata:\n  name: shut\nspec:\n  weight: 1\n"
        "status:\n  state: Closed\n",
    )
    write("c/job.yaml", job_yaml("j", 1))
    out = simulate_json(run_cli, d)
    assert out["queues"]["shut"]["state"] == "Closed"
    assert out["queues"]["default"]["allocated"]["cpu"] != "0"
    table = run_cli("simulate", d).stdout
    assert "Queues" in table and "shut" in table
