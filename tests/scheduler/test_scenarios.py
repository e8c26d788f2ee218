"""Scheduling stories: restarts, rank order, heterogeneous gangs, limits, queues, priorities."""

from __future__ import annotations

from hyperplace.api import Queue
from scheduler_plugin.config.scheduler_conf import load_scheduler_config

from .builders import (
    eight_nodes,
    hypernode,
    job_pods,
    node,
    nodes_of,
    partition_policy,
    pod,
    podgroup,
    schedule,
    seven_tree,
)

S4 = {"node0", "node1", "node2", "node3"}
S5 = {"node4", "node5", "node6", "node7"}
LEAF = {f"node{i}": f"s{i // 2}" for i in range(8)}


def test_after_a_restart_pending_pods_stay_in_the_hypernode_recovered_from_running_pods() -> None:
    # Two of four pods already run on node0/node1 (leaf s0); the job is hard tier 1.
    pods = job_pods("j", 4, cpu=2)
    pods[0]["spec"]["nodeName"], pods[0]["status"]["phase"] = "node0", "Running"
    pods[1]["spec"]["nodeName"], pods[1]["status"]["phase"] = "node1", "Running"
    result, _ = schedule(
        eight_nodes(),
        pods,
        seven_tree(),
        [podgroup("j", 2, topology={"mode": "hard", "highestTierAllowed": 1})],
    )
    assert set(nodes_of(result, "default/j-").values()) <= {"node0", "node1"}
    assert len(result.bindings) == 2
    assert result.jobs["default/j"].allocated_hypernode == "s0"


def test_after_a_restart_the_recovered_hypernode_is_widened_only_up_to_the_limit() -> None:
    pods = job_pods("j", 6, cpu=4)
    for i, n in ((0, "node0"), (1, "node2")):
        pods[i]["spec"]["nodeName"], pods[i]["status"]["phase"] = n, "Running"
    result, _ = schedule(
        eight_nodes(),
        pods,
        seven_tree(),
        [podgroup("j", 2, topology={"mode": "hard", "highestTierAllowed": 2})],
    )
    # Running pods span s0 and s1 -> recovered s4 (tier 2); the other four pods fit only two more in s4.
    assert set(result.bindings.values()) == {"node1", "node3"}
    assert result.jobs["default/j"].allocated_hypernode == "s4"
    assert len(result.unschedulable) == 2


def test_pods_beyond_the_minimum_fill_the_allowed_domain_around_the_allocated_one() -> None:
    pods = job_pods("j", 4, cpu=4)
    result, _ = schedule(
        eight_nodes(),
        pods,
        seven_tree(),
        [podgroup("j", 2, topology={"mode": "hard", "highestTierAllowed": 2})],
    )
    placed = set(result.bindings.values())
    assert len(placed) == 4 and (placed in (S4, S5))
    # The gang minimum went to one leaf; the job's allocated HyperNode widened to the tier-2 parent.
    assert result.jobs["default/j"].allocated_hypernode in ("s4", "s5")


def test_consecutive_ranks_share_nodes_and_leaves() -> None:
    pods = job_pods("j", 8, cpu=2)  # two pods per node
    result, _ = schedule(
        eight_nodes(),
        pods,
        seven_tree(),
        [podgroup("j", 8, topology={"mode": "hard", "highestTierAllowed": 2})],
    )
    where = [result.bindings[f"default/j-t0-{i}"] for i in range(8)]
    assert all(where[i] == where[i + 1] for i in range(0, 8, 2))
    leaves = [LEAF[n] for n in where]
    assert leaves[:4] == [leaves[0]] * 4 and leaves[4:] == [leaves[4]] * 4
    assert set(where) in (S4, S5)


def test_the_fewest_leaves_are_used_best_fit_for_the_remainder() -> None:
    # s0 has 1 free node, s1 has 2: a 2-pod job within s4 takes s1 alone, not s0 + s1.
    busy = [pod("b", None, cpu=4, node_name="node0")] + [
        pod(f"x{i}", None, cpu=4, node_name=f"node{i}") for i in range(4, 8)
    ]
    result, _ = schedule(
        eight_nodes(),
        [*busy, *job_pods("j", 2, cpu=4)],
        seven_tree(),
        [podgroup("j", 2, topology={"mode": "hard", "highestTierAllowed": 2})],
    )
    assert set(nodes_of(result, "default/j-").values()) == {"node2", "node3"}
    assert result.jobs["default/j"].allocated_hypernode == "s1"  # the lowest tier that fits


