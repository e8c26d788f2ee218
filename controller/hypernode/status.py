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
from typing import Literal

from hyperplace.api import Condition, HyperNode, HyperNodeStatus
from hyperplace.api.times import rfc3339
from hyperplace.kube.hypertree import child_claims, link_hypernodes, subtree_members
from hyperplace.kube.members import MemberIndex

READY = "Ready"


class TopologyIndex:
    """Links and node sets of one snapshot of HyperNodes and nodes.

    Build it once and query it for every HyperNode: member selectors are resolved by a
    :class:`~hyperplace.kube.members.MemberIndex` (pass a long-lived one to reuse its
    incremental state, as the controller and the simulator do), the tree is read with the
    scheduler's own rule (:func:`~hyperplace.kube.hypertree.link_hypernodes`) and every
    subtree's node set is computed once, instead of once per ancestor.
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
        self.links = link_hypernodes({name: child_claims(hn) for name, hn in self.hypernodes.items()})
        self._direct: dict[str, set[str]] = {}
        self._real: dict[str, set[str]] | None = None

    def direct_nodes(self, name: str) -> set[str]:
        """Names the HyperNode's Node members select (exactMatch names may not exist)."""
        if name not in self._direct:
            self._direct[name] = self.members.direct_nodes(name) if name in self.hypernodes else set()
        return self._direct[name]

    def real_nodes(self, name: str) -> frozenset[str]:
        """Existing nodes under ``name`` through the links the scheduler keeps (a claim it
        refuses, on a HyperNode that has a parent already, adds nothing)."""
        if self._real is None:
            existing = {
                n: {x for x in self.direct_nodes(n) if x in self.node_labels} for n in self.hypernodes
            }
            self._real = subtree_members(self.links, existing)
        return frozenset(self._real.get(name, ()))

    def ready(self, name: str) -> tuple[Literal["True", "False"], str, str]:
        """(status, reason, message) of the Ready condition; see the module docstring."""
        cycle = self.links.cycle_of(name)
        if cycle:
            return "False", "Cycle", "member cycle: " + " -> ".join(cycle)
        parents = self.links.claimants.get(name, [])
        if len(parents) > 1:
            return (
                "False",
                "MultipleParents",
                f"listed as a member by {len(parents)} HyperNodes: {', '.join(parents)}",
            )
        missing = self.links.missing.get(name, [])
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
        last_transition_time=transition or now or rfc3339(),
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
