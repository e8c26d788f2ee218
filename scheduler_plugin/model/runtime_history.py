"""Learned run times: how long a queue's gangs ran, to guess when running pods without a time
limit end (opt-in per queue, annotation ``hyperplace.io/runtime-estimate: history``).

A pod with ``activeDeadlineSeconds`` is gone by its start plus the limit (``time_limits.py``); a
pod without one may run for ever, and a held domain full of such pods has no known start. Many
teams submit similar jobs again and again, so the run times of a queue's finished gangs, by gang
size, say roughly when its running gangs will end. The estimate only orders which domain to hold
for the head of the queue (the one expected to free soonest); it never lets a job into held room
and never becomes a held gang's estimated start, because a guess must not delay a gang.

How a run time is observed: a gang seen running (its first pod's ``status.startTime``) whose
PodGroup is later seen with no pod running or waiting has ended; the time between is recorded
under its queue and size. A PodGroup that disappears (deleted, not finished) records nothing, and
a Queue that disappears takes its runs with it: one made again under its name, even between two
cycles or while the scheduler was down, has another ``metadata.uid`` and starts afresh.
Failed runs count: what matters is when the room freed. The history keeps the latest runs per
queue and size; the scheduler keeps the opted-in queues' part in a ConfigMap
(``runtime/history_store.py``), so a restart or a new leader goes on from it (:meth:`document`,
:meth:`load`).

Pure: no I/O, no clock of its own (the session's ``now`` is passed in).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from .jobs import JobInfo
from .memo import MemoKey, changed_entries
from .snapshot import ClusterSnapshot

ANNOTATION = "hyperplace.io/runtime-estimate"
HISTORY = "history"
KEPT = 64  # latest runs kept per queue and gang size
KEPT_QUEUE = 256  # latest runs kept per queue, all sizes
DOCUMENT_VERSION = 1
MIN_RUNS = 3  # runs needed before an estimate is given


def size_class(pods: int) -> int:
    """Gang sizes are compared by power of two: 1, 2, 3-4, 5-8, 9-16, ..."""
    return max(0, math.ceil(math.log2(max(pods, 1))))


def opted_in(queue_annotations: Mapping[str, str] | None) -> tuple[bool, str | None]:
    """Whether a queue's annotations ask for learned run times, and a message naming the
    annotation when its value is not understood."""
    value = (queue_annotations or {}).get(ANNOTATION)
    if value is None:
        return False, None
    if value.strip().lower() == HISTORY:
        return True, None
    return (
        False,
        f"annotation {ANNOTATION}: unknown value {value!r} (use {HISTORY!r}); no run times are learned",
    )


@dataclass
class _Seen:
    queue: str
    queue_uid: str | None  # the Queue the gang ran in; a run of a queue since replaced is not its
    pods: int
    started: float


def _same_queue(seen: _Seen, now_uids: Mapping[str, str | None]) -> bool:
    """The gang's queue is still the one it ran in: a run in a queue since deleted or made
    again says nothing about the queue there now."""
    return seen.queue in now_uids and seen.queue_uid == now_uids[seen.queue]


@dataclass
class RuntimeHistory:
    """Run times of finished gangs per queue and gang size, observed across sessions."""

    runs: dict[tuple[str, int], deque[float]] = field(default_factory=dict)
    by_queue: dict[str, deque[float]] = field(default_factory=dict)
    _running: dict[str, _Seen] = field(default_factory=dict)
    _jobs: Mapping[str, JobInfo] = field(default_factory=dict)  # the jobs last observed
    uids: dict[str, str] = field(default_factory=dict)  # the Queue object each queue's runs came from
    changes: int = 0  # runs recorded and queues forgotten so far (a store writes when this moved)

    def record(self, queue: str, pods: int, seconds: float) -> None:
        """One finished run of a gang of ``pods`` pods in ``queue``."""
        if seconds < 0 or not math.isfinite(seconds):
            return
        self._add(queue, size_class(pods), seconds)
        self.changes += 1

    def _add(self, queue: str, cls: int, seconds: float) -> None:
        self.runs.setdefault((queue, cls), deque(maxlen=KEPT)).append(seconds)
        self.by_queue.setdefault(queue, deque(maxlen=KEPT_QUEUE)).append(seconds)

    def document(self, queues: Collection[str], keep: int = KEPT) -> dict[str, object]:
        """The runs of ``queues`` as a JSON-able document (oldest first, per size class, the
        latest ``keep`` of each), what :meth:`load` reads back."""
        out: dict[str, dict[str, list[float]]] = {}
        for (queue, cls), runs in sorted(self.runs.items()):
            if queue in queues and runs and keep > 0:
                out.setdefault(queue, {})[str(cls)] = [round(d, 1) for d in list(runs)[-keep:]]
        doc: dict[str, object] = {"version": DOCUMENT_VERSION, "queues": out}
        uids = {q: self.uids[q] for q in sorted(out) if q in self.uids}
        if uids:
            doc["uids"] = uids
        return doc

    def load(self, doc: object) -> list[str]:
        """Take the runs of a :meth:`document` in place of the ones kept now (the document is
        what the last leader knew). Returns what was skipped, each naming its field; a document
        that is not understood at all changes nothing."""
        if not isinstance(doc, Mapping) or doc.get("version") != DOCUMENT_VERSION:
            version = doc.get("version") if isinstance(doc, Mapping) else None
            return [f"version: expected {DOCUMENT_VERSION}, got {version!r}; nothing loaded"]
        queues = doc.get("queues")
        if not isinstance(queues, Mapping):
            return ["queues: expected an object of queue name to runs; nothing loaded"]
        problems: list[str] = []
        # Which Queue object the runs came from (written since queues are told apart by uid; a
        # document without it is taken as the queues' of today).
        uids_doc = doc.get("uids", {})
        uids: dict[str, str] = {}
        if isinstance(uids_doc, Mapping):
            uids = {str(q): u for q, u in uids_doc.items() if isinstance(u, str) and u}
            if len(uids) != len(uids_doc):
                problems.append(f"uids: {len(uids_doc) - len(uids)} entries are not a queue's uid; skipped")
        else:
            problems.append("uids: expected an object of queue name to uid; skipped")
        loaded: list[tuple[str, int, list[float]]] = []
        for queue, sizes in queues.items():
            if not isinstance(sizes, Mapping):
                problems.append(f"queues.{queue}: expected an object of size class to run times")
                continue
            for cls, runs in sizes.items():
                where = f"queues.{queue}.{cls}"
                if not (isinstance(cls, str) and cls.isdigit()):
                    problems.append(f"{where}: a size class is a whole number")
                    continue
                if not isinstance(runs, list):
                    problems.append(f"{where}: expected a list of seconds")
                    continue
                good = [
                    float(d)
                    for d in runs
                    if isinstance(d, int | float) and not isinstance(d, bool) and math.isfinite(d) and d >= 0
                ]
                if len(good) != len(runs):
                    problems.append(f"{where}: {len(runs) - len(good)} entries are not seconds >= 0; skipped")
                loaded.append((str(queue), int(cls), good))
        self.runs.clear()
        self.by_queue.clear()
        self.uids = uids
        # Interleaved by position so each queue's all-sizes window keeps runs of every size.
        longest = max((len(r) for _, _, r in loaded), default=0)
        for i in range(longest):
            for queue, cls, runs in loaded:
                if i < len(runs):
                    self._add(queue, cls, runs[i])
        return problems

    def observe(self, snap: ClusterSnapshot, now: float) -> None:
        """Record the gangs seen running before that ``snap`` shows ended, and remember the ones
        running now. Only the jobs that changed since the last snapshot observed are looked at
        (an unchanged job is the same object); observing the same snapshot again records
        nothing more."""
        now_uids = {name: q.metadata.uid for name, q in snap.queues.items()}
        # A Queue deleted, or deleted and made again (another uid): its runs go.
        self.forget(
            q
            for q in list(self.by_queue)
            if q not in snap.queues or (now_uids[q] and self.uids.get(q, now_uids[q]) != now_uids[q])
        )
        self.uids = {q: u for q, u in now_uids.items() if u}
        changed, gone = changed_entries(self._jobs, snap.jobs)
        for key in gone:
            self._running.pop(key, None)  # deleted, not seen to end: nothing learned
        for key, job in changed:
            seen = self._running.pop(key, None)
            started = job_started(job)
            if started is not None:
                if seen is None or seen.started != started:
                    seen = _Seen(job.queue, now_uids.get(job.queue), len(job.tasks), started)
                self._running[key] = seen
            elif seen is not None and not job.tasks and _same_queue(seen, now_uids):
                # Every pod ended (ended pods leave the scheduler's view) and its PodGroup stays.
                self.record(seen.queue, seen.pods, now - seen.started)
        self._jobs = snap.jobs

    def forget(self, queues: Iterable[str]) -> None:
        """Drop the runs of ``queues`` (deleted: a queue made again under the name is another
        team's, or another workload's, and learns from nothing)."""
        for queue in queues:
            self.uids.pop(queue, None)
            self.by_queue.pop(queue, None)
            for key in [k for k in self.runs if k[0] == queue]:
                del self.runs[key]
            self.changes += 1

    def remaining(self, queue: str, pods: int, elapsed: float) -> float | None:
        """How much longer a gang of ``pods`` pods of ``queue`` that has run ``elapsed`` seconds
        is expected to run: the median of what runs of its size (else of its queue) that lasted
        longer had left at that age; as long again as it has run when it outlived them all.
        None without ``MIN_RUNS`` runs to go by."""
        runs = self.runs.get((queue, size_class(pods)))
        if runs is None or len(runs) < MIN_RUNS:
            runs = self.by_queue.get(queue)
        if runs is None or len(runs) < MIN_RUNS:
            return None
        longer = [d - elapsed for d in runs if d > elapsed]
        return statistics.median(longer) if longer else max(elapsed, 0.0)


# When a job's earliest running pod started (None: none runs with a start time), per JobInfo.
_STARTED: MemoKey[tuple[float | None]] = MemoKey("runtime_history.started", node_free=True)


def job_started(job: JobInfo) -> float | None:
    """When the job's earliest running pod started, or None when none runs with a start time
    (what a run is measured from, and a running gang's age)."""

    def make() -> tuple[float | None]:
        starts = [t.started_at for t in job.tasks if t.running and t.started_at is not None]
        return (min(starts) if starts else None,)

    return job.memo.get_or_put(_STARTED, make)[0]
