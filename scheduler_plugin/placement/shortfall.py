"""What a domain, or the whole cluster, lacks for a unit of pods, in words (pure: it reads the
snapshot and the session's allocation state).

The text a waiting gang gets: per gradient tier, the best domain and what it lacks; per
candidate domain, why it fails the fit counts; and kube-scheduler's ``0/N nodes are
available: ...`` per-node reasons for a pod that fits nowhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ..algorithms.demand import Demand, PartitionClass
from ..filters.node_ports import REASON_HOST_PORTS
from ..filters.node_resources_fit import insufficient_resources
from ..filters.pod_constraints import PodConstraints
from ..filters.registry import FIT_AFTER, STATEFUL_FILTERS
from ..framework.alloc_state import AllocState
from ..model.explanation import (
    MAX_CANDIDATES_PER_TIER,
    Candidate,
    CandidateTier,
    TierAttempt,
    predicate_summary_of_counts,
    shortage,
)
from ..model.snapshot import ClusterSnapshot, Shape, pods_fitting

I64 = npt.NDArray[np.int64]
# A node that passes every filter alone but whose room the cycle's earlier placements took.
REASON_PLACED = "node(s) were taken by pods placed earlier in this cycle"


class Shortfall:
    """Explains, against the current state, why pods of a unit do not fit."""

    def __init__(self, snap: ClusterSnapshot, state: AllocState) -> None:
        self.snap = snap
        self.tree = snap.tree
        self.state = state

    def shape(self, sid: int) -> Shape:
        """The snapshot shape with id ``sid``."""
        return self.snap.shapes[sid]

    def empty_node_fit(self, sid: int, nodes: I64) -> int:
        """Most pods of a shape one node of ``nodes`` could hold when empty (for 'N nodes short')."""
        req = self.shape(sid).requests
        if not len(nodes) or not (req > 0).any():
            return 1  # counted per pod, not per node
        return max(int(pods_fitting(self.snap.allocatable[nodes], req).max()), 1)

    def lacking(self, h: int, demand: Demand, pcaps: Mapping[PartitionClass, I64]) -> str:
        """What domain ``h`` lacks for the unit: pods per shape, resources, partitions."""
        parts: list[str] = []
        free = self.state.hn_alloc[h] - self.state.hn_used[h]
        # Atomic groups need all their pods; as-many-as-fit groups need room for one.
        for wanted, more in ((demand.total, ""), (demand.loose, " more")):
            for sid, k in wanted.items():
                have = int(self.state.dom_counts(self.shape(sid))[h])
                if have >= (k if not more else 1):
                    continue
                what = f"fits {have} of {k}{more} pods"
                if not self.snap.static_mask(self.shape(sid))[self.tree.node_sets[h]].any():
                    parts.append(f"{what}: no node passes the pods' node selector, affinity or taints")
                    continue
                why = self.pre_filtered(sid)
                if why is not None:
                    parts.append(f"{what}: {why}")
                    continue
                if self.state.volatile(self.shape(sid)):
                    # Inter-pod affinity or spread: the nodes' own verdicts, in kube's words.
                    _, tally = self.node_tally(sid, self.tree.node_sets[h])
                    words = "; ".join(f"{n} {r}" for r, n in sorted(tally.items(), key=lambda kv: -kv[1]))
                    parts.append(f"{what}" + (f": {words}" if words else ""))
                    continue
                per_node = self.empty_node_fit(sid, self.tree.node_sets[h])
                nodes_short = -(-(k - have) // per_node)
                lack = self._or_refused(
                    shortage(self.snap.resources, free, self.shape(sid).requests * k, nodes_short),
                    sid,
                    self.tree.node_sets[h],
                )
                parts.append(what + (", " + ", ".join(lack) if lack else ""))
        # Partitions are worth naming only when the pods themselves would fit (as tier_attempt).
        for (sid, limit, k), n in demand.classes.items() if not parts else ():
            pc = int(pcaps[(sid, limit, k)][h])
            if pc < n:
                parts.append(f"holds {pc} of {n} partitions of {k} pods within tier {limit}")
        return "; ".join(dict.fromkeys(parts)) or "fails the fit counts"

    def tier_attempt(
        self,
        tier: int,
        ids: I64,
        total: dict[int, int],
        classes: dict[PartitionClass, int],
        pcaps: Mapping[PartitionClass, I64],
        req_total: I64,
    ) -> TierAttempt:
        """The best domain of one gradient tier (``ids``) and what it lacks for the unit."""
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
        why = self.pre_filtered(sid)
        if why is not None:  # refused whatever the room: the one reason
            att.lacking = [why]
            return att
        if self.state.volatile(self.shape(sid)):
            # Inter-pod affinity or spread holds the pods back, not room: say what refuses.
            _, tally = self.node_tally(sid, self.tree.node_sets[best])
            att.lacking = [f"{n} {r}" for r, n in sorted(tally.items(), key=lambda kv: -kv[1])]
            return att
        free = self.state.hn_alloc[best] - self.state.hn_used[best]
        per_node = self.empty_node_fit(sid, self.tree.node_sets[best])
        missing = max(need - att.fits, 0)
        nodes_short = -(-missing // per_node) if missing else 0
        att.lacking = shortage(self.snap.resources, free, req_total, nodes_short)
        if missing:
            att.lacking = self._or_refused(att.lacking, sid, self.tree.node_sets[best])
        return att

    def _or_refused(self, lack: list[str], sid: int, nodes: I64) -> list[str]:
        """``lack`` unless no resource is short and stateful filters refuse the room there:
        then which ones (room is not what the pods lack)."""
        if any(x.startswith("short ") for x in lack):
            return lack
        names = self.refused_by(sid, nodes)
        return [f"room refused by {', '.join(names)}"] if names else lack

    def refused_by(self, sid: int, nodes: I64) -> list[str]:
        """The stateful filters that refuse room the pods of shape ``sid`` have on ``nodes``
        by their requests and the static filters."""
        shape = self.shape(sid)
        cons = shape.constraints
        st = self.state
        stateful = [(f, fst) for f, fst in st.filters if f.applies(fst, cons)]
        if not stateful or not len(nodes):
            return []
        base = np.where(
            self.snap.static_mask(shape)[nodes],
            pods_fitting(st.alloc[nodes] - st.used[nodes], shape.requests),
            0,
        )
        out = []
        for f, fst in stateful:
            if f.pre_filter(fst, cons) is not None:
                return [f.name]  # the first PreFilter to refuse is the one kube-scheduler names
            c = base.copy()
            f.cap_counts(fst, cons, nodes, c)
            if (c < base).any():
                out.append(f.name)
        return out

    def predicate_text(self, sid: int) -> str:
        """kube-scheduler's ``0/N nodes are available: ...`` for one pod of shape ``sid``, from
        the current usage. Counted with array work: a static predicate's reason is asked only
        of the nodes the shape's static mask refuses (few in a healthy cluster), and the nodes
        that pass it but have no room are grouped by which requested resources they lack, one
        text per group."""
        why = self.pre_filtered(sid)
        if why is not None:  # kube-scheduler's PreFilter message: no count per node
            return f"0/{self.snap.num_nodes} nodes are available: {why}."
        available, tally = self.node_tally(sid)
        return predicate_summary_of_counts(self.snap.num_nodes, available, tally)

    def pre_filtered(self, sid: int) -> str | None:
        """Why a stateful filter's PreFilter refuses pods of shape ``sid`` outright, or None."""
        cons = self.shape(sid).constraints
        for f, fst in self.state.filters:
            if f.applies(fst, cons):
                why = f.pre_filter(fst, cons)
                if why is not None:
                    return why
        return None

    def node_tally(self, sid: int, nodes: I64 | None = None) -> tuple[int, dict[str, int]]:
        """How many of ``nodes`` (all when None) take one more pod of shape ``sid`` now, and
        the others counted by the first filter that refuses them, in kube-scheduler's order."""
        shape = self.shape(sid)
        cons = shape.constraints
        st = self.state
        why = self.pre_filtered(sid)
        if why is not None:  # a PreFilter refused the pod: the one reason, for every node
            return 0, {why: self.snap.num_nodes if nodes is None else len(nodes)}
        res = self.snap.resources
        cols = [i for i, v in enumerate(shape.requests.tolist()) if v > 0]
        req = {res[i]: int(shape.requests[i]) for i in cols}
        counts = st.node_counts(shape)
        passes = self.snap.static_mask(shape).copy()
        if nodes is not None:
            inside = np.zeros(len(passes), dtype=bool)
            inside[nodes] = True
        else:
            inside = np.ones(len(passes), dtype=bool)
        tally: dict[str, int] = {}
        for n in np.flatnonzero(~passes & inside).tolist():
            r = cons.node_reason(self.snap.node_static[n])
            if r is None:
                passes[n] = True  # refused by no predicate after all: its room decides
            else:
                tally[r] = tally.get(r, 0) + 1
        passes &= inside
        no_room = passes & (counts <= 0)
        idx = np.flatnonzero(no_room)
        if len(idx):
            ci = np.asarray(cols, dtype=np.int64)
            short = (st.alloc[idx][:, ci] - st.used[idx][:, ci]) < shape.requests[ci]
            # Each node's first refusing filter in kube-scheduler's order: NodePorts, then
            # NodeResourcesFit, then the other stateful filters.
            left = np.ones(len(idx), dtype=bool)
            self._stateful_reasons(cons, idx, left, tally, before_fit=True)
            lack = left & short.any(axis=1)
            left &= ~lack
            self._resource_reasons(req, cols, short[lack], tally)
            self._stateful_reasons(cons, idx, left, tally, before_fit=False)
            rest = int(np.count_nonzero(left))
            if rest:  # no filter names it: the pods placed earlier in this cycle took it
                r = REASON_HOST_PORTS if cons.host_ports else REASON_PLACED
                tally[r] = tally.get(r, 0) + rest
        return int(np.count_nonzero(passes & (counts > 0))), tally

    def _resource_reasons(
        self, req: dict[str, int], cols: list[int], short: npt.NDArray[np.bool_], tally: dict[str, int]
    ) -> None:
        """Tally NodeResourcesFit's reasons for nodes whose rows of ``short`` (per requested
        resource: too little free) say what they lack, one text per pattern."""
        if not len(short):
            return
        res = self.snap.resources
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
            r = ", ".join(insufficient_resources(req, lacks))
            tally[r] = tally.get(r, 0) + k

    def _stateful_reasons(
        self,
        cons: PodConstraints,
        idx: I64,
        left: npt.NDArray[np.bool_],
        tally: dict[str, int],
        before_fit: bool,
    ) -> None:
        """Tally, for the nodes ``idx[left]``, the reason of the first stateful filter (of those
        kube-scheduler runs before NodeResourcesFit, or after it) that refuses each; the nodes
        named leave ``left``."""
        for f, st in self.state.filters:
            if (STATEFUL_FILTERS.index(f) < FIT_AFTER) != before_fit or not f.applies(st, cons):
                continue
            sub = np.flatnonzero(left)
            if not len(sub):
                return
            for j, rs in zip(sub.tolist(), f.reasons(st, cons, idx[sub]), strict=True):
                if rs:  # kube counts every reason the first refusing filter gives
                    left[j] = False
                    for r in rs:
                        tally[r] = tally.get(r, 0) + 1

    def predicates_if_short(self, total: dict[int, int]) -> str | None:
        """kube-scheduler's per-node text for the most demanded shape the cluster cannot hold,
        when some node refuses the pod outright (else None)."""
        root = self.tree.root
        for sid, k in sorted(total.items(), key=lambda kv: -kv[1]):
            if self.state.dom_counts(self.shape(sid))[root] < k:
                text = self.predicate_text(sid)
                # Only worth showing when some node refuses the pod outright.
                return None if text.startswith(f"{self.snap.num_nodes}/") else text
        return None

    def candidate_tier(
        self,
        tier: int,
        ids: I64,
        ok: npt.NDArray[np.bool_],
        order: list[int],
        ranking: tuple[npt.NDArray[Any], ...] | None,
        tried: dict[int, str | None],
        demand: Demand,
        pcaps: Mapping[PartitionClass, I64],
        max_tries: int,
    ) -> CandidateTier:
        """One gradient tier as ``explain`` shows it: the feasible domains in the order the
        scheduler tried them (with the score and the sort keys ranked before it), then the
        domains that fail the counts, those that fit the most first, with what they lack
        (``max_tries``: the exact placements the search tries per tier)."""
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
                why = f"not tried: at most {max_tries} exact placements per tier"
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
            wanted = demand.total or demand.loose
            if wanted:
                sid = max(wanted, key=lambda x: wanted[x])
                fit = self.state.dom_counts(self.shape(sid))[bad]
                bad = bad[np.lexsort((bad, -fit))]
            for h in bad[:room].tolist():
                out.candidates.append(Candidate(names[h], tier, False, None, self.lacking(h, demand, pcaps)))
        return out
