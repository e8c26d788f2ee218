"""The domain search's candidate list: recorded only on request, and it never changes a decision."""

from __future__ import annotations

from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import run_session

from .builders import hypernode, job_pods, node, partition_policy, pod, podgroup


def two_spines() -> tuple[list[dict[str, object]], list[object]]:
    """Two spines of two leaves of two 4-cpu nodes."""
    nodes = [node(f"n{i}", cpu=4) for i in range(8)]
    hns = [hypernode(f"leaf{i}", 1, nodes=[f"n{2 * i}", f"n{2 * i + 1}"]) for i in range(4)]
    hns += [
        hypernode("spine0", 2, children=["leaf0", "leaf1"]),
        hypernode("spine1", 2, children=["leaf2", "leaf3"]),
    ]
    return nodes, hns


def test_recording_candidates_changes_no_decision_and_is_off_by_default() -> None:
    nodes, hns = two_spines()
    pods = [pod("busy", None, cpu=3, node_name="n0"), pod("busy2", None, cpu=1, node_name="n5")]
    pgs = []
    for j, (n, cpu, tier) in enumerate([(3, 2, 2), (2, 1, 1), (4, 1, 1), (5, 2, 2)]):
        pods += job_pods(f"j{j}", n, cpu=cpu)
        pgs.append(podgroup(f"j{j}", n, topology={"mode": "hard", "highestTierAllowed": tier}))
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=hns, podgroups=pgs)
    plain = run_session(snap)
    recorded = run_session(snap, record_candidates=True)
    assert plain.bindings == recorded.bindings
    assert {k: o.allocated_hypernode for k, o in plain.jobs.items()} == {
        k: o.allocated_hypernode for k, o in recorded.jobs.items()
    }
    assert all(o.candidates is None for o in plain.jobs.values())
    for key, outcome in recorded.jobs.items():
        report = outcome.candidates
        assert report is not None and report.main is not None, key
        if outcome.phase == "Running":
            # The gang minimum's search chose a domain inside the job's allocated HyperNode.
            chosen = report.main.chosen
            assert chosen is not None
            tree = snap.tree
            a, c = tree.id_of(outcome.allocated_hypernode or ""), tree.id_of(chosen)
            assert (a is not None and c is not None and tree.is_ancestor(a, c)) or a == c


def test_partitions_that_fit_no_leaf_are_named_as_what_the_domain_lacks() -> None:
    # One spine of four leaves; every leaf keeps 3 cpu free (0 on one node, 3 on the other).
    nodes = [node(f"n{i}", cpu=4) for i in range(8)]
    hns = [hypernode(f"leaf{i}", 1, nodes=[f"n{2 * i}", f"n{2 * i + 1}"]) for i in range(4)]
    hns.append(hypernode("spine", 2, children=[f"leaf{i}" for i in range(4)]))
    pods = []
    for i in range(4):
        pods += [
            pod(f"b{2 * i}", None, cpu=4, node_name=f"n{2 * i}"),
            pod(f"b{2 * i + 1}", None, cpu=1, node_name=f"n{2 * i + 1}"),
        ]
    # 2 partitions of 4 pods of 1 cpu, each within one leaf: 12 cpu free in the spine is room for
    # the 8 pods, but no leaf holds 4 of them.
    pods += job_pods("parted", 8, cpu=1, partition_size=4)
    pg = podgroup(
        "parted",
        8,
        topology={"mode": "hard", "highestTierAllowed": 2},
        sub_groups=[partition_policy("t0", 4, tier=1)],
    )
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=hns, podgroups=[pg])
    result = run_session(snap, record_candidates=True)
    outcome = result.jobs["default/parted"]
    assert outcome.phase == "Pending" and not result.bindings
    report = outcome.candidates
    assert report is not None and report.main is not None
    search = report.main
    assert search.chosen is None
    assert [(t.tier, t.domains, t.feasible) for t in search.tiers] == [(1, 4, 0), (2, 1, 0)]
    leaf = search.tiers[0].candidates[0]
    assert leaf.reason is not None and leaf.reason.startswith("fits 3 of 8 pods, short 5 cpu")
    [spine] = search.tiers[1].candidates
    assert spine.reason == "holds 0 of 2 partitions of 4 pods within tier 1"
