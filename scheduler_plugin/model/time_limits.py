"""Time limits of pods (``spec.activeDeadlineSeconds``): when one pod ends at the latest, how
long a set of pods may run, and whether pods may use room held for a gang that starts later.

The kubelet ends a pod ``activeDeadlineSeconds`` after its start, so a running pod with a limit
is gone by ``start + limit``; a pod without one may run for ever. A job may run in held room only
when its own limit ends before the held gang's start (Slurm's EASY backfill). When the room of
whole nodes frees up: ``placement/drain_forecast.py``. Pure functions: no I/O, no clock of their
own (``now`` is the session's).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .jobs import TaskInfo

UNBOUNDED = math.inf


def task_end(t: TaskInfo, now: float) -> float:
    """When a bound pod is gone at the latest: its ``status.startTime`` plus its limit, as the
    kubelet counts it (a pod the kubelet has not started yet counts from ``now``; one past its
    limit ends ``now``); ``UNBOUNDED`` without a limit."""
    if t.deadline is None:
        return UNBOUNDED
    start = t.started_at if t.started_at is not None else now
    return max(now, start + t.deadline)


def job_limit(tasks: Iterable[TaskInfo]) -> float | None:
    """The longest limit of ``tasks`` (how long they may run once started), or None when any of
    them has none."""
    longest = 0.0
    for t in tasks:
        if t.deadline is None:
            return None
        longest = max(longest, t.deadline)
    return longest


def fits_before(now: float, limit: float | None, start: float | None) -> bool:
    """May pods with ``limit`` start at ``now`` in room held for a gang starting at ``start``:
    only when both are known and the pods are gone by then."""
    return limit is not None and start is not None and now + limit <= start
