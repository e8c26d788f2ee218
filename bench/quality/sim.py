"""Part 2: trace-driven discrete-event simulation of a GPU cluster.

Time advances on a fixed scheduling tick (Volcano's ``--schedule-period`` is 1 s; the
simulation uses a coarser tick, a parameter, so a run stays within its CPU budget -- the
same tick applies to every scheduler, so queueing delays are comparable but quantised).
At a tick: finished jobs free their resources, arrived jobs join the queue, and -- if
anything changed since the last decision -- the scheduler gets one cycle over the queue in
arrival order (``place_batch``). Jobs that do not fit are skipped (Volcano's allocate
skips them too); for a scheduler without a reservation of its own, a job that has waited
longer than ``reserve_after_s`` blocks everything behind it until it starts, so no scheduler
can starve the largest jobs indefinitely. Ours (``reserves``) gets the simulated clock instead
and runs its real head-of-queue reservation (``scheduler_plugin.reservation``).
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

import numpy as np

from .generators import TraceJob
from .metrics import lca_tier, leaf_span, min_leaf_span, pods_fit_per_node, ring_crossings, stranded_gpus
from .model import GPU, ClusterState, JobSpec
from .schedulers import Scheduler


@dataclass
class JobRecord:
    name: str
    gpus: int
    pods: int
    arrival: float
    start: float | None = None
    end: float | None = None
    tier: int | None = None
    leaves: int | None = None
    min_leaves: int | None = None
    ring: int | None = None  # consecutive ranks on different leaves


@dataclass
class SimResult:
    scheduler: str
    jobs: list[JobRecord]
    cycle_cpu_s: list[float]
    util_time: list[tuple[float, float]]  # (time, allocated GPU fraction) at each decision point
    gpu_util: float  # time-averaged over the measurement window
    stranded_frac: float  # time-averaged stranded GPUs / total GPUs over the same window
    end_time: float
    demand: float  # GPU share the trace would use in the window if every job started on arrival
    anomalies: list[str] = field(default_factory=list)

    def started(self) -> list[JobRecord]:
        return [j for j in self.jobs if j.start is not None]


def leaf_capacity_pods(state: ClusterState, job: JobSpec) -> int:
    """Pods of the job's (largest) shape the largest leaf could hold when empty."""
    req = job.req[int(np.argmax(job.req[:, GPU]))]
    empty = ClusterState(state.topo, state.alloc, np.zeros_like(state.used))
    per_node = pods_fit_per_node(empty, req)
    return int(np.bincount(state.topo.anc[0], weights=per_node).max())


def simulate(
    sched: Scheduler,
    state0: ClusterState,
    trace: list[TraceJob],
    tick: float = 10.0,
    reserve_after_s: float = 4 * 3600.0,
    drain_factor: float = 3.0,
    warmup_fraction: float = 0.2,
) -> SimResult:
    """Run ``trace`` through ``sched`` on a copy of ``state0``."""
    state = state0.copy()
    topo = state.topo
    total_gpus = float(state.alloc[:, GPU].sum())
    records = {
        tj.spec.name: JobRecord(tj.spec.name, int(tj.spec.gpus), tj.spec.n_pods, tj.arrival) for tj in trace
    }
    by_name = {tj.spec.name: tj for tj in trace}
    arrivals = sorted(trace, key=lambda tj: tj.arrival)
    last_arrival = arrivals[-1].arrival if arrivals else 0.0
    horizon = last_arrival * drain_factor + tick
    # Utilisation and stranding are averaged over [warm, last arrival]: the cluster starts
    # empty, and after the last arrival the queue only drains.
    warm = warmup_fraction * last_arrival
    pending: list[TraceJob] = []
    running: list[tuple[float, str]] = []  # heap of (end time, job name)
    placements: dict[str, np.ndarray] = {}
    cycle_cpu: list[float] = []
    util_time: list[tuple[float, float]] = []
    util_area = stranded_area = 0.0
    prev_t = 0.0
    prev_util = prev_stranded = 0.0
    next_arrival = 0
    changed = False
    t = 0.0
    while t <= horizon:
        # Integrate the step functions over [prev_t, t), clipped to the measurement window.
        span = max(0.0, min(t, last_arrival) - max(prev_t, warm))
        util_area += prev_util * span
        stranded_area += prev_stranded * span
        prev_t = t
        while running and running[0][0] <= t:
            _, name = heapq.heappop(running)
            tj = by_name[name]
            state.apply(tj.spec.req, placements.pop(name), sign=-1)
            sched.on_finish(tj.spec)
            changed = True
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival <= t:
            tj = arrivals[next_arrival]
            sched.set_created(tj.spec, tj.arrival)
            pending.append(tj)
            next_arrival += 1
            changed = True
        if pending and changed:
            head = pending[0]
            if sched.reserves:
                # The scheduler's own reservation code decides (no harness rule).
                queue = pending
                sched.set_now(t)
            else:
                queue = [head] if t - head.arrival > reserve_after_s else pending
            c0 = time.process_time()
            decided = sched.place_batch(state, [tj.spec for tj in queue])
            own = sched.decision_cpu()
            cycle_cpu.append(time.process_time() - c0 if own is None else own)
            for name, placement in decided.items():
                tj = by_name[name]
                rec = records[name]
                rec.start = t
                rec.end = t + tj.duration
                rec.tier = lca_tier(topo, placement)
                rec.leaves = leaf_span(topo, placement)
                rec.ring = ring_crossings(topo, placement)
                rec.min_leaves = min_leaf_span(tj.spec.n_pods, leaf_capacity_pods(state, tj.spec))
                placements[name] = placement
                sched.on_start(state, tj.spec, placement)
                heapq.heappush(running, (t + tj.duration, name))
            pending = [tj for tj in pending if tj.spec.name not in decided]
        changed = False
        prev_util = float(state.used[:, GPU].sum()) / total_gpus
        prev_stranded = (
            stranded_gpus(state, pending[0].spec.req[int(np.argmax(pending[0].spec.req[:, GPU]))])
            / total_gpus
            if pending
            else 0.0
        )
        util_time.append((t, prev_util))
        if next_arrival >= len(arrivals) and not pending:
            break  # every job has started; running ones end at their known times
        # Jump to the tick of the next event (nothing changes in between).
        nxt = min(
            running[0][0] if running else math.inf,
            arrivals[next_arrival].arrival if next_arrival < len(arrivals) else math.inf,
        )
        if nxt == math.inf:
            break
        t = max(t + tick, math.ceil(nxt / tick) * tick)
    window = max(last_arrival - warm, 1e-9)
    demand = sum(
        tj.spec.gpus * max(0.0, min(tj.arrival + tj.duration, last_arrival) - max(tj.arrival, warm))
        for tj in trace
    )
    anomalies = list(getattr(sched, "anomalies", []))
    return SimResult(
        sched.name,
        list(records.values()),
        cycle_cpu,
        util_time,
        util_area / window,
        stranded_area / window,
        t,
        demand / (total_gpus * window),
        anomalies,
    )


