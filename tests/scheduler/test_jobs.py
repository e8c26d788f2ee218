"""Jobs and SubJobs: Volcano's exact grouping rules."""

from __future__ import annotations

from hyperplace.api.constants import PARTITION_ID_KEY, TASK_SPEC_KEY
from scheduler_plugin.model.jobs import fnv32a, safe_encode, subjob_suffix

from .builders import (
    eight_nodes,
    guide_tree,
    job_pods,
    node,
    nodes_of,
    partition_policy,
    pod,
    podgroup,
    schedule,
)


def snapshot_job(pods: list, pg) -> object:  # type: ignore[no-untyped-def]
    _, snap = schedule([node("n0")], pods, [], [pg])
    return snap.jobs[pg.key]


def test_partition_pods_form_subjobs_named_after_policy_and_partition_id() -> None:
    pg = podgroup("pg", 4, sub_groups=[partition_policy("worker", 2, tier=1, min_groups=2)])
    pods = job_pods("pg", 4, task="worker", partition_size=2) + job_pods("pg", 1, task="master")
    job = snapshot_job(pods, pg)
    ids = sorted(job.subjobs)  # type: ignore[attr-defined]
    assert ids == ["default/pg", "default/pg/worker-0", "default/pg/worker-1"]
    sj = job.subjobs["default/pg/worker-1"]  # type: ignore[attr-defined]
    assert sj.gid == "default/pg/worker" and sj.min_available == 2 and sj.match_index == 1
    assert sj.topology.limit == 1
    default = job.subjobs["default/pg"]  # type: ignore[attr-defined]
    assert default.min_available == 1  # a PodGroup with sub-group policies: default SubJob needs 1
    assert [t.name for t in default.tasks] == ["pg-master-0"]
    assert job.min_subjobs == {"default/pg/worker": 2}  # type: ignore[attr-defined]


def test_default_subjob_needs_min_member_without_policies_and_copies_the_job_topology() -> None:
    pg = podgroup("pg", 3, topology={"mode": "hard", "highestTierAllowed": 2})
    job = snapshot_job(job_pods("pg", 4), pg)
    (sj,) = job.subjobs.values()  # type: ignore[attr-defined]
    assert sj.id == "default/pg" and sj.min_available == 3 and sj.topology.limit == 2


def test_first_matching_policy_wins_and_missing_key_values_fall_through() -> None:
    policies = [
        {"name": "a", "labelSelector": {"matchLabels": {TASK_SPEC_KEY: "x"}}, "matchLabelKeys": ["missing"]},
        {"name": "b", "matchLabelKeys": [PARTITION_ID_KEY, TASK_SPEC_KEY]},
        {"name": "c", "matchLabelKeys": [PARTITION_ID_KEY]},
    ]
    pg = podgroup("pg", 1, sub_groups=policies)
    pods = [pod("p-x-0", "pg", task="x", partition=3), pod("p-y-0", "pg", task="y")]
    job = snapshot_job(pods, pg)
    assert sorted(job.subjobs) == ["default/pg", "default/pg/b-3-x"]  # type: ignore[attr-defined]


def test_long_match_values_are_replaced_by_the_safe_encoded_fnv32a_hash() -> None:
    long = ["v" * 100, "w" * 40]
    suffix = subjob_suffix(long)
    assert suffix == safe_encode(str(fnv32a("-".join(long))))
    assert len(suffix) == len(str(fnv32a("-".join(long))))
    assert set(suffix) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert subjob_suffix(["1", "a"]) == "1-a"
    # FNV-1a reference value.
    assert fnv32a("a") == 0xE40C292C


def test_soft_mode_is_hard_bounded_by_the_cluster_and_subjobs_by_the_job() -> None:
    pg = podgroup(
        "pg",
        2,
        topology={"mode": "soft"},
        sub_groups=[{**partition_policy("t0", 2), "networkTopology": {"mode": "soft"}}],
    )
    _, snap = schedule([node("n0")], job_pods("pg", 2, partition_size=2), [], [pg])
    job = snap.jobs["default/pg"]
    assert (
        job.topology is not None and job.topology.mode == "hard" and job.topology.limit == snap.tree.top_tier
    )
    sj = job.subjobs["default/pg/t0-0"]
    assert sj.topology is not None and sj.topology.limit == snap.tree.top_tier