def test_master_and_gpu_workers_are_placed_exactly_not_by_a_representative_pod() -> None:
    nodes = [node(f"node{i}", cpu=4, gpu=8) for i in range(8)]
    master = pod("j-master-0", "j", cpu=3, task="master", index=0)
    workers = job_pods("j", 3, cpu=1, gpu=8, task="worker")
    result, _ = schedule(
        nodes,
        [master, *workers],
        seven_tree(),
        [podgroup("j", 4, topology={"mode": "hard", "highestTierAllowed": 2})],
    )
    assert len(result.bindings) == 4, result.unschedulable
    placed = set(result.bindings.values())
    assert placed <= S4 or placed <= S5
    # The master (3 cpu) shares a node with one worker (1 cpu): 4 cpu, exactly full.
    counts = {n: list(result.bindings.values()).count(n) for n in placed}
    assert sorted(counts.values()) == [1, 1, 2]


def test_partitions_and_job_limits_apply_together() -> None:
    pods = job_pods("j", 4, cpu=4, partition_size=2)
    pg = podgroup(
        "j",
        4,
        topology={"mode": "hard", "highestTierAllowed": 2},
        sub_groups=[partition_policy("t0", 2, tier=1)],
    )
    result, _ = schedule(eight_nodes(), pods, seven_tree(), [pg])
    assert len(result.bindings) == 4
    p0 = {LEAF[result.bindings[f"default/j-t0-{i}"]] for i in (0, 1)}
    p1 = {LEAF[result.bindings[f"default/j-t0-{i}"]] for i in (2, 3)}
    assert len(p0) == 1 and len(p1) == 1 and p0 != p1
    assert set(result.bindings.values()) in (S4, S5)


