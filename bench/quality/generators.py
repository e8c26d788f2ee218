"""Seeded generators: small exact-optimum cases, the Clos cluster and the job trace.

Everything here is a pure function of a seed (``numpy.random.default_rng(seed)``), so a
case or a whole trace is reproduced from its seed alone; nothing is read from disk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .model import ClusterState, IntArray, JobSpec, NetTopology, Task, Topology, uniform_tree

GIB_MIB = 1024

# ---------------------------------------------------------------------------------------
# 1. Small cases for the exact optimum
# ---------------------------------------------------------------------------------------

# Pod shapes (cpu milli, memory MiB, GPUs): a GPU worker of 1, 2, 4 or 8 GPUs and a
# CPU-only helper (launcher / parameter server), as in the PAI and Philly job mixes.
SMALL_SHAPES: tuple[tuple[int, int, int], ...] = (
    (4_000, 16 * GIB_MIB, 1),
    (8_000, 32 * GIB_MIB, 2),
    (16_000, 64 * GIB_MIB, 4),
    (32_000, 128 * GIB_MIB, 8),
    (2_000, 4 * GIB_MIB, 0),
)


@dataclass(frozen=True)
class SmallCase:
    """One exact-optimum case: a cluster state and one pending gang job."""

    seed: int
    state: ClusterState
    job: JobSpec

    @property
    def label(self) -> str:
        parts = "partitions" if self.job.partitions else "no-partitions"
        mode = self.job.topology.mode if self.job.topology else "none"
        return f"{parts}/{mode}"


def random_tree(
    rng: np.random.Generator,
    max_nodes: int,
    tiers: int,
    nodes_per_leaf: tuple[int, int] = (2, 10),
    children: tuple[int, int] = (1, 4),
) -> Topology:
    """An irregular tree with ``tiers`` real tiers and at most ``max_nodes`` nodes: every
    domain draws its own child count (inclusive ranges), 1-2 top domains under the root."""
    for _ in range(1000):
        counts = [int(rng.integers(1, 3))]
        parents: list[list[int]] = []
        for _tier in range(tiers - 1):
            par: list[int] = []
            for d in range(counts[-1]):
                par.extend([d] * int(rng.integers(children[0], children[1] + 1)))
            parents.insert(0, par)
            counts.append(len(par))
        leaf_of_node: list[int] = []
        for leaf in range(counts[-1]):
            leaf_of_node.extend([leaf] * int(rng.integers(nodes_per_leaf[0], nodes_per_leaf[1] + 1)))
        if len(leaf_of_node) <= max_nodes:
            return Topology.build(leaf_of_node, parents, ("leaf", "spine", "core"))
    raise RuntimeError("could not draw a small enough tree")


def random_background(rng: np.random.Generator, alloc: IntArray, busy: float) -> IntArray:
    """Random running load: about ``busy`` of the nodes carry some pods, sized in whole
    GPUs with CPU and memory roughly proportional (plus noise)."""
    n = alloc.shape[0]
    used = np.zeros_like(alloc)
    loaded = rng.random(n) < busy
    gpu = np.where(loaded, rng.integers(0, alloc[:, 2] + 1), 0)
    frac = np.where(alloc[:, 2] > 0, gpu / np.maximum(alloc[:, 2], 1), rng.random(n) * loaded)
    noise = rng.uniform(0.7, 1.2, size=n)
    used[:, 2] = gpu
    used[:, 0] = np.minimum(alloc[:, 0], (alloc[:, 0] * frac * noise).astype(np.int64))
    used[:, 1] = np.minimum(alloc[:, 1], (alloc[:, 1] * frac * noise).astype(np.int64))
    return used


def small_case(seed: int, max_nodes: int = 256, max_pods: int = 64, tiny: bool = False) -> SmallCase:
    """A random small case: 2-3 tiers, random background load, pods of 1-3 shapes,
    with or without partitions, hard or soft job and partition bounds."""
    rng = np.random.default_rng(seed)
    tiers = int(rng.integers(2, 4))
    topo = (
        random_tree(rng, max_nodes, tiers, nodes_per_leaf=(1, 2), children=(1, 2))
        if tiny
        else random_tree(rng, max_nodes, tiers)
    )
    n = topo.n_nodes
    # Mostly 8-GPU nodes, some 4-GPU ones, with matching CPU and memory.
    gpus = rng.choice(np.asarray([8, 8, 8, 4]), size=n)
    alloc = np.stack([gpus * 8_000, gpus * 32 * GIB_MIB, gpus], axis=1).astype(np.int64)
    used = random_background(rng, alloc, busy=float(rng.uniform(0.2, 0.8)))
    state = ClusterState(topo, alloc, used)

    n_shapes = int(rng.integers(1, 4))
    shape_ids = rng.choice(len(SMALL_SHAPES), size=n_shapes, replace=False)
    # Size the gang against the free capacity so that most cases are feasible but tight:
    # up to ~90 % of the free GPUs (or CPU, for CPU-only shapes).
    shapes = np.asarray([SMALL_SHAPES[s] for s in shape_ids.tolist()], dtype=np.float64)
    free = state.free.sum(axis=0)
    mean = shapes.mean(axis=0)
    cap = max_pods
    for r in range(shapes.shape[1]):
        if mean[r] > 0:
            cap = min(cap, int(0.9 * free[r] / mean[r]))
    budget = int(rng.integers(2, max(2, cap) + 1))
    with_partitions = bool(rng.random() < 0.5)
    tasks: list[Task] = []
    for k, sid in enumerate(shape_ids.tolist()):
        left = budget - sum(t.replicas for t in tasks)
        if left <= 0:
            break
        replicas = left if k == n_shapes - 1 else int(rng.integers(1, left + 1))
        psize = None
        ptopo = None
        if with_partitions and k == 0 and replicas >= 2:
            psize = int(rng.choice([s for s in (2, 3, 4, 8) if s <= replicas] or [replicas]))
            replicas -= replicas % psize  # Volcano requires replicas = partitions * size
            ptopo = (
                NetTopology("hard", int(rng.integers(1, tiers + 1)))
                if rng.random() < 0.7
                else NetTopology("soft")
            )
        tasks.append(Task(f"t{k}", SMALL_SHAPES[sid], replicas, psize, ptopo))
    job_topo = (
        NetTopology("hard", int(rng.integers(1, tiers + 2))) if rng.random() < 0.5 else NetTopology("soft")
    )
    job = JobSpec(f"job-{seed}", tuple(tasks), job_topo)
    return SmallCase(seed, state, job)


def tiny_case(seed: int) -> SmallCase:
    """A case small enough for exhaustive search (<= 6 nodes, <= 4 pods)."""
    rng = np.random.default_rng(seed)
    for _ in range(1000):
        case = small_case(int(rng.integers(1 << 31)), max_nodes=6, max_pods=4, tiny=True)
        if case.state.topo.n_nodes**case.job.n_pods <= 5_000:
            return case
    raise RuntimeError("no tiny case found")


# ---------------------------------------------------------------------------------------
# 2. The Clos cluster and the GPU job trace
# ---------------------------------------------------------------------------------------

# A DGX-class node: 8 GPUs, CPU and memory sized so that an 8-GPU pod fills the node.
NODE_ALLOC = (128_000, 1024 * GIB_MIB, 8)
CPU_PER_GPU = 14_000
MEM_PER_GPU_MIB = 100 * GIB_MIB


def clos_cluster(nodes_per_leaf: int, leaves_per_spine: int, spines: int) -> ClusterState:
    """An empty 3-tier Clos: leaf (ToR) -> spine -> core, under the virtual root."""
    topo = uniform_tree([nodes_per_leaf, leaves_per_spine, spines, 1], ("leaf", "spine", "core"))
    alloc = np.tile(np.asarray(NODE_ALLOC, dtype=np.int64), (topo.n_nodes, 1))
    return ClusterState(topo, alloc, np.zeros_like(alloc))


# Job-size distribution (GPUs per job) and durations.
#
# Calibrated to the shapes published for three public GPU traces -- Microsoft Philly
# (Jeon et al., ATC'19), SenseTime Helios (Hu et al., SC'21) and Alibaba PAI (Weng et al.,
# NSDI'22):
#   * most jobs ask for a single GPU, and jobs of at most 8 GPUs (one server) are the vast
#     majority of job counts in all three traces;
#   * a long tail of multi-server jobs holds most of the GPU time; the brief's tail of
#     256-4,096-GPU jobs is the modern large-training regime (3,000-5,000 pods
#     of 8 GPUs), rarer than the traces' 64-128-GPU jobs;
#   * run times are heavy-tailed (log-normal fits are customary) and grow with job size.
# The bucket weights below are read off those papers' CDFs to one significant figure, not
# fitted to the raw trace files (which are not shipped); treat the
# generator as "trace-shaped", not as a replay.
GPU_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
GPU_WEIGHTS: tuple[float, ...] = (
    0.55,
    0.10,
    0.10,
    0.12,
    0.04,
    0.03,
    0.025,
    0.015,
    0.0075,
    0.0045,
    0.0025,
    0.0012,
    0.0003,
)
# Log-normal run time: median 10 min for a 1-GPU job, growing as gpus**0.3 (about 1 h for
# 512 GPUs), sigma 1.0 in log space; capped at 12 h. Real traces run longer (days for the
# largest jobs); the time scale is compressed so that a trace of a few thousand jobs spans
# many lifetimes of its largest jobs -- only the ratio of run time to arrival gap matters
# for placement quality and fragmentation.
DURATION_MEDIAN_S = 600.0
DURATION_SIZE_EXPONENT = 0.3
DURATION_SIGMA = 1.0
DURATION_CAP_S = 12 * 3600.0


@dataclass(frozen=True)
class TraceJob:
    """One job of the stream: arrival time, run time and the gang spec."""

    arrival: float
    duration: float
    spec: JobSpec


def topology_policy(
    pods: int, nodes_per_leaf: int, nodes_per_spine: int
) -> tuple[NetTopology | None, int | None, NetTopology | None]:
    """What a typical user sets (documented in README): job topology, partition size and
    partition topology.

    * one pod: nothing (a single server is as local as it gets);
    * fits in a leaf: soft (prefer one leaf, but do not wait for it);
    * fits in a spine: hard at tier 2 (never cross the core);
    * larger: soft;
    * 16 pods or more: partitions of 8 pods (a 64-GPU tensor x pipeline group) hard at
      tier 1, so each group shares a leaf switch.
    """
    if pods <= 1:
        return None, None, None
    if pods <= nodes_per_leaf:
        job = NetTopology("soft")
    elif pods <= nodes_per_spine:
        job = NetTopology("hard", 2)
    else:
        job = NetTopology("soft")
    if pods >= 16 and pods % 8 == 0:
        return job, 8, NetTopology("hard", 1)
    return job, None, None


def trace_jobs(
    seed: int, n_jobs: int, state: ClusterState, load: float = 0.85, max_job_fraction: float = 0.5
) -> list[TraceJob]:
    """A seeded stream of ``n_jobs`` GPU jobs with Poisson arrivals at offered load ``load``.

    Jobs larger than ``max_job_fraction`` of the cluster's GPUs are clamped to it (so the
    quick cluster still sees its largest jobs); a job of ``g`` GPUs is ``ceil(g / 8)`` pods
    of ``min(g, 8)`` GPUs.
    """
    rng = np.random.default_rng(seed)
    topo = state.topo
    total_gpus = int(state.alloc[:, 2].sum())
    cap = max(1, int(total_gpus * max_job_fraction))
    # Quota sampling: each size bucket gets its expected share of the jobs (largest
    # remainders round), then the order is shuffled. With i.i.d. draws the handful of
    # 1,000+-GPU jobs -- which carry most of the GPU time -- would make the offered load of
    # a short trace swing by 2x from seed to seed.
    weights = np.asarray(GPU_WEIGHTS) / sum(GPU_WEIGHTS)
    expected = weights * n_jobs
    counts = np.floor(expected).astype(np.int64)
    for b in np.argsort(-(expected - counts), kind="stable")[: n_jobs - int(counts.sum())]:
        counts[b] += 1
    sizes = np.repeat(np.asarray(GPU_BUCKETS, dtype=np.int64), counts)
    gpus = np.minimum(rng.permutation(sizes), cap)
    gpus = np.where(gpus > 8, (gpus // 8) * 8, gpus)
    median = DURATION_MEDIAN_S * gpus.astype(float) ** DURATION_SIZE_EXPONENT
    durations = np.minimum(median * np.exp(rng.normal(0.0, DURATION_SIGMA, size=n_jobs)), DURATION_CAP_S)
    # Offered load: arrival rate such that E[gpus * duration] * rate = load * total GPUs,
    # with the expectation taken over the distribution (log-normal mean = median *
    # exp(sigma^2 / 2), cap ignored), not over this sample: a sample mean would let one
    # long 1,000-GPU job halve the arrival rate of the whole trace.
    bucket = np.minimum(np.asarray(GPU_BUCKETS, dtype=float), cap)
    mean_work = float(
        np.sum(
            weights
            * bucket
            * DURATION_MEDIAN_S
            * bucket**DURATION_SIZE_EXPONENT
            * np.exp(DURATION_SIGMA**2 / 2)
        )
    )
    rate = load * total_gpus / mean_work
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n_jobs))
    nodes_per_leaf = topo.leaf_size
    nodes_per_spine = int(np.bincount(topo.anc[1]).max()) if topo.n_tiers >= 2 else topo.n_nodes
    out = []
    for i in range(n_jobs):
        g = int(gpus[i])
        per_pod = min(g, 8)
        pods = math.ceil(g / 8)
        jt, psize, pt = topology_policy(pods, nodes_per_leaf, nodes_per_spine)
        task = Task("worker", (CPU_PER_GPU * per_pod, MEM_PER_GPU_MIB * per_pod, per_pod), pods, psize, pt)
        spec = JobSpec(f"job-{i:05d}", (task,), jt, meta={"gpus": float(g)})
        out.append(TraceJob(float(arrivals[i]), float(durations[i]), spec))
    return out


# Time limits as users declare them (item 4 of issue 24): a share of jobs sets one, a
# multiple of its true run time (users over-estimate; Slurm traces show requested limits
# several times the run time), so no job is ever cut short by its limit.
LIMIT_SHARE = 0.7
LIMIT_FACTOR = (1.2, 4.0)


def with_limits(
    seed: int, trace: list[TraceJob], share: float = LIMIT_SHARE, factor: tuple[float, float] = LIMIT_FACTOR
) -> list[TraceJob]:
    """``trace`` with a time limit (``meta["limit_s"]``, the pods' ``activeDeadlineSeconds``) on
    about ``share`` of the jobs, ``factor[0]``-``factor[1]`` times the job's run time, drawn from
    ``seed`` (a stream of its own: the jobs, sizes and arrivals are those of the plain trace)."""
    rng = np.random.default_rng([seed, 24])
    has = rng.random(len(trace)) < share
    mult = rng.uniform(factor[0], factor[1], size=len(trace))
    out = []
    for tj, h, m in zip(trace, has.tolist(), mult.tolist(), strict=True):
        if not h:
            out.append(tj)
            continue
        limit = float(math.ceil(tj.duration * m))
        spec = JobSpec(tj.spec.name, tj.spec.tasks, tj.spec.topology, meta={**tj.spec.meta, "limit_s": limit})
        out.append(TraceJob(tj.arrival, tj.duration, spec))
    return out
