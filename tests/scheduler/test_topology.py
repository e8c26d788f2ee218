"""The HyperNode tree: member resolution, virtual root, LCA, broken trees."""

from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperplace.api.constants import CLUSTER_TOP_HYPERNODE
from scheduler_plugin.model.hypernode_tree import HyperNodeTree

from .builders import hypernode, job_pods, node, pod, podgroup, schedule, seven_tree


def build(hns: list, n: int = 8, labels: dict | None = None) -> HyperNodeTree:
    names = [f"node{i}" for i in range(n)]
    return HyperNodeTree.build(hns, names, {nm: (labels or {}).get(nm, {}) for nm in names})


def test_virtual_root_sits_one_tier_above_the_highest_and_adopts_parentless_hypernodes() -> None:
    tree = build(seven_tree())
    root = tree.root
    assert tree.names[root] == CLUSTER_TOP_HYPERNODE
    assert tree.top_tier == 4
    assert [tree.names[c] for c in tree.children[root]] == ["s6"]
    assert tree.parents["s0"] == "s4" and tree.parents["s6"] == CLUSTER_TOP_HYPERNODE
    assert tree.parents[CLUSTER_TOP_HYPERNODE] is None
    assert len(tree.node_sets[root]) == 8
    assert tree.ready


def test_without_hypernodes_the_root_is_tier_1_and_holds_every_node() -> None:
    tree = build([])
    assert tree.top_tier == 1 and len(tree) == 1
    assert tree.node_sets[0].tolist() == list(range(8))


def test_real_node_sets_include_children_recursively_and_regex_is_unanchored() -> None:
    hns = [hypernode("leaf", 1, regex="de[0-3]"), hypernode("spine", 2, children=["leaf"], nodes=["node7"])]
    tree = build(hns)
    assert tree.node_sets[tree.index["leaf"]].tolist() == [0, 1, 2, 3]
    assert tree.node_sets[tree.index["spine"]].tolist() == [0, 1, 2, 3, 7]
    assert tree.lowest_containing([0, 3]) == tree.index["leaf"]
    assert tree.lowest_containing([0, 7]) == tree.index["spine"]
    assert tree.lowest_containing([0, 5]) == tree.root


def test_label_match_members_select_nodes_by_labels() -> None:
    from hyperplace.api import HyperNode

    hn = HyperNode.model_validate(
        {
            "metadata": {"name": "rack-a"},
            "spec": {
                "tier": 1,
                "members": [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "a"}}}}],
            },
        }
    )
    tree = build([hn], labels={"node2": {"rack": "a"}, "node5": {"rack": "a"}})
    assert tree.node_sets[0].tolist() == [2, 5]


def test_a_second_parent_makes_the_tree_not_ready_with_a_reason() -> None:
    hns = [*seven_tree(), hypernode("s7", 2, children=["s0"])]
    tree = build(hns)
    assert not tree.ready
    assert any("s0 already has a parent s4; s7 also claims it" in p for p in tree.problems)


def test_a_cycle_makes_the_tree_not_ready_with_a_reason() -> None:
    hns = [hypernode("a", 1, children=["b"], nodes=["node0"]), hypernode("b", 2, children=["a"])]
    tree = build(hns)
    assert not tree.ready
    assert any("cycle" in p for p in tree.problems)


def test_broken_tree_topology_jobs_wait_with_the_reason_and_other_jobs_still_schedule() -> None:
    hns = [*seven_tree(), hypernode("s7", 2, children=["s0"])]
    nodes = [node(f"node{i}") for i in range(8)]
    pods = job_pods("topo", 2, cpu=1) + job_pods("plain", 2, cpu=1)
    pgs = [podgroup("topo", 2, topology={"mode": "hard", "highestTierAllowed": 1}), podgroup("plain", 2)]
    result, _ = schedule(nodes, pods, hns, pgs)
    assert result.jobs["default/topo"].phase == "Pending"
    topo_expl = result.jobs["default/topo"].explanation
    assert topo_expl is not None and "HyperNode tree not ready" in topo_expl.summary
    assert "already has a parent" in result.unschedulable["default/topo-t0-0"]
    assert result.jobs["default/plain"].phase == "Running"
    assert len([k for k in result.bindings if k.startswith("default/plain")]) == 2


@st.composite
def random_trees(draw: st.DrawFn) -> tuple[list, int]:
    n = draw(st.integers(2, 16))
    leaves = draw(st.integers(1, min(n, 6)))
    hns = []
    for i in range(leaves):
        members = [f"node{j}" for j in range(n) if j % leaves == i]
        hns.append(hypernode(f"l{i}", 1, nodes=members))
    level = [f"l{i}" for i in range(leaves)]
    tier = 2
    while len(level) > 1 and draw(st.booleans()):
        k = draw(st.integers(1, len(level)))
        groups = [level[i : i + k] for i in range(0, len(level), k)]
        nxt = []
        for gi, g in enumerate(groups):
            name = f"t{tier}-{gi}"
            hns.append(hypernode(name, tier, children=g))
            nxt.append(name)
        level = nxt
        tier += 1
    return hns, n


@settings(max_examples=60, deadline=None)
@given(random_trees(), st.data())
def test_lca_matches_networkx(tree_and_n: tuple[list, int], data: st.DataObject) -> None:
    hns, n = tree_and_n
    tree = build(hns, n)
    g = nx.DiGraph()
    for i in range(len(tree)):
        p = int(tree.parent[i])
        if p >= 0:
            g.add_edge(p, i)
        g.add_node(i)
    a = data.draw(st.integers(0, len(tree) - 1))
    b = data.draw(st.integers(0, len(tree) - 1))
    assert tree.lca(a, b) == nx.lowest_common_ancestor(g, a, b)
    # Every node's lowest containing HyperNode holds it, and its parent chain does too.
    for node_id in range(n):
        h = tree.lowest_containing([node_id])
        assert all(node_id in tree.node_sets[x] for x in tree.ancestors(h))
    anc = tree.ancestor_matrix()
    for i, t in enumerate(tree.sorted_tiers):
        for node_id in range(n):
            owners = [h for h in range(len(tree)) if tree.tiers[h] == t and node_id in tree.node_sets[h]]
            assert anc[i, node_id] == (min(owners) if owners else -1)
    sums = tree.domain_sums(np.ones(n, dtype=np.int64))
    assert sums.tolist() == [len(s) for s in tree.node_sets]


def test_a_pod_on_an_unknown_node_is_not_accounted_and_does_not_break_the_snapshot() -> None:
    nodes = [node("node0")]
    result, snap = schedule(nodes, [pod("x", None, cpu=1, node_name="gone")], [], [])
    assert snap.used.sum() == 0 and result.bindings == {}
