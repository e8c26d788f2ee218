"""Time limits of pods (``spec.activeDeadlineSeconds``) as bounds on when room frees up.

The kubelet ends a pod ``activeDeadlineSeconds`` after its start, so a running pod with a limit
is gone by ``start + limit``; a pod without one may run for ever. From these bounds a held
domain's earliest start for the gang waiting on it is known, and a job may run in the held room
only when its own limit ends before that start (Slurm's EASY backfill). Pure functions over a
snapshot: no I/O, no clock of their own (``now`` is the session's).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from .jobs import JobInfo, TaskInfo
from .memo import MemoKey
from .snapshot import ClusterSnapshot

UNBOUNDED = math.inf


def task_end(t: TaskInfo, now: float) -> float:
    """When a bound pod is gone at the latest: its ``status.startTime`` plus its limit, as the
    kubelet counts it (a pod the kubelet has not started yet counts from ``now``; one past its
    limit ends ``now``); ``UNBOUNDED`` without a limit."""
    if t.deadline is None:
        return UNBOUNDED
    start = t.started_at if t.started_at is not None else now
    return max(now, start + t.deadline)


def node_free_at(
    snap: ClusterSnapshot, now: float, remaining: Mapping[str, float] | None = None
) -> npt.NDArray[np.float64]:
    """Per node, when every pod bound there is gone at the latest: ``now`` for an empty node,
    the latest end of its pods when each has a limit, ``UNBOUNDED`` when any has none (pods
    of no job, which the scheduler does not model, count as unbounded: only the room our
    bounded pods explain is trusted).

    ``remaining``: for some jobs, how much longer they are expected to run (learned run
    times): their pods without a limit count as ending then. What comes out is then an
    expectation, not a bound, fit to order domains and nothing else."""
    n = snap.num_nodes
    free = np.full(n, now, dtype=np.float64)
    explained = np.zeros_like(snap.used)
    jobs = [(job.key, b) for job in snap.jobs.values() if len((b := _bound_pods(job))[0])]
    parts = [b for _, b in jobs]
    if parts:
        where = np.concatenate([p[0] for p in parts])
        start = np.concatenate([p[1] for p in parts])
        limit = np.concatenate([p[2] for p in parts])
        # Not started yet: counted from now; past its limit: ends now; no limit: never.
        ends = np.maximum(now, np.where(np.isnan(start), now, start) + limit)
        if remaining:
            expect = np.concatenate([np.full(len(b[0]), now + remaining.get(k, UNBOUNDED)) for k, b in jobs])
            ends = np.where(np.isinf(ends), expect, ends)
        np.maximum.at(free, where, ends)
        np.add.at(explained, where, np.concatenate([p[3] for p in parts]))
    # Room used by something we cannot bound (a pod of no job) keeps the node busy for ever.
    free[(snap.used > explained).any(axis=1)] = UNBOUNDED
    return free


_BOUND: MemoKey[
    tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64]]
] = MemoKey("time_limits.bound_pods")


def _bound_pods(
    job: JobInfo,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """A job's pods bound to a node: node rows, start (NaN: not started), limit (inf: none) and
    requests; derived once per job version (a scheduler cycle only pays for jobs that changed)."""

    def make() -> tuple[
        npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64]
    ]:
        ts = [t for sj in job.subjobs.values() for t in sj.tasks if t.running and t.node >= 0]
        where = np.fromiter((t.node for t in ts), dtype=np.int64, count=len(ts))
        start = np.fromiter(
            (math.nan if t.started_at is None else t.started_at for t in ts),
            dtype=np.float64,
            count=len(ts),
        )
        limit = np.fromiter(
            (UNBOUNDED if t.deadline is None else t.deadline for t in ts), dtype=np.float64, count=len(ts)
        )
        req = np.stack([t.requests for t in ts]) if ts else np.zeros((0, 0), dtype=np.int64)
        return where, start, limit, req

    return job.memo.get_or_put(_BOUND, make)


def room_at(
    free_at: npt.NDArray[np.float64],
    now_fit: npt.NDArray[np.int64],
    drained_fit: npt.NDArray[np.int64],
    need: int,
    now: float,
) -> float:
    """When ``need`` pods fit on these nodes, if each node takes ``now_fit`` pods now and
    ``drained_fit`` once it frees up (``free_at``): the earliest such time (``now`` when they
    fit now), ``UNBOUNDED`` when the nodes that free up at a known time never make room enough."""
    have = int(now_fit.sum())
    if have >= need:
        return now
    order = np.argsort(free_at, kind="stable")
    gained = np.cumsum((drained_fit - now_fit)[order])
    enough = np.flatnonzero(have + gained >= need)
    if not len(enough):
        return UNBOUNDED
    return float(free_at[order[enough[0]]])


def has_limits(free_at: npt.NDArray[np.float64], now: float) -> bool:
    """True when some node frees up at a known time after ``now`` (some running pod has a limit)."""
    return bool(((free_at > now) & np.isfinite(free_at)).any())


def held_start(free_at: npt.NDArray[np.float64], nodes: Iterable[int], now: float) -> float | None:
    """The earliest start of a gang held on ``nodes`` (the nodes its pods are charged to): when
    the last of them frees up; None when any of them may stay busy for ever."""
    idx = np.fromiter(nodes, dtype=np.int64)
    if not len(idx):
        return now
    latest = float(free_at[idx].max())
    return None if math.isinf(latest) else max(latest, now)


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
