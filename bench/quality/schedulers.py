"""The scheduler adapter interface and the two baselines.

``Scheduler.place(state, job) -> placement | None`` is the whole interface: a placement is
one node index per pod (``job.req`` order) and must be all-or-nothing (gang). Schedulers
that decide for many jobs at once (ours runs one session per cycle) override
``place_batch``.

Baselines:
* :class:`BlindScheduler` -- topology-blind: gang only, each pod on the least-allocated
  node that fits (kube-scheduler's default spreading).
* :class:`VolcanoScheduler` -- Volcano's allocate action with the network-topology-aware,
  binpack and nodeorder plugins, re-implemented from Volcano's allocate action and plugins: per-tier
  gradients, a dry run of the whole job in every candidate HyperNode, SubJob gradients
  inside it, HyperNodeOrderFn bin-pack to pick among successful candidates, and per-pod
  node scoring (nodeorder + binpack + the LCA score).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .model import CPU, GPU, MEM, ClusterState, IntArray, JobSpec, NetTopology, Topology


class DeadlineExceeded(Exception):
    """Raised inside a baseline when its CPU-time budget for one decision is spent."""


class Scheduler:
    """Adapter interface every scheduler under test implements."""

    name: str = "scheduler"
    # True when the scheduler keeps its own head-of-queue reservation (ours: the scheduler's
    # reservation code); the trace simulation then applies no reservation rule of its own.
    reserves: bool = False

    def place(self, state: ClusterState, job: JobSpec) -> IntArray | None:
        """A gang placement of ``job`` on ``state`` (not mutated), or None."""
        raise NotImplementedError

    # Hooks the trace simulation calls; schedulers that keep their own view of running
    # jobs (ours builds wire objects for them) override these.
    def set_created(self, job: JobSpec, when: float) -> None:
        """``job`` was submitted at simulated time ``when``."""

    def on_start(self, state: ClusterState, job: JobSpec, placement: IntArray) -> None:
        """``job`` started on ``placement``."""

    def set_now(self, when: float) -> None:
        """The simulated time of the next ``place_batch`` (the scheduler's clock)."""

    def on_finish(self, job: JobSpec) -> None:
        """``job`` finished and its resources were freed."""

    def decision_cpu(self) -> float | None:
        """CPU seconds the scheduler itself spent on the last ``place_batch``, when the adapter
        also translates between the simulation and the scheduler's own objects (that
        translation is the harness's, not the scheduler's); None: the whole call counts."""
        return None

    def place_batch(self, state: ClusterState, jobs: Sequence[JobSpec]) -> dict[str, IntArray]:
        """One scheduling cycle over pending ``jobs`` in queue order; ``state`` is updated
        with every placement made, so later jobs see earlier ones (Volcano's allocate
        walks its job queue the same way and skips jobs that do not fit)."""
        out: dict[str, IntArray] = {}
        for job in jobs:
            placement = self.place(state, job)
            if placement is not None:
                state.apply(job.req, placement)
                out[job.name] = placement
        return out


def _fits(state: ClusterState, nodes: IntArray, req: IntArray, used: IntArray) -> IntArray:
    return nodes[np.all(used[nodes] + req <= state.alloc[nodes], axis=1)]


class BlindScheduler(Scheduler):
    """Gang-only baseline: least-allocated spreading, no topology at all."""

    name = "topology-blind"

    def place(self, state: ClusterState, job: JobSpec) -> IntArray | None:
        used = state.used.copy()
        alloc = state.alloc
        all_nodes = np.arange(state.topo.n_nodes)
        placement = np.full(job.n_pods, -1, dtype=np.int64)
        denom = np.maximum(alloc, 1).astype(float)
        has = alloc > 0
        for i in range(job.n_pods):
            req = job.req[i]
            cands = _fits(state, all_nodes, req, used)
            if len(cands) == 0:
                return None
            # LeastAllocated over every resource the node has (cpu, memory, GPUs).
            frac = (alloc[cands] - used[cands] - req) / denom[cands]
            score = (frac * has[cands]).sum(axis=1) / np.maximum(has[cands].sum(axis=1), 1)
            n = int(cands[int(np.argmax(score))])
            placement[i] = n
            used[n] += req
        return placement


@dataclass
class VolcanoConfig:
    """Plugin arguments of the Volcano baseline (as volcano-scheduler.conf gives them).

    The default is Volcano's: nodeorder + binpack + network-topology-aware, weight 1, default
    arguments -- so both bin-pack scores see only CPU and memory, the same configuration as
    our ``DEFAULT_CONFIG``. :meth:`gpu_binpack` adds ``nvidia.com/gpu`` to both resource
    lists, as a GPU cluster operator would.
    """

    nodeorder_least_requested: float = 1.0
    nodeorder_balanced: float = 1.0
    binpack_weight: float = 1.0
    binpack_resources: dict[int, float] = field(default_factory=lambda: {CPU: 1.0, MEM: 1.0})
    nt_weight: float = 1.0
    hn_binpack_resources: dict[int, float] = field(default_factory=lambda: {CPU: 1.0, MEM: 1.0})
    normal_pod_enable: bool = True
    normal_pod_fading: float = 0.8

    @classmethod
    def gpu_binpack(cls) -> VolcanoConfig:
        gpu = {CPU: 1.0, MEM: 1.0, GPU: 1.0}
        return cls(binpack_resources=dict(gpu), hn_binpack_resources=dict(gpu))


Domain = tuple[int, int]  # (tier, local index)


@dataclass
class _SubJob:
    pods: IntArray  # pod indexes in task order
    topology: NetTopology | None  # after Volcano's soft->hard conversion: hard or None


class VolcanoScheduler(Scheduler):
    """Volcano's allocate algorithm (see module docstring). Ties are broken with a seeded
    RNG where Volcano breaks them at random (Go map order or explicit shuffles)."""

    name = "volcano-algorithm"

    def __init__(
        self,
        config: VolcanoConfig | None = None,
        seed: int = 0,
        cpu_budget_s: float | None = None,
        name: str = "volcano-algorithm",
    ) -> None:
        self.name = name
        self.config = config or VolcanoConfig()
        self.rng = np.random.default_rng(seed)
        self.cpu_budget_s = cpu_budget_s
        self.timed_out = False
        self._deadline = float("inf")

    # ---- entry point -------------------------------------------------------------------

    def place(self, state: ClusterState, job: JobSpec) -> IntArray | None:
        self.timed_out = False
        self._deadline = (
            time.process_time() + self.cpu_budget_s if self.cpu_budget_s is not None else float("inf")
        )
        try:
            return self._place(state, job)
        except DeadlineExceeded:
            self.timed_out = True
            return None

    def _place(self, state: ClusterState, job: JobSpec) -> IntArray | None:
        topo = state.topo
        root: Domain = (topo.root_tier, 0)
        # Soft becomes hard bounded by the top tier; partitions inherit the job's bound.
        job_topo = NetTopology("hard", job.topology.limit(topo.root_tier)) if job.topology else None
        subjobs = self._subjobs(job, job_topo, topo.root_tier)
        if job_topo is None and not job.partitions:
            return self._flat(state, job)
        if job_topo is not None:
            gradients = self._gradient(state, root, job_topo, job.req.sum(axis=0), state.used)
        else:
            gradients = [[root]]
        for grad in gradients:
            solutions: list[tuple[float, IntArray]] = []
            for h in grad:
                used = state.used.copy()
                placement = np.full(job.n_pods, -1, dtype=np.int64)
                score = 0.0
                ready = True
                # Every SubJob is tried even after one fails, as Volcano pops them all.
                for sj in subjobs:
                    s = self._allocate_subjob(state, job, sj, h, used, placement)
                    if s is None:
                        ready = False
                    else:
                        score += s
                if ready:
                    solutions.append((score, placement))
            if solutions:
                best = max(s for s, _ in solutions)
                tied = [p for s, p in solutions if np.isclose(s, best)]
                return tied[int(self.rng.integers(len(tied)))]
        return None

    @staticmethod
    def _subjobs(job: JobSpec, job_topo: NetTopology | None, root_tier: int) -> list[_SubJob]:
        """Partitions in MatchIndex order, then the default SubJob (pods in no partition)."""
        out = []
        for p in range(len(job.partitions)):
            spec = job.partition_topology(p)
            if spec is not None:
                bound = job_topo.highest_tier if job_topo is not None else root_tier
                limit = spec.highest_tier if spec.mode == "hard" and spec.highest_tier is not None else bound
                spec = NetTopology("hard", limit)
            out.append(_SubJob(np.flatnonzero(job.pod_partition == p), spec))
        rest = np.flatnonzero(job.pod_partition < 0)
        if len(rest):
            out.append(_SubJob(rest, job_topo))
        return out

    # ---- gradients --------------------------------------------------------------

    def _gradient(
        self, state: ClusterState, start: Domain, spec: NetTopology, min_req: IntArray, used: IntArray
    ) -> list[list[Domain]]:
        """Eligible domains under ``start`` (itself included) grouped by tier, lowest first:
        tier within the hard bound and aggregate idle >= the (Sub)Job's requests."""
        topo = state.topo
        limit = spec.highest_tier if spec.highest_tier is not None else topo.root_tier
        t0, d0 = start
        out = []
        for t in range(1, min(t0, limit) + 1):
            doms = np.unique(topo.anc[t - 1, topo.members[t0 - 1][d0]])
            idle = self._idle_by_domain(state, t, used)[doms]
            ok = doms[np.all(idle >= min_req, axis=1)]
            if len(ok):
                out.append([(t, int(d)) for d in ok])
        return out

    @staticmethod
    def _idle_by_domain(state: ClusterState, tier: int, used: IntArray) -> IntArray:
        row = state.topo.anc[tier - 1]
        n = state.topo.n_domains(tier)
        idle = state.alloc - used
        return np.stack([np.bincount(row, idle[:, r], minlength=n) for r in range(idle.shape[1])], axis=1)

    # ---- SubJob allocation ------------------------------------------------------

    def _allocate_subjob(
        self,
        state: ClusterState,
        job: JobSpec,
        sj: _SubJob,
        h_job: Domain,
        used: IntArray,
        placement: IntArray,
    ) -> float | None:
        """Place ``sj`` inside ``h_job``; on success update ``used``/``placement`` and return
        the chosen candidate's HyperNodeOrderFn score."""
        req_sum = job.req[sj.pods].sum(axis=0)
        if sj.topology is not None:
            gradients = self._gradient(state, h_job, sj.topology, req_sum, used)
        else:
            gradients = [[h_job]]
        for grad in gradients:
            successes: list[tuple[Domain, IntArray, IntArray]] = []
            for h in grad:
                trial = used.copy()
                nodes = self._allocate_tasks(state, job, sj, h, trial)
                if nodes is not None:
                    successes.append((h, trial, nodes))
            if successes:
                # HyperNodeOrderFn on pre-allocation usage (the dry runs were discarded).
                scores = np.asarray([self._hn_binpack(state, h, req_sum, used) for h, _, _ in successes])
                tied = np.flatnonzero(np.isclose(scores, scores.max()))
                h, trial, nodes = successes[int(tied[int(self.rng.integers(len(tied)))])]
                used[:] = trial
                placement[sj.pods] = nodes
                return float(scores.max()) * 100.0 * self.config.nt_weight
        return None

    def _hn_binpack(self, state: ClusterState, h: Domain, req: IntArray, used: IntArray) -> float:
        """HyperNodeOrderFn: weighted mean of (used + request) / allocatable, 0 on overflow."""
        nodes = state.topo.members[h[0] - 1][h[1]]
        alloc = state.alloc[nodes].sum(axis=0)
        u = used[nodes].sum(axis=0)
        num = den = 0.0
        for r, w in self.config.hn_binpack_resources.items():
            if alloc[r] <= 0:
                continue
            if u[r] + req[r] > alloc[r]:
                return 0.0
            num += w * (u[r] + req[r]) / alloc[r]
            den += w
        return num / den if den else 0.0

    # ---- task allocation --------------------------------------------------------

    def _allocate_tasks(
        self, state: ClusterState, job: JobSpec, sj: _SubJob, h: Domain, used: IntArray
    ) -> IntArray | None:
        topo = state.topo
        nodes = topo.members[h[0] - 1][h[1]]
        out = np.full(len(sj.pods), -1, dtype=np.int64)
        allocated: Domain | None = None  # the SubJob's running allocated HyperNode
        leaf_count = np.zeros(topo.n_domains(1), dtype=np.int64)
        for k, i in enumerate(sj.pods.tolist()):
            if time.process_time() >= self._deadline:
                raise DeadlineExceeded
            req = job.req[i]
            cands = _fits(state, nodes, req, used)
            if len(cands) == 0:
                return None  # minAvailable == tasks: stop at the first pod that fits nowhere
            if len(cands) == 1:
                n = int(cands[0])  # a single feasible node is taken without scoring
            else:
                score = self._node_scores(state, cands, req, used)
                if sj.topology is not None:
                    score = score + self._lca_scores(topo, cands, allocated, leaf_count, len(sj.pods))
                tied = cands[np.isclose(score, score.max())]
                n = int(tied[int(self.rng.integers(len(tied)))])
            out[k] = n
            used[n] += req
            leaf = int(topo.anc[0, n])
            leaf_count[leaf] += 1
            allocated = _lca(topo, allocated, (1, leaf))
        return out

    def _node_scores(self, state: ClusterState, cands: IntArray, req: IntArray, used: IntArray) -> np.ndarray:
        """nodeorder (leastRequested + balancedResource, k8s integer scores) + binpack."""
        cfg = self.config
        alloc = state.alloc[cands].astype(np.int64)
        after = used[cands] + req
        score = np.zeros(len(cands))
        if cfg.nodeorder_least_requested:
            per = [
                ((alloc[:, r] - after[:, r]) * 100) // np.maximum(alloc[:, r], 1) for r in (CPU, MEM)
            ]  # k8s leastResourceScorer: int64 per resource, then an integer mean
            score += cfg.nodeorder_least_requested * ((per[0] + per[1]) // 2)
        if cfg.nodeorder_balanced:
            fr = [after[:, r] / np.maximum(alloc[:, r], 1) for r in (CPU, MEM)]
            std = np.abs(fr[0] - fr[1]) / 2.0
            score += cfg.nodeorder_balanced * np.floor((1.0 - std) * 100.0)
        if cfg.binpack_weight:
            num = np.zeros(len(cands))
            den = 0.0
            for r, w in cfg.binpack_resources.items():
                if req[r] <= 0:
                    continue  # binpack skips resources the pod does not request
                num += w * after[:, r] / np.maximum(alloc[:, r], 1)
                den += w
            if den:
                score += cfg.binpack_weight * 100.0 * num / den
        return score

    def _lca_scores(
        self,
        topo: Topology,
        cands: IntArray,
        allocated: Domain | None,
        leaf_count: IntArray,
        n_tasks: int,
    ) -> np.ndarray:
        """BatchNodeOrderFn for network-aware pods: 1 in the allocated leaf, else
        tierScore(LCA tier); the first pod gets all zeros; ties get a task-count bonus."""
        if allocated is None:
            return np.zeros(len(cands))
        min_t, max_t = 1, topo.root_tier
        ta, da = allocated
        lca_t = np.full(len(cands), max_t, dtype=np.int64)
        anc_a = _ancestors(topo, allocated)
        for t in range(max_t, ta - 1, -1):
            lca_t = np.where(topo.anc[t - 1, cands] == anc_a[t], t, lca_t)
        s = (max_t - lca_t) / (max_t - min_t)
        leaves = topo.anc[0, cands]
        s = np.where((ta == 1) & (leaves == da), 1.0, s)
        top = np.isclose(s, s.max())
        if top.sum() > 1:
            s = s + top * leaf_count[leaves] / max(n_tasks, 1)
        return s * 100.0 * self.config.nt_weight

    # ---- flat path (no topology) --------------------------------------------------------

    def _flat(self, state: ClusterState, job: JobSpec) -> IntArray | None:
        """Jobs without topology: every node is a candidate; the normal-pod HyperNode
        bin-pack score (faded over tiers) joins nodeorder and binpack."""
        topo = state.topo
        used = state.used.copy()
        nodes = np.arange(topo.n_nodes)
        out = np.full(job.n_pods, -1, dtype=np.int64)
        for i in range(job.n_pods):
            if time.process_time() >= self._deadline:
                raise DeadlineExceeded
            req = job.req[i]
            cands = _fits(state, nodes, req, used)
            if len(cands) == 0:
                return None
            if len(cands) == 1:
                n = int(cands[0])
            else:
                score = self._node_scores(state, cands, req, used)
                if self.config.normal_pod_enable:
                    score = score + self._normal_pod_scores(state, cands, req, used)
                tied = cands[np.isclose(score, score.max())]
                n = int(tied[int(self.rng.integers(len(tied)))])
            out[i] = n
            used[n] += req
        return out

    def _normal_pod_scores(
        self, state: ClusterState, cands: IntArray, req: IntArray, used: IntArray
    ) -> np.ndarray:
        topo = state.topo
        fading = self.config.normal_pod_fading
        total = np.zeros(len(cands))
        wsum = 0.0
        for t in range(1, topo.root_tier + 1):
            w = fading ** (t - 1)
            row = topo.anc[t - 1]
            nd = topo.n_domains(t)
            num = np.zeros(len(cands))
            den = 0.0
            over = np.zeros(len(cands), dtype=bool)
            for r, wr in self.config.hn_binpack_resources.items():
                a = np.bincount(row, state.alloc[:, r], minlength=nd)[row[cands]]
                u = np.bincount(row, used[:, r], minlength=nd)[row[cands]]
                if not a.any():
                    continue
                over |= u + req[r] > a
                num += wr * (u + req[r]) / np.maximum(a, 1)
                den += wr
            s = np.where(over, 0.0, num / den if den else 0.0)
            total += w * s
            wsum += w
        return 100.0 * self.config.nt_weight * total / wsum


def _ancestors(topo: Topology, dom: Domain) -> dict[int, int]:
    """Local index of ``dom``'s ancestor at every tier from its own up to the root."""
    t, d = dom
    out = {t: d}
    while t < topo.root_tier:
        d = int(topo.parent[t - 1][d])
        t += 1
        out[t] = d
    return out


def _lca(topo: Topology, a: Domain | None, b: Domain) -> Domain:
    if a is None:
        return b
    aa, bb = _ancestors(topo, a), _ancestors(topo, b)
    for t in range(max(a[0], b[0]), topo.root_tier + 1):
        if aa[t] == bb[t]:
            return (t, aa[t])
    return (topo.root_tier, 0)
