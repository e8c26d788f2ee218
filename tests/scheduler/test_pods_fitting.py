"""The one rule for how many pods of a shape a node holds (``model.snapshot.pods_fitting``),
which fit counts, preemption's victim search, the reservation's drained counts and the
"N nodes short" explanation all call."""

from __future__ import annotations

import numpy as np

from scheduler_plugin.model.snapshot import UNBOUNDED, pods_fitting


def test_a_node_holds_as_many_pods_as_its_scarcest_requested_resource_allows() -> None:
    # columns: cpu (milli), memory, gpu
    free = np.array([[8000, 64, 8], [2000, 64, 8], [8000, 64, 1]], dtype=np.int64)
    req = np.array([1000, 0, 2], dtype=np.int64)
    assert pods_fitting(free, req).tolist() == [4, 2, 0]


def test_an_overcommitted_node_holds_none_rather_than_a_negative_count() -> None:
    free = np.array([[-1000, 8]], dtype=np.int64)
    assert pods_fitting(free, np.array([500, 1], dtype=np.int64)).tolist() == [0]


def test_a_pod_requesting_nothing_fits_without_bound() -> None:
    free = np.zeros((2, 3), dtype=np.int64)
    assert pods_fitting(free, np.zeros(3, dtype=np.int64)).tolist() == [UNBOUNDED, UNBOUNDED]


def test_it_agrees_with_counting_pod_by_pod() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        free = rng.integers(-3, 20, size=(6, 4))
        req = rng.integers(0, 4, size=4)
        want = []
        for row in free:
            n = 0
            if (req > 0).any():
                while (row - (n + 1) * req >= 0)[req > 0].all():
                    n += 1
            else:
                n = UNBOUNDED
            want.append(n)
        assert pods_fitting(free, req).tolist() == want
