"""The HyperNode tree as a user should see it: tiers, node sets, occupancy, and what is wrong.

The tree is read with the scheduler's own rule (:mod:`hyperplace.kube.hypertree`) but,
instead of silently marking it "not ready", a reason is kept on every HyperNode at fault:
cycles, a second parent, members that select nothing, members naming objects that do
not exist, all in red. Only a cycle or a second parent makes the tree not ready (Volcano
then schedules no job that carries a network topology); the rest are shown as problems.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperplace.api import HyperNode
from hyperplace.kube.hypertree import child_claims, link_hypernodes, subtree_members
from hyperplace.kube.members import node_labels_of, resolve_member_nodes_many
from hyperplace.kube.objects import TERMINAL_PHASES, namespaced_key, podgroup_key_of

from .resources import node_allocatable, pod_node, pod_phase, used_by_node

# How pods that belong to no PodGroup are counted in per-HyperNode job lists.
NO_GROUP = "other pods"


def natural_key(text: str) -> list[Any]:
    """``node2`` sorts before ``node10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def natural_order(d: Mapping[str, Any]) -> dict[str, Any]:
    """``d`` with its keys in :func:`natural_key` order (how every listing is shown)."""
    return {k: d[k] for k in sorted(d, key=natural_key)}


@dataclass
class HyperNodeView:
    """One HyperNode as displayed: resolved members, links and what is wrong with it."""

    name: str
    tier: int
    tier_name: str | None
    direct_nodes: set[str] = field(default_factory=set)
    children: list[str] = field(default_factory=list)
    parent: str | None = None
    nodes: set[str] = field(default_factory=set)  # every real node below, children included
    problems: list[str] = field(default_factory=list)  # shown in red
    notes: list[str] = field(default_factory=list)  # odd but harmless
    # The problems that make the scheduler cache not ready (a cycle or a second parent), as in
    # Volcano; a member naming a missing Node or selecting nothing is shown but does not block.
    blocking: list[str] = field(default_factory=list)
    in_cycle: bool = False
    # Head-of-queue reservations holding this HyperNode: "<ns>/<podgroup> since <time>".
    held_for: list[str] = field(default_factory=list)


@dataclass
class TopologyView:
    """The display tree plus node capacity and the pods running on each node."""

    hypernodes: dict[str, HyperNodeView]
    roots: list[str]  # no parent and not part of a cycle
    node_names: list[str]  # every Node, natural order
    unplaced_nodes: list[str]  # Nodes in no HyperNode
    allocatable: dict[str, dict[str, int]]
    used: dict[str, dict[str, int]]
    pods_by_node: dict[str, list[str]]  # "ns/pod" of running pods
    job_of_pod: dict[str, str]  # "ns/pod" -> "ns/podgroup"

    @property
    def ready(self) -> bool:
        return not any(h.blocking for h in self.hypernodes.values())

    # node -> leaf_of(node), made on first use (once for all pods, not a scan per pod)
    _leaves: dict[str, str] | None = field(default=None, init=False, repr=False, compare=False)

    def leaf_of(self, node: str) -> str | None:
        """The lowest-tier HyperNode holding ``node`` directly (ties: name order)."""
        if self._leaves is None:
            best: dict[str, HyperNodeView] = {}
            for h in self.hypernodes.values():
                for n in h.direct_nodes:
                    b = best.get(n)
                    if b is None or (h.tier, h.name) < (b.tier, b.name):
                        best[n] = h
            self._leaves = {n: h.name for n, h in best.items()}
        return self._leaves.get(node)

    def ordered_children(self, name: str) -> list[str]:
        return sorted(self.hypernodes[name].children, key=natural_key)

    def free_total(self, nodes: Iterable[str], resource: str) -> tuple[int, int]:
        free = total = 0
        for n in nodes:
            alloc = self.allocatable.get(n, {}).get(resource, 0)
            total += alloc
            free += alloc - self.used.get(n, {}).get(resource, 0)
        return free, total

    def jobs_on(self, nodes: Iterable[str]) -> dict[str, int]:
        """``{"ns/podgroup": pods}`` running on these nodes; pods without a PodGroup count
        together under :data:`NO_GROUP`."""
        out: dict[str, int] = {}
        for n in nodes:
            for p in self.pods_by_node.get(n, []):
                j = self.job_of_pod.get(p, NO_GROUP)
                out[j] = out.get(j, 0) + 1
        return out


