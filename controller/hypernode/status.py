"""HyperNode status: ``nodeCount`` and a ``Ready`` condition, as a pure function.

Volcano's controller (``hypernode_handler.go actualNodeCnt``) sets ``nodeCount`` to the
size of the union of the names every member resolves to, *ignoring the member type*: an
exactMatch HyperNode member then counts the child HyperNode's name as if it were a node.
We deliberately deviate and count **real nodes recursively**: Node members resolved
against the nodes that exist, plus the real nodes of every child HyperNode (exactMatch
HyperNode members, the only kind Volcano's scheduler treats as children). That is the
number users expect ("how many machines are under this switch") and equals the size of
the scheduler's ``realNodesSet``, minus exactMatch names of nodes that do not exist.

Volcano has no Ready condition; ours surfaces the situations that make Volcano's
scheduler cache not ready (and so block every topology-aware job), naming the culprit:

========================= ======= ================================================
reason                    status  when
========================= ======= ================================================
``Cycle``                 False   the HyperNode is on, or reaches, a member cycle
``MultipleParents``       False   more than one HyperNode lists it as a member
``MissingChild``          False   an exactMatch HyperNode member does not exist
``NoMembersMatched``      False   no real node under it at all
``MembersResolved``       True    otherwise
========================= ======= ================================================

``lastTransitionTime`` only changes when the condition's status flips.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Literal

from hyperplace.api import Condition, HyperNode, HyperNodeStatus
from hyperplace.kube.members import MemberIndex

READY = "Ready"


def now_rfc3339() -> str:
    """Current UTC time in metav1.Time's wire format (second precision)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hypernode_children(hn: HyperNode) -> list[str]:
    """Child HyperNodes: exactMatch members of type HyperNode, in member order."""
    out: list[str] = []
    for m in hn.spec.members:
        if m.type == "HyperNode" and m.selector.exact_match is not None:
            name = m.selector.exact_match.name
            if name and name not in out:
                out.append(name)
    return out


class TopologyIndex:
    """Children, parents and memoised node sets of one snapshot of HyperNodes and nodes.

    Build it once and query it for every HyperNode: member selectors are resolved by a
    :class:`~hyperplace.kube.members.MemberIndex` (pass a long-lived one to reuse its
    incremental state, as the controller and the simulator do) and each subtree's node set
    is computed once, instead of once per ancestor.
    """

    def __init__(
        self,
        hypernodes: Mapping[str, HyperNode],
        node_labels: Mapping[str, Mapping[str, str]],
        members: MemberIndex | None = None,
    ) -> None:
        self.hypernodes = dict(hypernodes)
        self.node_labels = node_labels
        if members is None:
            members = MemberIndex.build(self.hypernodes.values(), node_labels)
        self.members = members
        self.children = {name: hypernode_children(hn) for name, hn in self.hypernodes.items()}
        parents: dict[str, list[str]] = {}
        for name, kids in sorted(self.children.items()):
            for kid in kids:
                if kid != name:
                    parents.setdefault(kid, []).append(name)
        self.parents = parents
        self._direct: dict[str, set[str]] = {}
        self._real: dict[str, frozenset[str]] = {}

    def direct_nodes(self, name: str) -> set[str]:
        """Names the HyperNode's Node members select (exactMatch names may not exist)."""
        if name not in self._direct:
            self._direct[name] = self.members.direct_nodes(name) if name in self.hypernodes else set()
        return self._direct[name]

    def real_nodes(self, name: str) -> frozenset[str]:
        """Existing nodes under ``name``, recursively through child HyperNodes (cycle-safe)."""
        return self._real_nodes(name, set())[0]

    def _real_nodes(self, name: str, stack: set[str]) -> tuple[frozenset[str], bool]:
        """(nodes, complete): incomplete when a cycle cut the walk, and then not memoised,
        so a HyperNode above a cycle still gets everything reachable from it."""
        if name in self._real:
            return self._real[name], True
        if name not in self.hypernodes:
            return frozenset(), True
        if name in stack:
            return frozenset(), False
        stack.add(name)
        out = {n for n in self.direct_nodes(name) if n in self.node_labels}
        complete = True
        for child in self.children[name]:
            nodes, ok = self._real_nodes(child, stack)
            out |= nodes
            complete = complete and ok
        stack.discard(name)
        result = frozenset(out)
        if complete:
            self._real[name] = result
        return result, complete

    def find_cycle(self, start: str) -> list[str] | None:
        """A member cycle reachable from ``start``, as a path repeating its first name."""
        path: list[str] = []
        on_path: set[str] = set()
        done: set[str] = set()

        def visit(name: str) -> list[str] | None:
            if name in on_path:
                return [*path[path.index(name) :], name]
            if name in done or name not in self.hypernodes:
                return None
            path.append(name)
            on_path.add(name)
            for child in self.children[name]:
                found = visit(child)
                if found:
                    return found
            path.pop()
            on_path.discard(name)
            done.add(name)
            return None

        return visit(start)

    def ready(self, name: str) -> tuple[Literal["True", "False"], str, str]:
        """(status, reason, message) of the Ready condition; see the module docstring."""
        cycle = self.find_cycle(name)
        if cycle:
            return "False", "Cycle", "member cycle: " + " -> ".join(cycle)
        parents = self.parents.get(name, [])
        if len(parents) > 1:
            return (
                "False",
                "MultipleParents",
                f"listed as a member by {len(parents)} HyperNodes: {', '.join(parents)}",
            )
        missing = [c for c in self.children.get(name, []) if c not in self.hypernodes]
        if missing:
            return "False", "MissingChild", f"member HyperNode(s) not found: {', '.join(missing)}"
        absent = sorted(n for n in self.direct_nodes(name) if n not in self.node_labels)
        note = f"; node(s) not found: {', '.join(absent)}" if absent else ""
        count = len(self.real_nodes(name))
        if count == 0:
            return "False", "NoMembersMatched", f"no existing node matches the members{note}"
        return "True", "MembersResolved", f"{count} node(s){note}"


