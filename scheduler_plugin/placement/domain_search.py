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
   then name). Identical partitions go to the fewest domains of their tier (``place_batch``).
3. *Place exactly* on the chosen domain: real per-pod assignment updating free resources; if it
   fails (multi-resource or heterogeneous interactions), fall back to the next candidate.

Inside a domain, pods go to the fewest leaf domains (largest leaves first, best fit for the
remainder), nodes inside the partial leaf by node score (binpack etc.), and pods in rank order
(task index) onto nodes ordered by leaf then node name, so consecutive ranks share a leaf.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..algorithms.demand import Demand, PartitionClass, partition_class
from ..framework.session import Session
from ..framework.statement import Statement
from ..model.explanation import (
    CandidateReport,
    DomainSearch,
    Explanation,
    TierAttempt,
    predicate_summary_of_counts,
)
from ..model.jobs import JobInfo, SubJobInfo, TaskInfo
from ..model.memo import MemoKey
from ..model.snapshot import Shape
from .domain_ranking import DomainRanking
from .gang_units import Group
from .shortfall import Shortfall

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

# Exact placements tried per gradient tier before giving up on it (counts make failures rare;
# the cap bounds the worst case on pathological multi-resource clusters).
MAX_EXACT_TRIES_PER_TIER = 16
_RANK = operator.attrgetter("rank")


@dataclass
class UnitResult:
    """Outcome of placing one unit (a job's gang minimum or a later increment)."""

    ok: bool
    placed: int = 0
    job_domain: int = -1
    group_domains: dict[str, int] = field(default_factory=dict)
    explanation: Explanation | None = None


# Node name -> index, once per snapshot (the replacements' node hints are names).
NODE_INDEX: MemoKey[dict[str, int]] = MemoKey("node index by name")