def summarize(res: SimResult) -> dict[str, float]:
    """The side-by-side numbers of one run (multi-pod jobs for tier and span)."""
    started = res.started()
    multi = [j for j in started if j.pods > 1]
    tiers = np.asarray([j.tier for j in multi], dtype=float)
    excess = np.asarray([(j.leaves or 0) - (j.min_leaves or 0) for j in multi], dtype=float)
    waits = np.asarray([(j.start or 0.0) - j.arrival for j in started], dtype=float)
    gpus = np.asarray([j.gpus for j in started], dtype=float)
    big = [j for j in started if j.gpus >= 256]
    big_waits = np.asarray([(j.start or 0.0) - j.arrival for j in big], dtype=float)
    cpu = np.asarray(res.cycle_cpu_s, dtype=float)

    def pct(a: np.ndarray, q: float) -> float:
        return float(np.percentile(a, q)) if len(a) else float("nan")

    def mean(a: np.ndarray) -> float:
        return float(a.mean()) if len(a) else float("nan")

    return {
        "jobs": float(len(res.jobs)),
        "started": float(len(started)),
        "multi_pod_jobs": float(len(multi)),
        "tier_mean": mean(tiers),
        "tier_p95": pct(tiers, 95),
        "leaf_excess_mean": mean(excess),
        "leaf_at_min_share": float((excess == 0).mean()) if len(excess) else float("nan"),
        "ring_crossings_mean": mean(np.asarray([j.ring or 0 for j in multi], dtype=float)),
        "demand": res.demand,
        "gpu_util": res.gpu_util,
        "stranded_frac": res.stranded_frac,
        "wait_mean_s": mean(waits),
        "wait_p50_s": pct(waits, 50),
        "wait_p95_s": pct(waits, 95),
        "wait_p99_s": pct(waits, 99),
        "big_jobs": float(len(big)),
        "big_wait_p50_s": pct(big_waits, 50),
        "big_wait_p95_s": pct(big_waits, 95),
        "big_wait_mean_s": mean(big_waits),
        # Percentiles cannot see one job starved for hours; the GPU-hours spent waiting (a
        # job's wait times its GPUs) and when the last job started can.
        "gpu_hours_waited": float((waits * gpus).sum()) / 3600.0,
        "last_start_s": max((j.start or 0.0) for j in started) if started else float("nan"),
        "wait_max_s": float(waits.max()) if len(waits) else float("nan"),
        "wait_max_gpus": float(started[int(np.argmax(waits))].gpus) if len(waits) else float("nan"),
        "cycle_cpu_mean_ms": mean(cpu) * 1e3,
        "cycle_cpu_p95_ms": pct(cpu, 95) * 1e3,
        "cycles": float(len(cpu)),
    }
