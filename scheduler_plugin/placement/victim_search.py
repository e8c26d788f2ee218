"""Topology-aware victim planning for the ``preempt`` and ``reclaim`` actions (pure: no I/O,
no session: it reads the snapshot and the session's allocation state).

Volcano's legacy preempt walks nodes one preemptor pod at a time and skips jobs with a network
topology; its gang actions look at a few domains and evict whole bundles. Here a pending gang
(the preemptor) is placed domain first:

1. *Victim units* (:mod:`.victim_units`). The pods the session's plugins allow (the action
   asks ``Session.preemptable`` / ``Session.reclaimable``) are grouped per victim job into
   units: single "spare" pods, which the job can lose while keeping its minMember (and each
   partition its size, each task its minTaskMember), and the whole gang (every running pod),
   which breaks it. A victim gang is
   never left below its minimum: either enough of its pods stay, or all of them go. PodGroups
   annotated ``volcano.sh/preemptable: "false"`` and pods of critical priority are never
   victims, whatever the plugins say.
2. *Feasibility with every victim gone.* For each tier of the preemptor's gradient (lowest
   first; the same gradients allocate uses), per-shape fit counts with all allowed victims
   removed, plus the partition capacities allocate checks, prune the domains that cannot host
   the gang's minimum even then.
3. *Fewest victims per domain.* Units are ranked by disruption (spare pods before whole gangs,
   then victim priority, then running time lost). In each feasible domain a binary search
   finds the shortest prefix of that ranking after which the gang fits, then units are dropped
   again, most disruptive first, while it still fits, so only what is needed goes.
4. *The domain with the least disruption* of the lowest tier wins: fewest gangs broken, lowest
   victim priority, fewest pods stopped, least running time lost. The action then places the gang
   exactly on the state without its victims (``actions/preempt.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..algorithms.demand import Demand
from ..algorithms.victim_units import VictimUnits, build_units
from ..framework.alloc_state import AllocState
from ..model.jobs import TaskInfo
from ..model.snapshot import ClusterSnapshot, pods_fitting

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

# Domains of one tier examined in detail (after the all-victims count check) and exact
# placements tried; both bound the work on huge trees, the counts make misses rare.
MAX_DOMAINS_PER_TIER = 16
# Units re-checked for removal after the binary search (most disruptive first), in the
# PRUNED_DOMAINS domains whose estimate is best.
MAX_PRUNE_TRIALS = 32
PRUNED_DOMAINS = 3


# ---------------------------------------------------------------------------------- fit
class FitCounter:
    """Per-shape fit counts on the session state with some pods' requests given back."""

    def __init__(self, snap: ClusterSnapshot, state: AllocState, demand: Demand) -> None:
        self.snap = snap
        self.tree = snap.tree
        self.state = state
        self.demand = demand
        self._bottom_up = np.argsort(-self.tree.depth, kind="stable").tolist()
        # Per shape of the gang, the filters that judge it whose verdict victims change and
        # whose verdict for its first pod bounds the rest (InterPodAffinity): asked with the
        # victims gone, so a pod kept out by the terms of pods that may go finds its room.
        self.judged: dict[int, list[tuple[Any, Any]]] = {
            sid: [
                (f, fst)
                for f, fst in state.filters
                if getattr(f, "first_pod_bounds", False) and f.applies(fst, snap.shapes[sid].constraints)
            ]
            for sid in demand.total
        }
        self.judges = any(self.judged.values())
        # Shapes a filter counts together: the pods of one claim template are a shape each, but
        # they share a node's devices, so their demand is held against one joint count (else
        # two pods would each count the same four free GPUs).
        self.rep: dict[int, int] = {}
        self.group_demand: dict[int, int] = {}
        firsts: dict[Any, int] = {}
        for sid, k in demand.total.items():
            key = state.count_key(sid)
            r = firsts.setdefault(key, sid) if key is not None else sid
            self.rep[sid] = r
            self.group_demand[r] = self.group_demand.get(r, 0) + k
        self.joint = {r for r, n in Counter(self.rep.values()).items() if n > 1}

    @contextmanager
    def _without(self, sid: int, gone: Sequence[TaskInfo]) -> Iterator[None]:
        """The judging filters of shape ``sid`` see the pods ``gone`` leave, then come back."""
        by_shape: dict[int, list[int]] = {}
        for t in gone:
            if t.node >= 0:
                by_shape.setdefault(t.shape, []).append(t.node)
        moves = [
            (self.snap.shapes[s].constraints, np.asarray(n, dtype=np.int64)) for s, n in by_shape.items()
        ]
        judged = self.judged.get(sid, [])
        for f, fst in judged:
            for pod, nodes in moves:
                f.unreserve(fst, pod, nodes)
        try:
            yield
        finally:
            for f, fst in judged:
                for pod, nodes in moves:
                    f.reserve(fst, pod, nodes)

    def counts(self, sid: int, nodes: I64 | None, freed: I64, gone: Sequence[TaskInfo] = ()) -> I64:
        """Pods of shape ``sid`` each of ``nodes`` (all when None) could take with ``freed`` back
        (the requests of the pods ``gone``)."""
        shape = self.snap.shapes[sid]
        st = self.state
        if nodes is None:
            free = st.alloc - st.used + freed
            mask = self.snap.static_mask(shape)
        else:
            free = st.alloc[nodes] - st.used[nodes] + freed
            mask = self.snap.static_mask(shape)[nodes]
        c = np.where(mask, pods_fitting(free, shape.requests), 0)
        # The stateful filters' own bound per node (one pod with host ports, one that repels its
        # own kind); what the placed pods add (port conflicts, affinity and spread counts, which
        # a victim's leaving changes too) is left to the exact placement. A filter whose verdict
        # no victim changes (a claim's volume elsewhere) is asked as it stands.
        for f, fst in st.filters:
            if not f.applies(fst, shape.constraints):
                continue
            most = f.most_per_node(shape.constraints)
            if most is not None:
                c = np.minimum(c, most)
            if getattr(f, "victims_change_nothing", False):
                f.cap_counts(fst, shape.constraints, np.arange(len(c)) if nodes is None else nodes, c)
        if self.judged.get(sid):
            joint = sid in self.joint
            with self._without(sid, gone):
                for f, fst in self.judged[sid]:
                    cap = f.cap_counts_joint if joint and hasattr(f, "cap_counts_joint") else f.cap_counts
                    cap(fst, shape.constraints, np.arange(len(c)) if nodes is None else nodes, c)
        return c

    def _pcap(self, per_node: I64, limit: int, size: int, within: list[int] | None) -> I64:
        tree = self.tree
        dom = tree.domain_sums(per_node)
        out = np.where(tree.tiers <= limit, dom // max(size, 1), 0).astype(np.int64)
        order = self._bottom_up if within is None else within[::-1]
        for h in order:
            if tree.tiers[h] > limit and tree.children[h]:
                out[h] = int(out[tree.children[h]].sum())
        return out

    def feasible_all(self, ids: I64, freed_all: I64, gone: Sequence[TaskInfo]) -> npt.NDArray[np.bool_]:
        """Which of ``ids`` could host the gang if every allowed victim (``gone``) left (counts)."""
        ok = np.ones(len(ids), dtype=bool)
        per_shape: dict[int, I64] = {}
        for sid, k in self.group_demand.items():
            per_shape[sid] = self.counts(sid, None, freed_all, gone)
            ok &= self.tree.domain_sums(per_shape[sid])[ids] >= k
        for (sid, limit, k), n in self.demand.classes.items():
            ok &= self._pcap(per_shape[self.rep.get(sid, sid)], limit, k, None)[ids] >= n
        return ok

    def fits_in(self, d: int, nodes: I64, freed: I64, gone: Sequence[TaskInfo] = ()) -> bool:
        """Does the gang fit in domain ``d`` (its ``nodes``) with ``freed`` given back by the
        pods ``gone`` (counts)."""
        per_shape: dict[int, I64] = {}
        for sid, k in self.group_demand.items():
            c = self.counts(sid, nodes, freed, gone)
            if int(c.sum()) < k:
                return False
            per_shape[sid] = c
        tree = self.tree
        for (sid, limit, k), n in self.demand.classes.items():
            c = per_shape[self.rep.get(sid, sid)]
            if tree.tiers[d] <= limit:
                if int(c.sum()) // max(k, 1) < n:
                    return False
                continue
            full = np.zeros(self.snap.num_nodes, dtype=np.int64)
            full[nodes] = c
            if self._pcap(full, limit, k, tree.subtree(d))[d] < n:
                return False
        return True


# ---------------------------------------------------------------------------------- plan
@dataclass
class Plan:
    """The victims that make room for a gang in one domain, and what that costs."""

    domain: int
    tier: int
    victims: list[TaskInfo]
    broken: list[str]  # victim jobs evicted whole
    cost: tuple[int, int, int, float]  # gangs broken, highest victim priority, pods, seconds lost
    considered: int = 0  # domains of the tier examined

    def describe(self, place: str) -> str:
        """One line: where (``place``: the domain as the user knows it), how many victims, and
        why this domain."""
        jobs = len({t.job for t in self.victims})
        return (
            f"tier {self.tier}: {place} fits the gang after evicting {len(self.victims)} pods of "
            f"{jobs} job(s), {len(self.broken)} gang(s) broken, highest victim priority {self.cost[1]} "
            f"(least disruption of {self.considered} domain(s) that could fit at this tier)"
        )


@dataclass
class Outcome:
    """The result of planning for one gang: a plan, or why there is none."""

    plans: list[Plan] = field(default_factory=list)  # best first, lowest tier only
    why: str = ""


def _domain_plan(
    fc: FitCounter,
    units: VictimUnits,
    d: int,
    tier: int,
    pod_local: I64,
    n_nodes_d: int,
    prune: bool = True,
    need: I64 | None = None,
) -> Plan | None:
    """Fewest-disruption victims inside domain ``d`` (None when even all of them do not do).

    ``prune=False`` stops after the binary search (the shortest fitting prefix of the ranking):
    a cheap estimate used to pick the domains worth pruning. ``need``: what the victims must
    free in total besides the room (the preemptor's queue at its limit gives that much back
    first), None for nothing.
    """
    nodes = fc.tree.node_sets[d]
    r_dim = units.req.shape[1]
    pd = np.flatnonzero(pod_local >= 0)
    sr, wr = units.spare_rank[pd], units.whole_rank[pd]
    ranks = np.unique(np.concatenate([sr[sr >= 0], wr[wr >= 0]]))
    loc = pod_local[pd]
    req = units.req[pd]

    def freed_for(mask: npt.NDArray[np.bool_]) -> I64:
        out = np.zeros((n_nodes_d, r_dim), dtype=np.int64)
        if mask.any():
            np.add.at(out, loc[mask], req[mask])
        return out

    def fits(mask: npt.NDArray[np.bool_]) -> bool:
        freed = freed_for(mask)
        if need is not None and not bool((freed.sum(axis=0) >= need).all()):
            return False
        gone = [units.tasks[i] for i in pd[mask].tolist()] if fc.judges else ()
        return fc.fits_in(d, nodes, freed, gone)

    def fits_set(chosen: I64) -> bool:
        return fits(np.isin(sr, chosen) | np.isin(wr, chosen))

    if fits(np.zeros(len(pd), dtype=bool)):
        return Plan(d, tier, [], [], (0, -(1 << 62), 0, 0.0))
    if not len(ranks):
        return None
    n_units = len(units.broken)

    def search(perm: I64) -> list[int] | None:
        """The shortest prefix of ``perm`` (unit ranks) after which the gang fits."""
        pos = np.full(n_units + 1, n_units, dtype=np.int64)  # index -1 (no unit) -> never
        pos[perm] = np.arange(len(perm))
        psr, pwr = pos[sr], pos[wr]

        def fits_j(j: int) -> bool:
            return fits((psr <= j) | (pwr <= j))

        if not fits_j(len(perm) - 1):
            return None
        lo, hi = 0, len(perm) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if fits_j(mid):
                hi = mid
            else:
                lo = mid + 1
        got = [int(r) for r in perm[: lo + 1]]
        # A gang that goes whole makes its spare units redundant.
        whole_jobs = {units.job[r] for r in got if units.broken[r]}
        return [r for r in got if units.broken[r] or units.job[r] not in whole_jobs]

    def cost(chosen: list[int]) -> tuple[int, int, int, float]:
        # Fewest gangs broken, lowest victim priority, then fewest pods stopped (between domains
        # that break as many gangs, the one that stops fewer pods), then least running time lost.
        broken = {units.job[r] for r in chosen if units.broken[r]}
        prio = max((units.prio[r] for r in chosen), default=0)
        return (
            len(broken),
            prio,
            sum(units.size[r] for r in chosen),
            float(sum(units.lost[r] for r in chosen)),
        )

    # Two orders: disruption rank (cheapest units first), and spare pods first then whole gangs
    # with the most pods in this domain first (fewest gangs for the room they free).
    found = search(ranks)
    if found is None:
        return None
    whole_mask = np.array([units.broken[r] for r in ranks.tolist()], dtype=bool)
    if whole_mask.any():
        in_d = np.bincount(wr[wr >= 0], minlength=n_units)
        w = ranks[whole_mask]
        alt = np.concatenate([ranks[~whole_mask], w[np.lexsort((w, -in_d[w]))]])
        other = search(alt)
        if other is not None and cost(other) < cost(found):
            found = other
    chosen = sorted(found)
    # Drop units again, most disruptive first, while the gang still fits.
    # A class whose tier limit the domain meets is implied by the per-shape totals.
    if not prune:
        pass
    elif (
        need is not None
        or fc.judges  # a unit taken back changes the verdicts beyond its own nodes
        or any(limit < fc.tree.tiers[d] for (_, limit, _) in fc.demand.classes)
    ):
        for r in sorted(chosen, reverse=True)[:MAX_PRUNE_TRIALS]:
            rest = np.array([x for x in chosen if x != r], dtype=np.int64)
            if fits_set(rest):
                chosen = rest.tolist()
    else:
        chosen = _prune_local(fc, nodes, chosen, sr, wr, loc, req, freed_for)
    broken = sorted({units.job[r] for r in chosen if units.broken[r]})
    victims: list[TaskInfo] = []
    if prune:
        mask = units.members(np.array(chosen, dtype=np.int64))
        victims = [units.tasks[i] for i in np.flatnonzero(mask).tolist()]
    return Plan(d, tier, victims, broken, cost(chosen))  # no pod is in two chosen units


def _prune_local(
    fc: FitCounter,
    nodes: I64,
    chosen: list[int],
    sr: I64,
    wr: I64,
    loc: I64,
    req: I64,
    freed_for: Callable[[npt.NDArray[np.bool_]], I64],
) -> list[int]:
    """Drop chosen units, most disruptive first, while the counts still fit the gang.

    Without partition classes a fit is "per shape, the domain's count sum >= demand", so taking
    one unit back changes the counts of its own nodes only: each trial costs the unit's size,
    not the domain's.
    """
    arr = np.array(chosen, dtype=np.int64)
    in_sr, in_wr = np.isin(sr, arr), np.isin(wr, arr)
    mask = in_sr | in_wr
    freed = freed_for(mask)
    owner = np.where(in_wr, wr, np.where(in_sr, sr, -1))  # each pod in one chosen unit at most
    pods_of: dict[int, list[int]] = {}
    for i in np.flatnonzero(mask).tolist():
        pods_of.setdefault(int(owner[i]), []).append(i)
    total = fc.group_demand
    counts = {sid: fc.counts(sid, nodes, freed) for sid in total}
    sums = {sid: int(c.sum()) for sid, c in counts.items()}
    keep = set(chosen)
    for r in sorted(chosen, reverse=True)[: MAX_PRUNE_TRIALS * 2]:
        idx = pods_of.get(r)
        if not idx:
            keep.discard(r)
            continue
        ln = loc[idx]
        touched = np.unique(ln)
        back = freed[touched].copy()
        pos = np.searchsorted(touched, ln)
        np.subtract.at(back, pos, req[idx])
        new = {sid: fc.counts(sid, nodes[touched], back) for sid in total}
        if all(
            sums[sid] - int(counts[sid][touched].sum()) + int(new[sid].sum()) >= k for sid, k in total.items()
        ):
            keep.discard(r)
            freed[touched] = back
            for sid in total:
                sums[sid] += int(new[sid].sum()) - int(counts[sid][touched].sum())
                counts[sid][touched] = new[sid]
    return [r for r in chosen if r in keep]


def plan_victims(
    snap: ClusterSnapshot,
    state: AllocState,
    demand: Demand,
    levels: list[list[int]],
    allowed: list[TaskInfo],
    gone: set[str],
    need: I64 | None = None,
    max_domains: int = MAX_DOMAINS_PER_TIER,
    whole_gangs: bool = True,
    job_rank: Mapping[str, int] | None = None,
) -> Outcome:
    """Domains (best first, of the lowest tier where any fits) and victims for a gang asking
    ``demand``: ``levels`` are the tiers of candidate HyperNodes (its gradient), ``allowed`` the
    pods the plugins let it evict and ``gone`` the pods already leaving. ``need`` (a resource
    vector): what the victims must free in total on top of making room, as when the gang's
    queue is at its limit and gives back from its own pods first. ``max_domains``: domains of a
    tier examined in detail (Volcano's gang actions' ``maxDomains``); ``whole_gangs`` False:
    victims are spare pods only, no gang is broken (their ``allowWholeBundle: false``).
    ``job_rank``: victims' jobs ranked before their priorities (:func:`build_units`)."""
    tree = snap.tree
    if need is not None and not need.any():
        need = None
    if not allowed:
        return Outcome(why="no running pod may be evicted for it")
    units = build_units(snap, allowed, gone, whole_gangs, job_rank)
    fc = FitCounter(snap, state, demand)
    n = snap.num_nodes
    freed_all = np.zeros((n, units.req.shape[1]), dtype=np.int64)
    np.add.at(freed_all, units.node, units.req)
    n_pods = sum(demand.total.values())
    local = np.full(n, -1, dtype=np.int64)  # node -> index inside the domain being examined
    for level in levels:
        ids = np.asarray(level, dtype=np.int64)
        if not len(ids):
            continue
        ok = fc.feasible_all(ids, freed_all, units.tasks if fc.judges else ())
        cands = ids[ok]
        if not len(cands):
            continue
        # Most room already free first: those need the fewest victims.
        sid0 = max(demand.total, key=lambda s: demand.total[s])
        now = state.dom_counts(snap.shapes[sid0])[cands]
        cands = cands[np.lexsort((cands, -now))][: max(max_domains, 1)]

        def plan_in(d: int, prune: bool) -> Plan | None:
            nodes = tree.node_sets[d]
            local[nodes] = np.arange(len(nodes))
            try:
                return _domain_plan(
                    fc, units, d, int(tree.tiers[d]), local[units.node], len(nodes), prune, need
                )
            finally:
                local[nodes] = -1

        # Every domain gets the cheap estimate; the best few are pruned to their fewest victims.
        rough = [pl for d in cands.tolist() if (pl := plan_in(d, False)) is not None]
        rough.sort(key=lambda p: (p.cost, tree.names[p.domain]))
        plans = [pl for p in rough[:PRUNED_DOMAINS] if (pl := plan_in(p.domain, True)) is not None]
        if plans:
            plans.sort(key=lambda p: (p.cost, tree.names[p.domain]))
            for p in plans:
                p.considered = len(rough)
            return Outcome(plans=plans)
    if need is not None:
        return Outcome(
            why=f"the gang's {n_pods} pods do not fit, with its queue back within its limit, in any allowed "
            f"domain even if all {len(allowed)} evictable pods left"
        )
    return Outcome(
        why=f"the gang's {n_pods} pods do not fit in any allowed domain even if all {len(allowed)} "
        "evictable pods left"
    )