class Placer:
    """Domain search + exact placement on a session."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.snap = ssn.snap
        self.tree = ssn.snap.tree
        self.state = ssn.state
        self.why = Shortfall(ssn.snap, ssn.state)
        self.rank = DomainRanking(ssn.snap, ssn.state)
        self._held: tuple[Statement, int, object, set[int]] | None = None
        # Why the last pod of an inter-pod affinity or spread shape found no node (kube's words).
        self.volatile_failure: str | None = None
        alloc = self.snap.allocatable
        self._max_alloc = (
            np.maximum(alloc.max(axis=0), 1) if len(alloc) else np.ones(len(self.snap.resources))
        )

    # ------------------------------------------------------------------ helpers
    def shape(self, sid: int) -> Shape:
        """The snapshot shape with id ``sid``."""
        return self.snap.shapes[sid]

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
        placed += self._back_in_their_leaf(stmt, group, nodes_d, by_shape, used)
        for sid in shapes:
            if not by_shape[sid]:
                continue
            tasks = sorted(by_shape[sid], key=_RANK)
            k = len(tasks)
            if self.state.volatile(self.shape(sid)):
                got = self._one_by_one(stmt, tasks, group.subjob, nodes_d, used, group.atomic)
                if got < k and group.atomic:
                    stmt.rollback(mark)
                    return None
                placed += got
                continue
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

    def _back_in_their_leaf(
        self, stmt: Statement, group: Group, nodes_d: I64, by_shape: dict[int, list[TaskInfo]], used: set[int]
    ) -> int:
        """Replacements of pods lost with their node (``hyperplace.io/replaces-node``) go back into
        that node's leaf first, as far as it has room in ``nodes_d``; those placed leave
        ``by_shape``. Returns how many were placed."""
        if not any(t.replaces_node for t in group.tasks):
            return 0
        index = self.ssn.snap.memo.get_or_put(
            NODE_INDEX, lambda: {n: i for i, n in enumerate(self.ssn.snap.node_names)}
        )
        leaf_of = self.tree.leaf_of
        placed = 0
        for sid, tasks in by_shape.items():
            shape = self.shape(sid)
            if self.state.volatile(shape):
                continue
            by_leaf: dict[int, list[TaskInfo]] = {}
            for t in tasks:
                i = index.get(t.replaces_node or "", -1)
                if i >= 0 and leaf_of[i] >= 0:
                    by_leaf.setdefault(int(leaf_of[i]), []).append(t)
            done: set[str] = set()
            for leaf, mine in sorted(by_leaf.items()):
                cand = nodes_d[leaf_of[nodes_d] == leaf]
                c = self.state.node_counts(shape)[cand]
                nz = c > 0
                k = min(len(mine), int(c[nz].sum()))
                if k == 0:
                    continue
                mine = sorted(mine, key=_RANK)[:k]
                nodes, per = self._pick_nodes(mine[0], group.subjob, cand[nz], c[nz], k, used)
                stmt.allocate(mine, np.repeat(nodes, per).tolist())
                used.add(leaf)
                done.update(t.key for t in mine)
                placed += k
            if done:
                by_shape[sid] = [t for t in tasks if t.key not in done]
        return placed

    def _one_by_one(
        self,
        stmt: Statement,
        tasks: Sequence[TaskInfo],
        sj: SubJobInfo,
        nodes_d: I64,
        used: set[int],
        atomic: bool,
    ) -> int:
        """Place pods of a volatile shape (inter-pod affinity, topology spread) one at a time on
        ``nodes_d``, recounting after each, as kube-scheduler binds them one after another.

        When the first pod decides where the rest may go (a group affine to itself, see
        ``AllocState.cohorts``), an atomic group is tried whole in each such node group, the
        roomiest first, so it does not start in one too small. Returns how many were placed."""
        cohorts = self.state.cohorts(self.shape(tasks[0].shape)) if atomic else None
        if cohorts is None:
            return self._sequential(stmt, tasks, sj, nodes_d, used)
        counts = self.state.node_counts(self.shape(tasks[0].shape))
        groups = [np.intersect1d(c, nodes_d) for c in cohorts]
        rooms = [int(counts[g].sum()) for g in groups]
        for i in sorted(range(len(groups)), key=lambda j: -rooms[j])[:MAX_EXACT_TRIES_PER_TIER]:
            if not rooms[i]:
                break
            mark, held = stmt.mark(), set(used)
            if self._sequential(stmt, tasks, sj, groups[i], held) == len(tasks):
                used |= held
                return len(tasks)
            stmt.rollback(mark)
        return 0

    def _sequential(
        self, stmt: Statement, tasks: Sequence[TaskInfo], sj: SubJobInfo, nodes_d: I64, used: set[int]
    ) -> int:
        """Pods of one volatile shape on ``nodes_d``, step by step as kube-scheduler binds them one
        after another, several per step where they cannot affect one another: at most one per
        node and per domain of each of the shape's batch keys (``AllocState.batch_keys``), one
        alone when the first decides where the rest go. Nodes are taken in the order of their
        leaf (one the unit holds first), node score (scored once for the batch), then name.
        Returns how many were placed (they stop when no node takes one more)."""
        leaf_of = self.tree.leaf_of
        shape = self.shape(tasks[0].shape)
        state = self.state
        soft = state.soft_keys(shape)
        scores = self.ssn.node_scores(tasks[0], sj, nodes_d) if len(nodes_d) > 1 else np.zeros(len(nodes_d))
        placed = 0
        while placed < len(tasks):
            if soft and placed and len(nodes_d) > 1:
                # The pods placed so far changed the scores of the rest (preferred terms).
                scores = self.ssn.node_scores(tasks[placed], sj, nodes_d)
            c = state.node_counts(shape)[nodes_d]
            ok = c > 0
            if not ok.any():
                # Said in kube-scheduler's words if the unit fails for it (before the undo).
                available, tally = self.why.node_tally(shape.id, nodes_d)
                text = predicate_summary_of_counts(len(nodes_d), available, tally)
                self.volatile_failure = f"pod {tasks[placed].key}: {text}"
                break
            cand, cc = nodes_d[ok], c[ok]
            if used:
                held = np.isin(leaf_of[cand], np.fromiter(used, dtype=np.int64, count=len(used)))
            else:
                held = np.zeros(len(cand), dtype=bool)
            o = np.lexsort((cand, -scores[ok], ~held))
            cand, cc = cand[o], cc[o]
            keys = state.batch_keys(shape)
            if keys is not None and soft:
                keys = keys + [k for k in soft if k not in keys]
            left = len(tasks) - placed
            if keys is None:
                nodes = cand[:1]
            elif not keys:
                # Nothing the placements change for one another but the nodes' room.
                nodes = np.repeat(cand, cc)[:left]
            else:
                nodes = self._step(shape, keys, cand, left)
            stmt.allocate(list(tasks[placed : placed + len(nodes)]), nodes.tolist())
            used.update(int(x) for x in np.unique(leaf_of[nodes]) if x >= 0)
            placed += len(nodes)
        return placed

    def _step(self, shape: Shape, keys: list[str], cand: I64, left: int) -> I64:
        """The nodes of one step for a volatile shape: ``cand`` in order of preference, one pod
        each, in distinct domains of every key the pods interact through (a key of one domain
        per node, such as the hostname, asks nothing more). With one coarser key, the filter
        that owns it may fill its domains further (spread: water-filling)."""
        topo = self.snap.topology
        coarse = [k for k in keys if not topo.per_node(k)]
        if not coarse:
            return cand[:left]
        if len(coarse) == 1:
            dom = topo.domains(coarse[0])[0][cand]
            quota = self.state.batch_quota(shape, coarse[0], cand, dom, left)
            if quota is not None:
                return cand[np.asarray(quota, dtype=np.int64)]  # in the filter's order: valid so
        # One per domain of each key, looked for among the best few candidates only: a step
        # takes at most as many pods as the key with the fewest domains has.
        most = min(topo.domains(k)[1] for k in coarse)
        head = cand[: min(len(cand), 64 * most + left)]
        take = np.ones(len(head), dtype=bool)
        for key in coarse:
            dom = topo.domains(key)[0][head]
            first = np.zeros(len(head), dtype=bool)
            first[np.unique(dom, return_index=True)[1]] = True
            take &= first | (dom < 0)  # a node without the key is in no domain of it
        return head[take][:left]

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
            order = cands[
                np.lexsort((cands, -scores, self.rank.closeness(cands, ssn.subjob_hn.get(sj.id, -1))))
            ]
            for d in order[:MAX_EXACT_TRIES_PER_TIER].tolist():
                if self.assign(stmt, group, d) is not None:
                    return d
        return None

    # ------------------------------------------------------------------ batched partitions
    def batch_key(self, group: Group) -> PartitionClass | None:
        """Identical partitions (one partition class, nothing allocated yet) batch."""
        if group.subjob.id in self.ssn.subjob_hn:
            return None
        key = partition_class(group)
        if key is not None and self.state.volatile(self.shape(key[0])):
            return None  # placed one pod at a time (see _one_by_one)
        return key

    def place_batch(self, stmt: Statement, groups: Sequence[Group], job_domain: int) -> dict[str, int] | None:
        """Place identical partitions in the fewest domains of the lowest tier that fits them.

        Each partition takes the lowest tier with a domain that fits it (as Volcano's sequential
        greedy does). There, the domains are filled fewest first: the best-scoring domain
        (HyperNode bin-packing, then name) that takes every partition left, else the one that
        takes the most, and so on. Volcano fills the best-scoring domain first, then the next:
        bin-packing then sends a job's partitions into the fullest leaves, a few per leaf, and a
        job that two empty leaves would hold spans five (the trace benchmark's 64-pod jobs).
        """
        ssn = self.ssn
        g0 = groups[0]
        key = self.batch_key(g0)
        assert key is not None
        sid, _limit, k = key
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
            by_score = np.lexsort((cands, -scores))
            cands, scores = cands[by_score], scores[by_score]
            while remaining:
                # Counts drop as partitions land (and for overlapping domains): re-read them.
                fit = self.state.dom_counts(shape)[cands] // k
                if not (fit > 0).any():
                    break
                # Fewest domains: the best-scoring domain that takes every partition left, else
                # the one that takes the most (best score among equals), and so on.
                whole = np.flatnonzero(fit >= len(remaining))
                j = int(whole[0]) if len(whole) else int(np.argmax(fit))
                d = int(cands[j])
                m = min(int(fit[j]), len(remaining))
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
        demand = Demand.of(groups)
        pcaps = {key: self.rank.pcap(*key) for key in demand.classes}
        req_total = np.sum([t.requests for g in groups for t in g.tasks], axis=0).astype(np.int64)
        # Most constrained groups first (see _constrained_first); if that order fails on a domain,
        # the SubJob order is tried too, so the reordering never loses a placement found before.
        first = self._constrained_first(groups)
        orders = [first] if first == list(groups) else [first, list(groups)]
        # The candidate list for ``explain``, only when asked (the decision does not need it).
        rec = self._search(job, groups) if ssn.record_candidates else None
        self.volatile_failure = None
        for level in levels:
            ids = np.asarray(level, dtype=np.int64)
            tier = int(tree.tiers[ids[0]]) if len(ids) else -1
            ok = self._feasible(ids, demand, pcaps)
            cands = ids[ok]
            if not len(cands):
                expl.add_tier(
                    self.why.tier_attempt(
                        tier, ids, demand.total or demand.loose, demand.classes, pcaps, req_total
                    )
                )
                if rec is not None:
                    rec.tiers.append(
                        self.why.candidate_tier(
                            tier, ids, ok, [], None, {}, demand, pcaps, MAX_EXACT_TRIES_PER_TIER
                        )
                    )
                continue
            ranking = self._ranking(job, cands, tier, demand, req_total, groups)
            cands, scores, close, ptiers, spans = ranking
            order = cands[np.lexsort((cands, -scores, spans, ptiers, close))]
            tried: dict[int, str | None] = {}
            for h in order.tolist():
                if len(tried) >= MAX_EXACT_TRIES_PER_TIER:
                    break
                placed = next((p for seq in orders if (p := self._place_groups_in(seq, h)) is not None), None)
                if placed is None:
                    tried[h] = "passes the fit counts, but exact placement of every pod failed"
                    continue
                stmt, domains = placed
                if rec is not None:
                    tried[h] = None
                    rec.chosen = tree.names[h]
                    rec.tiers.append(
                        self.why.candidate_tier(
                            tier,
                            ids,
                            ok,
                            order.tolist(),
                            ranking,
                            tried,
                            demand,
                            pcaps,
                            MAX_EXACT_TRIES_PER_TIER,
                        )
                    )
                    ssn.candidates.setdefault(job.key, CandidateReport()).add(rec)
                return UnitResult(True, len(stmt.ops), h, domains), stmt
            expl.add_tier(
                TierAttempt(
                    tier=tier,
                    candidates=len(ids),
                    note=f"{len(cands)} domains pass the counts but exact placement failed in {len(tried)} tried",
                )
            )
            if rec is not None:
                rec.tiers.append(
                    self.why.candidate_tier(
                        tier, ids, ok, order.tolist(), ranking, tried, demand, pcaps, MAX_EXACT_TRIES_PER_TIER
                    )
                )
        if rec is not None:
            ssn.candidates.setdefault(job.key, CandidateReport()).add(rec)
        expl.summary = self._summary(job, groups, demand.total)
        expl.predicates = self.why.predicates_if_short(demand.total) or self.volatile_failure
        if not levels:
            limit = job.topology.limit if job.topology is not None else None
            expl.add_detail(f"no HyperNode has a tier <= {limit} (tiers present: {tree.sorted_tiers})")
        return UnitResult(False, explanation=expl), Statement(ssn)

    def _feasible(self, ids: I64, demand: Demand, pcaps: dict[PartitionClass, I64]) -> npt.NDArray[np.bool_]:
        """Which of ``ids`` pass the fit counts: every atomic pod, room for one more of each
        loose shape, and every partition class."""
        ok = np.ones(len(ids), dtype=bool)
        for sid, k in demand.total.items():
            ok &= self.state.dom_counts(self.shape(sid))[ids] >= k
        if len(demand.total) > 1:
            # Many shapes each fit alone where their sum does not (a gang of per-pod claims is a
            # shape per pod): the domain's free resources must hold them all.
            need = np.sum([self.shape(sid).requests * k for sid, k in demand.total.items()], axis=0)
            free = self.state.hn_alloc[ids] - self.state.hn_used[ids]
            ok &= (free >= need).all(axis=1)
        for sid in demand.loose:
            ok &= self.state.dom_counts(self.shape(sid))[ids] >= 1
        for key, n in demand.classes.items():
            ok &= pcaps[key][ids] >= n
        return ok

    def _ranking(
        self,
        job: JobInfo,
        cands: I64,
        tier: int,
        demand: Demand,
        req_total: I64,
        groups: Sequence[Group] = (),
    ) -> tuple[I64, F64, I64, I64, I64]:
        """The keys candidates are tried in, after nearness to the job's domain (and for the
        replacements of pods lost with their node, to that node's leaf): the tiers its
        partitions would take, the leaves it needs, then the HyperNode bin-packing score."""
        ssn = self.ssn
        many = len(cands) > 1
        default_sj = job.subjobs.get(job.key)
        scores = ssn.hypernode_scores(default_sj, req_total, cands) if many else np.zeros(1)
        ptiers = self.rank.partition_tier_sums(demand.classes, cands) if many else np.zeros(1, dtype=np.int64)
        if many and tier > 1:
            spans = self.rank.leaves_needed(demand.total, cands)
        else:
            spans = np.zeros(len(cands), dtype=np.int64)
        close = self.rank.closeness(cands, ssn.job_hn.get(job.key, -1))
        lost_in = self._lost_leaf(groups) if many else -1
        if lost_in >= 0:
            # Tiers are small: nearness to the job's domain first, then to the lost pods' leaf.
            close = close * 1024 + self.rank.closeness(cands, lost_in)
        return cands, scores, close, ptiers, spans

    def _lost_leaf(self, groups: Sequence[Group]) -> int:
        """The leaf most of the unit's replacements lost their predecessor in (the node they name
        in ``hyperplace.io/replaces-node``); -1 when none names a node of a leaf."""
        named = Counter(t.replaces_node for g in groups for t in g.tasks if t.replaces_node)
        if not named:
            return -1
        index = self.ssn.snap.memo.get_or_put(
            NODE_INDEX, lambda: {n: i for i, n in enumerate(self.ssn.snap.node_names)}
        )
        leaves: Counter[int] = Counter()
        for name, k in named.items():
            if name in index:
                leaves[int(self.tree.leaf_of[index[name]])] += k
        leaves.pop(-1, None)
        return leaves.most_common(1)[0][0] if leaves else -1

    def _search(self, job: JobInfo, groups: Sequence[Group]) -> DomainSearch:
        """An empty record of the search about to run for ``groups`` of ``job``."""
        n = sum(len(g.tasks) for g in groups)
        gang = not self.ssn.job_ready(job)
        return DomainSearch(unit=f"gang minimum ({n} pods)" if gang else f"{n} more pods", gang=gang)

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
            return (0 if hard else 1, limit, -size, bkey[0] if bkey else -1, bkey[2] if bkey else -1)

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
        total = Demand.of(groups).total
        root = self.tree.root
        # Volatile shapes' counts only bound what one more pod may do: their pods are tried one
        # by one below, and the one that fits nowhere is explained in kube-scheduler's words.
        short = {
            sid: k
            for sid, k in total.items()
            if not self.state.volatile(self.shape(sid)) and self.state.dom_counts(self.shape(sid))[root] < k
        }
        if short:
            expl = Explanation(summary=self._summary(job, groups, total))
            req_total = np.sum([t.requests for g in groups for t in g.tasks], axis=0).astype(np.int64)
            ids = np.array([root], dtype=np.int64)
            expl.add_tier(self.why.tier_attempt(self.tree.top_tier, ids, total, {}, {}, req_total))
            expl.predicates = self.why.predicates_if_short(total)
            return UnitResult(False, explanation=expl), stmt
        all_nodes = np.arange(self.snap.num_nodes, dtype=np.int64)
        for g in groups:
            # Pods of volatile shapes (inter-pod affinity, spread) go first, one by one: they are
            # the constrained ones.
            later: dict[int, list[TaskInfo]] = {}
            for t in g.tasks:
                if self.state.volatile(self.shape(t.shape)):
                    later.setdefault(t.shape, []).append(t)
            for sid, ts in later.items():
                got = self._one_by_one(stmt, ts, g.subjob, all_nodes, set(), g.atomic)
                if got < len(ts) and g.atomic:
                    text = self.why.predicate_text(sid)
                    stmt.discard()
                    expl = Explanation(summary=self._summary(job, groups, total))
                    expl.predicates = f"pod {ts[got].key}: {text}"
                    if len(ts) > 1:
                        expl.add_detail(
                            "each pod fits on its own, but not together with the rest of the gang"
                        )
                    return UnitResult(False, explanation=expl), stmt
            for t in g.tasks:
                if t.shape in later:
                    continue
                c = self.state.node_counts(self.shape(t.shape))
                cand = np.flatnonzero(c > 0)
                if not len(cand):
                    if g.atomic:
                        # Explain with the gang's earlier pods still in place (that is why this
                        # one has no room), then undo them.
                        text = self.why.predicate_text(t.shape)
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


def record(ssn: Session, job: JobInfo, res: UnitResult) -> None:
    """Remember the domains a placed unit took: the job's and each SubJob's allocated
    HyperNode widen to include them (their lowest common ancestor)."""
    tree = ssn.snap.tree
    if res.job_domain >= 0:
        ssn.job_hn[job.key] = tree.lca(ssn.job_hn.get(job.key, -1), res.job_domain)
    for sid, d in res.group_domains.items():
        ssn.subjob_hn[sid] = tree.lca(ssn.subjob_hn.get(sid, -1), d)