def test_a_partition_is_placed_whole_or_not_at_all_and_min_subgroups_decides_the_job() -> None:
    # Three partitions of 2 full-node pods, tier-1 each; only two leaves are free.
    busy = [pod(f"x{i}", None, cpu=4, node_name=f"node{i}") for i in (0, 2, 4, 6)] + [
        pod("y", None, cpu=4, node_name="node5")
    ]
    pods = job_pods("j", 6, cpu=4, partition_size=2)
    pg = podgroup("j", 4, sub_groups=[partition_policy("t0", 2, tier=1, min_groups=2)])
    result, _ = schedule(eight_nodes(), busy + pods, seven_tree(), [pg])
    assert result.bindings == {}  # only s3 is a free leaf: 1 partition < minSubGroups 2
    assert result.jobs["default/j"].phase == "Pending"

    busy = [pod(f"x{i}", None, cpu=4, node_name=f"node{i}") for i in (0, 2)]
    result, _ = schedule(eight_nodes(), busy + pods, seven_tree(), [pg])
    parts = {}
    for k, n in result.bindings.items():
        parts.setdefault(int(k.rsplit("-", 1)[1]) // 2, set()).add(LEAF[n])
    assert len(result.bindings) == 4 and all(len(v) == 1 for v in parts.values())
    assert result.jobs["default/j"].phase == "Running"


def test_soft_jobs_search_the_lowest_tier_upward_without_a_bound() -> None:
    result, _ = schedule(
        eight_nodes(), job_pods("j", 3, cpu=4), seven_tree(), [podgroup("j", 3, topology={"mode": "soft"})]
    )
    assert set(result.bindings.values()) in (
        {"node0", "node1", "node2"},
        {"node0", "node1", "node3"},
        {"node0", "node2", "node3"},
        {"node1", "node2", "node3"},
        {"node4", "node5", "node6"},
        {"node4", "node5", "node7"},
        {"node4", "node6", "node7"},
        {"node5", "node6", "node7"},
    )
    result, _ = schedule(
        eight_nodes(), job_pods("j", 6, cpu=4), seven_tree(), [podgroup("j", 6, topology={"mode": "soft"})]
    )
    assert len(result.bindings) == 6 and result.jobs["default/j"].allocated_hypernode == "s6"


def test_highest_tier_name_is_translated_and_an_unknown_name_is_placed_with_a_warning() -> None:
    hns = [
        *(
            hypernode(f"s{i}", 1, nodes=[f"node{2 * i}", f"node{2 * i + 1}"], tier_name="leaf")
            for i in range(4)
        ),
        hypernode("s4", 2, children=["s0", "s1"], tier_name="spine"),
        hypernode("s5", 2, children=["s2", "s3"], tier_name="spine"),
    ]
    ok = podgroup("ok", 2, topology={"mode": "hard", "highestTierName": "leaf"})
    bad = podgroup("bad", 2, topology={"mode": "hard", "highestTierName": "pod"})
    pods = job_pods("ok", 2, cpu=4) + job_pods("bad", 2, cpu=4)
    result, _ = schedule(eight_nodes(), pods, hns, [ok, bad])
    assert {LEAF[n] for n in nodes_of(result, "default/ok-").values()} in ({"s0"}, {"s1"}, {"s2"}, {"s3"})
    # Volcano's session skips the translation with a warning and places the job anyway
    # (allocate_test.go); we place it too and say so on the PodGroup.
    assert len(nodes_of(result, "default/bad-")) == 2
    bad_outcome = result.jobs["default/bad"]
    assert bad_outcome.phase == "Running"
    (warning,) = [c for c in bad_outcome.conditions if c["type"] == "NetworkTopologyWarning"]
    assert "unknown highestTierName 'pod'" in warning["message"]
    assert "leaf=1" in warning["message"] and "spine=2" in warning["message"]
    assert not any(c["type"] == "NetworkTopologyWarning" for c in result.jobs["default/ok"].conditions)


def test_a_job_naming_a_missing_queue_waits_and_default_always_exists() -> None:
    pods = job_pods("a", 1) + job_pods("b", 1)
    pgs = [podgroup("a", 1, queue="gpu"), podgroup("b", 1, queue="default")]
    result, _ = schedule(eight_nodes(), pods, [], pgs)
    assert "default/b-t0-0" in result.bindings
    assert result.unschedulable["default/a-t0-0"] == "queue 'gpu' not found"
    result, _ = schedule(
        eight_nodes(), pods, [], pgs, queues=[Queue.model_validate({"metadata": {"name": "gpu"}})]
    )
    assert len(result.bindings) == 2


def test_higher_priority_jobs_go_first_then_older_ones() -> None:
    pcs = [{"metadata": {"name": "high"}, "value": 1000}]
    nodes = [node("n0", cpu=4)]
    pods = job_pods("old", 1, cpu=4, created="2026-01-01T00:00:00Z") + job_pods(
        "new", 1, cpu=4, created="2026-01-02T00:00:00Z"
    )
    pgs = [
        podgroup("old", 1, created="2026-01-01T00:00:00Z"),
        podgroup("new", 1, created="2026-01-02T00:00:00Z"),
    ]
    result, _ = schedule(nodes, pods, [], pgs)
    assert result.bindings == {"default/old-t0-0": "n0"}
    pgs[1] = podgroup("new", 1, priority_class="high", created="2026-01-02T00:00:00Z")
    result, _ = schedule(nodes, pods, [], pgs, priority_classes=pcs)
    assert result.bindings == {"default/new-t0-0": "n0"}


def test_min_task_member_requires_each_role() -> None:
    nodes = [node("n0", cpu=4)]
    pods = [pod("j-ps-0", "j", cpu=2, task="ps"), *job_pods("j", 3, cpu=1, task="worker")]
    result, _ = schedule(nodes, pods, [], [podgroup("j", 2, min_task_member={"ps": 1, "worker": 1})])
    assert "default/j-ps-0" in result.bindings
    assert len(result.bindings) == 3  # ps + 2 workers fill the node; the third worker waits
    result, _ = schedule(nodes, pods[1:], [], [podgroup("j", 2, min_task_member={"ps": 1, "worker": 1})])
    expl = result.jobs["default/j"].explanation
    assert result.bindings == {} and expl is not None and "minTaskMember" in expl.summary


def test_a_gang_is_never_partly_placed() -> None:
    busy = [pod(f"x{i}", None, cpu=4, node_name=f"node{i}") for i in range(4)]
    result, _ = schedule(eight_nodes(), busy + job_pods("j", 5, cpu=4), [], [podgroup("j", 5)])
    assert result.bindings == {}
    expl = result.jobs["default/j"].explanation
    assert expl is not None
    assert "fits 4 of 5 pods" in expl.message()
    assert "0/8 nodes" not in expl.message()


def test_static_predicates_are_explained_kube_scheduler_style() -> None:
    taint = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    nodes = [node(f"n{i}", cpu=4, taints=taint) for i in range(3)] + [node("n3", cpu=1)]
    result, _ = schedule(nodes, job_pods("j", 1, cpu=2), [], [podgroup("j", 1)])
    msg = result.unschedulable["default/j-t0-0"]
    assert "0/4 nodes are available" in msg
    assert "3 node(s) had untolerated taint" in msg and "1 Insufficient cpu" in msg


def test_unknown_plugins_are_reported_not_fatal() -> None:
    conf = load_scheduler_config(
        """
actions: "allocate, backfill"
tiers:
- plugins:
  - name: gang
  - name: magic-placement
  - name: predicates
  - name: network-topology-aware
"""
    )
    result, _ = schedule(eight_nodes(), job_pods("j", 1), [], [podgroup("j", 1)], config=conf)
    assert result.bindings and any("magic-placement" in n for n in result.notes)


def test_best_effort_pods_are_backfilled() -> None:
    pods = [pod("be-0", "be", cpu=0)]
    result, _ = schedule(
        [node("n0", cpu=1)], [pod("busy", None, cpu=1, node_name="n0"), *pods], [], [podgroup("be", 1)]
    )
    assert result.bindings == {"default/be-0": "n0"}


def test_host_ports_keep_two_pods_of_a_gang_apart() -> None:
    ports = {
        "containers": [
            {
                "name": "c",
                "image": "x",
                "ports": [{"containerPort": 80, "hostPort": 8080}],
                "resources": {"requests": {"cpu": "1"}},
            }
        ]
    }
    pods = [pod(f"j-t0-{i}", "j", cpu=1, index=i, extra_spec=ports) for i in range(2)]
    result, _ = schedule([node("a", cpu=8), node("b", cpu=8)], pods, [], [podgroup("j", 2)])
    assert sorted(result.bindings.values()) == ["a", "b"]
    result, _ = schedule([node("a", cpu=8)], pods, [], [podgroup("j", 2)])
    assert result.bindings == {}


def test_a_gang_whose_pods_fit_one_by_one_but_not_together_is_not_placed() -> None:
    # Counts say each pod fits somewhere; exact placement finds they cannot share the one node.
    pods = [pod("j-a-0", "j", cpu=3, task="a"), pod("j-b-0", "j", cpu=2, task="b")]
    result, _ = schedule([node("only", cpu=4)], pods, [], [podgroup("j", 2)])
    assert result.bindings == {}
    expl = result.jobs["default/j"].explanation
    assert expl is not None
    assert expl.lines() == [
        "cannot place 2 pods",
        "pod default/j-b-0: 0/1 nodes are available: 1 Insufficient cpu.",
        "each pod fits on its own, but not together with the rest of the gang",
    ]


def test_pods_beyond_the_minimum_go_near_the_pods_already_placed() -> None:
    # Soft job, minAvailable 2 of 3 full-node pods. s3 is partly used, so its leaf scores best
    # for bin-packing, but the third pod belongs next to the first two (s0), i.e. in s1.
    busy = [pod("x", None, cpu=2, node_name="node6")]
    pg = podgroup("j", 2, topology={"mode": "soft"})
    result, _ = schedule(eight_nodes(), [*busy, *job_pods("j", 3, cpu=4)], seven_tree(), [pg])
    assert sorted(result.bindings.values()) == ["node0", "node1", "node2"]
    assert result.jobs["default/j"].allocated_hypernode == "s4"


def test_a_limit_below_every_tier_and_no_op_actions_are_explained() -> None:
    conf = load_scheduler_config(
        """
actions: "enqueue, allocate, shuffle"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: network-topology-aware
"""
    )
    pg = podgroup("j", 1, topology={"mode": "hard", "highestTierAllowed": 0})
    result, _ = schedule(eight_nodes(), job_pods("j", 1), seven_tree(), [pg], config=conf)
    expl = result.jobs["default/j"].explanation
    assert result.bindings == {} and expl is not None
    assert "no HyperNode has a tier <= 0 (tiers present: [1, 2, 3, 4])" in expl.lines()
    assert any(n.startswith("action 'shuffle' not run: ") for n in result.notes)


def test_pods_running_on_a_deleted_node_still_count_for_their_gang_and_the_absence_is_reported() -> None:
    # Two of four gang members run on "gone", whose Node object was deleted under them.
    pods = job_pods("j", 4, cpu=2)
    for p in pods[:2]:
        p["spec"]["nodeName"], p["status"]["phase"] = "gone", "Running"
    result, snap = schedule(eight_nodes(), pods, seven_tree(), [podgroup("j", 4)])
    # Volcano counts them (ReadyTaskNum looks at the pod, not the node): the other two start
    # and the gang is Running instead of waiting for four free slots.
    assert set(nodes_of(result, "default/j-")) == {"default/j-t0-2", "default/j-t0-3"}
    assert result.jobs["default/j"].phase == "Running"
    assert snap.missing_node_pods == {"default/j-t0-0": "gone", "default/j-t0-1": "gone"}
    (note,) = [n for n in result.notes if "no Node object" in n]
    assert "default/j-t0-0 on gone" in note


def test_a_deleted_node_does_not_confuse_the_recovered_hypernode_of_a_topology_job() -> None:
    pods = job_pods("j", 4, cpu=2)
    pods[0]["spec"]["nodeName"], pods[0]["status"]["phase"] = "node0", "Running"
    pods[1]["spec"]["nodeName"], pods[1]["status"]["phase"] = "gone", "Running"
    pg = podgroup("j", 4, topology={"mode": "hard", "highestTierAllowed": 1})
    result, _ = schedule(eight_nodes(), pods, seven_tree(), [pg])
    # Recovery from the pod on node0 keeps the rest in leaf s0; the pod on "gone" adds nothing.
    assert {LEAF[n] for n in nodes_of(result, "default/j-").values()} == {"s0"}
    assert result.jobs["default/j"].allocated_hypernode == "s0"
