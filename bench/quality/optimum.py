"""Exact optimum of one gang placement: a MILP (scipy / HiGHS) and an exhaustive search.

Objective, lexicographic:
  1. the lowest tier of a HyperNode that can hold the whole job (within its hard bound);
  2. given that, the lowest sum of partition LCA tiers (each within its own hard bound);
  3. given both, the fewest tier-1 domains (leaves) spanned.

The MILP tries job tiers from the bottom up; for a tier ``t`` it chooses one tier-``t``
domain for the job (binary ``w``), one domain at a tier ``<= min(limit, t)`` for every
partition (binary ``z``), the leaves in use (binary ``u``), and pod counts per
(pod group, node) (integer ``x``). Levels 2 and 3 are folded into one integer objective
``(leaves + 1) * sum(partition tiers) + sum(u)``, exact because HiGHS is asked for a zero
gap. The exhaustive search enumerates every pod-to-node map and is the test oracle for
the MILP on tiny cases.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from .metrics import Quality, quality, violations
from .model import ClusterState, IntArray, JobSpec


@dataclass(frozen=True)
class Optimum:
    """The oracle's answer: ``quality`` is None when no valid placement exists."""

    quality: Quality | None
    placement: IntArray | None
    timed_out: bool = False

    @property
    def feasible(self) -> bool:
        return self.quality is not None


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """HiGHS prints debug lines straight to file descriptor 1 on some MIPs; keep them out
    of the benchmark's markdown output."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _groups(job: JobSpec) -> tuple[list[IntArray], IntArray]:
    """Interchangeable pods: same task and same partition. Returns pod indexes per group
    and the partition of each group (-1 for none)."""
    keys = list(zip(job.pod_task.tolist(), job.pod_partition.tolist(), strict=True))
    order: dict[tuple[int, int], list[int]] = {}
    for i, key in enumerate(keys):
        order.setdefault(key, []).append(i)
    pods = [np.asarray(v, dtype=np.int64) for v in order.values()]
    part = np.asarray([k[1] for k in order], dtype=np.int64)
    return pods, part


def _solve_at_tier(
    state: ClusterState, job: JobSpec, tier: int, time_limit: float
) -> tuple[IntArray | None, bool]:
    """Best placement with the job inside one tier-``tier`` domain (None if infeasible)."""
    topo = state.topo
    free = state.free
    groups, gpart = _groups(job)
    cnt = np.asarray([len(g) for g in groups], dtype=np.int64)
    greq = np.stack([job.req[g[0]] for g in groups])

    # x variables only where one pod of the group fits on the node's free capacity.
    pairs: list[tuple[int, int]] = []
    for g in range(len(groups)):
        ok = np.all(free >= greq[g], axis=1)
        pairs.extend((g, int(n)) for n in np.flatnonzero(ok))
    if not pairs:
        return None, False
    nx_ = len(pairs)
    pg = np.asarray([p[0] for p in pairs], dtype=np.int64)
    pn = np.asarray([p[1] for p in pairs], dtype=np.int64)

    n_job_dom = topo.n_domains(tier)
    w0 = nx_
    # z blocks: for each partition, for each allowed tier s, all tier-s domains.
    z_index: dict[tuple[int, int], int] = {}  # (partition, tier) -> offset of its domain block
    z_cost: list[float] = []
    z0 = w0 + n_job_dom
    off = z0
    for p in range(len(job.partitions)):
        spec = job.partition_topology(p)
        top = min(tier, spec.limit(topo.root_tier) if spec else topo.root_tier)
        for s in range(1, top + 1):
            z_index[(p, s)] = off
            z_cost.extend([float(s)] * topo.n_domains(s))
            off += topo.n_domains(s)
    u0 = off
    n_leaves = topo.n_domains(1)
    nvar = u0 + n_leaves

    c = np.zeros(nvar)
    c[z0:u0] = np.asarray(z_cost) * (n_leaves + 1)
    c[u0:] = 1.0
    lb = np.zeros(nvar)
    ub = np.ones(nvar)
    ub[:nx_] = cnt[pg]
    integrality = np.ones(nvar)

    rows: list[IntArray] = []
    cols: list[IntArray] = []
    vals: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []
    r = 0

    def add(row_cols: IntArray, row_vals: np.ndarray, low: float, high: float) -> None:
        nonlocal r
        rows.append(np.full(len(row_cols), r, dtype=np.int64))
        cols.append(np.asarray(row_cols, dtype=np.int64))
        vals.append(np.asarray(row_vals, dtype=float))
        lo.append(low)
        hi.append(high)
        r += 1

    # Every pod placed.
    for g in range(len(groups)):
        idx = np.flatnonzero(pg == g)
        add(idx, np.ones(len(idx)), float(cnt[g]), float(cnt[g]))
    # Node capacity per resource.
    for n in np.unique(pn):
        idx = np.flatnonzero(pn == n)
        for res in range(greq.shape[1]):
            coef = greq[pg[idx], res]
            if coef.any():
                add(idx, coef, -np.inf, float(free[n, res]))
    # One job domain; pods only inside it.
    add(np.arange(w0, w0 + n_job_dom), np.ones(n_job_dom), 1.0, 1.0)
    for i in range(nx_):
        big = float(cnt[pg[i]])
        add(np.asarray([i, w0 + topo.anc[tier - 1, pn[i]]]), np.asarray([1.0, -big]), -np.inf, 0.0)
        # Leaf in use.
        add(np.asarray([i, u0 + topo.anc[0, pn[i]]]), np.asarray([1.0, -big]), -np.inf, 0.0)
        p = int(gpart[pg[i]])
        if p >= 0:
            zc = [
                z_index[(p, s)] + int(topo.anc[s - 1, pn[i]]) for s in range(1, tier + 1) if (p, s) in z_index
            ]
            add(np.asarray([i, *zc]), np.asarray([1.0] + [-big] * len(zc)), -np.inf, 0.0)
    # One domain per partition.
    for p in range(len(job.partitions)):
        block = [
            np.arange(z_index[(p, s)], z_index[(p, s)] + topo.n_domains(s))
            for s in range(1, tier + 1)
            if (p, s) in z_index
        ]
        if not block:
            return None, False
        idx = np.concatenate(block)
        add(idx, np.ones(len(idx)), 1.0, 1.0)

    a = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nvar))
    with _quiet_stdout():
        res = milp(
            c,
            integrality=integrality,
            bounds=Bounds(lb, ub),
            constraints=[LinearConstraint(a, np.asarray(lo), np.asarray(hi))],
            options={"mip_rel_gap": 0.0, "time_limit": time_limit, "presolve": True},
        )
    if res.status == 1 and res.x is None:
        return None, True
    if res.x is None:
        return None, False
    x = np.rint(res.x[:nx_]).astype(np.int64)
    placement = np.full(job.n_pods, -1, dtype=np.int64)
    for g, pods in enumerate(groups):
        idx = np.flatnonzero((pg == g) & (x > 0))
        nodes = np.repeat(pn[idx], x[idx])
        placement[pods] = nodes
    return placement, res.status == 1


def milp_optimum(state: ClusterState, job: JobSpec, time_limit: float = 30.0) -> Optimum:
    """Lexicographic optimum by MILP, trying job tiers bottom-up within the hard bound.

    ``timed_out`` means HiGHS hit ``time_limit`` somewhere: the result is then not proven
    optimal (or not proven infeasible) and callers should not score against it.
    """
    topo = state.topo
    limit = job.topology.limit(topo.root_tier) if job.topology else topo.root_tier
    timed_out = False
    for tier in range(1, min(limit, topo.root_tier) + 1):
        placement, hit_limit = _solve_at_tier(state, job, tier, time_limit)
        timed_out = timed_out or hit_limit
        if placement is None and hit_limit:
            # Unknown whether this tier is feasible: the answer would not be exact.
            return Optimum(None, None, timed_out=True)
        if placement is not None:
            problems = violations(state, job, placement)
            if problems:  # a solver tolerance slip; never report an invalid optimum
                raise AssertionError(f"MILP returned an invalid placement: {problems}")
            return Optimum(quality(topo, job, placement), placement, timed_out)
    return Optimum(None, None, timed_out)


def exhaustive_optimum(state: ClusterState, job: JobSpec, max_assignments: int = 2_000_000) -> Optimum:
    """Lexicographic optimum by enumerating every pod-to-node map (tiny cases only)."""
    n, p = state.topo.n_nodes, job.n_pods
    if n**p > max_assignments:
        raise ValueError(f"{n}^{p} assignments is too many for exhaustive search")
    best: tuple[tuple[int, int, int], IntArray] | None = None
    for combo in itertools.product(range(n), repeat=p):
        placement = np.asarray(combo, dtype=np.int64)
        if violations(state, job, placement):
            continue
        key = quality(state.topo, job, placement).key()
        if best is None or key < best[0]:
            best = (key, placement)
    if best is None:
        return Optimum(None, None)
    return Optimum(quality(state.topo, job, best[1]), best[1])
