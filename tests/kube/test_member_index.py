"""The incremental HyperNode member index always agrees with resolving from scratch."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperplace.api import HyperNode
from hyperplace.kube.members import MemberIndex, resolve_members

NODE_NAMES = [f"{rack}-{i}" for rack in ("gpu-a", "gpu-b", "cpu") for i in range(4)]
LABEL_VALUES = ["s0", "s1", "s2"]
PATTERNS = ["^gpu-a", "gpu-b-[0-1]$", "-3", "^cpu-.*", "(", "x?", "gpu-(a|b)-2"]


def hypernode(name: str, members: list[dict[str, Any]], tier: int = 1) -> HyperNode:
    return HyperNode.model_validate({"metadata": {"name": name}, "spec": {"tier": tier, "members": members}})


member = st.one_of(
    st.sampled_from([*NODE_NAMES, "ghost-node"]).map(
        lambda n: {"type": "Node", "selector": {"exactMatch": {"name": n}}}
    ),
    st.sampled_from(PATTERNS).map(lambda p: {"type": "Node", "selector": {"regexMatch": {"pattern": p}}}),
    st.sampled_from(LABEL_VALUES).map(
        lambda v: {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"switch": v}}}}
    ),
    st.sampled_from(LABEL_VALUES).map(
        lambda v: {
            "type": "Node",
            "selector": {
                "labelMatch": {"matchExpressions": [{"key": "switch", "operator": "NotIn", "values": [v]}]}
            },
        }
    ),
    st.just(
        {
            "type": "Node",
            "selector": {
                "labelMatch": {"matchExpressions": [{"key": "switch", "operator": "In", "values": []}]}
            },
        }
    ),
    st.sampled_from(["hn-0", "hn-1", "hn-2"]).map(
        lambda n: {"type": "HyperNode", "selector": {"exactMatch": {"name": n}}}
    ),
)

event = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NODE_NAMES), st.sampled_from([None, *LABEL_VALUES])),
    st.tuples(st.just("rm-node"), st.sampled_from(NODE_NAMES), st.none()),
    st.tuples(
        st.just("hn"),
        st.sampled_from(["hn-0", "hn-1", "hn-2", "hn-3"]),
        st.lists(member, min_size=1, max_size=3),
    ),
    st.tuples(st.just("rm-hn"), st.sampled_from(["hn-0", "hn-1", "hn-2", "hn-3"]), st.none()),
    st.tuples(st.just("query"), st.none(), st.none()),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(event, max_size=30))
def test_any_sequence_of_node_and_hypernode_changes_resolves_like_a_fresh_resolution(
    events: list[Any],
) -> None:
    index = MemberIndex()
    nodes: dict[str, dict[str, str]] = {}
    hns: dict[str, HyperNode] = {}
    for kind, name, arg in events:
        if kind == "node":
            nodes[name] = {"switch": arg} if arg else {}
            index.set_node(name, nodes[name])
        elif kind == "rm-node":
            nodes.pop(name, None)
            index.remove_node(name)
        elif kind == "hn":
            hns[name] = hypernode(name, arg)
            index.set_hypernode(hns[name])
        elif kind == "rm-hn":
            hns.pop(name, None)
            index.remove_hypernode(name)
        else:
            for h in hns.values():
                assert index.members(h.name) == resolve_members(h, nodes)
    for h in hns.values():
        assert index.members(h.name) == resolve_members(h, nodes), h.name
    assert index.direct_nodes("no-such-hypernode") == set()


def test_a_relabelled_node_moves_between_label_hypernodes_and_bumps_the_generation() -> None:
    leaf0 = hypernode(
        "leaf-0", [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"switch": "s0"}}}}]
    )
    leaf1 = hypernode(
        "leaf-1", [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"switch": "s1"}}}}]
    )
    index = MemberIndex.build([leaf0, leaf1], {"n0": {"switch": "s0"}, "n1": {"switch": "s1"}})
    assert index.direct_nodes("leaf-0") == {"n0"}
    gen = index.generation
    index.set_node("n0", {"switch": "s1"})
    assert index.direct_nodes("leaf-0") == set()
    assert index.direct_nodes("leaf-1") == {"n0", "n1"}
    assert index.generation > gen
    gen = index.generation
    assert not index.set_node("n0", {"switch": "s1"})  # a heartbeat: nothing moved
    assert index.generation == gen


def test_many_regex_hypernodes_resolve_in_one_pass_each_way() -> None:
    names: dict[str, dict[str, str]] = {f"rack{r:03d}-node{i}": {} for r in range(300) for i in range(8)}
    leaves = [
        hypernode(f"leaf-{r}", [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^rack{r:03d}-"}}}])
        for r in range(300)
    ]
    index = MemberIndex.build(leaves, names)
    assert index.direct_nodes("leaf-7") == {f"rack007-node{i}" for i in range(8)}
    index.set_node("rack007-node99", {})
    assert "rack007-node99" in index.direct_nodes("leaf-7")
    assert [h for h in index.hypernodes if "rack007-node99" in index.direct_nodes(h)] == ["leaf-7"]
