"""Volcano's scheduler and queue series, beside ours, so that dashboards and alerts built on
Volcano keep working after the switch.

Names, labels, units (milliseconds; milli-cpu, bytes, milli-units for other resources) and
histogram buckets are Volcano's (``pkg/scheduler/metrics`` of v1.15). Which ones are exported,
and where the meaning differs, is listed in ``manifests/README.md`` ("Volcano's metric names");
:data:`EXPORTED` is that list, and tests hold it to what a scrape shows.

Histograms and counters are observed once per cycle (:meth:`VolcanoMetrics.observe_cycle`) and
per pod (:meth:`task_assumed`, :meth:`task_bound`); the gauges are computed at scrape time
from the last cycle's snapshot and result, which are never changed once published, and from
the PodGroup store (a scrape runs on the event loop, as the informers do), so a job or queue
that is gone leaves no stale series behind.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hyperplace.api.constants import DEFAULT_QUEUE
from hyperplace.api.times import parse_rfc3339

from ..algorithms.hdrf import dominant_share
from ..cycle.result import SessionResult
from ..model.resources import Missing, Res
from ..model.snapshot import ClusterSnapshot
from ..plugins.proportion import SHARES

PREFIX = "volcano_"


def exponential_buckets_range(low: float, high: float, count: int) -> tuple[float, ...]:
    """Prometheus' Go ``ExponentialBucketsRange``: ``count`` buckets from ``low`` to ``high``."""
    factor = (high / low) ** (1 / (count - 1))
    return tuple(low * factor**i for i in range(count))


E2E_BUCKETS = exponential_buckets_range(1, 5000, 20)
ACTION_BUCKETS = exponential_buckets_range(1, 2000, 20)
JOB_BUCKETS = exponential_buckets_range(100, 120000, 30)
TASK_BUCKETS = exponential_buckets_range(50, 60000, 30)
STAGE_BUCKETS = exponential_buckets_range(0.1, 500, 20)

# Volcano's PodGroup phases counted per queue (its controller's volcano_queue_pod_group_*_count).
PODGROUP_PHASES = ("Inqueue", "Pending", "Running", "Unknown", "Completed")

# Every series this module exports, as a scrape names it (histograms by their base name).
EXPORTED = (
    "volcano_e2e_scheduling_latency_milliseconds",
    "volcano_open_session_duration_milliseconds",
    "volcano_action_scheduling_latency_milliseconds",
    "volcano_task_scheduling_latency_milliseconds",
    "volcano_scheduling_stage_duration_milliseconds",
    "volcano_e2e_job_scheduling_latency_milliseconds",
    "volcano_e2e_job_scheduling_duration",
    "volcano_e2e_job_scheduling_start_time",
    "volcano_e2e_job_scheduling_last_time",
    "volcano_schedule_attempts_total",
    "volcano_pod_preemption_victims",
    "volcano_total_preemption_attempts",
    "volcano_unschedule_task_count",
    "volcano_unschedule_job_count",
    *(
        f"volcano_queue_{what}_{unit}"
        for what in ("allocated", "request", "deserved", "capacity", "real_capacity")
        for unit in ("milli_cpu", "memory_bytes", "scalar_resources")
    ),
    "volcano_queue_share",
    "volcano_queue_weight",
    "volcano_queue_overused",
    *(f"volcano_queue_pod_group_{p.lower()}_count" for p in PODGROUP_PHASES),
)


def _ms(seconds: float) -> float:
    return max(seconds, 0.0) * 1000.0


@dataclass
class _JobTimes:
    """Volcano's per-job gauges of the last job placed: start (creation) and last (placed)."""

    name: str
    namespace: str
    queue: str
    duration_ms: float
    last: float


@dataclass
class _Published:
    """What the last cycle left for scrapes; replaced whole, never changed."""

    snapshot: ClusterSnapshot | None = None
    result: SessionResult | None = None
    placed: dict[str, _JobTimes] = field(default_factory=dict)


