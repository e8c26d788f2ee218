"""Priority preemption, as Volcano documents it, with the topology choice Volcano lacks.

A pending high-priority gang that does not fit evicts lower-priority pods of its queue; it takes
the tier-1 domain where the eviction breaks the fewest gangs, evicts only what it needs, and
never touches non-preemptable gangs or critical pods.
"""

from __future__ import annotations

from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, racks, running_gang
from tests.scheduler.builders import schedule


def run(pgs_pods, nodes, hns, config=PREEMPT_CONF):
    pgs = [pg for pg, _ in pgs_pods]
    pods = [p for _, ps in pgs_pods for p in ps]
    return schedule(nodes, pods, hns, pgs, priority_classes=PRIORITY_CLASSES, config=config)


def victims(result):
    return sorted(e.victim for e in result.evictions)


def test_the_rack_where_the_fewest_gangs_break_is_chosen():
    # rack0 holds two 2-pod gangs, rack1 one 4-pod gang: both racks fit the 4-pod preemptor only
    # after eviction, and rack1 breaks one gang where rack0 would break two.
    nodes, hns = racks()
    res, _ = run(
        [
            running_gang("a1", ["r0n0", "r0n1"]),
            running_gang("a2", ["r0n2", "r0n3"]),
            running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"]),
            pending_gang("urgent", 4),
        ],
        nodes,
        hns,
    )
    assert victims(res) == [f"default/b1-t0-{i}" for i in range(4)]
    assert {e.preemptor for e in res.evictions} == {"default/urgent"}
    nom = res.nominations["default/urgent"]
    assert sorted(nom.pods.values()) == ["r1n0", "r1n1", "r1n2", "r1n3"]
    assert nom.domain == "rack1"
    assert "1 gang(s) broken" in nom.reason
    # Nothing is bound yet: the victims have to terminate first.
    assert not res.bindings
    assert res.jobs["default/urgent"].phase == "Pending"
    assert res.jobs["default/urgent"].conditions[-1]["reason"] == "Preempting"


def test_only_the_pods_needed_are_evicted_and_spare_pods_go_before_whole_gangs():
    # b1 runs 4 pods with minMember 2: two of them are spare. The preemptor needs two nodes,
    # which the spare pods free without breaking b1; a1 (minMember 2, 2 pods) stays whole.
    nodes, hns = racks()
    res, _ = run(
        [
            running_gang("a1", ["r0n0", "r0n1"]),
            running_gang("a2", ["r0n2", "r0n3"]),
            running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"], min_member=2),
            pending_gang("urgent", 2),
        ],
        nodes,
        hns,
    )
    assert len(res.evictions) == 2
    assert all(e.victim_job == "default/b1" for e in res.evictions)
    assert "0 gang(s) broken" in res.nominations["default/urgent"].reason


def test_a_non_preemptable_gang_is_never_touched():
    nodes, hns = racks()
    res, _ = run(
        [
            running_gang("a1", ["r0n0", "r0n1"]),
            running_gang("a2", ["r0n2", "r0n3"]),
            running_gang(
                "b1", ["r1n0", "r1n1", "r1n2", "r1n3"], annotations={"volcano.sh/preemptable": "false"}
            ),
            pending_gang("urgent", 4),
        ],
        nodes,
        hns,
    )
    assert victims(res) == sorted(
        [f"default/a1-t0-{i}" for i in range(2)] + [f"default/a2-t0-{i}" for i in range(2)]
    )
    assert res.nominations["default/urgent"].domain == "rack0"


def test_a_critical_pod_is_never_a_victim():
    # The critical classes are not defined here, so those pods have priority 0, lower than the
    # preemptor's: only conformance (the class name, and kube-system) keeps them. rack1 holds a system-node-critical gang, rack0 a kube-system pod among low ones:
    # neither rack can be freed, and the preemptor waits, saying why.
    nodes, hns = racks()
    a1 = running_gang("a1", ["r0n0", "r0n1", "r0n2"])
    kube = running_gang("dns", ["r0n3"], ns="kube-system")
    sys_gang = running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"], priority="system-node-critical")
    urgent = pending_gang("urgent", 4)
    pgs = [a1[0], kube[0], sys_gang[0], urgent[0]]
    pods = a1[1] + kube[1] + sys_gang[1] + urgent[1]
    res, _ = schedule(nodes, pods, hns, pgs, priority_classes=PRIORITY_CLASSES[:2], config=PREEMPT_CONF)
    assert res.evictions == []
    assert res.nominations == {}
    assert "preempt: the gang's 4 pods do not fit" in res.unschedulable["default/urgent-t0-0"]


def test_equal_or_higher_priority_is_never_preempted():
    nodes, hns = racks()
    res, _ = run(
        [
            running_gang("a1", ["r0n0", "r0n1", "r0n2", "r0n3"], priority="high"),
            running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"], priority="high"),
            pending_gang("urgent", 4),
        ],
        nodes,
        hns,
    )
    assert res.evictions == []


