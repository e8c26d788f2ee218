"""When the room of each node frees up, for one allocate action's head-of-queue holds.

A node is free once every pod bound there is gone: by the pods' time limits
(``model/time_limits.py``) that is a bound; with the run times a queue learns
(``model/runtime_history.py``) it is an expectation, fit to order the domains a hold may take and
nothing else. From the bounds a held gang's earliest start is known, and when a number of pods
fit on a set of nodes as they drain.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from ..framework.session import Session
from ..model.jobs import JobInfo
from ..model.memo import MemoKey
from ..model.runtime_history import RuntimeHistory, job_started, opted_in
from ..model.snapshot import ClusterSnapshot
from ..model.time_limits import UNBOUNDED


class DrainForecast:
    """When each node of the session's snapshot frees up, worked out once per action."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._bounds: npt.NDArray[np.float64] | None = None  # per node, by the time limits
        # Expected free times with learned run times, and whether any were learned.
        self._expected: tuple[npt.NDArray[np.float64] | None, bool] | None = None

    def bounds(self) -> npt.NDArray[np.float64] | None:
        """When each node frees up at the latest (from the pods' time limits), or None when no
        running pod has a limit (then nothing differs from a hold without time limits)."""
        now = self.ssn.now
        if now is None:
            return None
        if self._bounds is None:
            self._bounds = node_free_at(self.ssn.snap, now)
        return self._bounds if has_limits(self._bounds, now) else None

    def expected(self) -> npt.NDArray[np.float64] | None:
        """When each node is expected to free up, to order the domains a hold may take: the
        time limits' bounds, and for the running gangs of queues that learn run times
        (``hyperplace.io/runtime-estimate: history``) their pods without a limit as ending when
        runs like theirs ended. None when neither says when anything ends."""
        now, history = self.ssn.now, self.ssn.history
        if now is None or history is None:
            return self.bounds()
        if self._expected is None:
            remaining = self._learned(history, now)
            free = node_free_at(self.ssn.snap, now, remaining) if remaining else None
            self._expected = (free if free is not None and has_limits(free, now) else None, bool(remaining))
        return self._expected[0] if self._expected[0] is not None else self.bounds()

    @property
    def learned(self) -> bool:
        """Whether :meth:`expected` used learned run times."""
        return self._expected is not None and self._expected[1]

    def start_on(self, nodes: Iterable[int]) -> float | None:
        """The earliest start of a gang held on ``nodes``: when the last of them frees up; None
        when any may stay busy for ever or nothing has a time limit."""
        bounds, now = self.bounds(), self.ssn.now
        if bounds is None or now is None:
            return None
        return held_start(bounds, nodes, now)

    def _learned(self, history: RuntimeHistory, now: float) -> dict[str, float]:
        """Expected remaining run time of each running gang without limits in a queue that opts
        in (an annotation value not understood is named in the session notes)."""
        snap = self.ssn.snap
        learns: dict[str, bool] = {}
        out: dict[str, float] = {}
        for key, job in snap.jobs.items():
            if job.queue not in learns:
                q = snap.queues.get(job.queue)
                learns[job.queue], bad = opted_in(q.metadata.annotations if q is not None else None)
                if bad is not None:
                    self.ssn.note(f"Queue {job.queue}: {bad}")
            if not learns[job.queue]:
                continue
            if not any(t.running and t.deadline is None for t in job.tasks):
                continue
            # Its age as the history measures runs: from its first pod's start.
            started = job_started(job)
            elapsed = now - started if started is not None else 0.0
            rem = history.remaining(job.queue, len(job.tasks), elapsed)
            if rem is not None:
                out[key] = rem
        return out


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
] = MemoKey("drain_forecast.bound_pods")


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
