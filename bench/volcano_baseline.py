"""A faithful, in-process baseline of Volcano's topology-aware allocate algorithm.

What it does, as Volcano's ``allocateForJob`` / ``allocateForSubJob`` / ``allocateResourcesForTasks``
(Volcano's allocate action and network-topology-aware plugin):

* job gradient: HyperNodes of tier <= highestTierAllowed, lowest tier first (BFS order);
* for every candidate HyperNode H of a tier: dry-run every SubJob in order; a SubJob's gradient
  is the HyperNodes inside H of tier <= its own limit whose aggregate idle covers its pending
  requests (``isEligibleHyperNode``); every eligible candidate is dry-run pod by pod, each pod
  filtered and scored on *every* node of the candidate (per-node predicate + binpack + LCA
  score), the best candidate by HyperNode bin-packing is replayed, then the job is discarded;
* the first tier with a solution wins; the best H by summed SubJob scores is replayed.

Per-node work is plain Python, one node at a time, as Volcano's predicate/score loops are (in
Go). A wall-clock budget stops the run; the caller then reports a lower bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from scheduler_plugin.model.jobs import JobInfo
from scheduler_plugin.model.snapshot import ClusterSnapshot


class BudgetExceeded(Exception):
    """The baseline ran out of its wall-clock budget."""


@dataclass
class BaselineResult:
    placed: int
    hypernode: str | None
    seconds: float
    node_evals: int
    complete: bool  # False: the time budget was hit, ``seconds`` is a lower bound


class VolcanoBaseline:
    """Volcano's per-domain dry-run search on a snapshot (pure Python per node)."""

    def __init__(self, snap: ClusterSnapshot, budget_s: float = 30.0) -> None:
        self.snap = snap
        self.tree = snap.tree
        self.budget = budget_s
        res = snap.resources
        self.cols = [i for i, r in enumerate(res) if r in ("cpu", "nvidia.com/gpu", "pods")]
        self.alloc = [[int(snap.allocatable[n, c]) for c in self.cols] for n in range(snap.num_nodes)]
        self.free = [
            [int(snap.allocatable[n, c] - snap.used[n, c]) for c in self.cols] for n in range(snap.num_nodes)
        ]
        tree = self.tree
        self.hn_nodes = [s.tolist() for s in tree.node_sets]
        self.hn_free = [
            [sum(self.free[n][k] for n in nodes) for k in range(len(self.cols))] for nodes in self.hn_nodes
        ]
        self.hn_alloc = [
            [sum(self.alloc[n][k] for n in nodes) for k in range(len(self.cols))] for nodes in self.hn_nodes
        ]
        self.node_hns = [tree.hypernodes_of_node(n).tolist() for n in range(snap.num_nodes)]
        self.leaf = tree.leaf_of.tolist()
        self.tiers = tree.tiers.tolist()
        self.evals = 0
        self.t0 = 0.0

    # ------------------------------------------------------------------ primitives
    def _alloc(self, n: int, req: list[int], sign: int) -> None:
        f = self.free[n]
        for k, v in enumerate(req):
            f[k] -= sign * v
        for h in self.node_hns[n]:
            hf = self.hn_free[h]
            for k, v in enumerate(req):
                hf[k] -= sign * v

    def _undo(self, ops: list[tuple[int, list[int]]]) -> None:
        for n, req in reversed(ops):
            self._alloc(n, req, -1)

    def _allocate_tasks(
        self, reqs: list[list[int]], h: int, allocated: int
    ) -> list[tuple[int, list[int]]] | None:
        """Place every pod on the best node of ``h`` (per-node filter + score), or undo and fail."""
        if time.perf_counter() - self.t0 > self.budget:
            raise BudgetExceeded
        ops: list[tuple[int, list[int]]] = []
        nodes = self.hn_nodes[h]
        tree = self.tree
        lo, hi = tree.sorted_tiers[0], tree.sorted_tiers[-1]
        for req in reqs:
            if time.perf_counter() - self.t0 > self.budget:
                self._undo(ops)
                raise BudgetExceeded
            best, best_score = -1, -1.0
            for n in nodes:
                self.evals += 1
                f = self.free[n]
                if f[0] < req[0] or f[1] < req[1] or f[2] < req[2]:
                    continue
                a = self.alloc[n]
                # binpack (cpu, gpu) + network-topology LCA score, as per node score plugins do.
                s = 0.0
                wsum = 0
                for k in (0, 1):
                    if req[k] and a[k]:
                        s += (a[k] - f[k] + req[k]) / a[k]
                        wsum += 1
                s = s / wsum if wsum else 0.0
                leaf = self.leaf[n]
                if allocated >= 0 and leaf >= 0:
                    lca_t = self.tiers[tree.lca(leaf, allocated)]
                    s += 1.0 if leaf == allocated else (hi - lca_t) / (hi - lo) if hi > lo else 1.0
                if s > best_score:
                    best, best_score = n, s
            if best < 0:
                self._undo(ops)
                return None
            self._alloc(best, req, 1)
            ops.append((best, req))
            if allocated < 0 and self.leaf[best] >= 0:
                allocated = self.leaf[best]
            elif self.leaf[best] >= 0:
                allocated = tree.lca(allocated, self.leaf[best])
        return ops

    def _gradient(self, root: int, limit: int | None, need: list[int] | None) -> list[list[int]]:
        if limit is None:
            return [[root]]
        by: dict[int, list[int]] = {}
        for h in self.tree.subtree(root):
            t = self.tiers[h]
            if t > limit:
                continue
            if need is not None and any(self.hn_free[h][k] < need[k] for k in range(len(need))):
                continue  # isEligibleHyperNode: aggregate idle must cover the pending requests
            by.setdefault(t, []).append(h)
        return [by[t] for t in sorted(by)]

    def _score(self, h: int, need: list[int]) -> float:
        a, f = self.hn_alloc[h], self.hn_free[h]
        s, w = 0.0, 0
        for k in (0, 1):
            if need[k] and a[k]:
                used = a[k] - f[k] + need[k]
                if used > a[k]:
                    return 0.0
                s += used / a[k]
                w += 1
        return s / w if w else 0.0

    # ------------------------------------------------------------------ allocate
    def run(self, job: JobInfo) -> BaselineResult:
        """Volcano's allocateForJob on one job; stops at the budget."""
        self.t0 = time.perf_counter()
        self.evals = 0
        subjobs = sorted(job.subjobs.values(), key=lambda s: (s.match_index, s.id))
        sj_reqs = [
            [[int(t.requests[c]) for c in self.cols] for t in sj.tasks if not t.running] for sj in subjobs
        ]
        job_limit = job.topology.limit if job.topology is not None else None
        try:
            for level in self._gradient(self.tree.root, job_limit, None):
                best: tuple[float, int, list[tuple[int, list[int]]]] | None = None
                for big in level:
                    ops_all: list[tuple[int, list[int]]] = []
                    total = 0.0
                    ok = True
                    for sj, reqs in zip(subjobs, sj_reqs, strict=True):
                        need = [sum(r[k] for r in reqs) for k in range(len(self.cols))]
                        limit = sj.topology.limit if sj.topology is not None else None
                        done = False
                        for sub_level in self._gradient(big, limit, need):
                            cands = []
                            for h in sub_level:
                                ops = self._allocate_tasks(reqs, h, -1)
                                if ops is not None:
                                    cands.append(h)
                                    self._undo(ops)
                            if cands:
                                scores = [self._score(h, need) for h in cands]
                                h = cands[int(np.argmax(scores))]
                                ops = self._allocate_tasks(reqs, h, -1)
                                assert ops is not None
                                ops_all.extend(ops)
                                total += max(scores)
                                done = True
                                break
                        if not done:
                            ok = False
                            break
                    self._undo(ops_all)
                    if ok and (best is None or total > best[0]):
                        best = (total, big, ops_all)
                if best is not None:
                    for n, req in best[2]:
                        self._alloc(n, req, 1)
                    return BaselineResult(
                        len(best[2]),
                        self.tree.names[best[1]],
                        time.perf_counter() - self.t0,
                        self.evals,
                        True,
                    )
        except BudgetExceeded:
            return BaselineResult(0, None, time.perf_counter() - self.t0, self.evals, False)
        return BaselineResult(0, None, time.perf_counter() - self.t0, self.evals, True)
