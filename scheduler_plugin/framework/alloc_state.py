"""Mutable allocation state of one session: used resources, the stateful filters' state (host
ports in use) and per-shape fit counts.

Fit counts are the heart of the fast domain search: for a pod shape, ``count[n]`` is how many
more pods of that shape node ``n`` can take (min over requested resources of free // request,
masked by the static filters, capped by the stateful ones: at most 1 with host ports). For one shape the counts are exactly
additive: placing one pod lowers its node's count by exactly one, so HyperNode sums of counts
(``dom[h]``) say exactly how many pods of that shape a domain can still take.

Counts are cached per shape and kept in sync incrementally: an allocation recomputes the counts
of the touched nodes only and pushes the deltas to their HyperNodes (one bincount).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..filters.registry import STATEFUL_FILTERS
from ..model.memo import MemoKey
from ..model.snapshot import ClusterSnapshot, Shape, pods_fitting

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
        self.filters = [
            (f, f.cycle_state(snap))
            for f in STATEFUL_FILTERS
            if any(f.applies(sh.constraints) for sh in shapes)
        ]

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
            if f.applies(cons):
                f.cap_counts(st, cons, range(self.snap.num_nodes) if idx is None else idx.tolist(), c)
        return c

    def node_counts(self, shape: Shape) -> I64:
        """Cached per-node counts of a shape (kept current by allocate/deallocate)."""
        c = self._node_counts.get(shape.id)
        if c is None:
            c = self.compute_counts(shape)
            self._node_counts[shape.id] = c
            self._dom_counts[shape.id] = self.tree.domain_sums(c)
        return c

    def dom_counts(self, shape: Shape) -> I64:
        """Cached per-HyperNode counts (sum over the HyperNode's real nodes)."""
        if shape.id not in self._dom_counts:
            self.node_counts(shape)
        return self._dom_counts[shape.id]

    def _refresh(self, nodes: I64) -> None:
        if not len(nodes):
            return
        tree = self.tree
        for sid, cnt in self._node_counts.items():
            shape = self.snap.shapes[sid]
            new = self.compute_counts(shape, nodes)
            delta = new - cnt[nodes]
            if not delta.any():
                continue
            cnt[nodes] = new
            nz = delta != 0
            nn, dd = nodes[nz], delta[nz]
            # Each changed node's HyperNodes get its delta.
            hns, deg = self._node_hns(nn)
            self._dom_counts[sid] += np.bincount(hns, weights=np.repeat(dd, deg), minlength=len(tree)).astype(
                np.int64
            )

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
        touched = [n_arr]
        for f, st in self.filters:
            for sid, n in zip(s_arr.tolist(), n_arr.tolist(), strict=True):
                cons = self.snap.shapes[sid].constraints
                if f.applies(cons):
                    # A filter may change other nodes' verdicts (a volume taken, a claim pinned).
                    more = (f.reserve if sign > 0 else f.unreserve)(st, cons, n)
                    if more is not None and len(more):
                        touched.append(np.asarray(more, dtype=np.int64))
        self._refresh(np.unique(np.concatenate(touched)))

    def fill(self, nodes: I64, sign: int = 1) -> None:
        """Mark ``nodes`` full (sign=1: their whole allocatable added to used) or undo it
        (sign=-1): no pod fits there while filled. Exclusive domains fence their nodes so."""
        if not len(nodes):
            return
        rows = self.alloc[nodes] * sign
        self.used[nodes] += rows
        self._add_hn_used(nodes, rows)
        self._refresh(np.unique(nodes))

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
