"""The HyperNode controller reports how many real nodes sit under each HyperNode and
whether the tree around it is usable."""

from __future__ import annotations

from typing import Any

from controller.hypernode.status import TopologyIndex, compute_all, compute_status
from hyperplace.api import HyperNode

NODES: dict[str, dict[str, str]] = {
    **{f"node-{i}": {"rack": "r1" if i < 4 else "r2"} for i in range(8)},
    "gpu-a": {"accelerator": "h100"},
}


def hn(name: str, tier: int, members: list[dict[str, Any]], generation: int = 1, **status: Any) -> HyperNode:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "generation": generation},
        "spec": {"tier": tier, "members": members},
    }
    if status:
        obj["status"] = status
    return HyperNode.model_validate(obj)


def node(
    exact: str | None = None, regex: str | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    if exact is not None:
        return {"type": "Node", "selector": {"exactMatch": {"name": exact}}}
    if regex is not None:
        return {"type": "Node", "selector": {"regexMatch": {"pattern": regex}}}
    return {"type": "Node", "selector": {"labelMatch": {"matchLabels": labels}}}


def child(name: str) -> dict[str, Any]:
    return {"type": "HyperNode", "selector": {"exactMatch": {"name": name}}}


def tree(*hns: HyperNode) -> dict[str, HyperNode]:
    return {h.name: h for h in hns}


def ready(status: Any) -> Any:
    return next(c for c in status.conditions if c.type == "Ready")


def test_leaf_counts_nodes_its_regex_and_label_members_select() -> None:
    leaf = hn("leaf", 1, [node(regex="^node-[0-2]$"), node(labels={"rack": "r2"}), node(exact="node-1")])
    st = compute_status(leaf, NODES, tree(leaf), now="t0")
    assert st.node_count == 3 + 4  # node-0..2 plus node-4..7, node-1 counted once
    c = ready(st)
    assert (c.status, c.reason, c.observed_generation, c.last_transition_time) == (
        "True",
        "MembersResolved",
        1,
        "t0",
    )


def test_spine_counts_real_nodes_of_its_children_recursively_not_child_names() -> None:
    l1 = hn("leaf-1", 1, [node(labels={"rack": "r1"})])
    l2 = hn("leaf-2", 1, [node(labels={"rack": "r2"})])
    spine = hn("spine", 2, [child("leaf-1"), child("leaf-2")])
    top = hn("top", 3, [child("spine")])
    hns = tree(l1, l2, spine, top)
    assert compute_status(spine, NODES, hns, now="t").node_count == 8
    assert compute_status(top, NODES, hns, now="t").node_count == 8


def test_exact_match_of_a_missing_node_is_not_counted_but_reported() -> None:
    leaf = hn("leaf", 1, [node(exact="node-0"), node(exact="ghost")])
    st = compute_status(leaf, NODES, tree(leaf), now="t")
    assert st.node_count == 1
    assert "ghost" in (ready(st).message or "")


def test_no_matching_node_makes_the_hypernode_not_ready() -> None:
    leaf = hn("leaf", 1, [node(labels={"rack": "nowhere"})])
    c = ready(compute_status(leaf, NODES, tree(leaf), now="t"))
    assert (c.status, c.reason) == ("False", "NoMembersMatched")


def test_missing_child_is_named() -> None:
    spine = hn("spine", 2, [child("leaf-9"), node(exact="node-0")])
    c = ready(compute_status(spine, NODES, tree(spine), now="t"))
    assert (c.status, c.reason) == ("False", "MissingChild")
    assert "leaf-9" in (c.message or "")


def test_cycle_is_reported_with_its_path() -> None:
    a = hn("a", 2, [child("b")])
    b = hn("b", 1, [child("a"), node(exact="node-0")])
    c = ready(compute_status(a, NODES, tree(a, b), now="t"))
    assert (c.status, c.reason) == ("False", "Cycle")
    assert c.message == "member cycle: a -> b -> a"
    # Counting still terminates and counts each real node once.
    assert compute_status(a, NODES, tree(a, b), now="t").node_count == 1


def test_a_hypernode_claimed_by_two_parents_is_not_ready() -> None:
    leaf = hn("leaf", 1, [node(exact="node-0")])
    p1 = hn("p1", 2, [child("leaf")])
    p2 = hn("p2", 2, [child("leaf")])
    c = ready(compute_status(leaf, NODES, tree(leaf, p1, p2), now="t"))
    assert (c.status, c.reason) == ("False", "MultipleParents")
    assert "p1, p2" in (c.message or "")


def test_hypernode_members_by_regex_are_not_children() -> None:
    leaf = hn("leaf", 1, [node(exact="node-0")])
    spine = hn("spine", 2, [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "leaf"}}}])
    c = ready(compute_status(spine, NODES, tree(leaf, spine), now="t"))
    assert compute_status(spine, NODES, tree(leaf, spine), now="t").node_count == 0
    assert c.reason == "NoMembersMatched"


