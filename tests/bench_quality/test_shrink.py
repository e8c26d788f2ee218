"""The case shrinker keeps the kind of miss while it simplifies."""

from __future__ import annotations

import numpy as np

from bench.quality.generators import small_case
from bench.quality.model import ClusterState, IntArray, JobSpec
from bench.quality.schedulers import Scheduler
from bench.quality.shrink import describe, miss_kind, shrink


class Never(Scheduler):
    name = "never"

    def place(self, state: ClusterState, job: JobSpec) -> IntArray | None:
        return None


class FirstNode(Scheduler):
    """Puts every pod on node 0, valid or not."""

    name = "first-node"

    def place(self, state: ClusterState, job: JobSpec) -> IntArray | None:
        return np.zeros(job.n_pods, dtype=np.int64)


def _feasible_seed() -> int:
    for seed in range(100):
        case = small_case(seed, max_nodes=40)
        if case.state.topo.n_nodes <= 40 and miss_kind(case, Never()) == "not-placed":
            return seed
    raise AssertionError("no small feasible case")


def test_miss_kinds() -> None:
    seed = _feasible_seed()
    case = small_case(seed, max_nodes=40)
    assert miss_kind(case, Never()) == "not-placed"
    infeasible = next(
        c for c in (small_case(s, max_nodes=40) for s in range(100)) if miss_kind(c, Never()) is None
    )
    assert miss_kind(infeasible, FirstNode()) == "placed-infeasible"


def test_shrink_reduces_to_one_pod_on_one_node() -> None:
    case = small_case(_feasible_seed(), max_nodes=40)
    small = shrink(case, Never(), "not-placed", log=lambda _: None)
    assert miss_kind(small, Never()) == "not-placed"
    assert small.job.n_pods == 1
    assert int((small.state.used != small.state.alloc).any(axis=1).sum()) == 1
    assert "optimum" in describe(small, Never())
