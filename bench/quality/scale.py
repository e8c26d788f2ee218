"""Part 3: decision latency against cluster size and gang size, with the Volcano-algorithm
baseline timed in the same process for a ratio.

Cluster: the 3-tier Clos of :func:`.generators.clos_cluster` with 32 nodes per leaf and 16
leaves per spine (512 nodes per spine), ``N / 512`` spines; a quarter of the nodes carry
1-8 GPUs of background load. Job: ``pods`` pods of 8 GPUs, soft job topology; the
two-level variant adds partitions of 8 pods, hard at tier 1 (the design's DP x TP layout).
Points with ``pods > 0.6 N`` are skipped (they cannot fit next to the background).

Latency is CPU time (``time.process_time``) of one decision. For ours it is reported as
snapshot build + session; the baseline runs with a CPU budget and reports "> budget" when
it is spent. Once a baseline point hits the budget, the same job at larger clusters is not
run (its cost grows with N) and is reported as capped too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .generators import CPU_PER_GPU, MEM_PER_GPU_MIB, clos_cluster
from .metrics import lca_tier, violations
from .model import ClusterState, JobSpec, NetTopology, Task
from .ours import HyperplaceScheduler
from .schedulers import VolcanoScheduler


@dataclass
class ScalePoint:
    nodes: int
    pods: int
    two_level: bool
    ours_build_s: float | None
    ours_session_s: float | None
    ours_tier: int | None
    volcano_s: float | None
    volcano_capped: bool
    volcano_tier: int | None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.ours_session_s is None or self.volcano_s is None:
            return None
        ours = (self.ours_build_s or 0.0) + self.ours_session_s
        return self.volcano_s / ours if ours > 0 else None


def scale_cluster(nodes: int, seed: int) -> ClusterState:
    state = clos_cluster(32, 16, max(1, nodes // 512))
    rng = np.random.default_rng(seed)
    n = state.topo.n_nodes
    loaded = rng.random(n) < 0.25
    gpus = np.where(loaded, rng.integers(1, 9, size=n), 0)
    state.used[:, 2] = gpus
    state.used[:, 0] = gpus * CPU_PER_GPU
    state.used[:, 1] = gpus * MEM_PER_GPU_MIB
    return state


def scale_job(pods: int, two_level: bool) -> JobSpec:
    task = Task(
        "worker",
        (8 * CPU_PER_GPU, 8 * MEM_PER_GPU_MIB, 8),
        pods,
        8 if two_level else None,
        NetTopology("hard", 1) if two_level else None,
    )
    return JobSpec(f"scale-{pods}-{'2l' if two_level else '1l'}", (task,), NetTopology("soft"))


def run_scale(
    node_sizes: list[int],
    pod_sizes: list[int],
    volcano_budget_s: float,
    seed: int = 0,
    run_ours: bool = True,
) -> list[ScalePoint]:
    points: list[ScalePoint] = []
    capped: set[tuple[int, bool]] = set()
    for nodes in node_sizes:
        state = scale_cluster(nodes, seed)
        ours = HyperplaceScheduler(seed=seed)
        for two_level in (False, True):
            for pods in pod_sizes:
                if pods > 0.6 * state.topo.n_nodes:
                    continue
                job = scale_job(pods, two_level)
                pt = ScalePoint(state.topo.n_nodes, pods, two_level, None, None, None, None, False, None)
                if run_ours:
                    try:
                        placement = ours.place(state, job)
                        pt.ours_build_s = ours.timing.build_s
                        pt.ours_session_s = ours.timing.session_s
                        if placement is not None:
                            bad = violations(state, job, placement)
                            pt.ours_tier = lca_tier(state.topo, placement)
                            if bad:
                                pt.note += f"ours invalid: {bad[0]}; "
                        else:
                            pt.note += "ours: not placed; "
                    except Exception as exc:  # report, keep sweeping
                        pt.note += f"ours error: {type(exc).__name__}: {exc}; "
                if (pods, two_level) in capped:
                    pt.volcano_capped = True
                    pt.volcano_s = volcano_budget_s
                    pt.note += "baseline not run (capped at a smaller size); "
                else:
                    vol = VolcanoScheduler(seed=seed, cpu_budget_s=volcano_budget_s)
                    t0 = time.process_time()
                    vp = vol.place(state, job)
                    pt.volcano_s = time.process_time() - t0
                    pt.volcano_capped = vol.timed_out
                    if vol.timed_out:
                        capped.add((pods, two_level))
                    elif vp is not None:
                        pt.volcano_tier = lca_tier(state.topo, vp)
                points.append(pt)
    return points
