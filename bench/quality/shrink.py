"""Shrink a non-optimal exact case to a small reproducer for the scheduler's developers.

``python -m bench.quality.shrink SEED [SEED ...]`` takes a seed of :func:`small_case`,
classifies how our scheduler misses the optimum, then greedily simplifies the case while
the same kind of miss persists: fill whole leaves, then single nodes (a full node is as
good as absent), then drop pods (one at a time, or a whole partition). It prints the
reduced case: tree, free capacity of the nodes left, job, the optimum and ours.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable

import numpy as np

from .generators import SmallCase, small_case
from .metrics import quality
from .model import IntArray, Task
from .optimum import milp_optimum
from .schedulers import Scheduler


def miss_kind(case: SmallCase, sched: Scheduler) -> str | None:
    """``not-placed``, ``placed-infeasible``, ``job-tier``, ``partition-tier``, ``leaves+2``,
    ``oracle-timeout`` or None (optimal, or leaves within +1)."""
    opt = milp_optimum(case.state, case.job)
    if opt.timed_out:
        return "oracle-timeout"  # no proven optimum: nothing to shrink against
    placement = sched.place(case.state.copy(), case.job)
    if opt.quality is None:
        return "placed-infeasible" if placement is not None else None
    if placement is None:
        return "not-placed"
    q = quality(case.state.topo, case.job, placement)
    if q.job_tier != opt.quality.job_tier:
        return "job-tier"
    if q.partition_tier_sum != opt.quality.partition_tier_sum:
        return "partition-tier"
    if q.leaves > opt.quality.leaves + 1:
        return "leaves+2"
    return None


def _with(case: SmallCase, used: IntArray | None = None, tasks: tuple[Task, ...] | None = None) -> SmallCase:
    state = case.state.copy()
    if used is not None:
        state.used = used
    job = dataclasses.replace(case.job, tasks=tasks) if tasks is not None else case.job
    return SmallCase(case.seed, state, job)


def shrink(case: SmallCase, sched: Scheduler, kind: str, log: Callable[[str], None] = print) -> SmallCase:
    """Greedy delta-debugging keeping ``miss_kind == kind``."""

    def keeps(candidate: SmallCase) -> bool:
        return candidate.job.n_pods > 0 and miss_kind(candidate, sched) == kind

    topo = case.state.topo
    changed = True
    while changed:  # dropping pods can free nodes to fill, and the other way round
        changed = False
        # 1. Fill whole leaves, then single nodes.
        groups = [topo.members[0][leaf] for leaf in range(topo.n_domains(1))]
        groups += [np.asarray([n]) for n in range(topo.n_nodes)]
        for nodes in groups:
            if (case.state.used[nodes] == case.state.alloc[nodes]).all():
                continue
            used = case.state.used.copy()
            used[nodes] = case.state.alloc[nodes]
            cand = _with(case, used=used)
            if keeps(cand):
                case = cand
        # 2. Drop pods, a whole partition or a single unpartitioned pod at a time, until
        # no task can lose one; only then is another node pass worth its MILP calls.
        changed = False
        dropped = True
        while dropped:
            dropped = False
            for k, task in enumerate(case.job.tasks):
                step = task.partition_size or 1
                if task.replicas < step:
                    continue
                smaller = dataclasses.replace(task, replicas=task.replicas - step)
                if smaller.replicas > 0:
                    tasks = tuple(smaller if i == k else t for i, t in enumerate(case.job.tasks))
                else:
                    tasks = tuple(t for i, t in enumerate(case.job.tasks) if i != k)
                cand = _with(case, tasks=tasks)
                if keeps(cand):
                    case, changed, dropped = cand, True, True
                    break
        log(
            f"  {int((case.state.used != case.state.alloc).any(axis=1).sum())} nodes with room, {case.job.n_pods} pods"
        )
    return case


def describe(case: SmallCase, sched: Scheduler) -> str:
    topo = case.state.topo
    free = case.state.free
    lines = [
        f"tree: tiers 1..{topo.n_tiers} + root; domains per tier {[topo.n_domains(t) for t in range(1, topo.root_tier)]}"
    ]
    lines.append("nodes with free room (name: leaf/spine..., free cpu m, mem MiB, gpu; alloc gpu):")
    for n in np.flatnonzero((case.state.used != case.state.alloc).any(axis=1)).tolist():
        path = "/".join(topo.domain_names[t][int(topo.anc[t, n])] for t in range(topo.n_tiers))
        lines.append(
            f"  {topo.node_names[n]}: {path}: {free[n].tolist()}; alloc gpu {int(case.state.alloc[n, 2])}"
        )
    lines.append(f"job topology: {case.job.topology}")
    for t in case.job.tasks:
        lines.append(
            f"  task {t.name}: {t.replicas} x {t.req} partition_size={t.partition_size} {t.partition_topology}"
        )
    opt = milp_optimum(case.state, case.job)
    placement = sched.place(case.state.copy(), case.job)
    ours = quality(topo, case.job, placement).key() if placement is not None else None
    lines.append(
        f"optimum (job tier, partition tier sum, leaves): {opt.quality.key() if opt.quality else None}"
    )
    lines.append(f"{sched.name}: {ours}")
    if opt.placement is not None:
        lines.append(
            f"optimal placement (pod -> node): {[topo.node_names[n] for n in opt.placement.tolist()]}"
        )
    if placement is not None:
        lines.append(f"{sched.name} placement: {[topo.node_names[n] for n in placement.tolist()]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from .ours import HyperplaceScheduler

    ap = argparse.ArgumentParser(prog="python -m bench.quality.shrink", description=__doc__)
    ap.add_argument("seeds", type=int, nargs="+")
    args = ap.parse_args(argv)
    sched = HyperplaceScheduler()
    for seed in args.seeds:
        case = small_case(seed)
        kind = miss_kind(case, sched)
        print(f"== seed {seed}: {kind or 'no miss'}")
        if kind is None or kind == "oracle-timeout":
            continue
        print(describe(shrink(case, sched, kind), sched))
    return 0


if __name__ == "__main__":
    sys.exit(main())
