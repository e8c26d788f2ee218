"""The HyperNode tree's links, and what makes the tree invalid: one rule for every component.

Volcano's scheduler cache links HyperNodes by their exactMatch HyperNode members and refuses a
tree it cannot read as a forest; while it is refused, no job with a network topology is
scheduled. The scheduler (which then holds such jobs), the HyperNode controller (the ``Ready``
condition of each HyperNode) and the simulator (what it draws in red) all read the tree with
:func:`link_hypernodes`, so they agree on it:

* a HyperNode's children are its exactMatch HyperNode members that exist (member order,
  duplicates once); a member naming a missing HyperNode links nothing (``missing``);
* a HyperNode has one parent: claimants are taken in name order and the first wins; every
  later claim is refused (``second_claims``: the child then has two parents);
* a HyperNode listing itself is a cycle of one (``self_claims``, no link);
* a cycle of parent links is reported and broken at the link into its first member in name
  order, so the links that remain form a forest (``cycles``, each written in member order,
  ``a -> b -> a``: ``a`` lists ``b``, which lists ``a``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from hyperplace.api.hypernode import HyperNode

T = TypeVar("T", bound=Hashable)


def child_claims(hn: HyperNode) -> list[str]:
    """The HyperNodes ``hn`` claims as children: its exactMatch HyperNode members, in member
    order, each once (a member of another type or selector links nothing)."""
    out: list[str] = []
    for m in hn.spec.members:
        em = m.selector.exact_match
        if m.type == "HyperNode" and em is not None and em.name and em.name not in out:
            out.append(em.name)
    return out


@dataclass(frozen=True)
class SecondClaim:
    """A refused link: ``claimant`` lists ``child``, which ``parent`` (the first claimant) holds."""

    child: str
    parent: str
    claimant: str


@dataclass
class HyperNodeLinks:
    """Parent and child links of a set of HyperNodes, with every problem found."""

    parent: dict[str, str] = field(default_factory=dict)  # kept links only
    children: dict[str, list[str]] = field(default_factory=dict)  # kept links, member order
    claimed: dict[str, list[str]] = field(default_factory=dict)  # every claim, member order
    claimants: dict[str, list[str]] = field(default_factory=dict)  # every claim, name order
    missing: dict[str, list[str]] = field(default_factory=dict)  # members naming no HyperNode
    self_claims: list[str] = field(default_factory=list)
    second_claims: list[SecondClaim] = field(default_factory=list)
    cycles: list[list[str]] = field(default_factory=list)  # member order, first name repeated

    def problems(self) -> list[str]:
        """What makes the tree invalid, one line each (the scheduler's words)."""
        out = [f"HyperNode {n} lists itself as a member (cycle)" for n in self.self_claims]
        out += [
            f"HyperNode {c.child} already has a parent {c.parent}; {c.claimant} also claims it"
            for c in self.second_claims
        ]
        out += ["HyperNode cycle: " + " -> ".join(c) for c in self.cycles]
        return out

    def cycle_of(self, name: str) -> list[str] | None:
        """The cycle ``name`` is on, or the first one its claims lead down into (a HyperNode
        listing itself is a cycle of one), or None."""
        on = {n: c for c in self.cycles for n in c}
        on.update((n, [n, n]) for n in self.self_claims)
        seen: set[str] = set()
        stack = [name]
        while stack:
            cur = stack.pop()
            if cur in on:
                return on[cur]
            if cur in seen:
                continue
            seen.add(cur)
            stack.extend(reversed(self.claimed.get(cur, [])))
        return None


def link_hypernodes(claims: Mapping[str, Sequence[str]]) -> HyperNodeLinks:
    """The links of the HyperNodes in ``claims`` (name -> names of its exactMatch HyperNode
    members, in member order); see the module docstring for the rules."""
    out = HyperNodeLinks()
    names = sorted(claims)
    for p in names:
        out.children[p] = []
        out.claimed[p] = []
    for p in names:
        for kid in dict.fromkeys(claims[p]):
            if kid not in claims:
                out.missing.setdefault(p, []).append(kid)
            elif kid == p:
                out.self_claims.append(p)
            else:
                out.claimed[p].append(kid)
                out.claimants.setdefault(kid, []).append(p)
                if kid in out.parent:
                    out.second_claims.append(SecondClaim(kid, out.parent[kid], p))
                else:
                    out.parent[kid] = p
                    out.children[p].append(kid)
    _break_cycles(out, names)
    return out


def _break_cycles(links: HyperNodeLinks, names: list[str]) -> None:
    """Find every cycle of parent links; report it in member order from its smallest name and
    remove the link into that name."""
    done: set[str] = set()
    for start in names:
        path: list[str] = []
        on_path: set[str] = set()
        cur: str | None = start
        while cur is not None and cur not in done and cur not in on_path:
            path.append(cur)
            on_path.add(cur)
            cur = links.parent.get(cur)
        if cur is not None and cur in on_path:
            upward = path[path.index(cur) :]  # child -> parent -> ...
            member_order = list(reversed(upward))  # parent -> child -> ...
            first = min(member_order)
            i = member_order.index(first)
            cycle = member_order[i:] + member_order[:i]
            links.cycles.append([*cycle, first])
            parent = links.parent.pop(first)
            links.children[parent].remove(first)
        done.update(path)


def subtree_members(links: HyperNodeLinks, direct: Mapping[str, set[T]]) -> dict[str, set[T]]:
    """Everything under each HyperNode through the kept links: its ``direct`` members (real
    nodes, as names or indices) and those of every descendant."""
    out: dict[str, set[T]] = {}
    for root in links.children:
        if root in out:
            continue
        stack: list[tuple[str, bool]] = [(root, False)]
        while stack:
            name, expanded = stack.pop()
            if name in out:
                continue
            kids = links.children.get(name, [])
            if expanded:
                got = set(direct.get(name, ()))
                for k in kids:
                    got |= out[k]
                out[name] = got
            else:
                stack.append((name, True))
                stack.extend((k, False) for k in kids if k not in out)
    return out
