"""Resolve HyperNode members to node names and child HyperNodes (Volcano's rules).

* exactMatch returns the name even if no such node exists; an empty name, nothing.
* regexMatch is an unanchored Go RE2 search over node names; a bad pattern, nothing.
* labelMatch selects nodes by labels; an empty selector (or one that fails to convert)
  selects nothing, never "all nodes".
* A HyperNode member counts as a child only with exactMatch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hyperplace.api.hypernode import HyperNode, MemberSpec

from .goregex import GoRegexError, compile_go_regex
from .labels import SelectorError, label_selector_matches, selector_is_empty


@dataclass
class ResolvedMembers:
    nodes: set[str] = field(default_factory=set)  # direct Node members
    children: list[str] = field(default_factory=list)  # exactMatch HyperNode members, in order


def resolve_member_nodes(member: MemberSpec, node_labels: Mapping[str, Mapping[str, str]]) -> set[str]:
    """Node names a member selects, ignoring its type (as Volcano's nodeCount does)."""
    sel = member.selector
    if sel.exact_match is not None:
        return {sel.exact_match.name} if sel.exact_match.name else set()
    if sel.regex_match is not None:
        try:
            rx = compile_go_regex(sel.regex_match.pattern)
        except GoRegexError:
            return set()
        return {n for n in node_labels if rx.search(n) is not None}
    if sel.label_match is not None:
        if selector_is_empty(sel.label_match):
            return set()
        try:
            return {n for n, labels in node_labels.items() if label_selector_matches(sel.label_match, labels)}
        except SelectorError:
            return set()
    return set()


def resolve_members(hn: HyperNode, node_labels: Mapping[str, Mapping[str, str]]) -> ResolvedMembers:
    """Direct node members and child HyperNode names of one HyperNode."""
    out = ResolvedMembers()
    for m in hn.spec.members:
        if m.type == "Node":
            out.nodes |= resolve_member_nodes(m, node_labels)
        elif (
            m.selector.exact_match is not None
            and m.selector.exact_match.name
            and m.selector.exact_match.name not in out.children
        ):
            out.children.append(m.selector.exact_match.name)
    return out


def node_labels_of(nodes: Iterable[Mapping[str, object]]) -> dict[str, dict[str, str]]:
    """``{name: labels}`` from Node dicts."""
    out: dict[str, dict[str, str]] = {}
    for n in nodes:
        meta = n.get("metadata") or {}
        assert isinstance(meta, Mapping)
        name = str(meta.get("name", ""))
        labels = meta.get("labels") or {}
        assert isinstance(labels, Mapping)
        out[name] = {str(k): str(v) for k, v in labels.items()}
    return out