def test_transition_time_is_kept_until_ready_flips() -> None:
    leaf = hn("leaf", 1, [node(exact="node-0")], generation=3)
    first = compute_status(leaf, NODES, tree(leaf), now="t1")
    leaf.status = first
    again = compute_status(leaf, NODES, tree(leaf), now="t2")
    assert ready(again).last_transition_time == "t1"
    gone = compute_status(leaf, {}, tree(leaf), now="t3")
    assert (ready(gone).status, ready(gone).last_transition_time) == ("False", "t3")
    assert ready(gone).observed_generation == 3


def test_other_conditions_are_preserved() -> None:
    leaf = hn(
        "leaf",
        1,
        [node(exact="node-0")],
        conditions=[{"type": "Custom", "status": "True", "reason": "X"}],
    )
    st = compute_status(leaf, NODES, tree(leaf), now="t")
    assert [c.type for c in st.conditions or []] == ["Custom", "Ready"]


def test_a_hypernode_above_a_cycle_is_not_ready_and_counts_what_the_scheduler_links() -> None:
    a = hn("a", 2, [child("b"), node(exact="node-0")])
    b = hn("b", 1, [child("a"), node(exact="node-1")])
    top = hn("top", 3, [child("a"), node(exact="node-2")])
    statuses = compute_all(tree(a, b, top), NODES, now="t")
    assert ready(statuses["top"]).reason == "Cycle"  # top reaches the cycle
    # As the scheduler reads the tree: b took a first, so top's claim on a links nothing,
    # and the cycle is broken at the link into a (the first name on it).
    assert statuses["top"].node_count == 1
    assert (statuses["a"].node_count, statuses["b"].node_count) == (2, 1)


def test_compute_all_on_a_large_tree_matches_one_at_a_time() -> None:
    # Speed is measured in bench/, not asserted here; this pins correctness at size.
    labels = {f"n{i}": {"leaf": f"l{i // 8}"} for i in range(8000)}
    leaves = [hn(f"leaf-{j}", 1, [node(labels={"leaf": f"l{j}"})]) for j in range(1000)]
    spines = [
        hn(f"spine-{k}", 2, [child(f"leaf-{j}") for j in range(k * 50, k * 50 + 50)]) for k in range(20)
    ]
    top = hn("top", 3, [child(f"spine-{k}") for k in range(20)])
    hns = tree(*leaves, *spines, top)
    statuses = compute_all(hns, labels, now="t")
    assert statuses["top"].node_count == 8000 and statuses["spine-3"].node_count == 400
    assert all(ready(s).status == "True" for s in statuses.values())
    assert compute_status(spines[7], labels, hns, now="t").to_dict() == statuses["spine-7"].to_dict()


def test_index_is_reused_for_status_only_changes_but_not_for_spec_changes() -> None:
    leaf = hn("leaf", 1, [node(exact="node-0")])
    index = TopologyIndex(tree(leaf), NODES)
    with_status = leaf.model_copy(deep=True)
    with_status.status = compute_status(leaf, NODES, tree(leaf), now="t")
    assert compute_status(with_status, NODES, {}, now="t", index=index).node_count == 1
    grown = hn("leaf", 1, [node(exact="node-0"), node(exact="node-1")])
    assert compute_status(grown, NODES, {}, now="t", index=index).node_count == 2


def test_fast_label_selection_agrees_with_member_resolution() -> None:
    from hyperplace.kube.members import resolve_members

    selectors: list[dict[str, Any]] = [
        {"matchLabels": {"rack": "r1"}},
        {"matchLabels": {"rack": "r1", "accelerator": "h100"}},
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]},
        {"matchLabels": {"rack": "r2"}, "matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]},
        {"matchExpressions": [{"key": "rack", "operator": "In"}]},  # invalid: selects nothing
        {},
    ]
    for sel in selectors:
        h = hn("h", 1, [{"type": "Node", "selector": {"labelMatch": sel}}, node(regex="gpu")])
        expected = resolve_members(h, NODES).nodes
        assert TopologyIndex(tree(h), NODES).direct_nodes("h") == expected, sel
