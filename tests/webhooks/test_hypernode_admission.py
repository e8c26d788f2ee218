"""A cluster admin writes HyperNodes; admission refuses mistakes with field-named messages."""

from __future__ import annotations

import pytest

from webhooks.admission import admit
from webhooks.hypernode import validate_hypernode

from .builders import context_of, hypernode, member


def _with_members(*members):
    hn = hypernode("rack-0", 1)
    hn["spec"]["members"] = list(members)
    return hn


def test_admin_gets_field_named_error_for_lookahead_regex():
    hn = _with_members(member("Node", {"regexMatch": {"pattern": "^node-(?=gpu)"}}))
    out = admit(hn)
    assert not out.allowed
    assert out.messages == [
        "spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid: "
        "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"
    ]


def test_admin_with_backreference_regex_is_refused_with_gos_error():
    out = admit(_with_members(member("Node", {"regexMatch": {"pattern": r"(node)-\1"}})))
    assert out.messages == [
        "spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid: "
        "error parsing regexp: invalid escape sequence: `\\1`"
    ]


def test_admin_with_a_go_regex_is_admitted_unchanged():
    hn = _with_members(member("Node", {"regexMatch": {"pattern": "^node-[0-9]+$"}}))
    out = admit(hn)
    assert out.allowed and out.messages == [] and out.patch == []
    assert out.object == hn


def test_admin_who_forgets_members_gets_volcanos_message():
    out = admit(_with_members())
    assert out.messages == ["spec.members: member must have at least one member"]


def test_admin_who_gives_no_selector_gets_the_crd_cel_message():
    out = admit(_with_members(member("Node", {})))
    assert out.messages == [
        "spec.members[0].selector: Either ExactMatch or RegexMatch or LabelMatch must be specified"
    ]


def test_admin_who_gives_two_selectors_gets_the_crd_cel_message():
    out = admit(
        _with_members(member("Node", {"exactMatch": {"name": "node-0"}, "regexMatch": {"pattern": "node"}}))
    )
    assert out.messages == [
        "spec.members[0].selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
    ]


def test_admin_with_uppercase_node_name_is_told_the_dns_rule():
    out = admit(_with_members(member("Node", {"exactMatch": {"name": "Node_0"}})))
    assert len(out.messages) == 1
    assert out.messages[0].startswith(
        'spec.members[0].selector.exactMatch.name: Invalid value: "Node_0": a lowercase RFC 1123 subdomain'
    )


def test_admin_with_empty_exact_name_is_told_it_is_required():
    out = admit(_with_members(member("Node", {"exactMatch": {"name": ""}})))
    assert out.messages == ["spec.members[0].selector.exactMatch.name: member exactMatch name is required"]


def test_label_match_on_a_hypernode_member_is_refused():
    out = admit(_with_members(member("HyperNode", {"labelMatch": {"matchLabels": {"rack": "r1"}}})))
    assert out.messages == [
        "spec.members[0].selector.labelMatch: labelMatch only takes effect for members of type Node; "
        "a HyperNode member must be selected with exactMatch"
    ]


def test_regex_match_on_a_hypernode_member_is_refused():
    out = admit(_with_members(member("HyperNode", {"regexMatch": {"pattern": "^rack-"}})))
    assert out.messages == [
        "spec.members[0].selector.regexMatch: a HyperNode member must be selected with exactMatch "
        "(Volcano ignores regexMatch for HyperNode members)"
    ]


def test_hypernode_listing_itself_is_refused():
    out = admit(hypernode("spine", 2, children=("spine",)))
    assert out.messages == [
        "spec.members[0].selector.exactMatch.name: a HyperNode cannot be a member of itself"
    ]


def test_label_match_with_bad_operator_names_the_expression():
    sel = {"labelMatch": {"matchExpressions": [{"key": "rack", "operator": "Equals", "values": ["a"]}]}}
    out = admit(_with_members(member("Node", sel)))
    assert out.messages == [
        'spec.members[0].selector.labelMatch.matchExpressions[0].operator: Unsupported value: "Equals": '
        'supported values: "In", "NotIn", "Exists", "DoesNotExist"'
    ]


def test_empty_label_match_is_a_warning_because_it_selects_nothing():
    out = admit(_with_members(member("Node", {"labelMatch": {}})))
    assert out.allowed
    assert out.warnings == ["spec.members[0].selector.labelMatch: an empty label selector selects no nodes"]


