"""Mutable allocation state of one session: used resources, the stateful filters' state (host
ports in use) and per-shape fit counts.

Fit counts are the heart of the fast domain search: for a pod shape, ``count[n]`` is how many
more pods of that shape node ``n`` can take (min over requested resources of free // request,
masked by the static filters, capped by the stateful ones: at most 1 with host ports). For one shape the counts are exactly
additive: placing one pod lowers its node's count by exactly one, so HyperNode sums of counts
(``dom[h]``) say exactly how many pods of that shape a domain can still take.

Counts are cached per shape and kept in sync incrementally: an allocation recomputes the counts
of the touched nodes only and pushes the deltas to their HyperNodes (one bincount). A shape a
non-local stateful filter applies to (inter-pod affinity, topology spread: a placement in a zone
changes the verdict across the zone) is *volatile*: its counts say what one more pod may do
(at most one per node), so they are not additive, and they are recounted whenever a placement
happened since they were last counted; placement then goes one pod at a time for such shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..filters.plugin import ScoringFilter, StatefulFilter
from ..filters.registry import SCORING_FILTERS, STATEFUL_FILTERS
from ..model.memo import MemoKey
from ..model.snapshot import ClusterSnapshot, Shape, pods_fitting, pods_fitting_many

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
# (allocatable, used) summed per HyperNode, per resource column; read-only.
HN_SUMS: MemoKey[tuple[F64, F64]] = MemoKey("hypernode sums")


def _hypernode_sums(snap: ClusterSnapshot) -> tuple[F64, F64]:
    h, r = len(snap.tree), len(snap.resources)
    hn_alloc = np.zeros((h, r), dtype=np.float64)
    hn_used = np.zeros((h, r), dtype=np.float64)
    for j in range(r):
        hn_alloc[:, j] = snap.tree.domain_sums_f(snap.allocatable[:, j])
        hn_used[:, j] = snap.tree.domain_sums_f(snap.used[:, j])
    hn_alloc.flags.writeable = False
    hn_used.flags.writeable = False
    return hn_alloc, hn_used


@dataclass
class _Volatile:
    """A volatile shape's counts and what they were last brought up to date with."""

    gen: int  # the state's placement generation
    counts: I64
    dom: I64
    marks: list[int]  # each applying non-local filter's mark
    seen: int  # entries of the touched-nodes log


