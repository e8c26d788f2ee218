"""The HyperNode tree of one scheduling cycle, as integer-indexed arrays.

HyperNodes are resolved to real node sets with :class:`hyperplace.kube.members.MemberIndex`
(exactMatch, unanchored RE2 regexMatch, labelMatch). Only exactMatch HyperNode members make
children, and a HyperNode may have one parent (Volcano's cache rules, read by
:func:`hyperplace.kube.hypertree.link_hypernodes`). A virtual root ``<cluster-top-hypernode>`` of
tier max+1 (1 when there are no HyperNodes) holds every node and adopts every parentless
HyperNode, as Volcano's session does.

Everything is indexed by integers: nodes ``0..N-1`` (the snapshot's order) and HyperNodes
``0..H-1`` with the root last. Membership is kept both ways in CSR form so that bottom-up sums
over HyperNodes are one ``np.bincount`` and per-node updates touch only a node's ancestors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from hyperplace.api.constants import CLUSTER_TOP_HYPERNODE
from hyperplace.api.hypernode import HyperNode
from hyperplace.kube.hypertree import link_hypernodes, subtree_members
from hyperplace.kube.members import MemberIndex

IntArray = npt.NDArray[np.int64]


def label_domains(
    key: str, node_names: Sequence[str], node_labels: Mapping[str, Mapping[str, str]]
) -> dict[str, frozenset[int]]:
    """The nodes (indices into ``node_names``) of each value of the node label ``key``; nodes
    without the label are in none (kube-scheduler's TopologyPlacementGenerator leaves them out)."""
    out: dict[str, set[int]] = {}
    for i, n in enumerate(node_names):
        v = (node_labels.get(n) or {}).get(key)
        if v is not None:
            out.setdefault(v, set()).add(i)
    return {v: frozenset(s) for v, s in out.items()}


def label_domain_hypernodes(
    keys: Sequence[str], node_names: Sequence[str], node_labels: Mapping[str, Mapping[str, str]]
) -> list[HyperNode]:
    """A virtual HyperNode tree of the keys' label domains, as label-based discovery groups
    nodes (a tier per key, a HyperNode per value, ``tierName`` the key): the finest key is tier
    1, and each coarser key whose every domain is a union of the tier below's is the next tier.
    A key whose domains cut across the others' gets no tier (its jobs wait, saying so)."""
    by_key = {k: label_domains(k, node_names, node_labels) for k in dict.fromkeys(keys)}
    order = sorted((k for k in by_key if by_key[k]), key=lambda k: (-len(by_key[k]), k))
    tiers: list[str] = []
    for key in order:
        if tiers:
            below = by_key[tiers[-1]]
            doms = list(by_key[key].values())
            if not all(any(d <= big for big in doms) for d in below.values()) or not all(
                big == frozenset().union(*(d for d in below.values() if d <= big)) for big in doms
            ):
                continue
        tiers.append(key)
    out: list[HyperNode] = []
    names: dict[tuple[str, frozenset[int]], str] = {}
    for t, key in enumerate(tiers, start=1):
        for value, nodes in sorted(by_key[key].items()):
            name = f"{key}={value}"  # not a HyperNode name a user can make: no clash
            names[(key, nodes)] = name
            if t == 1:
                members = [
                    {"type": "Node", "selector": {"exactMatch": {"name": node_names[i]}}}
                    for i in sorted(nodes)
                ]
            else:
                children = [
                    names[(tiers[t - 2], d)]
                    for d in sorted(by_key[tiers[t - 2]].values(), key=min)
                    if d <= nodes
                ]
                # The children's names are no DNS-1123 names (that is what keeps them apart from
                # a user's), which exactMatch validates: validated with a stand-in, then named.
                members = [
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": "child"}}} for _ in children
                ]
            hn = HyperNode.model_validate(
                {"metadata": {"name": name}, "spec": {"tier": t, "tierName": key, "members": members}}
            )
            if t > 1:
                for member, child in zip(hn.spec.members, children, strict=True):
                    assert member.selector.exact_match is not None
                    member.selector.exact_match.name = child
            out.append(hn)
    return out


@dataclass
class HyperNodeTree:
    """Resolved HyperNode tree. Build with :meth:`build`; treat as read-only afterwards."""

    names: list[str]
    tiers: IntArray  # (H,) tier of each HyperNode, root included
    parent: IntArray  # (H,) parent id or -1 (the root's is -1)
    children: list[list[int]]
    node_sets: list[IntArray]  # sorted node indices (real nodes) of each HyperNode
    tier_names: dict[str, int]  # tierName -> tier (last one seen wins, as in Volcano)
    problems: list[str] = field(default_factory=list)
    node_names: list[str] = field(default_factory=list)

    # Derived (filled by _derive).
    index: dict[str, int] = field(default_factory=dict)
    depth: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    node_hn_ptr: IntArray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    node_hn_idx: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hn_node_ptr: IntArray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    hn_node_idx: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    leaf_of: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sorted_tiers: list[int] = field(default_factory=list)
    _anc: IntArray | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        hypernodes: Sequence[HyperNode],
        node_names: Sequence[str],
        node_labels: Mapping[str, Mapping[str, str]],
        members: MemberIndex | None = None,
        label_keys: Sequence[str] = (),
    ) -> HyperNodeTree:
        """Resolve members, link parents (:func:`~hyperplace.kube.hypertree.link_hypernodes`:
        cycles and second parents are problems, and broken), add the virtual root.

        ``members``, when given, is an index already holding exactly ``hypernodes`` and the
        nodes of ``node_labels``; its resolved members are used instead of resolving afresh.

        ``label_keys``: node label keys some job's pods must share one value of (Kubernetes'
        PodGroup ``schedulingConstraints.topology``), each named as a tier in ``tier_names``
        where one can be found (:meth:`_name_label_tiers`); with no HyperNodes at all, the
        keys' label domains become a virtual tree of their own (:func:`label_domain_hypernodes`).
        """
        if not hypernodes and label_keys:
            virtual = label_domain_hypernodes(label_keys, node_names, node_labels)
            if virtual:
                tree = cls.build(virtual, node_names, node_labels, None)
                tree._name_label_tiers(label_keys, node_labels)
                return tree
        node_index = {n: i for i, n in enumerate(node_names)}
        hns = sorted(hypernodes, key=lambda h: h.name)
        if members is None:
            # One bulk resolution (every regex in one RE2-set pass per node name).
            members = MemberIndex.build(hns, node_labels)
        names = [h.name for h in hns]
        idx = {n: i for i, n in enumerate(names)}
        direct: dict[str, set[int]] = {}
        claims: dict[str, list[str]] = {}
        tier_names: dict[str, int] = {}
        for h in hns:
            res = members.members(h.name)
            direct[h.name] = {node_index[n] for n in res.nodes if n in node_index}
            claims[h.name] = res.children
            if h.spec.tier_name:
                tier_names[h.spec.tier_name] = h.spec.tier
        links = link_hypernodes(claims)
        parent = [idx.get(links.parent.get(n, ""), -1) for n in names]
        children = [[idx[c] for c in links.children[n]] for n in names]
        real = subtree_members(links, direct)
        node_sets = [np.array(sorted(real[n]), dtype=np.int64) for n in names]
        problems = links.problems()
        tiers = [h.spec.tier for h in hns]
        root_tier = (max(tiers) + 1) if tiers else 1
        root = len(hns)
        names.append(CLUSTER_TOP_HYPERNODE)
        tiers.append(root_tier)
        root_children = [i for i in range(len(hns)) if parent[i] == -1]
        for i in root_children:
            parent[i] = root
        parent.append(-1)
        children.append(root_children)
        node_sets.append(np.arange(len(node_names), dtype=np.int64))
        tree = cls(
            names=names,
            tiers=np.array(tiers, dtype=np.int64),
            parent=np.array(parent, dtype=np.int64),
            children=children,
            node_sets=node_sets,
            tier_names=tier_names,
            problems=problems,
            node_names=list(node_names),
        )
        tree._derive()
        if label_keys:
            tree._name_label_tiers(label_keys, node_labels)
        return tree

    def _name_label_tiers(self, keys: Sequence[str], node_labels: Mapping[str, Mapping[str, str]]) -> None:
        """Name after each key the lowest tier whose HyperNodes are exactly the key's domains
        (every HyperNode of the tier holds the nodes of one value of the key, and every value's
        nodes are one HyperNode of it; nodes without the key are in none). A key no tier
        matches stays unnamed: its jobs wait (a tier of that name given by HyperNodes is
        replaced by the matching one, or dropped when none matches)."""
        for key in keys:
            self.tier_names.pop(key, None)
            domains = label_domains(key, self.node_names, node_labels)
            if not domains:
                continue
            want = set(domains.values())
            for tier in self.sorted_tiers:
                got = {
                    frozenset(int(n) for n in self.node_sets[h])
                    for h in range(len(self.names) - 1)
                    if int(self.tiers[h]) == tier and len(self.node_sets[h])
                }
                if got == want:
                    self.tier_names[key] = tier
                    break

    def _derive(self) -> None:
        h = len(self.names)
        self.index = {n: i for i, n in enumerate(self.names)}
        depth = np.zeros(h, dtype=np.int64)
        for i in range(h):
            d, cur = 0, int(self.parent[i])
            while cur != -1:
                d += 1
                cur = int(self.parent[cur])
            depth[i] = d
        self.depth = depth
        n = len(self.node_names)
        lens = np.array([len(s) for s in self.node_sets], dtype=np.int64)
        self.hn_node_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        self.hn_node_idx = (
            np.concatenate(self.node_sets).astype(np.int64) if h else np.zeros(0, dtype=np.int64)
        )
        owners = np.repeat(np.arange(h, dtype=np.int64), lens)
        order = np.lexsort((owners, self.hn_node_idx))
        nodes_sorted = self.hn_node_idx[order]
        self.node_hn_idx = owners[order]
        counts = np.bincount(nodes_sorted, minlength=n) if n else np.zeros(0, dtype=np.int64)
        self.node_hn_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.sorted_tiers = sorted({int(t) for t in self.tiers})
        # Lowest-tier HyperNode of each node: Volcano looks only at the globally lowest tier.
        leaf = np.full(n, -1, dtype=np.int64)
        low = self.sorted_tiers[0] if self.sorted_tiers else 0
        for i in range(h):
            if self.tiers[i] == low:
                s = self.node_sets[i]
                free = s[leaf[s] == -1]
                leaf[free] = i
        self.leaf_of = leaf

    # ------------------------------------------------------------------ queries
    @property
    def ready(self) -> bool:
        """False when a cycle or a second parent was found: topology jobs must wait."""
        return not self.problems

    @property
    def root(self) -> int:
        """Id of the virtual root (always the last HyperNode)."""
        return len(self.names) - 1

    @property
    def top_tier(self) -> int:
        """Tier of the virtual root: max real tier + 1 (1 without HyperNodes)."""
        return int(self.tiers[self.root])

    @property
    def min_tier(self) -> int:
        """Lowest tier present (Volcano's ``HyperNodesTiers[0]``)."""
        return self.sorted_tiers[0]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def parents(self) -> dict[str, str | None]:
        """HyperNode name -> parent name (None for the virtual root), for display."""
        return {
            n: (self.names[int(p)] if p != -1 else None)
            for n, p in zip(self.names, self.parent.tolist(), strict=True)
        }

    def id_of(self, name: str) -> int | None:
        """Integer id of a HyperNode name, or None."""
        return self.index.get(name)

    def ancestors(self, h: int) -> list[int]:
        """``h`` first, then its parents up to the root."""
        out = []
        while h != -1:
            out.append(h)
            h = int(self.parent[h])
        return out

    def lca(self, a: int, b: int) -> int:
        """Lowest common ancestor by parent walk (-1 means "none"; -1 with x gives x)."""
        if a == -1:
            return b
        if b == -1:
            return a
        parent, depth = self.parent, self.depth
        while depth[a] > depth[b]:
            a = int(parent[a])
        while depth[b] > depth[a]:
            b = int(parent[b])
        while a != b:
            a, b = int(parent[a]), int(parent[b])
        return a

    def lca_many(self, ids: Sequence[int]) -> int:
        """LCA of several HyperNodes (-1 entries are ignored)."""
        out = -1
        for h in ids:
            out = self.lca(out, h)
        return out

    def hypernodes_of_node(self, n: int) -> IntArray:
        """Every HyperNode (root included) whose real node set contains node ``n``."""
        return self.node_hn_idx[self.node_hn_ptr[n] : self.node_hn_ptr[n + 1]]

    def is_ancestor(self, a: int, b: int) -> bool:
        """True when ``a`` is ``b`` or one of its ancestors."""
        while b != -1:
            if b == a:
                return True
            b = int(self.parent[b])
        return False

    def lowest_containing(self, nodes: Sequence[int]) -> int:
        """Lowest-tier HyperNode whose node set holds all ``nodes`` (Volcano recovery, PR #5008).

        Ties at one tier (possible with overlapping regex members) go to the smaller set, then the name.
        """
        if not nodes:
            return -1
        common: set[int] | None = None
        for n in set(nodes):
            hs = set(self.hypernodes_of_node(n).tolist())
            common = hs if common is None else common & hs
            if not common:
                return -1
        assert common is not None
        return min(common, key=lambda h: (int(self.tiers[h]), len(self.node_sets[h]), self.names[h]))

    def subtree(self, h: int) -> list[int]:
        """``h`` and its descendants, breadth first (Volcano's gradient traversal order)."""
        out = [h]
        i = 0
        while i < len(out):
            out.extend(sorted(self.children[out[i]], key=lambda c: self.names[c]))
            i += 1
        return out

    def ancestor_matrix(self) -> IntArray:
        """(tiers x N): row i holds, for each node, the HyperNode of tier ``sorted_tiers[i]``
        containing it (the lowest id if several do), or -1. Cached; read-only."""
        if self._anc is None:
            n = len(self.node_names)
            anc = np.full((len(self.sorted_tiers), n), -1, dtype=np.int64)
            row = {t: i for i, t in enumerate(self.sorted_tiers)}
            for h in range(len(self.names) - 1, -1, -1):  # descending ids: the lowest id wins
                anc[row[int(self.tiers[h])], self.node_sets[h]] = h
            self._anc = anc
        return self._anc

    def domain_sums(self, per_node: npt.NDArray[np.int64]) -> IntArray:
        """Sum of a per-node quantity over every HyperNode's real nodes (one bincount)."""
        vals = np.repeat(per_node, np.diff(self.node_hn_ptr))
        return np.bincount(self.node_hn_idx, weights=vals, minlength=len(self.names)).astype(np.int64)

    def domain_sums_f(self, per_node: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Float version of :meth:`domain_sums` for quantities whose sums may exceed int64."""
        vals = np.repeat(per_node.astype(np.float64), np.diff(self.node_hn_ptr))
        return np.bincount(self.node_hn_idx, weights=vals, minlength=len(self.names)).astype(np.float64)

    def describe(self) -> list[dict[str, object]]:
        """A display-friendly view: name, tier, parent, children and node names per HyperNode."""
        out: list[dict[str, object]] = []
        for i, name in enumerate(self.names):
            p = int(self.parent[i])
            out.append(
                {
                    "name": name,
                    "tier": int(self.tiers[i]),
                    "parent": self.names[p] if p != -1 else None,
                    "children": [self.names[c] for c in self.children[i]],
                    "nodes": [self.node_names[j] for j in self.node_sets[i]],
                }
            )
        return out
