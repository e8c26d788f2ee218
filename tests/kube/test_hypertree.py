"""One reading of the HyperNode tree for the scheduler, the controller and the simulator."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperplace.kube.hypertree import link_hypernodes, subtree_members


def test_children_come_from_claims_and_a_spine_holds_its_leaves_nodes() -> None:
    links = link_hypernodes({"spine": ["leaf-b", "leaf-a"], "leaf-a": [], "leaf-b": []})
    assert links.problems() == []
    assert links.children["spine"] == ["leaf-b", "leaf-a"]  # member order
    assert links.parent == {"leaf-a": "spine", "leaf-b": "spine"}
    real = subtree_members(links, {"leaf-a": {1, 2}, "leaf-b": {3}})
    assert real == {"spine": {1, 2, 3}, "leaf-a": {1, 2}, "leaf-b": {3}}


def test_the_first_claimant_by_name_keeps_a_child_claimed_twice() -> None:
    links = link_hypernodes({"p2": ["leaf"], "p1": ["leaf"], "leaf": []})
    assert links.parent["leaf"] == "p1" and links.children["p2"] == []
    assert links.claimants["leaf"] == ["p1", "p2"]
    assert links.problems() == ["HyperNode leaf already has a parent p1; p2 also claims it"]


def test_a_cycle_is_reported_in_member_order_and_broken_into_a_forest() -> None:
    links = link_hypernodes({"c": ["a"], "a": ["b"], "b": ["c"], "top": []})
    assert links.cycles == [["a", "b", "c", "a"]]  # a lists b, b lists c, c lists a
    assert links.problems() == ["HyperNode cycle: a -> b -> c -> a"]
    assert "a" not in links.parent  # the link into its first name is the one removed
    assert links.cycle_of("c") == ["a", "b", "c", "a"]
    assert links.cycle_of("top") is None


def test_self_members_missing_children_and_duplicates_link_nothing() -> None:
    links = link_hypernodes({"a": ["a", "ghost", "b", "b"], "b": []})
    assert links.self_claims == ["a"] and links.missing == {"a": ["ghost"]}
    assert links.children["a"] == ["b"] and links.second_claims == []
    assert links.cycle_of("a") == ["a", "a"]


names = st.sampled_from(list("abcdefg"))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(names, st.lists(names, max_size=4), min_size=1))
def test_whatever_the_claims_the_kept_links_form_a_forest(claims: dict[str, list[str]]) -> None:
    links = link_hypernodes(claims)
    for name in claims:
        seen = set()
        cur: str | None = name
        while cur is not None:
            assert cur not in seen, f"cycle left through {cur}"
            seen.add(cur)
            cur = links.parent.get(cur)
    for parent, kids in links.children.items():
        for kid in kids:
            assert links.parent[kid] == parent
    real = subtree_members(links, {n: {n} for n in claims})
    for name in claims:
        assert name in real[name]
        for kid in links.children[name]:
            assert real[kid] <= real[name]
