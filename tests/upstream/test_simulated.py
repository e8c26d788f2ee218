"""Kubernetes' own PodGroups placed by the scheduler, through the simulator (the incremental
state is checked against a full rebuild every cycle: HYPERPLACE_VERIFY_STATE in the tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from simulator.cli import app

RACK = "topology.kubernetes.io/rack"


def node(name: str, rack: str | None, cpu: int = 4) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if rack is not None:
        labels[RACK] = rack
    alloc = {"cpu": str(cpu), "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def racks(n_racks: int = 2, per_rack: int = 4) -> list[dict[str, Any]]:
    return [node(f"r{r}-n{i}", f"rack-{r}") for r in range(n_racks) for i in range(per_rack)]


def podgroup(name: str, policy: dict[str, Any], key: str | None = RACK, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": policy, **extra}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "train"},
        "spec": spec,
    }


def gang(name: str, min_count: int, **extra: Any) -> dict[str, Any]:
    return podgroup(name, {"gang": {"minCount": min_count}}, **extra)


def pods(group: str, n: int, cpu: int = 4) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{group}-{i}", "namespace": "train"},
            "spec": {
                "schedulerName": "volcano",
                "schedulingGroup": {"podGroupName": group},
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}],
            },
        }
        for i in range(n)
    ]


def simulate(tmp_path: Path, objs: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    f = tmp_path / "in.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    res = CliRunner().invoke(app, ["simulate", str(f), "--output", "json", *extra], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def nodes_of(out: dict[str, Any], group: str) -> list[str | None]:
    return [p["node"] for k, p in sorted(out["pods"].items()) if k.startswith(f"train/{group}-")]


def condition(out: dict[str, Any], group: str) -> dict[str, Any]:
    [c] = [
        c
        for c in out["podgroups"][f"train/{group}"]["conditions"]
        if c["type"] == "PodGroupInitiallyScheduled"
    ]
    return c


def test_a_gang_no_rack_can_hold_waits_explained_instead_of_spanning_two_racks(tmp_path: Path):
    # The story: minCount 5 of whole 4-CPU nodes, racks of 4 nodes. kube-scheduler's
    # TopologyPlacementGenerator keeps it in one rack; so do we: nothing is bound.
    out = simulate(tmp_path, [*racks(), gang("big", 5), *pods("big", 5)])
    assert nodes_of(out, "big") == [None] * 5
    assert out["bindings"] == {}
    c = condition(out, "big")
    assert (c["status"], c["reason"]) == ("False", "Unschedulable")
    assert "cannot place 5 pods" in c["message"] and f"{RACK}=rack-" in c["message"]
    reason = out["pods"]["train/big-0"]["reason"]
    assert "fits 4 of 5 pods" in reason


def test_a_gang_one_rack_holds_is_bound_whole_in_that_rack(tmp_path: Path):
    # One pod already runs in rack-0: the gang of 4 goes whole to rack-1, never split.
    busy = {**pods("other", 1)[0], "metadata": {"name": "busy", "namespace": "train"}}
    busy["spec"] = {**busy["spec"], "nodeName": "r0-n0"}
    del busy["spec"]["schedulingGroup"]
    out = simulate(tmp_path, [*racks(), busy, gang("fits", 4), *pods("fits", 4)])
    placed = nodes_of(out, "fits")
    assert None not in placed
    assert {n.split("-")[0] for n in placed if n} == {"r1"}
    c = condition(out, "fits")
    assert (c["status"], c["reason"]) == ("True", "Scheduled")
    assert out["podgroups"]["train/fits"]["allocatedHyperNode"] == f"{RACK}=rack-1"


def test_pods_whose_podgroup_does_not_exist_wait_for_it(tmp_path: Path):
    out = simulate(tmp_path, [*racks(), *pods("missing", 2)])
    assert nodes_of(out, "missing") == [None, None]
    assert out["pods"]["train/missing-0"]["reason"] == "PodGroup train/missing not found"


def test_a_basic_podgroup_places_its_pods_one_by_one_across_racks(tmp_path: Path):
    # basic: no gang; without a topology key, pods go wherever they fit, even partly.
    out = simulate(tmp_path, [*racks(1, 2), podgroup("b", {"basic": {}}, key=None), *pods("b", 3)])
    assert sorted(n for n in nodes_of(out, "b") if n) == ["r0-n0", "r0-n1"]
    assert nodes_of(out, "b").count(None) == 1


def test_nodes_without_the_key_are_in_no_domain(tmp_path: Path):
    # Four unlabelled nodes could hold the gang, but kube-scheduler leaves them out of every
    # placement: the gang goes to the one labelled rack that holds it.
    cluster = [node(f"u{i}", None) for i in range(4)] + [node(f"r0-n{i}", "rack-0") for i in range(3)]
    cluster += [node("r1-n0", "rack-1")]
    out = simulate(tmp_path, [*cluster, gang("g", 3), *pods("g", 3)])
    assert sorted(n for n in nodes_of(out, "g") if n) == ["r0-n0", "r0-n1", "r0-n2"]


def test_the_key_lines_up_with_a_hypernode_tier_whose_domains_match(tmp_path: Path):
    # HyperNodes exist: tier 1 (one per rack, the key's domains) is where the gang must stay.
    hns = [
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": f"leaf{r}"},
            "spec": {
                "tier": 1,
                "members": [
                    {"type": "Node", "selector": {"exactMatch": {"name": f"r{r}-n{i}"}}} for i in range(4)
                ],
            },
        }
        for r in range(2)
    ]
    hns.append(
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": "spine"},
            "spec": {
                "tier": 2,
                "members": [
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": f"leaf{r}"}}} for r in range(2)
                ],
            },
        }
    )
    out = simulate(
        tmp_path, [*racks(), *hns, gang("big", 5), *pods("big", 5), gang("fits", 4), *pods("fits", 4)]
    )
    assert nodes_of(out, "big") == [None] * 5
    placed = nodes_of(out, "fits")
    assert None not in placed and out["podgroups"]["train/fits"]["allocatedHyperNode"] in ("leaf0", "leaf1")
    assert len({n.split("-")[0] for n in placed if n}) == 1


def test_a_key_no_hypernode_tier_matches_makes_the_gang_wait_saying_so(tmp_path: Path):
    # One HyperNode over all eight nodes: no tier is the racks, so the gang is not placed.
    hn = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "all"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^r"}}}],
        },
    }
    out = simulate(tmp_path, [*racks(), hn, gang("g", 2), *pods("g", 2)])
    assert nodes_of(out, "g") == [None, None]
    assert "no HyperNode tier has exactly its label domains" in out["pods"]["train/g-0"]["reason"]


def test_the_groups_priority_orders_it_first(tmp_path: Path):
    # Room for one gang of 4: the one of higher priority (the group's own priority) goes first
    # although it comes later.
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 100,
    }
    objs = [
        *racks(1, 4),
        pc,
        gang("low", 4),
        *pods("low", 4),
        gang("high", 4, priorityClassName="high"),
        *pods("high", 4),
    ]
    out = simulate(tmp_path, objs)
    assert None not in nodes_of(out, "high")
    assert nodes_of(out, "low") == [None] * 4


def test_the_example_runs(tmp_path: Path):
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            str(Path(__file__).resolve().parents[2] / "examples" / "kubernetes-podgroup"),
            "--output",
            "json",
        ],
        catch_exceptions=False,
    )
    out = json.loads(res.stdout)
    assert out["rejected"] == []
    assert len({n.split("-")[1] for n in nodes_of(out, "fits") if n}) == 1
    assert nodes_of(out, "too-big") == [None] * 5
    assert not any("not simulated" in n for n in out["notes"])


def test_an_invalid_podgroup_is_refused_as_the_apiserver_would_naming_the_field(tmp_path: Path):
    bad = gang("bad", 0)
    out = simulate(tmp_path, [*racks(1, 1), bad, *pods("bad", 1)])
    [r] = out["rejected"]
    assert (r["kind"], r["name"]) == ("PodGroup", "bad")
    assert r["message"].startswith("spec.schedulingPolicy.gang.minCount")


def test_our_annotations_apply_queue_and_exclusive_topology(tmp_path: Path):
    # exclusive-topology: the gang's rack is its own; a second gang goes to the other rack
    # although both fit in one. The queue is read from volcano.sh/queue-name.
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"}}
    excl = gang("excl", 1)
    excl["metadata"]["annotations"] = {
        "hyperplace.io/exclusive-topology": "true",
        "volcano.sh/queue-name": "research",
    }
    objs = [*racks(2, 4), queue, excl, *pods("excl", 1), gang("other", 2), *pods("other", 2)]
    out = simulate(tmp_path, objs)
    [e] = nodes_of(out, "excl")
    other = nodes_of(out, "other")
    assert e is not None and None not in other
    assert {n.split("-")[0] for n in other if n} != {e.split("-")[0]}
    research = out["queues"]["research"]
    assert research["allocated"].get("cpu") in ("4", 4, "4000m")


BLOCK = "example.com/block"


def test_two_nested_keys_without_hypernodes_each_get_a_tier(tmp_path: Path) -> None:
    # docs/scheduling.md: with no HyperNodes, several keys each get a tier, finest first, when
    # each coarser key's domains are unions of the finer ones. Racks of 4 nodes, blocks of 2
    # racks: a gang of 4 keyed on the rack is bound in one rack, a gang of 8 keyed on the block
    # in one block (two whole racks), and the 2 pods of a busy rack send both elsewhere.
    objs = [
        {**n, "metadata": {**n["metadata"], "labels": {**n["metadata"]["labels"], BLOCK: f"block-{r // 2}"}}}
        for r in range(4)
        for n in [node(f"r{r}-n{i}", f"rack-{r}") for i in range(4)]
    ]
    out = simulate(
        tmp_path,
        [
            *objs,
            gang("in-rack", 4),
            *pods("in-rack", 4),
            gang("in-block", 8, key=BLOCK),
            *pods("in-block", 8),
        ],
    )
    rack = {n.split("-")[0] for n in nodes_of(out, "in-rack") if n}
    block = {int(n.split("-")[0][1:]) // 2 for n in nodes_of(out, "in-block") if n}
    assert None not in nodes_of(out, "in-rack") + nodes_of(out, "in-block")
    assert len(rack) == 1 and len(block) == 1


PREEMPT_CONF = """actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def _preemption(tmp_path: Path, batch_extra: dict[str, Any], urgent_extra: dict[str, Any]) -> dict[str, Any]:
    """Four nodes full of a low-priority Kubernetes PodGroup that runs with any one pod
    (minCount 1); a high-priority one-pod gang needs one node."""
    conf = tmp_path / "scheduler.conf"
    conf.write_text(PREEMPT_CONF)
    classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in (("low", 10), ("high", 1000))
    ]
    running = pods("batch", 4)
    for i, p in enumerate(running):
        p["spec"]["nodeName"] = f"r0-n{i}"
        p["spec"]["priorityClassName"] = "low"
    urgent = pods("urgent", 1)
    urgent[0]["spec"]["priorityClassName"] = "high"
    objs = [
        *racks(1, 4),
        *classes,
        gang("batch", 1, key=None, priorityClassName="low", **batch_extra),
        *running,
        gang("urgent", 1, key=None, priorityClassName="high", **urgent_extra),
        *urgent,
    ]
    return simulate(tmp_path, objs, "--scheduler-config", str(conf), "--cycles", "1")


def test_a_group_disrupted_one_pod_at_a_time_loses_one_pod_to_a_preemptor(tmp_path: Path) -> None:
    out = _preemption(tmp_path, {"disruptionMode": {"single": {}}}, {})
    assert len(out["evictions"]) == 1


def test_a_group_with_disruption_mode_all_is_evicted_whole_or_not_at_all(tmp_path: Path) -> None:
    out = _preemption(tmp_path, {"disruptionMode": {"all": {}}}, {})
    assert sorted(e if isinstance(e, str) else e.get("pod", e.get("victim")) for e in out["evictions"]) == [
        f"train/batch-{i}" for i in range(4)
    ]


def test_a_group_whose_preemption_policy_is_never_evicts_nobody(tmp_path: Path) -> None:
    out = _preemption(tmp_path, {}, {"preemptionPolicy": "Never"})
    assert out["evictions"] == []