class VolcanoMetrics(Collector):
    """Volcano's scheduler and queue series (see the module docstring)."""

    def __init__(
        self,
        registry: CollectorRegistry | None,
        podgroups: Callable[[], Iterable[Mapping[str, Any]]] = tuple,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # The PodGroup store (read at scrape time) and the clock durations are measured by.
        self.podgroups = podgroups
        self.clock = clock
        self._published = _Published()
        self._prev_nominations: frozenset[str] = frozenset()
        r = registry
        self.e2e = Histogram(
            PREFIX + "e2e_scheduling_latency_milliseconds",
            "Duration of a scheduling cycle in milliseconds: snapshot, session (actions) and applying "
            "its decisions",
            buckets=E2E_BUCKETS,
            registry=r,
        )
        self.open_session = Histogram(
            PREFIX + "open_session_duration_milliseconds",
            "Duration of opening a scheduling session in milliseconds, including the cluster snapshot",
            buckets=E2E_BUCKETS,
            registry=r,
        )
        self.action = Histogram(
            PREFIX + "action_scheduling_latency_milliseconds",
            "Action scheduling latency in milliseconds",
            ["action"],
            buckets=ACTION_BUCKETS,
            registry=r,
        )
        self.task = Histogram(
            PREFIX + "task_scheduling_latency_milliseconds",
            "Task scheduling latency from creation to various stages in milliseconds",
            ["stage"],
            buckets=TASK_BUCKETS,
            registry=r,
        )
        self.stage = Histogram(
            PREFIX + "scheduling_stage_duration_milliseconds",
            "Duration of per-task scheduling stages in milliseconds (Bind only)",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.job_latency = Histogram(
            PREFIX + "e2e_job_scheduling_latency_milliseconds",
            "End-to-end job scheduling latency in milliseconds (from PodGroup creation to its last "
            "pending pod assumed)",
            buckets=JOB_BUCKETS,
            registry=r,
        )
        self.attempts = Counter(
            PREFIX + "schedule_attempts",
            "Number of attempts to schedule pods, by the result: scheduled, unschedulable (left pending "
            "by a session), error (binding refused)",
            ["result"],
            registry=r,
        )
        # Volcano's counter has no _total suffix, which prometheus_client's Counter would add.
        self.preemption_attempts = 0
        self._victims = 0
        if r is not None:
            r.register(self)

    # -- observations ------------------------------------------------------------------------

    def observe_cycle(
        self,
        cycle_seconds: float,
        open_seconds: float,
        snapshot: ClusterSnapshot,
        result: SessionResult,
        ran: bool,
    ) -> None:
        """One scheduling cycle; ``ran`` is False when the session was skipped (nothing changed
        since the last one), which then counts only towards the end-to-end latency."""
        self.e2e.observe(_ms(cycle_seconds))
        placed = self._published.placed
        if ran:
            self.open_session.observe(_ms(open_seconds))
            for action, seconds in result.action_seconds.items():
                self.action.labels(action).observe(_ms(seconds))
            if result.bindings:
                self.attempts.labels("scheduled").inc(len(result.bindings))
            if result.unschedulable:
                self.attempts.labels("unschedulable").inc(len(result.unschedulable))
            if result.evictions:
                self._victims = len(result.evictions)
            new = set(result.nominations) - self._prev_nominations
            self.preemption_attempts += len(new)
            self._prev_nominations = frozenset(result.nominations)
            placed = self._jobs_placed(snapshot, result, placed)
        live = snapshot.jobs
        self._published = _Published(
            snapshot=snapshot, result=result, placed={k: v for k, v in placed.items() if k in live}
        )

    def _jobs_placed(
        self, snapshot: ClusterSnapshot, result: SessionResult, placed: Mapping[str, _JobTimes]
    ) -> dict[str, _JobTimes]:
        """Jobs whose last pending pod this session decided: their creation-to-placed time."""
        out = dict(placed)
        by_job: dict[str, int] = {}
        for jkey, job in snapshot.jobs.items():
            n = sum(1 for t in job.pending if t.key in result.bindings)
            if n:
                by_job[jkey] = n
        now = self.clock()
        for jkey, n in by_job.items():
            job = snapshot.jobs[jkey]
            if n != len(job.pending):
                continue
            created = parse_rfc3339(job.creation)
            if created is None:
                continue
            duration = _ms(now - created)
            self.job_latency.observe(duration)
            pg = job.podgroup.metadata
            out[jkey] = _JobTimes(pg.name or "", pg.namespace or "", job.queue, duration, now)
        return out

    def task_assumed(self, creation: str | None) -> None:
        """A pod was assumed on a node (Volcano's Assumed stage)."""
        self._task_stage("Assumed", creation)

    def task_bound(self, creation: str | None, bind_seconds: float) -> None:
        """A pod's binding was accepted (Bound stage; the request's own time is the Bind stage)."""
        self._task_stage("Bound", creation)
        self.stage.labels("Bind").observe(_ms(bind_seconds))

    def bind_failed(self) -> None:
        """A binding was refused: an attempt that ended in error."""
        self.attempts.labels("error").inc()

    def _task_stage(self, stage: str, creation: str | None) -> None:
        created = parse_rfc3339(creation)
        if created is not None:
            self.task.labels(stage).observe(_ms(self.clock() - created))

    # -- gauges at scrape time ---------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        pub = self._published
        victims = GaugeMetricFamily(
            PREFIX + "pod_preemption_victims", "Number of selected preemption victims"
        )
        victims.add_metric([], self._victims)
        yield victims
        attempts = Metric(
            PREFIX + "total_preemption_attempts",
            "Preemptions and reclaims that chose victims for a waiting gang, till now",
            "counter",
        )
        attempts.add_sample(PREFIX + "total_preemption_attempts", {}, float(self.preemption_attempts))
        yield attempts
        yield from self._job_gauges(pub)
        yield from self._queue_gauges(pub)
        yield from self._podgroup_counts()

    def _job_gauges(self, pub: _Published) -> Iterator[Metric]:
        tasks = GaugeMetricFamily(
            PREFIX + "unschedule_task_count",
            "Number of tasks of a gang still missing for its minimum after the last session",
            labels=["job_id"],
        )
        jobs = GaugeMetricFamily(PREFIX + "unschedule_job_count", "Number of jobs could not be scheduled")
        unready = 0
        snap, result = pub.snapshot, pub.result
        if snap is not None and result is not None:
            for job in snap.jobs.values():
                if not job.tasks or job.key in snap.standalone:
                    continue
                placed = sum(1 for t in job.tasks if t.node >= 0 or t.key in result.bindings)
                missing = max(0, job.min_member - placed)
                unready += missing > 0
                tasks.add_metric([job.podgroup.metadata.name or ""], missing)
        jobs.add_metric([], unready)
        yield tasks
        yield jobs
        labels = ["job_name", "queue", "job_namespace"]
        duration = GaugeMetricFamily(
            PREFIX + "e2e_job_scheduling_duration",
            "Per-job duration from job creation to last task assumed, in milliseconds",
            labels=labels,
        )
        start = GaugeMetricFamily(
            PREFIX + "e2e_job_scheduling_start_time", "E2E job scheduling start time", labels=labels
        )
        last = GaugeMetricFamily(
            PREFIX + "e2e_job_scheduling_last_time", "E2E job scheduling last time", labels=labels
        )
        if snap is not None:
            for job in snap.jobs.values():
                if job.key in snap.standalone:
                    continue
                created = parse_rfc3339(job.creation)
                pg = job.podgroup.metadata
                if created is not None:
                    start.add_metric([pg.name or "", job.queue, pg.namespace or ""], float(int(created)))
        for t in pub.placed.values():
            duration.add_metric([t.name, t.queue, t.namespace], t.duration_ms)
            last.add_metric([t.name, t.queue, t.namespace], float(int(t.last)))
        yield from (duration, start, last)

    def _queue_gauges(self, pub: _Published) -> Iterator[Metric]:
        fams: dict[str, tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]] = {}
        for what, help_what in (
            ("allocated", "Allocated"),
            ("request", "Request"),
            ("deserved", "Deserved"),
            ("capacity", "Capacity"),
            ("real_capacity", "Real capacity"),
        ):
            fams[what] = (
                GaugeMetricFamily(
                    f"{PREFIX}queue_{what}_milli_cpu",
                    f"{help_what} CPU count for one queue",
                    labels=["queue_name"],
                ),
                GaugeMetricFamily(
                    f"{PREFIX}queue_{what}_memory_bytes",
                    f"{help_what} memory for one queue",
                    labels=["queue_name"],
                ),
                GaugeMetricFamily(
                    f"{PREFIX}queue_{what}_scalar_resources",
                    f"{help_what} scalar resources for one queue (milli-units)",
                    labels=["queue_name", "resource"],
                ),
            )
        share = GaugeMetricFamily(PREFIX + "queue_share", "Share for one queue", labels=["queue_name"])
        weight = GaugeMetricFamily(PREFIX + "queue_weight", "Weight for one queue", labels=["queue_name"])
        overused = GaugeMetricFamily(
            PREFIX + "queue_overused", "If one queue is overused", labels=["queue_name"]
        )
        snap, result = pub.snapshot, pub.result
        if snap is not None and result is not None:
            requests = _queue_requests(snap)
            # The proportion plugin's view at session open (none under the capacity plugin).
            shares = snap.memo.get(SHARES) or {}
            for name, out in sorted(result.queues.items()):
                _add_res(fams["allocated"], name, out.allocated)
                _add_res(fams["request"], name, requests.get(name, Res()))
                if out.deserved is not None:
                    _add_res(fams["deserved"], name, out.deserved)
                    share.add_metric([name], dominant_share(out.allocated, out.deserved))
                    overused.add_metric([name], float(out.deserved.less_equal(out.allocated, Missing.ZERO)))
                if out.capability is not None:
                    _add_res(fams["capacity"], name, out.capability)
                if name in shares:
                    _add_res(fams["real_capacity"], name, shares[name].real_capability)
                queue = snap.queues.get(name)
                if queue is not None:
                    w = queue.spec.weight
                    weight.add_metric([name], float(1 if w is None else w))
        for trio in fams.values():
            yield from trio
        yield from (share, weight, overused)

    def _podgroup_counts(self) -> Iterator[Metric]:
        counts: dict[tuple[str, str], int] = {}
        queues: set[str] = set()
        for pg in self.podgroups():
            queue = str((pg.get("spec") or {}).get("queue") or DEFAULT_QUEUE)
            queues.add(queue)
            phase = str((pg.get("status") or {}).get("phase") or "")
            if phase in PODGROUP_PHASES:
                counts[(queue, phase)] = counts.get((queue, phase), 0) + 1
        for phase in PODGROUP_PHASES:
            fam = GaugeMetricFamily(
                f"{PREFIX}queue_pod_group_{phase.lower()}_count",
                f"The number of {phase} PodGroup in this queue",
                labels=["queue_name"],
            )
            for queue in sorted(queues):
                fam.add_metric([queue], counts.get((queue, phase), 0))
            yield fam


def _queue_requests(snap: ClusterSnapshot) -> dict[str, Res]:
    """Requests of every pod of every job, per queue (Volcano's queue ``request``)."""
    names = snap.resources
    sums: dict[str, Any] = {}
    for job in snap.jobs.values():
        for t in job.tasks:
            acc = sums.get(job.queue)
            sums[job.queue] = t.requests.copy() if acc is None else acc + t.requests
    return {
        q: Res.from_milli(dict(zip(names, (int(v) for v in vec), strict=True))) for q, vec in sums.items()
    }


def _add_res(
    trio: tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily], queue: str, r: Res
) -> None:
    cpu, memory, scalars = trio
    cpu.add_metric([queue], r.cpu if math.isfinite(r.cpu) else 0.0)
    memory.add_metric([queue], r.memory if math.isfinite(r.memory) else 0.0)
    for name, v in sorted((r.scalars or {}).items()):
        if name != "pods" and math.isfinite(v):
            scalars.add_metric([queue, name], v)
