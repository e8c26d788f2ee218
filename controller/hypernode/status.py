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

from hyperplace.api import Condition, HyperNode, HyperNodeStatus
from hyperplace.kube.members import resolve_members

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


def parents_of(name: str, hypernodes: Mapping[str, HyperNode]) -> list[str]:
    """Every HyperNode that lists ``name`` as a child, sorted."""
    return sorted(p for p, hn in hypernodes.items() if p != name and name in hypernode_children(hn))


def _find_cycle(start: str, hypernodes: Mapping[str, HyperNode]) -> list[str] | None:
    """A member cycle reachable from ``start`` (as a path that repeats its first name)."""
    path: list[str] = []
    on_path: set[str] = set()
    done: set[str] = set()

    def visit(name: str) -> list[str] | None:
        if name in on_path:
            return [*path[path.index(name) :], name]
        if name in done or name not in hypernodes:
            return None
        path.append(name)
        on_path.add(name)
        for child in hypernode_children(hypernodes[name]):
            found = visit(child)
            if found:
                return found
        path.pop()
        on_path.discard(name)
        done.add(name)
        return None

    return visit(start)


def real_nodes(
    name: str,
    node_labels: Mapping[str, Mapping[str, str]],
    hypernodes: Mapping[str, HyperNode],
    _seen: frozenset[str] = frozenset(),
) -> set[str]:
    """Existing nodes under HyperNode ``name``, recursively (cycle-safe)."""
    hn = hypernodes.get(name)
    if hn is None or name in _seen:
        return set()
    seen = _seen | {name}
    out = {n for n in resolve_members(hn, node_labels).nodes if n in node_labels}
    for child in hypernode_children(hn):
        out |= real_nodes(child, node_labels, hypernodes, seen)
    return out


def _ready(
    hn: HyperNode,
    node_labels: Mapping[str, Mapping[str, str]],
    hypernodes: Mapping[str, HyperNode],
    count: int,
) -> tuple[str, str, str]:
    universe = dict(hypernodes)
    universe[hn.name] = hn  # judge the object we were given, even if the map is stale
    cycle = _find_cycle(hn.name, universe)
    if cycle:
        return "False", "Cycle", "member cycle: " + " -> ".join(cycle)
    parents = parents_of(hn.name, universe)
    if len(parents) > 1:
        return (
            "False",
            "MultipleParents",
            f"listed as a member by {len(parents)} HyperNodes: {', '.join(parents)}",
        )
    missing = [c for c in hypernode_children(hn) if c not in universe]
    if missing:
        return "False", "MissingChild", f"member HyperNode(s) not found: {', '.join(missing)}"
    direct = resolve_members(hn, node_labels).nodes
    absent = sorted(n for n in direct if n not in node_labels)
    note = f"; node(s) not found: {', '.join(absent)}" if absent else ""
    if count == 0:
        return "False", "NoMembersMatched", f"no existing node matches the members{note}"
    return "True", "MembersResolved", f"{count} node(s){note}"


def compute_status(
    hn: HyperNode,
    node_labels: Mapping[str, Mapping[str, str]],
    hypernodes: Mapping[str, HyperNode],
    *,
    now: str | None = None,
) -> HyperNodeStatus:
    """The status the controller writes for ``hn``.

    ``node_labels`` maps every existing node to its labels; ``hypernodes`` maps every
    HyperNode name to its object (``hn`` itself may or may not be in it). ``now`` is
    the transition time to record when Ready flips (defaults to the wall clock).
    """
    universe = dict(hypernodes)
    universe[hn.name] = hn
    count = len(real_nodes(hn.name, node_labels, universe))
    status, reason, message = _ready(hn, node_labels, hypernodes, count)

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
    return HyperNodeStatus(conditions=conditions, node_count=count)
