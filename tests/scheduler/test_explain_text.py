"""The words of an explanation: what a user reads in events, conditions and `simulate`."""

from __future__ import annotations

from hyperplace.api.constants import CLUSTER_TOP_HYPERNODE
from scheduler_plugin.model.explanation import TierAttempt


def test_a_cluster_without_hypernodes_is_called_the_whole_cluster() -> None:
    line = TierAttempt(tier=1, candidates=1, best=CLUSTER_TOP_HYPERNODE, fits=0, needed=1).line()
    assert line == "tier 1: the whole cluster fits 0 of 1 pods"
    assert CLUSTER_TOP_HYPERNODE not in line


def test_a_real_hypernode_is_named() -> None:
    line = TierAttempt(tier=1, candidates=2, best="s0", fits=2, needed=4, lacking=["short 8 cpu"]).line()
    assert line == "tier 1: best s0 fits 2 of 4 pods, short 8 cpu"