def test_a_victim_gang_is_never_left_below_its_minimum():
    # Each rack has 3 of its 4 nodes taken by a 3-pod gang with minMember 3, and one free node.
    # The preemptor needs 2 nodes of one rack: taking one pod would leave the gang at 2 < 3, so
    # the whole gang goes (3 pods), never a part of it.
    nodes, hns = racks()
    res, _ = run(
        [
            running_gang("a1", ["r0n0", "r0n1", "r0n2"], created="2026-01-01T00:00:00Z"),
            running_gang("b1", ["r1n0", "r1n1", "r1n2"], created="2026-01-02T00:00:00Z"),
            pending_gang("urgent", 2),
        ],
        nodes,
        hns,
    )
    evicted_jobs = {e.victim_job for e in res.evictions}
    assert len(evicted_jobs) == 1
    (job,) = evicted_jobs
    assert len(res.evictions) == 3
    # The younger gang (less running time lost) goes.
    assert job == "default/b1"


def test_a_gang_that_cannot_fit_even_after_preemption_evicts_nothing():
    # 5 whole-node pods inside one rack of 4 nodes: no eviction can make that fit.
    nodes, hns = racks()
    res, _ = run(
        [
            running_gang("a1", ["r0n0", "r0n1", "r0n2", "r0n3"]),
            running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"]),
            pending_gang("urgent", 5),
        ],
        nodes,
        hns,
    )
    assert res.evictions == []
    assert res.nominations == {}
    assert "do not fit in any allowed domain" in res.unschedulable["default/urgent-t0-0"]


def test_without_the_preempt_action_nothing_is_evicted():
    from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG

    nodes, hns = racks()
    res, _ = run(
        [
            running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"]),
            running_gang("a1", ["r0n0", "r0n1", "r0n2", "r0n3"]),
            pending_gang("urgent", 4),
        ],
        nodes,
        hns,
        config=DEFAULT_CONFIG,
    )
    assert res.evictions == []
    # ...but the waiting gang is told what preemption would do.
    reason = res.unschedulable["default/urgent-t0-0"]
    assert (
        "rack0 would fit it after evicting 4 lower-priority pods of queue default; preemption is not enabled"
        in reason
    )


def test_a_partitioned_gang_takes_whole_racks_for_its_partitions():
    # Three racks of 4 nodes under one spine. The preemptor has 2 partitions of 4 pods, each
    # partition hard-limited to one rack, the job to the spine. rack0 and rack1 each run one
    # 4-pod gang; rack2 runs two 2-pod gangs. Evicting rack0's and rack1's gangs breaks two
    # gangs; any plan using rack2 breaks three: the partitions land in rack0 and rack1.
    from tests.scheduler.builders import job_pods, partition_policy, podgroup

    nodes, hns = racks(n_racks=3)
    pg = podgroup(
        "urgent",
        8,
        topology={"mode": "hard", "highestTierAllowed": 2},
        sub_groups=[partition_policy("t0", 4, tier=1)],
        priority_class="high",
    )
    pods = job_pods("urgent", 8, cpu=4, partition_size=4)
    for p in pods:
        p["spec"]["priorityClassName"] = "high"
    res, _ = run(
        [
            running_gang("a", ["r0n0", "r0n1", "r0n2", "r0n3"]),
            running_gang("b", ["r1n0", "r1n1", "r1n2", "r1n3"]),
            running_gang("c1", ["r2n0", "r2n1"]),
            running_gang("c2", ["r2n2", "r2n3"]),
            (pg, pods),
        ],
        nodes,
        hns,
    )
    assert {e.victim_job for e in res.evictions} == {"default/a", "default/b"}
    nom = res.nominations["default/urgent"]
    by_partition: dict[str, set[str]] = {}
    for key, node_name in nom.pods.items():
        part = int(key.rsplit("-", 1)[1]) // 4
        by_partition.setdefault(str(part), set()).add(node_name[:2])
    # Each partition inside one rack, the two in different racks.
    assert sorted(next(iter(v)) for v in by_partition.values()) == ["r0", "r1"]
    assert all(len(v) == 1 for v in by_partition.values())


def test_on_a_cluster_without_hypernodes_the_fewest_victims_go():
    # No topology at all: the preemptor needs two free nodes; n0 runs a young one-pod gang, n1
    # and n2 the two pods of an older minMember-1 gang (one of them spare). The pair's spare pod
    # goes first (it breaks nothing); for the second node one gang must break either way, and the
    # young one loses the least running time.
    from tests.scheduler.builders import node

    nodes = [node(f"n{i}", cpu=4) for i in range(3)]
    res, _ = run(
        [
            running_gang("solo", ["n0"], created="2026-01-03T00:00:00Z"),
            running_gang("pair", ["n1", "n2"], min_member=1),
            pending_gang("urgent", 2, tier=None),
        ],
        nodes,
        [],
    )
    assert len(res.evictions) == 2
    assert {e.victim_job for e in res.evictions} == {"default/solo", "default/pair"}
    nom = res.nominations["default/urgent"]
    assert nom.domain is None and len(nom.pods) == 2


def test_a_gang_whose_pods_never_preempt_waits():
    # preemptionPolicy: Never (a PriorityClass with preemptionPolicy Never sets it on the pods):
    # high priority orders the queue, but the gang does not evict anyone.
    nodes, hns = racks()
    urgent = pending_gang("urgent", 4)
    for p in urgent[1]:
        p["spec"]["preemptionPolicy"] = "Never"
    res, _ = run(
        [
            running_gang("a1", ["r0n0", "r0n1", "r0n2", "r0n3"]),
            running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"]),
            urgent,
        ],
        nodes,
        hns,
    )
    assert res.evictions == []
    assert "preemptionPolicy Never" in res.unschedulable["default/urgent-t0-0"]
