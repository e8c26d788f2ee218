"""Resolve HyperNode members to node names and child HyperNodes (Volcano's rules).

* exactMatch returns the name even if no such node exists; an empty name, nothing.
* regexMatch is an unanchored Go RE2 search over node names; a bad pattern, nothing.
* labelMatch selects nodes by labels; an empty selector (or one that fails to convert)
  selects nothing, never "all nodes".
* A HyperNode member counts as a child only with exactMatch.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from hyperplace.api.hypernode import HyperNode, MemberSpec

from .goregex import GoRegexError, compile_go_regex
from .hypertree import child_claims
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
    out = ResolvedMembers(children=child_claims(hn))
    for m in hn.spec.members:
        if m.type == "Node":
            out.nodes |= resolve_member_nodes(m, node_labels)
    return out


def resolve_member_nodes_many(
    members: Sequence[MemberSpec], node_labels: Mapping[str, Mapping[str, str]]
) -> list[set[str]]:
    """:func:`resolve_member_nodes` of many members at once: every regex in one RE2-set pass
    over the node names instead of one search per node per member."""
    out: list[set[str]] = [set() for _ in members]
    regex_at: list[int] = []
    for i, m in enumerate(members):
        sel = m.selector
        if sel.exact_match is None and sel.regex_match is not None:
            try:
                compile_go_regex(sel.regex_match.pattern)
            except GoRegexError:
                continue
            regex_at.append(i)
        else:
            out[i] = resolve_member_nodes(m, node_labels)
    if regex_at:
        patterns = []
        for i in regex_at:
            rm = members[i].selector.regex_match
            assert rm is not None
            patterns.append(rm.pattern)
        rs = _RegexSet(patterns)
        for node in node_labels:
            for j in rs.match(node):
                out[regex_at[j]].add(node)
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


# ---------------------------------------------------------------------------------------------
# Incremental index


class _Compiled:
    """One HyperNode's member selectors, parsed once per spec (RE2 compiled, selectors checked)."""

    __slots__ = ("children", "exact", "labels", "regexes", "spec")

    def __init__(self, hn: HyperNode) -> None:
        self.spec = hn.spec
        self.exact: set[str] = set()
        self.regexes: list[str] = []  # valid patterns only: a bad pattern selects nothing
        self.labels: list[dict[str, Any]] = []  # valid, non-empty selectors in dict form
        for m in hn.spec.members:
            if m.type != "Node":
                continue
            sel = m.selector
            if sel.exact_match is not None:
                if sel.exact_match.name:
                    self.exact.add(sel.exact_match.name)
            elif sel.regex_match is not None:
                try:
                    compile_go_regex(sel.regex_match.pattern)
                except GoRegexError:
                    continue
                self.regexes.append(sel.regex_match.pattern)
            elif sel.label_match is not None:
                raw = sel.label_match.to_dict()
                if selector_is_empty(raw) or not _selector_valid(raw):
                    continue
                self.labels.append(raw)
        self.children = child_claims(hn)


def _selector_valid(raw: Mapping[str, Any]) -> bool:
    """False when apimachinery would refuse to convert the selector (it then selects nothing).

    Whether a requirement raises depends only on its operator and values, never on the labels.
    """
    for req in raw.get("matchExpressions") or []:
        try:
            label_selector_matches({"matchExpressions": [req]}, {})
        except SelectorError:
            return False
    return True


class _RegexSet:
    """Many RE2 patterns matched in one pass over a string (RE2::Set, unanchored search).

    Patterns are grouped in chunks so that one set's automaton stays small; a chunk whose
    automaton runs out of memory falls back to one search per pattern.
    """

    CHUNK = 64

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = list(patterns)
        self._sets: list[tuple[int, Any]] = []
        for start in range(0, len(self.patterns), self.CHUNK):
            chunk = self.patterns[start : start + self.CHUNK]
            s = re2.Set.SearchSet(_SET_OPTIONS)
            try:
                for p in chunk:
                    s.Add(p)
                s.Compile()
            except Exception:
                s = None
            self._sets.append((start, s))

    def match(self, text: str) -> list[int]:
        """Indices of the patterns with a match somewhere in ``text``."""
        out: list[int] = []
        for start, s in self._sets:
            hits: list[int] | None = None
            if s is not None:
                try:
                    hits = s.Match(text) or []  # RE2::Set gives None for "no pattern matched"
                except Exception:
                    hits = None
            if hits is None:
                end = min(start + self.CHUNK, len(self.patterns))
                hits = [
                    i - start
                    for i in range(start, end)
                    if compile_go_regex(self.patterns[i]).search(text) is not None
                ]
            out.extend(start + i for i in hits)
        return out


_SET_OPTIONS = re2.Options()
_SET_OPTIONS.log_errors = False
_SET_OPTIONS.max_mem = 64 << 20