def test_wrong_member_type_and_negative_tier_are_schema_errors():
    hn = _with_members(member("Switch", {"exactMatch": {"name": "n0"}}))
    hn["spec"]["tier"] = -1
    out = admit(hn)
    assert (
        'spec.members[0].type: Unsupported value: "Switch": supported values: "Node", "HyperNode"'
        in out.messages
    )
    assert any(m.startswith("spec.tier: ") for m in out.messages)


def test_tier_given_as_string_is_refused_like_the_apiserver_would():
    hn = hypernode("rack-0", 1, nodes=("n0",))
    hn["spec"]["tier"] = "1"
    out = admit(hn)
    assert not out.allowed and out.messages[0].startswith("spec.tier: ")


def test_missing_name_is_refused():
    hn = hypernode("x", 1, nodes=("n0",))
    del hn["metadata"]["name"]
    assert admit(hn).messages == ["metadata.name: Required value: name or generateName is required"]


# --------------------------------------------------------------------------- the tree


@pytest.fixture
def tree():
    """s0,s1 (tier 1) under s2 (tier 2) under s3 (tier 3)."""
    return context_of(
        hypernode("s0", 1, nodes=("n0",)),
        hypernode("s1", 1, nodes=("n1",)),
        hypernode("s2", 2, children=("s0", "s1")),
        hypernode("s3", 3, children=("s2",)),
    )


def test_admin_cannot_make_a_leaf_contain_its_own_ancestor(tree):
    out = admit(hypernode("s0", 1, nodes=("n0",), children=("s3",)), "UPDATE", ctx=tree)
    assert (
        'spec.members[1].selector.exactMatch.name: HyperNode "s3" is an ancestor of "s0"; '
        "this would create a cycle (s3 -> s2 -> s0 -> s3)"
    ) in out.messages


def test_admin_cannot_give_a_hypernode_a_second_parent(tree):
    out = admit(hypernode("s9", 2, children=("s1",)), ctx=tree)
    assert out.messages == [
        'spec.members[0].selector.exactMatch.name: HyperNode "s1" already has a parent "s2"; '
        "a HyperNode may have only one parent"
    ]


def test_moving_a_child_inside_its_own_parent_is_not_a_second_parent(tree):
    # s2 re-applied with its children reordered: the parent is still s2.
    out = admit(hypernode("s2", 2, children=("s1", "s0")), "UPDATE", ctx=tree)
    assert out.allowed, out.messages


def test_child_tier_must_be_lower_than_parent_tier(tree):
    out = admit(hypernode("s4", 1, children=("s3",)), ctx=tree)
    assert out.messages == [
        'spec.members[0].selector.exactMatch.name: member HyperNode "s3" has tier 3, '
        "which is not lower than this HyperNode's tier 1"
    ]


def test_raising_a_child_to_its_parents_tier_is_refused(tree):
    out = admit(hypernode("s0", 2, nodes=("n0",)), "UPDATE", ctx=tree)
    assert out.messages == ['spec.tier: tier 2 is not lower than the tier 2 of parent HyperNode "s2"']


def test_a_child_that_does_not_exist_yet_is_only_a_warning(tree):
    out = admit(hypernode("s4", 4, children=("s3", "future-rack")), ctx=tree)
    assert out.allowed
    assert out.warnings == [
        'spec.members[1].selector.exactMatch.name: HyperNode "future-rack" does not exist yet; '
        "it becomes a child when created"
    ]


def test_a_reused_tier_name_for_another_tier_is_a_warning():
    ctx = context_of(hypernode("s0", 1, nodes=("n0",), tier_name="leaf"))
    out = admit(hypernode("s1", 2, children=("s0",), tier_name="leaf"), ctx=ctx)
    assert out.allowed
    assert out.warnings[0].startswith('spec.tierName: tierName "leaf" already names tier 1 (HyperNode "s0")')


def test_without_a_cache_tree_rules_are_not_guessed():
    # No cache: s9 claiming s1 cannot be known to be a second parent.
    assert admit(hypernode("s9", 2, children=("s1",))).allowed


def test_webhook_alone_never_raises_on_garbage():
    for garbage in ({}, {"spec": "x"}, {"spec": {"members": "x"}}, {"spec": {"members": [1, None, "a"]}}):
        v = validate_hypernode(garbage)
        assert not v.allowed
        assert all(": " in m for m in v.messages)


def test_delete_is_not_checked():
    assert validate_hypernode({}, "DELETE").allowed
