"""Ring crossings count consecutive ranks on different leaves, across the job and per partition."""

from __future__ import annotations

from hyperplace.api.ring import RankedPod, ring_crossings


def test_two_partitions_each_in_one_leaf_cross_once_between_them() -> None:
    pods = [RankedPod("w", i, str(i // 2), "leaf-a" if i < 2 else "leaf-b") for i in range(4)]
    assert ring_crossings(pods) == {"job": 1, "pairs": 3, "partitions": {"0": 0, "1": 0}}


def test_interleaved_ranks_cross_at_every_step_whatever_the_input_order() -> None:
    pods = [RankedPod("w", i, None, "leaf-a" if i % 2 else "leaf-b") for i in reversed(range(5))]
    assert ring_crossings(pods) == {"job": 4, "pairs": 4, "partitions": {}}


def test_a_pod_on_an_unknown_leaf_is_left_out_of_the_pairs() -> None:
    pods = [RankedPod("w", 0, None, "a"), RankedPod("w", 1, None, None), RankedPod("w", 2, None, "a")]
    assert ring_crossings(pods) == {"job": 0, "pairs": 0, "partitions": {}}