def compute_status(
    hn: HyperNode,
    node_labels: Mapping[str, Mapping[str, str]],
    hypernodes: Mapping[str, HyperNode],
    *,
    now: str | None = None,
    index: TopologyIndex | None = None,
) -> HyperNodeStatus:
    """The status the controller writes for ``hn``.

    ``node_labels`` maps every existing node to its labels; ``hypernodes`` maps every
    HyperNode name to its object (``hn`` itself may or may not be in it; ``hn`` wins).
    ``now`` is the transition time to record when Ready flips (defaults to the wall
    clock). ``index`` is reused when it was built from a snapshot holding this HyperNode
    with the same spec (status does not matter); otherwise one is built.
    """
    indexed = index.hypernodes.get(hn.name) if index is not None else None
    if index is None or indexed is None or (indexed is not hn and indexed.spec != hn.spec):
        universe = dict(hypernodes)
        universe[hn.name] = hn
        index = TopologyIndex(universe, node_labels)
    status, reason, message = index.ready(hn.name)

    old_conditions = list(hn.status.conditions or []) if hn.status else []
    old = next((c for c in old_conditions if c.type == READY), None)
    transition = old.last_transition_time if old is not None and old.status == status else None
    ready = Condition(
        type=READY,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=transition or now or now_rfc3339(),
        observed_generation=hn.metadata.generation,
    )
    conditions = (
        [ready if c.type == READY else c for c in old_conditions] if old else [*old_conditions, ready]
    )
    return HyperNodeStatus(conditions=conditions, node_count=len(index.real_nodes(hn.name)))


def compute_all(
    hypernodes: Mapping[str, HyperNode],
    node_labels: Mapping[str, Mapping[str, str]],
    *,
    now: str | None = None,
    members: MemberIndex | None = None,
) -> dict[str, HyperNodeStatus]:
    """Statuses of every HyperNode from one shared index (what a full resync writes).

    ``members``, when given, must hold exactly ``hypernodes`` and ``node_labels``.
    """
    index = TopologyIndex(hypernodes, node_labels, members)
    return {
        name: compute_status(hn, node_labels, hypernodes, now=now, index=index)
        for name, hn in index.hypernodes.items()
    }