class AllocState:
    """Working copy of node usage plus cached per-shape counts and HyperNode aggregates."""

    def __init__(self, snap: ClusterSnapshot) -> None:
        self.snap = snap
        self.tree = snap.tree
        self.alloc = snap.allocatable
        self.used = snap.used.copy()
        r = len(snap.resources)
        # HyperNode sums are float64: memory in milli-bytes summed over 10k nodes overflows int64,
        # and these sums only feed scores and shortage reports (exact fits use per-node ints).
        # The starting sums depend on the snapshot only: computed once per snapshot (a cycle
        # with no change reuses the previous snapshot, and so these).
        base = snap.memo.get_or_put(HN_SUMS, lambda: _hypernode_sums(snap))
        self.hn_alloc = base[0]  # read-only
        self.hn_used = base[1].copy()
        self._node_counts: dict[int, I64] = {}
        self._dom_counts: dict[int, I64] = {}
        # Per-node number of hypernodes containing it, for vectorised delta pushes.
        self._deg = np.diff(self.tree.node_hn_ptr)
        shapes = snap.shapes
        self._shape_req = (
            np.stack([sh.requests for sh in shapes]) if shapes else np.zeros((0, r), dtype=np.int64)
        )
        # The stateful filters some pod of this cycle needs, each with its state (kube-scheduler's
        # PreFilter state; Reserve and Unreserve below keep it current).
        self._all = np.arange(snap.num_nodes, dtype=np.int64)
        self.filters: list[tuple[StatefulFilter[Any], Any]] = [
            (f, st) for f in STATEFUL_FILTERS if (st := f.cycle_state(snap)) is not None
        ]
        self._nonlocal = [(f, st) for f, st in self.filters if not f.local]
        # Volatile shapes: their counts, kept current lazily (see _volatile_counts).
        self._volatile: dict[int, bool] = {}
        self._gen = 0
        self._touched: list[I64] = []  # nodes whose usage changed, placement by placement
        self._vol_counts: dict[int, _Volatile] = {}
        self._judged_by: dict[int, bool] = {}
        self._mask_bytes: dict[int, bytes] = {}
        self._keying: dict[int, list[tuple[StatefulFilter[Any], Any]]] = {}  # see count_key
        self._keyed: dict[Any, int] = {}  # count key -> a cached shape that had it
        # The filters whose plugin scores, once a node order asks for them (score_with).
        self._scorers: list[tuple[ScoringFilter[Any], Any]] = []
        self._soft_keys: dict[int, list[str]] = {}

    # ------------------------------------------------------------------ counts
    def compute_counts(self, shape: Shape, nodes: I64 | None = None) -> I64:
        """Fresh fit counts of ``shape`` on ``nodes`` (all nodes when None)."""
        if nodes is None:
            free = self.alloc - self.used
            mask = self.snap.static_mask(shape)
            idx = None
        else:
            free = self.alloc[nodes] - self.used[nodes]
            mask = self.snap.static_mask(shape)[nodes]
            idx = nodes
        c = np.where(mask, pods_fitting(free, shape.requests), 0)
        cons = shape.constraints
        for f, st in self.filters:
            if f.applies(st, cons):
                f.cap_counts(st, cons, self._all if idx is None else idx, c)
        return c

    def volatile(self, shape: Shape) -> bool:
        """Whether a non-local stateful filter applies to the shape (see the module text), or
        its pods' placements change one another's scores (:meth:`soft_keys`)."""
        got = self._volatile.get(shape.id)
        if got is None:
            got = self._volatile[shape.id] = any(
                f.applies(st, shape.constraints) for f, st in self._nonlocal
            ) or bool(self.soft_keys(shape))
        return got

    def score_with(self, names: set[str]) -> None:
        """The scoring plugins a node order weighs (by name): only their scores are computed,
        and only their terms make a gang's placements step by step (:meth:`soft_keys`)."""
        self._scorers = [
            (SCORING_FILTERS[f.name], st)
            for f, st in self.filters
            if f.name in SCORING_FILTERS and f.name in names
        ]
        self._soft_keys = {}
        self._volatile = {}

    def scores(self, shape: Shape, nodes: I64) -> dict[str, F64]:
        """kube-scheduler's normalized scores (0-100) of ``nodes`` for a pod of the shape, by the
        plugins that score from a filter's counts (InterPodAffinity, PodTopologySpread), given
        what the cycle has placed so far; only those with something to score."""
        out: dict[str, F64] = {}
        for f, st in self._scorers:
            got = f.score(st, shape.constraints, nodes)
            if got is not None:
                out[f.name] = got
        return out

    def soft_keys(self, shape: Shape) -> list[str]:
        """Topology keys in whose domains a placed pod of the shape changes the next one's
        scores (a preferred anti-affinity or ScheduleAnyway spread the pod matches itself): its
        pods are placed a step at a time, one per domain of each, and scored again."""
        got = self._soft_keys.get(shape.id)
        if got is None:
            got = []
            for f, st in self._scorers:
                got += [k for k in f.soft_keys(st, shape.constraints) if k not in got]
            self._soft_keys[shape.id] = got
        return got

    def cohorts(self, shape: Shape) -> list[I64] | None:
        """Node groups one of which must take every pod of the shape (see
        ``StatefulFilter.cohorts``); None when no filter bounds it so."""
        for f, st in self._nonlocal:
            if f.applies(st, shape.constraints):
                got = f.cohorts(st, shape.constraints)
                if got is not None:
                    return got
        return None

    def batch_keys(self, shape: Shape) -> list[str] | None:
        """Topology keys such that pods of a volatile shape placed on distinct nodes, in distinct
        domains of each key, may be placed in one step (see ``StatefulFilter.batch_keys``);
        None when only one at a time."""
        keys: list[str] = []
        for f, st in self._nonlocal:
            if f.applies(st, shape.constraints):
                got = f.batch_keys(st, shape.constraints)
                if got is None:
                    return None
                keys += [k for k in got if k not in keys]
        return keys

    def batch_quota(self, shape: Shape, key: str, cand: I64, dom: I64, left: int) -> list[int] | None:
        """Which of the candidate nodes ``cand`` (in order of preference, each taking one pod;
        ``dom``: their domains of ``key``) may take a pod of the shape in one step, when a
        single filter interacts through ``key`` and can tell (spread: water-filling the
        domains); None when it cannot, and the step then takes one per domain."""
        asked = [
            (f, st)
            for f, st in self._nonlocal
            if f.applies(st, shape.constraints) and key in (f.batch_keys(st, shape.constraints) or ())
        ]
        if len(asked) != 1:
            return None
        f, st = asked[0]
        return f.batch_quota(st, shape.constraints, key, cand, dom, left)

    def _volatile_counts(self, shape: Shape) -> tuple[I64, I64]:
        """Counts of a volatile shape, brought up to date when asked: recounted on the nodes
        touched since, and on those the non-local filters say changed (a domain whose verdict
        flipped), so a gang of thousands of such pods costs per pod what its pod changed, not
        the whole cluster."""
        cons = shape.constraints
        got = self._vol_counts.get(shape.id)
        if got is not None and got.gen == self._gen:
            return got.counts, got.dom
        fs = [(f, st) for f, st in self._nonlocal if f.applies(st, cons)]
        if got is not None:
            parts = self._touched[got.seen :]
            for (f, st), since in zip(fs, got.marks, strict=True):
                ch = f.changed(st, cons, since)
                if ch is None:
                    got = None  # the filter's verdict may have changed anywhere
                    break
                parts.append(ch)
        if got is None:
            c = self.compute_counts(shape)
            got = _Volatile(self._gen, c, self.tree.domain_sums(c), [], len(self._touched))
        elif sum(len(x) for x in parts) * 2 > self.snap.num_nodes:
            c = self.compute_counts(shape)  # most of the cluster changed: recount it whole
            got = _Volatile(self._gen, c, self.tree.domain_sums(c), [], len(self._touched))
        else:
            nodes = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
            if len(nodes):
                new = self.compute_counts(shape, nodes)
                delta = new - got.counts[nodes]
                nz = delta != 0
                if nz.any():
                    got.counts[nodes] = new
                    hns, deg = self._node_hns(nodes[nz])
                    got.dom += np.bincount(
                        hns, weights=np.repeat(delta[nz], deg), minlength=len(self.tree)
                    ).astype(np.int64)
            got.gen, got.seen = self._gen, len(self._touched)
        got.marks = [f.mark(st) for f, st in fs]
        self._vol_counts[shape.id] = got
        return got.counts, got.dom

    def node_counts(self, shape: Shape) -> I64:
        """Cached per-node counts of a shape (kept current by allocate/deallocate)."""
        if self.volatile(shape):
            return self._volatile_counts(shape)[0]
        c = self._node_counts.get(shape.id)
        if c is None:
            key = self.count_key(shape.id)
            twin = self._keyed.get(key) if key is not None else None
            if twin is not None and twin in self._node_counts and self.count_key(twin) == key:
                # A shape counted alike (the pod before it, of the same claim template).
                c = self._node_counts[twin].copy()
                self._node_counts[shape.id] = c
                self._dom_counts[shape.id] = self._dom_counts[twin].copy()
                return c
            c = self.compute_counts(shape)
            self._node_counts[shape.id] = c
            self._dom_counts[shape.id] = self.tree.domain_sums(c)
            if key is not None:
                self._keyed[key] = shape.id
        return c

    def _own_shape(self, sid: int) -> bool:
        """Whether a stateful filter says shape ``sid`` is one pod's own (its claims are made
        for it alone), so no other pod reads its counts."""
        shape = self.snap.shapes[sid]
        if self.volatile(shape):
            return False
        return any(
            hasattr(f, "one_pod_shape") and f.one_pod_shape(st, shape.constraints) for f, st in self.filters
        )

    def count_key(self, sid: int) -> Any:
        """Shapes with equal keys have equal counts on every node now: the same requests and
        static mask, and every stateful filter that judges them says they are alike (the pods
        of one claim template are a shape each). None: the shape is counted on its own."""
        shape = self.snap.shapes[sid]
        keying = self._keying.get(sid)
        if keying is None:
            # Which filters judge the shape does not change within a cycle: asked once.
            judging = [(f, st) for f, st in self.filters if f.applies(st, shape.constraints)]
            keyable = bool(judging) and all(hasattr(f, "count_key") for f, _ in judging)
            keying = self._keying[sid] = judging if keyable and not self.volatile(shape) else []
        if not keying:
            return None
        parts: list[Any] = []
        for f, st in keying:
            got = f.count_key(st, shape.constraints)  # type: ignore[attr-defined]
            if got is None:
                return None
            parts.append((f.name, got))
        mask = self._mask_bytes.get(sid)
        if mask is None:
            mask = self._mask_bytes[sid] = self.snap.static_mask(shape).tobytes()
        return (shape.requests.tobytes(), mask, tuple(parts))

    def dom_counts(self, shape: Shape) -> I64:
        """Cached per-HyperNode counts (sum over the HyperNode's real nodes)."""
        if self.volatile(shape):
            return self._volatile_counts(shape)[1]
        if shape.id not in self._dom_counts:
            self.node_counts(shape)
        return self._dom_counts[shape.id]

    def _refresh(self, nodes: I64) -> None:
        """Recount every cached shape on ``nodes`` and push the changes to their HyperNodes.
        Shapes no stateful filter judges are recounted together, in one array operation per
        chunk of shapes (a gang of per-pod claims has a shape per pod, and each placement would
        otherwise recount them one by one)."""
        if not len(nodes) or not self._node_counts:
            return
        plain: list[int] = []
        where = self._node_hns(nodes)  # the same for every shape
        alike: dict[Any, I64] = {}  # count key -> the counts of the first shape that had it
        for sid in self._node_counts:
            if self._judged(sid):
                key = self.count_key(sid)
                new = alike.get(key) if key is not None else None
                if new is None:
                    new = self.compute_counts(self.snap.shapes[sid], nodes)
                    if key is not None:
                        alike[key] = new
                self._push(sid, new, nodes, where)
            else:
                plain.append(sid)
        if not plain:
            return
        free = self.alloc[nodes] - self.used[nodes]  # (k, R)
        step = max(1, (1 << 20) // max(1, len(nodes) * free.shape[1]))
        for i in range(0, len(plain), step):
            chunk = plain[i : i + step]
            new = pods_fitting_many(free, self._shape_req[chunk])
            masks = np.stack([self.snap.static_mask(self.snap.shapes[sid])[nodes] for sid in chunk])
            new = np.where(masks, new, 0)
            for row, sid in enumerate(chunk):
                self._push(sid, new[row], nodes, where)

    def _judged(self, sid: int) -> bool:
        """Whether a stateful filter applies to shape ``sid`` (its counts need the filter)."""
        got = self._judged_by.get(sid)
        if got is None:
            cons = self.snap.shapes[sid].constraints
            got = self._judged_by[sid] = any(f.applies(st, cons) for f, st in self.filters)
        return got

    def _push(self, sid: int, new: I64, nodes: I64, where: tuple[I64, I64]) -> None:
        """Shape ``sid``'s fresh counts ``new`` on ``nodes``: kept, and their change added to the
        HyperNodes holding those nodes (``where``: :meth:`_node_hns` of ``nodes``)."""
        cnt = self._node_counts[sid]
        delta = new - cnt[nodes]
        if not delta.any():
            return
        cnt[nodes] = new
        hns, deg = where
        self._dom_counts[sid] += np.bincount(
            hns, weights=np.repeat(delta, deg), minlength=len(self.tree)
        ).astype(np.int64)

    # ------------------------------------------------------------------ mutation
    def apply(self, shape_ids: Sequence[int], nodes: Sequence[int], sign: int = 1) -> None:
        """Add (sign=1) or remove (sign=-1) one pod of shape ``shape_ids[i]`` on ``nodes[i]``."""
        if not len(nodes):
            return
        n_arr = np.asarray(nodes, dtype=np.int64)
        s_arr = np.asarray(shape_ids, dtype=np.int64)
        reqs = self._shape_req[s_arr] * sign
        if len(np.unique(s_arr)) == 1:
            # One shape (the common case): per-node pod counts times the request.
            uniq, cnt = np.unique(n_arr, return_counts=True)
            self.used[uniq] += np.outer(cnt, reqs[0])
        else:
            np.add.at(self.used, n_arr, reqs)
        self._add_hn_used(n_arr, reqs)
        touched = np.unique(n_arr)
        if self.filters:
            shapes = self.snap.shapes
            by_shape = [(int(sid), n_arr[s_arr == sid]) for sid in np.unique(s_arr).tolist()]
            more: list[I64] = [touched]
            for f, st in self.filters:
                step = f.reserve if sign > 0 else f.unreserve
                for sid, ns in by_shape:
                    cons = shapes[sid].constraints
                    # A local filter hears only of the pods it judges; a non-local one of every
                    # pod (any placed pod may count for another's terms).
                    if f.local and not f.applies(st, cons):
                        continue
                    # A local filter may change other nodes' verdicts (a volume taken, a claim
                    # pinned): they are recounted too.
                    got = step(st, cons, ns)
                    if got is not None and len(got):
                        more.append(got)
            if len(more) > 1:
                touched = np.unique(np.concatenate(more))
            if sign > 0:
                for sid, _ns in by_shape:
                    if self._own_shape(sid):
                        # Its one pod is placed: no one asks its counts again unless the
                        # placement is undone (then they are counted afresh), so they are not
                        # kept current placement after placement (a 512-pod gang of per-pod
                        # claims would recount 512 shapes per placement).
                        self._node_counts.pop(sid, None)
                        self._dom_counts.pop(sid, None)
        self._gen += 1
        if self._nonlocal:
            self._touched.append(touched)
        self._refresh(touched)

    def fill(self, nodes: I64, sign: int = 1) -> None:
        """Mark ``nodes`` full (sign=1: their whole allocatable added to used) or undo it
        (sign=-1): no pod fits there while filled. Exclusive domains fence their nodes so."""
        if not len(nodes):
            return
        rows = self.alloc[nodes] * sign
        self.used[nodes] += rows
        self._add_hn_used(nodes, rows)
        self._gen += 1
        touched = np.unique(nodes)
        if self._nonlocal:
            self._touched.append(touched)
        self._refresh(touched)

    def _node_hns(self, nodes: I64) -> tuple[I64, I64]:
        """The HyperNodes of each of ``nodes``, concatenated (CSR slices), and how many each has."""
        deg = self._deg[nodes]
        starts = self.tree.node_hn_ptr[nodes]
        offs = np.repeat(starts - np.concatenate([[0], np.cumsum(deg)[:-1]]), deg) + np.arange(deg.sum())
        return self.tree.node_hn_idx[offs], deg

    def _add_hn_used(self, nodes: I64, rows: I64) -> None:
        """Add ``rows[i]`` (one per node) to the usage of every HyperNode holding ``nodes[i]``."""
        hns, deg = self._node_hns(nodes)
        rep = np.repeat(rows, deg, axis=0)
        h = len(self.tree)
        for r in np.flatnonzero(rows.any(axis=0)).tolist():
            self.hn_used[:, r] += np.bincount(hns, weights=rep[:, r], minlength=h)

    def overcommitted(self, nodes: Sequence[int]) -> list[int]:
        """Nodes among ``nodes`` whose used exceeds allocatable on some resource (must be none)."""
        n_arr = np.unique(np.asarray(nodes, dtype=np.int64))
        bad = (self.used[n_arr] > self.alloc[n_arr]).any(axis=1)
        return n_arr[bad].tolist()
