"""Part 1: placement quality against the exact optimum on small seeded cases.

For each case the MILP oracle (:mod:`.optimum`) gives the lexicographic optimum and each
scheduler under test places the job once on the same state. Scored per scheduler:

* ``job_tier_ok``: placed with the optimal job LCA tier (feasible cases; not placing a
  feasible job counts as a miss);
* ``partitions_ok``: job tier optimal *and* the sum of partition LCA tiers optimal
  (feasible cases with partitions) -- i.e. every partition as low as the lexicographic
  optimum allows;
* ``leaves_ok``: leaves spanned <= optimum + 1 (feasible, placed cases);
* ``infeasible_placed``: placed although no valid placement exists (must be 0);
* ``invalid``: a placement that breaks capacity or a hard bound;
* ``feasible_missed``: feasible but not placed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .generators import small_case
from .metrics import quality, violations
from .optimum import milp_optimum
from .schedulers import Scheduler


@dataclass
class SchedulerTally:
    """Counts for one scheduler over all cases, plus the seeds of every miss."""

    cases: int = 0
    feasible: int = 0
    with_partitions: int = 0
    placed_feasible: int = 0
    job_tier_ok: int = 0
    partitions_ok: int = 0
    leaves_ok: int = 0
    infeasible_placed: int = 0
    invalid: int = 0
    feasible_missed: int = 0
    errors: int = 0
    misses: list[dict[str, Any]] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)


@dataclass
class ExactResult:
    seeds: list[int]
    tallies: dict[str, SchedulerTally]
    oracle_cpu_s: list[float]
    oracle_timeouts: int
    labels: dict[str, int]


def run_exact(
    schedulers: list[Scheduler], n_cases: int, seed0: int = 0, max_nodes: int = 256, max_pods: int = 64
) -> ExactResult:
    seeds = list(range(seed0, seed0 + n_cases))
    tallies = {s.name: SchedulerTally() for s in schedulers}
    oracle_cpu: list[float] = []
    timeouts = 0
    labels: dict[str, int] = {}
    for seed in seeds:
        case = small_case(seed, max_nodes=max_nodes, max_pods=max_pods)
        labels[case.label] = labels.get(case.label, 0) + 1
        t0 = time.process_time()
        opt = milp_optimum(case.state, case.job)
        oracle_cpu.append(time.process_time() - t0)
        if opt.timed_out:
            timeouts += 1  # no proven optimum: the case is reported but not scored
            continue
        for sched in schedulers:
            tally = tallies[sched.name]
            tally.cases += 1
            t0 = time.process_time()
            try:
                placement = sched.place(case.state.copy(), case.job)
            except Exception as exc:  # a crash is a result to report, not a reason to stop
                tally.errors += 1
                tally.misses.append({"seed": seed, "what": f"error: {type(exc).__name__}: {exc}"})
                continue
            finally:
                tally.cpu_s.append(time.process_time() - t0)
            problems = violations(case.state, case.job, placement)
            if problems:
                tally.invalid += 1
                tally.misses.append({"seed": seed, "what": "INVALID: " + "; ".join(problems)})
            if opt.quality is None:
                if placement is not None:
                    tally.infeasible_placed += 1
                    tally.misses.append({"seed": seed, "what": "PLACED AN INFEASIBLE JOB"})
                continue
            tally.feasible += 1
            has_parts = bool(case.job.partitions)
            tally.with_partitions += has_parts
            if placement is None:
                tally.feasible_missed += 1
                tally.misses.append(
                    {"seed": seed, "what": f"NOT PLACED: optimum {opt.quality.key()}; {case.label}"}
                )
                continue
            tally.placed_feasible += 1
            q = quality(case.state.topo, case.job, placement)
            best = opt.quality
            tier_ok = q.job_tier == best.job_tier
            tally.job_tier_ok += tier_ok
            if has_parts and tier_ok and q.partition_tier_sum == best.partition_tier_sum:
                tally.partitions_ok += 1
            tally.leaves_ok += q.leaves <= best.leaves + 1
            if q.key() != best.key():
                if not tier_ok:
                    kind = "JOB TIER"
                elif q.partition_tier_sum != best.partition_tier_sum:
                    kind = "PARTITION TIER"
                elif q.leaves > best.leaves + 1:
                    kind = "LEAVES > +1"
                else:
                    kind = "leaves +1 (within target)"
                tally.misses.append(
                    {
                        "seed": seed,
                        "what": f"{kind}: got {q.key()} vs optimum {best.key()} "
                        f"(job tier, partition tier sum, leaves); {case.label}",
                    }
                )
    return ExactResult(seeds, tallies, oracle_cpu, timeouts, labels)
