"""When a gang that ran stopped being whole, read from its pods alone (restart-safe).

A gang's waiting clocks (the head-of-queue hold, the topology relaxation) count from the moment
it started waiting for room. For a new gang that is its PodGroup's creation. A gang that ran for
months and lost a pod with its node has not been waiting for months: it waits since its
replacement was made. Nothing but the pods records that, so it is read from them, and a
scheduler that restarts reads the same answer:

* **Damaged** (some pods still bound, the *remainder*): its replacements are the pending pods
  made after the remainder was bound and made (:func:`hyperplace.kube.gang_damage.replacements_since`,
  the rule the Job controller reads too).
  The gang stopped being whole when the first replacement was made.
* **Restarted whole** (none bound, the Volcano Job's pods carry ``volcano.sh/job-version`` above
  0: ``RestartJob`` made them anew): it stopped being whole when the first pod of that version
  was made.

Otherwise the gang never ran: ``None``, and its clocks count from the PodGroup's creation.
"""

from __future__ import annotations

from hyperplace.api.constants import JOB_VERSION_KEY
from hyperplace.api.times import parse_rfc3339
from hyperplace.kube.gang_damage import replacements_since

from .jobs import JobInfo
from .memo import MemoKey

# Depends on the job's pods alone (their creation and scheduling times, their version).
DAMAGED_SINCE: MemoKey[tuple[float | None]] = MemoKey("when the gang stopped being whole", node_free=True)


def stopped_whole_at(job: JobInfo) -> float | None:
    """Epoch seconds when ``job``'s gang, having run, stopped being whole; None when it never ran
    (or has nothing pending)."""
    got = job.memo.get(DAMAGED_SINCE)
    if got is None:
        got = job.memo.put(DAMAGED_SINCE, (_stopped_whole_at(job),))
    return got[0]


def _stopped_whole_at(job: JobInfo) -> float | None:
    if not job.pending:
        return None
    bound = [(t.scheduled_at, parse_rfc3339(t.creation)) for t in job.tasks if t.running]
    if any(at is not None for at, _ in bound):
        return replacements_since(bound, (parse_rfc3339(t.creation) for t in job.pending))
    if any(t.running for t in job.tasks):
        return None  # bound, not yet started: nothing says when
    restarted = [
        c
        for t in job.pending
        if _version(t.labels.get(JOB_VERSION_KEY)) > 0 and (c := parse_rfc3339(t.creation)) is not None
    ]
    return min(restarted) if restarted else None


def _version(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def replacements(job: JobInfo) -> bool:
    """Whether ``job`` is a damaged gang: a remainder bound, and replacements that wait to make
    it whole again (a gang restarted whole has no remainder: it is placed as a new one)."""
    return stopped_whole_at(job) is not None and any(t.running for t in job.tasks)


def waiting_since(job: JobInfo) -> float | None:
    """Epoch seconds since when ``job`` waits for room: when it stopped being whole, for a gang
    that ran; else its PodGroup's creation (None when that is unknown)."""
    created = parse_rfc3339(job.creation)
    damaged = stopped_whole_at(job)
    if damaged is None:
        return created
    return damaged if created is None else max(created, damaged)
