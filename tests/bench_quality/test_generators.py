"""Generators are pure functions of their seed."""

from __future__ import annotations

import numpy as np

from bench.quality.generators import (
    GPU_BUCKETS,
    GPU_WEIGHTS,
    LIMIT_FACTOR,
    LIMIT_SHARE,
    clos_cluster,
    small_case,
    tiny_case,
    topology_policy,
    trace_jobs,
    with_limits,
)


def test_small_case_is_deterministic() -> None:
    a, b, c = small_case(7), small_case(7), small_case(8)
    assert a.state.topo.node_names == b.state.topo.node_names
    assert np.array_equal(a.state.topo.anc, b.state.topo.anc)
    assert np.array_equal(a.state.used, b.state.used)
    assert a.job == b.job and np.array_equal(a.job.req, b.job.req)
    assert not (np.array_equal(a.state.used, c.state.used) and a.job == c.job)


def test_small_case_bounds() -> None:
    for seed in range(30):
        case = small_case(seed)
        topo = case.state.topo
        assert topo.n_nodes <= 256
        assert topo.n_tiers in (2, 3)
        assert 1 <= case.job.n_pods <= 64
        assert len({t.req for t in case.job.tasks}) <= 3
        assert (case.state.used <= case.state.alloc).all()
        for t in case.job.tasks:
            if t.partition_size:
                assert t.replicas % t.partition_size == 0


def test_tiny_case_fits_exhaustive_search() -> None:
    for seed in range(10):
        case = tiny_case(seed)
        assert case.state.topo.n_nodes**case.job.n_pods <= 5_000


def test_trace_is_deterministic_and_shaped() -> None:
    state = clos_cluster(16, 8, 2)
    a = trace_jobs(3, 400, state)
    b = trace_jobs(3, 400, state)
    assert [(j.arrival, j.duration, j.spec) for j in a] == [(j.arrival, j.duration, j.spec) for j in b]
    c = trace_jobs(4, 400, state)
    assert [j.arrival for j in a] != [j.arrival for j in c]
    gpus = np.asarray([j.spec.gpus for j in a])
    assert (np.diff([j.arrival for j in a]) >= 0).all()
    assert (gpus <= 0.5 * 2048).all()
    # "Many 1-8 GPU jobs": the 1-8 GPU buckets carry most of the weight.
    small_weight = sum(w for g, w in zip(GPU_BUCKETS, GPU_WEIGHTS, strict=True) if g <= 8) / sum(GPU_WEIGHTS)
    assert small_weight > 0.8
    assert 0.7 < (gpus <= 8).mean() <= 1.0
    for j in a:
        pods = j.spec.n_pods
        assert pods == max(1, -(-j.spec.gpus // 8))
        assert (j.spec.topology is None) == (pods == 1)


def test_topology_policy() -> None:
    assert topology_policy(1, 16, 128) == (None, None, None)
    job, psize, _ = topology_policy(8, 16, 128)
    assert job is not None and job.mode == "soft" and psize is None
    job, psize, pt = topology_policy(64, 16, 128)
    assert job is not None and job.mode == "hard" and job.highest_tier == 2
    assert psize == 8 and pt is not None and pt.highest_tier == 1
    job, _, _ = topology_policy(256, 16, 128)
    assert job is not None and job.mode == "soft"


def test_limit_trace_gives_most_jobs_a_limit_above_their_run_time() -> None:
    state = clos_cluster(16, 8, 2)
    plain = trace_jobs(3, 1000, state)
    limited = with_limits(3, plain)
    # The same jobs, arrivals and run times: only the declared limit differs.
    assert [(j.arrival, j.duration, j.spec) for j in limited] == [
        (j.arrival, j.duration, j.spec) for j in plain
    ]
    limits = [(j.spec.meta.get("limit_s"), j.duration) for j in limited]
    share = sum(lim is not None for lim, _ in limits) / len(limits)
    assert abs(share - LIMIT_SHARE) < 0.05
    ratios = np.asarray([lim / d for lim, d in limits if lim is not None])
    assert ratios.min() >= LIMIT_FACTOR[0] and ratios.max() <= LIMIT_FACTOR[1] + 0.01
    assert all("limit_s" not in j.spec.meta for j in plain)  # the plain trace is untouched
    # Drawn per seed.
    other = with_limits(4, plain)
    assert [j.spec.meta.get("limit_s") for j in other] != [j.spec.meta.get("limit_s") for j in limited]