def mark_reservations(topo: TopologyView, podgroups: Iterable[Mapping[str, Any]]) -> None:
    """Mark the HyperNodes that PodGroups' ``HyperNodeReserved`` conditions hold."""
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from scheduler_plugin.model.reservation import RESERVED_CONDITION, held_hypernode

    for pg in podgroups:
        for c in (pg.get("status") or {}).get("conditions") or []:
            if c.get("type") != RESERVED_CONDITION or c.get("status") != "True":
                continue
            hn = held_hypernode(str(c.get("message") or ""))
            v = topo.hypernodes.get(hn or "")
            if v is not None:
                who = namespaced_key(pg)
                v.held_for.append(f"{who} since {c.get('lastTransitionTime') or '?'}")


def build_topology(
    hypernodes: Iterable[HyperNode],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]] = (),
) -> TopologyView:
    """Resolve members, link parents and children with the scheduler's rule
    (:func:`~hyperplace.kube.hypertree.link_hypernodes`), find problems."""
    nodes = list(nodes)
    pods = list(pods)
    labels = node_labels_of(nodes)
    existing = set(labels)
    hns = list(hypernodes)
    views: dict[str, HyperNodeView] = {
        h.name: HyperNodeView(h.name, h.spec.tier, h.spec.tier_name) for h in hns
    }

    # Every Node member of every HyperNode resolved at once (one RE2-set pass for the regexes).
    node_members = [m for h in hns for m in h.spec.members if m.type == "Node"]
    resolved = iter(resolve_member_nodes_many(node_members, labels))
    for h in hns:
        v = views[h.name]
        for i, m in enumerate(h.spec.members):
            sel = m.selector
            if m.type == "Node":
                selected = next(resolved)
                missing = sorted(selected - existing, key=natural_key)
                if missing:
                    v.problems.append(f"member {i} names Node {', '.join(missing)}, which does not exist")
                if not selected:
                    v.problems.append(
                        f"member {i} ({'/'.join(sel.kinds()) or 'no selector'}) selects no Node"
                    )
                v.direct_nodes |= selected & existing
                continue
            if sel.exact_match is None:
                # Volcano links HyperNode members by exactMatch only; others are ignored.
                v.notes.append(
                    f"member {i}: HyperNode members need exactMatch; {'/'.join(sel.kinds())} is ignored"
                )
                continue
            child = sel.exact_match.name
            if child not in views:
                v.problems.append(f"member {i} names HyperNode {child}, which does not exist")

    # Parents, children, cycles and second parents exactly as the scheduler reads them.
    links = link_hypernodes({h.name: child_claims(h) for h in hns})
    for name in links.self_claims:
        v = views[name]
        v.problems.append("lists itself as a member (cycle)")
        v.blocking.append(v.problems[-1])
        v.in_cycle = True
    for claim in links.second_claims:
        c = views[claim.child]
        c.problems.append(f"has two parents: {claim.parent} and {claim.claimant}")
        c.blocking.append(c.problems[-1])
        views[claim.claimant].problems.append(
            f"claims {claim.child}, which already belongs to {claim.parent}"
        )
    for name, v in views.items():
        v.parent = links.parent.get(name)
        v.children = list(links.children.get(name, []))
    for cycle in links.cycles:
        text = "cycle: " + " -> ".join(cycle)
        for name in cycle[:-1]:
            v = views[name]
            v.in_cycle = True
            v.problems.append(text)
            v.blocking.append(text)
    real = subtree_members(links, {name: v.direct_nodes for name, v in views.items()})
    for v in views.values():
        v.nodes = real.get(v.name, set())
        for child_name in v.children:
            if views[child_name].tier >= v.tier:
                v.notes.append(
                    f"child {child_name} has tier {views[child_name].tier}, not below this tier {v.tier}"
                )
        if not v.nodes and not any("selects no Node" in p for p in v.problems):
            v.problems.append("contains no Node")

    roots = sorted((n for n, v in views.items() if v.parent is None and not v.in_cycle), key=natural_key)
    names = sorted(existing, key=natural_key)
    covered: set[str] = set()
    for v in views.values():
        covered |= v.direct_nodes
    pods_by_node: dict[str, list[str]] = {}
    job_of_pod: dict[str, str] = {}
    for p in pods:
        node = pod_node(p)
        if node is None or pod_phase(p) in TERMINAL_PHASES:
            continue
        k = namespaced_key(p)
        pods_by_node.setdefault(node, []).append(k)
        g = podgroup_key_of(p)
        if g:
            job_of_pod[k] = g
    for lst in pods_by_node.values():
        lst.sort(key=natural_key)
    return TopologyView(
        hypernodes=views,
        roots=roots,
        node_names=names,
        unplaced_nodes=[n for n in names if n not in covered],
        allocatable={str((n.get("metadata") or {}).get("name")): node_allocatable(n) for n in nodes},
        used=used_by_node(pods),
        pods_by_node=pods_by_node,
        job_of_pod=job_of_pod,
    )