class MemberIndex:
    """HyperNode membership resolved once, then kept current per Node and HyperNode change.

    Feed it changes (:meth:`set_node`, :meth:`remove_node`, :meth:`set_hypernode`,
    :meth:`remove_hypernode`) or whole listings (:meth:`sync_nodes`, :meth:`sync_hypernodes`,
    which diff against what it holds). Changes are applied lazily on the next query:

    * a HyperNode added or changed is resolved against every node (its regexes in one
      RE2-set pass over the node names, a labelMatch with matchLabels through a
      ``(key, value) -> nodes`` index, exact names directly);
    * a Node added or relabelled is matched once against every other member selector
      (all regexes in one RE2-set pass over its name, then each label selector);
    * a Node removed leaves the HyperNodes a reverse index says selected it.

    Selectors are parsed and compiled once per HyperNode spec. Results equal
    :func:`resolve_members` over the same nodes (a property test checks it).
    ``generation`` moves whenever a HyperNode's resolved members or the node set changes,
    so callers can cache what they derive from it.
    """

    def __init__(self) -> None:
        self._labels: dict[str, dict[str, str]] = {}
        self._by_label: dict[tuple[str, str], set[str]] = {}
        self._hns: dict[str, HyperNode] = {}
        self._compiled: dict[str, _Compiled] = {}
        self._dyn: dict[str, set[str]] = {}  # HyperNode -> nodes its regex/label members select
        self._node_hns: dict[str, set[str]] = {}  # node -> HyperNodes whose regex/label select it
        self._dirty_hns: set[str] = set()
        self._dirty_nodes: set[str] = set()
        self._regex_all: tuple[list[tuple[str, str]], _RegexSet] | None = None
        # Label selectors for matching one node: those with matchLabels by one required
        # (key, value) pair (a node only meets those whose pair it carries), the rest apart.
        self._label_all: (
            tuple[dict[tuple[str, str], list[tuple[str, dict[str, Any]]]], list[tuple[str, dict[str, Any]]]]
            | None
        ) = None
        self.generation = 0
        self.hypernode_generation = 0  # moves when a HyperNode spec is added, changed or removed

    # ---------------------------------------------------------------- construction
    @classmethod
    def build(
        cls, hypernodes: Iterable[HyperNode], node_labels: Mapping[str, Mapping[str, str]]
    ) -> MemberIndex:
        """An index over one listing of HyperNodes and nodes."""
        idx = cls()
        idx.sync_nodes(node_labels)
        idx.sync_hypernodes(hypernodes)
        return idx

    # ---------------------------------------------------------------- nodes
    @property
    def node_labels(self) -> Mapping[str, Mapping[str, str]]:
        """``{node: labels}`` of every node the index knows (read-only)."""
        return self._labels

    def set_node(self, name: str, labels: Mapping[str, str]) -> bool:
        """A node added or updated; True when it is new or its labels changed."""
        old = self._labels.get(name)
        new = {str(k): str(v) for k, v in labels.items()}
        if old == new:
            return False
        if old is not None:
            self._unindex_labels(name, old)
        self._labels[name] = new
        for kv in new.items():
            self._by_label.setdefault(kv, set()).add(name)
        self._dirty_nodes.add(name)
        self.generation += 1
        return True

    def remove_node(self, name: str) -> bool:
        """A node deleted; True when the index had it."""
        old = self._labels.pop(name, None)
        if old is None:
            return False
        self._unindex_labels(name, old)
        self._dirty_nodes.add(name)
        self.generation += 1
        return True

    def sync_nodes(self, node_labels: Mapping[str, Mapping[str, str]]) -> bool:
        """Make the node set equal to ``node_labels`` (a relist); True when anything changed."""
        changed = False
        for name in [n for n in self._labels if n not in node_labels]:
            changed |= self.remove_node(name)
        for name, labels in node_labels.items():
            changed |= self.set_node(name, labels)
        return changed

    def _unindex_labels(self, name: str, labels: Mapping[str, str]) -> None:
        for kv in labels.items():
            s = self._by_label.get(kv)
            if s is not None:
                s.discard(name)
                if not s:
                    del self._by_label[kv]

    # ---------------------------------------------------------------- HyperNodes
    @property
    def hypernodes(self) -> Mapping[str, HyperNode]:
        """Every HyperNode the index holds, by name (read-only)."""
        return self._hns

    def set_hypernode(self, hn: HyperNode) -> bool:
        """A HyperNode added or updated; True when its spec is new (status does not matter)."""
        old = self._hns.get(hn.name)
        self._hns[hn.name] = hn
        if old is not None and (old.spec is hn.spec or old.spec == hn.spec):
            return False
        self._dirty_hns.add(hn.name)
        self.generation += 1
        self.hypernode_generation += 1
        return True

    def remove_hypernode(self, name: str) -> bool:
        """A HyperNode deleted; True when the index had it."""
        if self._hns.pop(name, None) is None:
            return False
        self._dirty_hns.add(name)
        self.generation += 1
        self.hypernode_generation += 1
        return True

    def sync_hypernodes(self, hypernodes: Iterable[HyperNode]) -> bool:
        """Make the HyperNode set equal to ``hypernodes``; True when any spec changed."""
        fresh = {h.name: h for h in hypernodes}
        changed = False
        for name in [n for n in self._hns if n not in fresh]:
            changed |= self.remove_hypernode(name)
        for hn in fresh.values():
            changed |= self.set_hypernode(hn)
        return changed

    # ---------------------------------------------------------------- queries
    def direct_nodes(self, name: str) -> set[str]:
        """Names the HyperNode's Node members select (exactMatch names may not exist)."""
        self._flush()
        c = self._compiled.get(name)
        if c is None:
            return set()
        return c.exact | self._dyn.get(name, set())

    def children(self, name: str) -> list[str]:
        """exactMatch HyperNode members, in member order."""
        self._flush()
        c = self._compiled.get(name)
        return list(c.children) if c is not None else []

    def members(self, name: str) -> ResolvedMembers:
        """What :func:`resolve_members` gives for this HyperNode over the indexed nodes."""
        return ResolvedMembers(self.direct_nodes(name), self.children(name))

    # ---------------------------------------------------------------- maintenance
    def _flush(self) -> None:
        if not self._dirty_hns and not self._dirty_nodes:
            return
        dirty_hns, self._dirty_hns = self._dirty_hns, set()
        dirty_nodes, self._dirty_nodes = self._dirty_nodes, set()
        # 1. Forget what changed HyperNodes selected; recompile their selectors.
        for name in dirty_hns:
            for node in self._dyn.pop(name, set()):
                s = self._node_hns.get(node)
                if s is not None:
                    s.discard(name)
            self._compiled.pop(name, None)
            hn = self._hns.get(name)
            if hn is not None:
                self._compiled[name] = _Compiled(hn)
        if dirty_hns:
            self._regex_all = None
            self._label_all = None
        # 2. Forget what removed or changed nodes were selected by.
        for node in dirty_nodes:
            for name in self._node_hns.pop(node, set()):
                d = self._dyn.get(name)
                if d is not None:
                    d.discard(node)
        # 3. Changed HyperNodes against every node.
        live_dirty = [n for n in dirty_hns if n in self._compiled]
        if live_dirty:
            self._resolve_hypernodes(live_dirty)
        # 4. Changed nodes against every other HyperNode (none left when every HyperNode was
        # just resolved, as on the first listing: the pass would match every node again for nothing).
        nodes = [n for n in dirty_nodes if n in self._labels]
        skip = set(live_dirty)
        if nodes and any(n not in skip for n in self._compiled):
            self._resolve_nodes(nodes, skip=skip)

    def _add(self, name: str, node: str) -> None:
        self._dyn.setdefault(name, set()).add(node)
        self._node_hns.setdefault(node, set()).add(name)

    def _resolve_hypernodes(self, names: list[str]) -> None:
        pairs = [(n, p) for n in names for p in self._compiled[n].regexes]
        if pairs:
            rs = _RegexSet([p for _, p in pairs])
            for node in self._labels:
                for i in rs.match(node):
                    self._add(pairs[i][0], node)
        for n in names:
            for raw in self._compiled[n].labels:
                match_labels = raw.get("matchLabels") or {}
                candidates: Iterable[str]
                if match_labels:
                    candidates = list(self._by_label.get(min(match_labels.items()), ()))
                else:
                    candidates = self._labels
                for node in candidates:
                    if label_selector_matches(raw, self._labels[node]):
                        self._add(n, node)

    def _resolve_nodes(self, nodes: list[str], skip: set[str]) -> None:
        if self._regex_all is None:
            pairs = [(n, p) for n, c in sorted(self._compiled.items()) for p in c.regexes]
            self._regex_all = (pairs, _RegexSet([p for _, p in pairs]))
        pairs, rs = self._regex_all
        if self._label_all is None:
            keyed: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
            loose: list[tuple[str, dict[str, Any]]] = []
            for n, c in self._compiled.items():
                for raw in c.labels:
                    ml = raw.get("matchLabels") or {}
                    if ml:
                        keyed.setdefault(min(ml.items()), []).append((n, raw))
                    else:
                        loose.append((n, raw))
            self._label_all = (keyed, loose)
        keyed, loose = self._label_all
        for node in nodes:
            if pairs:
                for i in rs.match(node):
                    if pairs[i][0] not in skip:
                        self._add(pairs[i][0], node)
            labels = self._labels[node]
            cands = [sel for kv in labels.items() for sel in keyed.get(kv, ())]
            for n, raw in itertools.chain(cands, loose):
                if n not in skip and label_selector_matches(raw, labels):
                    self._add(n, node)