def test_pods_naming_a_missing_podgroup_are_reported_not_placed() -> None:
    result, _ = schedule([node("n0")], [pod("lost-0", "nope")], [], [])
    assert result.bindings == {}
    assert result.unschedulable == {"default/lost-0": "PodGroup default/nope not found"}


def test_pods_of_other_schedulers_are_ignored_but_their_usage_counts() -> None:
    pods = [
        pod("mine-0", "pg", cpu=3),
        pod("theirs", None, cpu=2, scheduler="default-scheduler", node_name="n0"),
    ]
    result, _snap = schedule([node("n0", cpu=4)], pods, [], [podgroup("pg", 1)])
    assert result.bindings == {}
    assert "Insufficient cpu" in result.unschedulable["default/mine-0"]
    assert "default/theirs" not in result.unschedulable


def test_terminal_pods_free_their_resources() -> None:
    pods = [pod("done", None, cpu=4, node_name="n0", phase="Succeeded"), pod("new-0", "pg", cpu=4)]
    result, _ = schedule([node("n0", cpu=4)], pods, [], [podgroup("pg", 1)])
    assert result.bindings == {"default/new-0": "n0"}


def test_a_pod_whose_resource_claim_is_missing_waits_for_it_in_kube_schedulers_words() -> None:
    claims = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}
    result, _ = schedule([node("n0")], [pod("p-0", "pg", extra_spec=claims)], [], [podgroup("pg", 1)])
    assert result.bindings == {}
    assert result.unschedulable["default/p-0"].endswith(
        '0/1 nodes are available: resourceclaim.resource.k8s.io "gpu-claim" not found.'
    )


def test_partition_shortfall_is_explained_in_partitions() -> None:
    from .builders import eight_nodes, seven_tree

    # One partition of two full-node pods within tier 1; every leaf has one free node left.
    pods = job_pods("j", 2, cpu=4, partition_size=2)
    pg = podgroup(
        "j",
        2,
        topology={"mode": "hard", "highestTierAllowed": 2},
        sub_groups=[partition_policy("t0", 2, tier=1)],
    )
    busy = [pod(f"x{i}", None, cpu=4, node_name=f"node{i}") for i in (1, 3, 5, 7)]
    result, _ = schedule(eight_nodes(), [*busy, *pods], seven_tree(), [pg])
    assert result.bindings == {}
    lines = result.jobs["default/j"].explanation.lines()  # type: ignore[union-attr]
    assert "tier 1: best s0 fits 1 of 2 pods, short 4 cpu on 1 node" in lines
    assert (
        "tier 2: best s4 fits 0 of 1 partitions, partitions of 2 pods must each fit in one tier-<=1 domain"
        in lines
    )


def test_a_pod_without_a_podgroup_is_scheduled_as_its_own_one_pod_gang() -> None:
    result, _ = schedule([node("n0", cpu=2)], [pod("solo", None, cpu=1), pod("big", None, cpu=4)], [], [])
    assert result.bindings == {"default/solo": "n0"}
    assert "Insufficient cpu" in result.unschedulable["default/big"]
    assert result.jobs == {}  # Volcano's shadow PodGroups are not reported as jobs


def test_task_minimums_above_the_job_minimum_are_not_enforced_as_in_volcano() -> None:
    # User guide §3.3.1 after admission: minAvailable 4, task minAvailable defaulted to replicas 8.
    # Volcano's CheckTaskValid/CheckTaskReady skip per-task minimums when minMember < their sum,
    # so the 4 pods that fit one tier-1 HyperNode start.
    pg = podgroup("j", 4, topology={"mode": "hard", "highestTierAllowed": 1}, min_task_member={"t0": 8})
    result, _ = schedule(eight_nodes(), job_pods("j", 8, cpu=4), guide_tree(), [pg])
    bound = nodes_of(result, "default/j-")
    assert len(bound) == 4
    assert set(bound.values()) in ({f"node{i}" for i in range(4)}, {f"node{i}" for i in range(4, 8)})


def test_task_minimums_are_enforced_when_the_job_minimum_covers_them() -> None:
    # minMember 3 = master 1 + workers 2: every task must reach its own minimum. The master asks
    # for more cpu than any node has, so nothing of the gang starts even though 3 workers fit.
    pg = podgroup("mw", 3, min_task_member={"master": 1, "worker": 2})
    pods = [pod("mw-master-0", "mw", cpu=64, task="master", index=0), *job_pods("mw", 3, task="worker")]
    result, _ = schedule(eight_nodes(), pods, [], [pg])
    assert nodes_of(result, "default/mw-") == {}
