"""Shared fixtures for the bench/quality tests: a hand-made two-tier cluster."""

from __future__ import annotations

import numpy as np
import pytest

from bench.quality.model import ClusterState, Topology, uniform_tree


@pytest.fixture
def two_by_two() -> ClusterState:
    """Two tier-2 spines x two leaves x two nodes (8 nodes), 8 GPUs each, all empty."""
    topo: Topology = uniform_tree([2, 2, 2])
    alloc = np.tile(np.asarray([64_000, 256 * 1024, 8], dtype=np.int64), (topo.n_nodes, 1))
    return ClusterState(topo, alloc, np.zeros_like(alloc))
