"""Ring crossings: how often consecutive ranks of a job sit in different leaves.

Collective libraries build rings in rank order (``volcano.sh/task-index``), so every pair of
consecutive ranks on different leaf HyperNodes is a hop through a spine switch. Counted across
the job (ranks of each task in index order, tasks in name order) and within each partition.
Pure function, shared by ``explain`` and the benchmarks.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class RankedPod:
    """A placed pod: its task, rank, partition (None without one) and leaf (None if unknown)."""

    task: str
    index: int
    partition: str | None
    leaf: str | None


def _crossings(leaves: list[str | None]) -> tuple[int, int]:
    """(pairs whose leaves differ, pairs compared) for consecutive entries with known leaves."""
    pairs = crossing = 0
    for a, b in itertools.pairwise(leaves):
        if a is None or b is None:
            continue
        pairs += 1
        crossing += a != b
    return crossing, pairs


def ring_crossings(pods: Iterable[RankedPod]) -> dict[str, object]:
    """``{"job": n, "pairs": m, "partitions": {id: n}}``: consecutive-rank pairs in different
    leaves across the job (``pairs`` compared in all) and within each partition."""
    ordered = sorted(pods, key=lambda p: (p.task, p.index))
    job, pairs = _crossings([p.leaf for p in ordered])
    by_part: dict[str, list[str | None]] = {}
    for p in ordered:
        if p.partition is not None:
            by_part.setdefault(p.partition, []).append(p.leaf)
    parts = {pid: _crossings(leaves)[0] for pid, leaves in sorted(by_part.items(), key=lambda kv: kv[0])}
    return {"job": job, "pairs": pairs, "partitions": parts}
