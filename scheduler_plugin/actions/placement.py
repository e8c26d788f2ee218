"""Fast domain search and exact placement (the heart of the scheduler).

Volcano dry-runs the whole job on every candidate HyperNode of every tier (per-pod filter +
score, then discard). Here, for every distinct pod shape, the session state keeps per-node fit
counts and their per-HyperNode sums, so:

1. *Prune by counts.* A candidate HyperNode H of the job's gradient is feasible only if, for
   every shape, ``count[H] >= demand``; for partitions of size k limited to tier L,
   ``pcap[H] >= #partitions`` where ``pcap`` is ``floor(count / k)`` at tiers <= L, summed
   over children above L (a partition must fit inside one domain of tier <= L). For one shape
   these counts are exact, so no dry run is wasted.
2. *Pick the lowest feasible tier* (gradient order) and, inside it, the domain with the best
   HyperNode bin-packing score (Volcano's HyperNodeOrderFn; ties: SubJob tasks already there,
   then name).
3. *Place exactly* on the chosen domain: real per-pod assignment updating free resources; if it
   fails (multi-resource or heterogeneous interactions), fall back to the next candidate.

Inside a domain, pods go to the fewest leaf domains (largest leaves first, best fit for the
remainder), nodes inside the partial leaf by node score (binpack etc.), and pods in rank order
(task index) onto nodes ordered by leaf then node name, so consecutive ranks share a leaf.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..framework.session import Session
from ..framework.statement import Statement
from ..model.explanation import (
    MAX_CANDIDATES_PER_TIER,
    Candidate,
    CandidateReport,
    CandidateTier,
    DomainSearch,
    Explanation,
    TierAttempt,
    predicate_summary_of_counts,
    shortage,
)
from ..model.jobs import JobInfo, SubJobInfo, TaskInfo
from ..model.node_filters import insufficient_resources
from ..model.snapshot import Shape

I64 = npt.NDArray[np.int64]

# Exact placements tried per gradient tier before giving up on it (counts make failures rare;
# the cap bounds the worst case on pathological multi-resource clusters).
MAX_EXACT_TRIES_PER_TIER = 16
_RANK = operator.attrgetter("rank")


@dataclass
class Group:
    """Tasks of one SubJob to place together (atomic) or as many as fit (not atomic)."""

    subjob: SubJobInfo
    tasks: list[TaskInfo]
    atomic: bool = True
    _demand: dict[int, int] | None = field(default=None, repr=False, compare=False)

    def demand(self) -> dict[int, int]:
        """Pods per shape (computed once; groups are not mutated after creation)."""
        if self._demand is None:
            out: dict[int, int] = {}
            for t in self.tasks:
                out[t.shape] = out.get(t.shape, 0) + 1
            self._demand = out
        return self._demand


@dataclass
class _Need:
    """What a unit asks of a domain: pods per shape (atomic groups), shapes of which at least
    one pod must fit (as-many-as-fit groups), partition classes and their capacities."""

    total: dict[int, int]
    loose: dict[int, int]  # pods per shape of the as-many-as-fit groups
    classes: dict[tuple[int, int, int], int]
    pcaps: dict[tuple[int, int, int], I64]


@dataclass
class UnitResult:
    """Outcome of placing one unit (a job's gang minimum or a later increment)."""

    ok: bool
    placed: int = 0
    job_domain: int = -1
    group_domains: dict[str, int] = field(default_factory=dict)
    explanation: Explanation | None = None


class Placer:
    """Domain search + exact placement on a session."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.snap = ssn.snap
        self.tree = ssn.snap.tree
        self.state = ssn.state
        # Children before parents, for the partition-capacity roll-up.
        self._bottom_up = np.argsort(-self.tree.depth, kind="stable").tolist()
        self._held: tuple[Statement, int, object, set[int]] | None = None
        alloc = self.snap.allocatable
        self._max_alloc = (
            np.maximum(alloc.max(axis=0), 1) if len(alloc) else np.ones(len(self.snap.resources))
        )

    # ------------------------------------------------------------------ helpers
    def shape(self, sid: int) -> Shape:
        """The snapshot shape with id ``sid``."""
        return self.snap.shapes[sid]

    def pcap(self, sid: int, limit: int, size: int) -> I64:
        """Partitions of ``size`` pods of shape ``sid`` each HyperNode can host (tier limit ``limit``)."""
        dom = self.state.dom_counts(self.shape(sid))
        tiers = self.tree.tiers
        out = np.where(tiers <= limit, dom // max(size, 1), 0).astype(np.int64)
        children = self.tree.children
        for h in self._bottom_up:
            if tiers[h] > limit and children[h]:
                out[h] = int(out[children[h]].sum())
        return out

    def _empty_node_fit(self, sid: int, nodes: I64) -> int:
        """Most pods of a shape one node of ``nodes`` could hold when empty (for 'N nodes short')."""
        req = self.shape(sid).requests
        pos = req > 0
        if not len(nodes) or not pos.any():
            return 1
        per = (self.snap.allocatable[nodes][:, pos] // req[pos]).min(axis=1)
        return max(int(per.max()), 1)

    def _closeness(self, cands: I64, allocated: int) -> I64:
        """Tier of LCA(candidate, allocated HyperNode): with pods already running, nearer domains
        come first (the intent of Volcano's LCA node score); all zero before the first placement."""
        if allocated < 0:
            return np.zeros(len(cands), dtype=np.int64)
        tree = self.tree
        return np.array([int(tree.tiers[tree.lca(int(c), allocated)]) for c in cands], dtype=np.int64)

    # ------------------------------------------------------------------ exact placement
    def _pick_nodes(
        self, task: TaskInfo, sj: SubJobInfo, cand: I64, cc: I64, k: int, used: set[int] | None = None
    ) -> tuple[I64, I64]:
        """Nodes (ordered by leaf, then name) and pods per node for ``k`` pods of one shape.

        ``used``: leaves the unit already holds. They are filled first (whole, then best fit),
        so the shapes of one gang share leaves instead of each opening its own.
        """
        tree = self.tree
        leaves = tree.leaf_of[cand]
        leaves = np.where(leaves >= 0, leaves, -(cand + 1))  # a node outside every leaf is its own leaf
        uniq, inv = np.unique(leaves, return_inverse=True)
        caps = np.bincount(inv, weights=cc).astype(np.int64)
        if used:
            fresh = ~np.isin(uniq, np.fromiter(used, dtype=np.int64, count=len(used)))
        else:
            fresh = np.zeros(len(uniq), dtype=bool)
        order = np.lexsort((uniq, -caps, fresh))
        caps_sorted = caps[order]
        cum = np.cumsum(caps_sorted)
        m = int(np.searchsorted(cum, k))  # leaves order[:m] are taken whole
        before = int(cum[m - 1]) if m > 0 else 0
        rem = k - before
        full = order[:m]
        take = np.isin(inv, full)
        per = np.where(take, cc, 0)
        if rem > 0:
            rest = caps_sorted[m:]
            fits = rest >= rem
            held = ~fresh[order[m:]]
            if (fits & held).any():
                fits &= held  # a leaf the unit holds beats a new one
            # Best fit: the smallest leaf that still fits (the last such in descending order).
            smallest = int(rest[fits].min())
            j = m + int(np.flatnonzero(fits & (rest == smallest))[-1])
            part = int(order[j])
            idx = np.flatnonzero(inv == part)
            if int(cc[idx].sum()) == rem:
                per[idx] = cc[idx]
            else:
                # Choose which nodes of the partial leaf by node score (binpack, ...), then name.
                scores = self.ssn.node_scores(task, sj, cand[idx])
                o = np.lexsort((cand[idx], -scores))
                sel = idx[o]
                c_sel = np.cumsum(cc[sel])
                last = int(np.searchsorted(c_sel, rem))
                per[sel[:last]] = cc[sel[:last]]
                per[sel[last]] = rem - (int(c_sel[last - 1]) if last > 0 else 0)
        chosen = np.flatnonzero(per > 0)
        # Rank order: leaf (name order = id order; stand-alone nodes last), then node name.
        leaf_key = np.where(leaves[chosen] >= 0, leaves[chosen], len(tree.names) + cand[chosen])
        o2 = np.lexsort((cand[chosen], leaf_key))
        chosen = chosen[o2]
        return cand[chosen], per[chosen]

    def _held_leaves(self, stmt: Statement) -> set[int]:
        """Leaves holding pods of ``stmt``, kept incrementally (a unit places many groups).

        The cache is trusted only while the op it last saw is still in place: a rollback
        followed by new allocations replaces it.
        """
        ops = stmt.ops
        c = self._held
        if c is None or c[0] is not stmt or c[1] > len(ops) or (c[1] and ops[c[1] - 1] is not c[2]):
            c = (stmt, 0, None, set())
        seen, held = c[1], c[3]
        if seen < len(ops):
            nodes = np.fromiter((n for _, n in ops[seen:]), dtype=np.int64)
            held.update(int(x) for x in np.unique(self.tree.leaf_of[nodes]) if x >= 0)
        self._held = (stmt, len(ops), ops[-1] if ops else None, held)
        return held

    def assign(self, stmt: Statement, group: Group, domain: int) -> int | None:
        """Place the group's tasks on nodes of ``domain``; None when an atomic group does not fit."""
        by_shape: dict[int, list[TaskInfo]] = {}
        for t in group.tasks:
            by_shape.setdefault(t.shape, []).append(t)
        # Larger pods first: they are the hard ones to fit; small pods fill around them.
        shapes = sorted(by_shape, key=lambda s: -float((self.shape(s).requests / self._max_alloc).max()))
        mark = stmt.mark()
        nodes_d = self.tree.node_sets[domain]
        placed = 0
        # Leaves this unit already holds (earlier groups, earlier shapes): later shapes fill them
        # first, so a gang's tasks share leaves rather than each picking its own.
        leaf_of = self.tree.leaf_of
        used = set(self._held_leaves(stmt))
        for sid in shapes:
            tasks = sorted(by_shape[sid], key=_RANK)
            k = len(tasks)
            c = self.state.node_counts(self.shape(sid))[nodes_d]
            nz = c > 0
            cand, cc = nodes_d[nz], c[nz]
            total = int(cc.sum())
            if total < k:
                if group.atomic:
                    stmt.rollback(mark)
                    return None
                k = total
                tasks = tasks[:k]
                if k == 0:
                    continue
            nodes, per = self._pick_nodes(tasks[0], group.subjob, cand, cc, k, used)
            node_of_task = np.repeat(nodes, per)
            stmt.allocate(tasks, node_of_task.tolist())
            used.update(int(x) for x in np.unique(leaf_of[nodes]) if x >= 0)
            # Verify: no node may exceed allocatable on a resource the pods request.
            req = self.shape(sid).requests > 0
            touched = np.unique(nodes)
            st = self.state
            if (st.used[touched][:, req] > st.alloc[touched][:, req]).any():  # pragma: no cover - invariant
                stmt.rollback(mark)
                return None
            placed += k
        return placed

    # ------------------------------------------------------------------ group in a job domain
    def place_group(
        self, stmt: Statement, group: Group, job_domain: int, attempts: list[TierAttempt] | None = None
    ) -> int | None:
        """Choose the SubJob's domain inside ``job_domain`` (its gradient) and place it exactly."""
        ssn = self.ssn
        sj = group.subjob
        levels = ssn.gradient(sj.topology, ssn.subjob_hn.get(sj.id, -1), job_domain)
        if isinstance(levels, str):
            if attempts is not None:
                attempts.append(TierAttempt(tier=self.tree.top_tier, candidates=0, note=levels))
            return None
        demand = group.demand()
        need = demand if group.atomic else dict.fromkeys(demand, 1)
        req_total = np.sum([t.requests for t in group.tasks], axis=0).astype(np.int64)
        for level in levels:
            ids = np.asarray(level, dtype=np.int64)
            ok = np.ones(len(ids), dtype=bool)
            for sid, k in need.items():
                ok &= self.state.dom_counts(self.shape(sid))[ids] >= k
            cands = ids[ok]
            if not len(cands):
                continue
            scores = ssn.hypernode_scores(sj, req_total, cands) if len(cands) > 1 else np.zeros(1)
            order = cands[np.lexsort((cands, -scores, self._closeness(cands, ssn.subjob_hn.get(sj.id, -1))))]
            for d in order[:MAX_EXACT_TRIES_PER_TIER].tolist():
                if self.assign(stmt, group, d) is not None:
                    return d
        return None

    # ------------------------------------------------------------------ batched partitions
    def batch_key(self, group: Group) -> tuple[int, int, int] | None:
        """Identical partitions (one shape, same size and tier limit, nothing allocated yet) batch."""
        sj = group.subjob
        topo = sj.topology
        if not group.atomic or topo is None or topo.mode != "hard" or topo.limit is None:
            return None
        if sj.id in self.ssn.subjob_hn:
            return None
        d = group.demand()
        if len(d) != 1:
            return None
        return (next(iter(d)), len(group.tasks), topo.limit)

    def place_batch(self, stmt: Statement, groups: Sequence[Group], job_domain: int) -> dict[str, int] | None:
        """Place identical partitions as Volcano's sequential greedy would, one domain at a time.

        Each partition takes the lowest tier with a domain that fits it and, there, the domain
        with the best HyperNode bin-packing score. Placing a partition only raises its domain's
        score and leaves the other domains of that tier untouched, so the sequential choice is
        "fill the best-scoring domain with as many partitions as it fits, then the next": done
        here with one count lookup per domain instead of a search per partition.
        """
        ssn = self.ssn
        g0 = groups[0]
        key = self.batch_key(g0)
        assert key is not None
        sid, k, _limit = key
        shape = self.shape(sid)
        levels = ssn.gradient(g0.subjob.topology, -1, job_domain)
        if isinstance(levels, str):
            return None
        remaining = list(groups)
        domains: dict[str, int] = {}
        mark = stmt.mark()
        req_one = shape.requests * k
        for level in levels:
            if not remaining:
                break
            ids = np.asarray(level, dtype=np.int64)
            fit = self.state.dom_counts(shape)[ids] // k
            ok = fit > 0
            if not ok.any():
                continue
            cands = ids[ok]
            scores = ssn.hypernode_scores(g0.subjob, req_one, cands) if len(cands) > 1 else np.zeros(1)
            for j in np.lexsort((cands, -scores)).tolist():
                if not remaining:
                    break
                d = int(cands[j])
                # Counts may have dropped if domains of this tier overlap (regex members): re-read.
                m = min(int(self.state.dom_counts(shape)[d]) // k, len(remaining))
                if m <= 0:
                    continue
                chunk, remaining = remaining[:m], remaining[m:]
                tasks = [t for g in chunk for t in sorted(g.tasks, key=_RANK)]
                nodes_d = self.tree.node_sets[d]
                c = self.state.node_counts(shape)[nodes_d]
                nz = c > 0
                nodes, per = self._pick_nodes(tasks[0], chunk[0].subjob, nodes_d[nz], c[nz], len(tasks))
                stmt.allocate(tasks, np.repeat(nodes, per).tolist())
                for g in chunk:
                    domains[g.subjob.id] = d
        if remaining:
            stmt.rollback(mark)
            return None
        return domains

    # ------------------------------------------------------------------ a job's unit
    def place(self, job: JobInfo, groups: Sequence[Group]) -> tuple[UnitResult, Statement]:
        """Topology path for jobs with hard topology or sub-group policies, flat path otherwise."""
        if job.with_hard_topology or job.has_policies:
            return self.place_unit(job, groups)
        return self.place_flat(job, groups)

    def place_unit(self, job: JobInfo, groups: Sequence[Group]) -> tuple[UnitResult, Statement]:
        """Topology path: job gradient, count pruning, best domain, exact placement of every group."""
        ssn, tree = self.ssn, self.tree
        levels = ssn.gradient(job.topology, ssn.job_hn.get(job.key, -1), tree.root)
        expl = Explanation(summary="")
        if isinstance(levels, str):
            expl.summary = f"network topology: {levels}"
            expl.reason = "NetworkTopology"
            return UnitResult(False, explanation=expl), Statement(ssn)
        atomic = [g for g in groups if g.atomic]
        total: dict[int, int] = {}
        for g in atomic:
            for sid, k in g.demand().items():
                total[sid] = total.get(sid, 0) + k
        loose = {t.shape for g in groups if not g.atomic for t in g.tasks}
        loose_total: dict[int, int] = {}
        for g in groups:
            if not g.atomic:
                for sid, k in g.demand().items():
                    loose_total[sid] = loose_total.get(sid, 0) + k
        # Partition classes: single-shape atomic groups whose own tier limit is tighter.
        classes: dict[tuple[int, int, int], int] = {}
        for g in atomic:
            topo = g.subjob.topology
            d = g.demand()
            if topo is not None and topo.mode == "hard" and topo.limit is not None and len(d) == 1:
                (sid, k) = next(iter(d.items()))
                key = (sid, topo.limit, k)
                classes[key] = classes.get(key, 0) + 1
        pcaps = {key: self.pcap(*key) for key in classes}
        req_total = np.zeros(len(self.snap.resources), dtype=np.int64)
        for g in groups:
            for t in g.tasks:
                req_total += t.requests
        default_sj = job.subjobs.get(job.key)
        # Most constrained groups first (see _constrained_first); if that order fails on a domain,
        # the SubJob order is tried too, so the reordering never loses a placement found before.
        first = self._constrained_first(groups)
        orders = [first] if first == list(groups) else [first, list(groups)]
        # The candidate list for ``explain``, only when asked (the decision does not need it).
        rec = self._search(job, groups) if ssn.record_candidates else None
        need = _Need(total, loose_total, classes, pcaps)
        for level in levels:
            ids = np.asarray(level, dtype=np.int64)
            ok = np.ones(len(ids), dtype=bool)
            for sid, k in total.items():
                ok &= self.state.dom_counts(self.shape(sid))[ids] >= k
            for sid in loose:
                ok &= self.state.dom_counts(self.shape(sid))[ids] >= 1
            for key, n in classes.items():
                ok &= pcaps[key][ids] >= n
            cands = ids[ok]
            tier = int(tree.tiers[ids[0]]) if len(ids) else -1
            if not len(cands):
                expl.add_tier(self._tier_attempt(tier, ids, total or loose_total, classes, pcaps, req_total))
                if rec is not None:
                    rec.tiers.append(self._candidate_tier(tier, ids, ok, [], None, {}, need))
                continue
            scores = ssn.hypernode_scores(default_sj, req_total, cands) if len(cands) > 1 else np.zeros(1)
            ptiers = self._partition_tier_sums(classes, cands) if len(cands) > 1 else np.zeros(1)
            spans = self._leaves_needed(total, cands) if len(cands) > 1 and tier > 1 else np.zeros(len(cands))
            close = self._closeness(cands, ssn.job_hn.get(job.key, -1))
            order = cands[np.lexsort((cands, -scores, spans, ptiers, close))]
            tried: dict[int, str | None] = {}
            for h in order.tolist():
                if len(tried) >= MAX_EXACT_TRIES_PER_TIER:
                    break
                placed = None
                for seq in orders:
                    placed = self._place_groups_in(seq, h)
                    if placed is not None:
                        break
                if placed is not None:
                    stmt, domains = placed
                    if rec is not None:
                        tried[h] = None
                        rec.chosen = tree.names[h]
                        ranking = (cands, scores, close, ptiers, spans)
                        rec.tiers.append(
                            self._candidate_tier(tier, ids, ok, order.tolist(), ranking, tried, need)
                        )
                        ssn.candidates.setdefault(job.key, CandidateReport()).add(rec)
                    return UnitResult(True, len(stmt.ops), h, domains), stmt
                tried[h] = "passes the fit counts, but exact placement of every pod failed"
            expl.add_tier(
                TierAttempt(
                    tier=tier,
                    candidates=len(ids),
                    note=f"{len(cands)} domains pass the counts but exact placement failed in {len(tried)} tried",
                )
            )
            if rec is not None:
                ranking = (cands, scores, close, ptiers, spans)
                rec.tiers.append(self._candidate_tier(tier, ids, ok, order.tolist(), ranking, tried, need))
        if rec is not None:
            ssn.candidates.setdefault(job.key, CandidateReport()).add(rec)
        expl.summary = self._summary(job, groups, total)
        expl.predicates = self._predicates_if_short(total)
        if not levels:
            limit = job.topology.limit if job.topology is not None else None
            expl.add_detail(f"no HyperNode has a tier <= {limit} (tiers present: {tree.sorted_tiers})")
        return UnitResult(False, explanation=expl), Statement(ssn)

    def _search(self, job: JobInfo, groups: Sequence[Group]) -> DomainSearch:
        """An empty record of the search about to run for ``groups`` of ``job``."""
        n = sum(len(g.tasks) for g in groups)
        gang = not self.ssn.job_ready(job)
        return DomainSearch(unit=f"gang minimum ({n} pods)" if gang else f"{n} more pods", gang=gang)

    def _candidate_tier(
        self,
        tier: int,
        ids: I64,
        ok: npt.NDArray[np.bool_],
        order: list[int],
        ranking: tuple[npt.NDArray[Any], ...] | None,
        tried: dict[int, str | None],
        need: _Need,
    ) -> CandidateTier:
        """One gradient tier as ``explain`` shows it: the feasible domains in the order the
        scheduler tried them (with the score and the sort keys ranked before it), then the
        domains that fail the counts, those that fit the most first, with what they lack."""
        names = self.tree.names
        out = CandidateTier(tier=tier, domains=len(ids), feasible=int(ok.sum()))
        chosen = next((h for h, why in tried.items() if why is None), None)
        listed = order[:MAX_CANDIDATES_PER_TIER]
        if chosen is not None and chosen not in listed:
            listed = [*listed[:-1], chosen]
        for h in listed:
            if h in tried:
                why = tried[h]
            elif chosen is not None:
                why = f"ranked after {names[chosen]}"
            else:
                why = f"not tried: at most {MAX_EXACT_TRIES_PER_TIER} exact placements per tier"
            score: float | None = None
            keys: dict[str, int] = {}
            if ranking is not None:
                cands, scores, close, ptiers, spans = ranking
                i = int(np.flatnonzero(cands == h)[0])  # only the listed few are looked up
                if len(cands) > 1:  # a lone candidate is not scored
                    score = float(scores[i])
                k = {"lcaTier": int(close[i]), "partitionTiers": int(ptiers[i]), "leaves": int(spans[i])}
                keys = {n: v for n, v in k.items() if v}
            out.candidates.append(Candidate(names[h], tier, True, score, why, keys))
        room = MAX_CANDIDATES_PER_TIER - len(out.candidates)
        bad = ids[~ok]
        if room > 0 and len(bad):
            demand = need.total or need.loose
            if demand:
                sid = max(demand, key=lambda x: demand[x])
                fit = self.state.dom_counts(self.shape(sid))[bad]
                bad = bad[np.lexsort((bad, -fit))]
            for h in bad[:room].tolist():
                out.candidates.append(Candidate(names[h], tier, False, None, self._lacking(h, need)))
        return out

    def _lacking(self, h: int, need: _Need) -> str:
        """What domain ``h`` lacks for the unit: pods per shape, resources, partitions."""
        parts: list[str] = []
        free = self.state.hn_alloc[h] - self.state.hn_used[h]
        # Atomic groups need all their pods; as-many-as-fit groups need room for one.
        for demand, more in ((need.total, ""), (need.loose, " more")):
            for sid, k in demand.items():
                have = int(self.state.dom_counts(self.shape(sid))[h])
                if have >= (k if not more else 1):
                    continue
                what = f"fits {have} of {k}{more} pods"
                if not self.snap.static_mask(self.shape(sid))[self.tree.node_sets[h]].any():
                    parts.append(f"{what}: no node passes the pods' node selector, affinity or taints")
                    continue
                per_node = self._empty_node_fit(sid, self.tree.node_sets[h])
                nodes_short = -(-(k - have) // per_node)
                lack = shortage(self.snap.resources, free, self.shape(sid).requests * k, nodes_short)
                parts.append(what + (", " + ", ".join(lack) if lack else ""))
        # Partitions are worth naming only when the pods themselves would fit (as _tier_attempt).
        for (sid, limit, k), n in need.classes.items() if not parts else ():
            pc = int(need.pcaps[(sid, limit, k)][h])
            if pc < n:
                parts.append(f"holds {pc} of {n} partitions of {k} pods within tier {limit}")
        return "; ".join(dict.fromkeys(parts)) or "fails the fit counts"

    def _partition_tier_sums(self, classes: dict[tuple[int, int, int], int], cands: I64) -> I64:
        """Lowest reachable sum of partition tiers inside each candidate job domain.

        The job's tier comes first, but among domains of that tier the partitions' own tiers
        matter next (a domain whose leaves each hold whole partitions beats one where they must
        straddle leaves, however well the latter bin-packs). For each partition class, count how
        many partitions fit at tier <= t for every tier t up to its limit and fill the lowest
        tiers first, as place_batch does. Classes are counted independently (a lower bound when
        two classes share a shape), which is enough to rank domains.
        """
        out = np.zeros(len(cands), dtype=np.int64)
        for (sid, limit, k), n in classes.items():
            prev = np.zeros(len(cands), dtype=np.int64)
            for t in self.tree.sorted_tiers:
                if t > limit:
                    break
                cap = np.minimum(self.pcap(sid, t, k)[cands], n)
                out += t * (cap - prev)
                prev = cap
        return out

    def _leaves_needed(self, total: dict[int, int], cands: I64) -> I64:
        """Fewest leaves each candidate domain needs for the gang (per shape, the largest leaves
        first; the most demanding shape counts). After the job's tier and the partitions' tiers,
        fewer leaves is the next goal: bin-packing alone prefers a well-packed domain even when
        its room is scattered over many leaves."""
        tree = self.tree
        out = np.zeros(len(cands), dtype=np.int64)
        for sid, k in total.items():
            counts = self.state.node_counts(self.shape(sid))
            for i, h in enumerate(cands.tolist()):
                nodes = tree.node_sets[h]
                c = counts[nodes]
                nz = c > 0
                if not nz.any():
                    continue
                leaves = tree.leaf_of[nodes[nz]]
                leaves = np.where(leaves >= 0, leaves, -(nodes[nz] + 1))  # a node outside every leaf
                _, inv = np.unique(leaves, return_inverse=True)
                caps = np.sort(np.bincount(inv, weights=c[nz]))[::-1]
                need = int(np.searchsorted(np.cumsum(caps), k)) + 1
                out[i] = max(out[i], need)
        return out

    def _constrained_first(self, groups: Sequence[Group]) -> list[Group]:
        """Groups ordered so the hardest to fit take their room first.

        Partitions with a hard tier limit must each fit inside one low-tier domain, while pods
        outside any partition may go anywhere in the job's domain: placed first, a free pod can
        take exactly the node a partition needed. So: hard-limited groups first (tightest limit
        first), then by their largest pod (relative to the largest node), biggest first; free pods
        come last and best-fit into the leftovers. The sort is stable and the batch key is part of
        it, so identical partitions stay adjacent and are still placed as one batch.
        """

        sizes: dict[int, float] = {}  # per shape: a unit has many groups but few shapes

        def size_of(sid: int) -> float:
            got = sizes.get(sid)
            if got is None:
                got = sizes[sid] = float((self.shape(sid).requests / self._max_alloc).max())
            return got

        def key(g: Group) -> tuple[int, int, float, int, int]:
            topo = g.subjob.topology
            hard = topo is not None and topo.mode == "hard" and topo.limit is not None
            limit = topo.limit if hard and topo is not None and topo.limit is not None else 1 << 30
            size = max(size_of(sid) for sid in g.demand())
            bkey = self.batch_key(g)
            return (0 if hard else 1, limit, -size, bkey[0] if bkey else -1, bkey[1] if bkey else -1)

        return sorted(groups, key=key)

    def _place_groups_in(self, groups: Sequence[Group], h: int) -> tuple[Statement, dict[str, int]] | None:
        """Place every group inside job domain ``h`` in the given order; None if an atomic one fails."""
        stmt = Statement(self.ssn)
        domains: dict[str, int] = {}
        i = 0
        while i < len(groups):
            g = groups[i]
            bkey = self.batch_key(g)
            if bkey is not None:
                j = i + 1
                while j < len(groups) and self.batch_key(groups[j]) == bkey:
                    j += 1
                got_many = self.place_batch(stmt, groups[i:j], h)
                if got_many is None:
                    stmt.discard()
                    return None
                domains.update(got_many)
                i = j
                continue
            i += 1
            got = self.place_group(stmt, g, h)
            if got is None:
                if g.atomic:
                    stmt.discard()
                    return None
                continue
            domains[g.subjob.id] = got
        if not stmt.ops:
            stmt.discard()
            return None
        return stmt, domains

    # ------------------------------------------------------------------ flat path
    def place_flat(self, job: JobInfo, groups: Sequence[Group]) -> tuple[UnitResult, Statement]:
        """Jobs without hard topology or sub-groups: Volcano's per-pod filter + score, gang-checked."""
        ssn = self.ssn
        stmt = Statement(ssn)
        if ssn.record_candidates:
            search = self._search(job, groups)
            search.note = (
                "no hard network topology: pods are placed one by one by node score, with no domain search"
            )
            ssn.candidates.setdefault(job.key, CandidateReport()).add(search)
        total: dict[int, int] = {}
        for g in groups:
            if g.atomic:
                for sid, k in g.demand().items():
                    total[sid] = total.get(sid, 0) + k
        root = self.tree.root
        short = {sid: k for sid, k in total.items() if self.state.dom_counts(self.shape(sid))[root] < k}
        if short:
            expl = Explanation(summary=self._summary(job, groups, total))
            req_total = np.sum([t.requests for g in groups for t in g.tasks], axis=0).astype(np.int64)
            ids = np.array([root], dtype=np.int64)
            expl.add_tier(self._tier_attempt(self.tree.top_tier, ids, total, {}, {}, req_total))
            expl.predicates = self._predicates_if_short(total)
            return UnitResult(False, explanation=expl), stmt
        for g in groups:
            for t in g.tasks:
                c = self.state.node_counts(self.shape(t.shape))
                cand = np.flatnonzero(c > 0)
                if not len(cand):
                    if g.atomic:
                        # Explain with the gang's earlier pods still in place (that is why this
                        # one has no room), then undo them.
                        text = self._predicate_text(t.shape)
                        stmt.discard()
                        expl = Explanation(summary=self._summary(job, groups, total))
                        expl.predicates = f"pod {t.key}: {text}"
                        expl.add_detail(
                            "each pod fits on its own, but not together with the rest of the gang"
                        )
                        return UnitResult(False, explanation=expl), stmt
                    break
                scores = ssn.node_scores(t, g.subjob, cand)
                n = int(cand[int(np.argmax(scores))])  # first max: lowest index = node name order
                stmt.allocate([t], [n])
        if not stmt.ops:
            expl = Explanation(summary=self._summary(job, groups, total))
            return UnitResult(False, explanation=expl), stmt
        return UnitResult(True, len(stmt.ops)), stmt

    # ------------------------------------------------------------------ explanations
    def _summary(self, job: JobInfo, groups: Sequence[Group], total: dict[int, int]) -> str:
        n = sum(len(g.tasks) for g in groups)
        parts = sum(1 for g in groups if g.atomic and not g.subjob.is_default)
        what = f"{n} pods" + (f" in {parts} partitions" if parts else "")
        topo = job.topology
        scope = f" within tier <= {topo.limit}" if topo is not None and topo.limit is not None else ""
        return f"cannot place {what}{scope}"

    def _tier_attempt(
        self,
        tier: int,
        ids: I64,
        total: dict[int, int],
        classes: dict[tuple[int, int, int], int],
        pcaps: dict[tuple[int, int, int], I64],
        req_total: I64,
    ) -> TierAttempt:
        att = TierAttempt(tier=tier, candidates=len(ids))
        if not len(ids) or not total:
            return att
        names = self.tree.names
        # Judge domains by the shape with the largest demand (the one most likely to be short).
        sid = max(total, key=lambda s: total[s])
        need = total[sid]
        dom = self.state.dom_counts(self.shape(sid))[ids]
        short_classes = [key for key, n in classes.items() if not (pcaps[key][ids] >= n).any()]
        if (dom >= need).any() and short_classes:
            key = max(short_classes, key=lambda kk: classes[kk])
            pc = pcaps[key][ids]
            best = int(ids[np.lexsort((ids, -pc))[0]])
            att.best, att.unit = names[best], "partitions"
            att.fits, att.needed = int(pcaps[key][best]), classes[key]
            att.lacking = [f"partitions of {key[2]} pods must each fit in one tier-<={key[1]} domain"]
            return att
        best = int(ids[np.lexsort((ids, -dom))[0]])
        att.best = names[best]
        att.fits = int(self.state.dom_counts(self.shape(sid))[best])
        att.needed = need
        free = self.state.hn_alloc[best] - self.state.hn_used[best]
        per_node = self._empty_node_fit(sid, self.tree.node_sets[best])
        missing = max(need - att.fits, 0)
        nodes_short = -(-missing // per_node) if missing else 0
        att.lacking = shortage(self.snap.resources, free, req_total, nodes_short)
        return att

    def _predicate_text(self, sid: int) -> str:
        """kube-scheduler's ``0/N nodes are available: ...`` for one pod of shape ``sid``, from
        the current usage. Counted with array work: a static predicate's reason is asked only
        of the nodes the shape's static mask refuses (few in a healthy cluster), and the nodes
        that pass it but have no room are grouped by which requested resources they lack, one
        text per group."""
        shape = self.shape(sid)
        cons = shape.constraints
        st = self.state
        res = self.snap.resources
        cols = [i for i, v in enumerate(shape.requests.tolist()) if v > 0]
        req = {res[i]: int(shape.requests[i]) for i in cols}
        counts = st.node_counts(shape)
        passes = self.snap.static_mask(shape).copy()
        tally: dict[str, int] = {}
        for n in np.flatnonzero(~passes).tolist():
            r = cons.node_reason(self.snap.node_static[n])
            if r is None:
                passes[n] = True  # refused by no predicate after all: its room decides
            else:
                tally[r] = tally.get(r, 0) + 1
        no_room = passes & (counts <= 0)
        idx = np.flatnonzero(no_room)
        if len(idx):
            ci = np.asarray(cols, dtype=np.int64)
            short = (st.alloc[idx][:, ci] - st.used[idx][:, ci]) < shape.requests[ci]
            if len(cols) <= 16:
                # Each node's pattern as a bit code (a pod requests a handful of resources).
                code = short.astype(np.int64) @ (1 << np.arange(len(cols), dtype=np.int64))
                n_of = np.bincount(code)
                groups = [
                    ([bool(p >> j & 1) for j in range(len(cols))], int(n_of[p]))
                    for p in np.flatnonzero(n_of).tolist()
                ]
            else:
                rows, n_rows = np.unique(short, axis=0, return_counts=True)
                groups = list(zip(rows.tolist(), n_rows.tolist(), strict=True))
            for row, k in groups:
                lacks = {res[i]: req[res[i]] - 1 if row[j] else req[res[i]] for j, i in enumerate(cols)}
                ins = insufficient_resources(req, lacks)
                r = ", ".join(ins) if ins else "node(s) didn't have free ports for the requested pod ports"
                tally[r] = tally.get(r, 0) + k
        available = int(np.count_nonzero(passes & (counts > 0)))
        return predicate_summary_of_counts(self.snap.num_nodes, available, tally)

    def _predicates_if_short(self, total: dict[int, int]) -> str | None:
        root = self.tree.root
        for sid, k in sorted(total.items(), key=lambda kv: -kv[1]):
            if self.state.dom_counts(self.shape(sid))[root] < k:
                text = self._predicate_text(sid)
                # Only worth showing when some node refuses the pod outright.
                return None if text.startswith(f"{self.snap.num_nodes}/") else text
        return None


def record(ssn: Session, job: JobInfo, res: UnitResult) -> None:
    """Remember the domains a placed unit took: the job's and each SubJob's allocated
    HyperNode widen to include them (their lowest common ancestor)."""
    tree = ssn.snap.tree
    if res.job_domain >= 0:
        ssn.job_hn[job.key] = tree.lca(ssn.job_hn.get(job.key, -1), res.job_domain)
    for sid, d in res.group_domains.items():
        ssn.subjob_hn[sid] = tree.lca(ssn.subjob_hn.get(sid, -1), d)
