"""Prometheus series of the scheduler process, and the client-side write rate it keeps to."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hyperplace.runtime.workqueue import TokenBucket

from .volcano_metrics import VolcanoMetrics

# Seconds, for the cycle and the session: 5 ms (nothing changed) to 30 s (a cold 10k-node start).
CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """Prometheus series of the scheduler process."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.cycle = Histogram(
            "hyperplace_scheduler_cycle_duration_seconds",
            "Whole scheduling cycle: snapshot, session, apply",
            registry=registry,
            buckets=CYCLE_BUCKETS,
        )
        self.session = Histogram(
            "hyperplace_scheduler_session_duration_seconds",
            "Snapshot build plus run_session",
            registry=registry,
            buckets=CYCLE_BUCKETS,
        )
        self.decisions = Counter(
            "hyperplace_scheduler_decisions_total",
            "Pods decided (assumed and sent to bind)",
            registry=registry,
        )
        self.binds = Counter(
            "hyperplace_scheduler_binds_total", "Binding requests by result", ["result"], registry=registry
        )
        self.pending_jobs = Gauge(
            "hyperplace_scheduler_pending_jobs",
            "PodGroups not placed after the last session",
            registry=registry,
        )
        self.unschedulable = Gauge(
            "hyperplace_scheduler_unschedulable_pods",
            "Pods left pending by the last session",
            registry=registry,
        )
        self.assumed = Gauge(
            "hyperplace_scheduler_assumed_pods", "Pods decided, not yet seen bound", registry=registry
        )
        self.skipped = Gauge(
            "hyperplace_scheduler_invalid_objects",
            "Objects skipped because they do not parse",
            registry=registry,
        )
        self.bind_latency = Histogram(
            "hyperplace_scheduler_bind_request_duration_seconds",
            "One binding request, sent to answered (the client's side of the apiserver's latency)",
            registry=registry,
            buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.writes = Counter(
            "hyperplace_scheduler_api_writes_total",
            "Status and event writes",
            ["resource", "result"],
            registry=registry,
        )
        self.config_loads = Counter(
            "hyperplace_scheduler_config_loads_total",
            "Configuration (re)loads by result",
            ["result"],
            registry=registry,
        )
        # The status write queue and the event recorder (issue 22: quiet on the control plane).
        self.status_queue_depth = Gauge(
            "hyperplace_scheduler_status_queue_depth",
            "Status writes queued (one per object: newer states replace queued ones)",
            registry=registry,
        )
        self.status_coalesced = Counter(
            "hyperplace_scheduler_status_writes_coalesced_total",
            "Status writes folded into one already queued for the same object",
            ["kind"],
            registry=registry,
        )
        self.status_dropped = Counter(
            "hyperplace_scheduler_status_writes_dropped_total",
            "Queued status writes not sent: the object was gone or no longer needed it",
            ["kind"],
            registry=registry,
        )
        self.status_deferred = Counter(
            "hyperplace_scheduler_status_writes_deferred_total",
            "PodGroup status writes put off by the per-PodGroup interval (only numbers moved)",
            registry=registry,
        )
        self.folded = Counter(
            "hyperplace_scheduler_events_folded_total",
            "Event occurrences folded into a write already pending for the same Event",
            registry=registry,
        )
        self.event_writes = Counter(
            "hyperplace_scheduler_event_writes_total",
            "Event writes by verb (create, patch: a series' count and lastTimestamp)",
            ["verb"],
            registry=registry,
        )
        # Hot spares (hyperplace.io/spare-nodes on HyperNodes), per leaf.
        self.spare_nodes = Gauge(
            "hyperplace_scheduler_spare_nodes",
            "Spare nodes per leaf HyperNode after the last session: wanted (the annotation) and held "
            "(free nodes kept for replacements)",
            ["hypernode", "state"],
            registry=registry,
        )
        self.spare_pods = Counter(
            "hyperplace_scheduler_spare_pods_placed_total",
            "Pods placed on spare nodes (replacements of gangs that lost pods, and borrowers the "
            "annotation lends them to)",
            ["hypernode"],
            registry=registry,
        )
        # Volcano's own series, so its users' dashboards and alerts keep working.
        self.volcano = VolcanoMetrics(registry)


class Throttle:
    """Client-side QPS limit shared by every write (client-go's rest.Config QPS/Burst)."""

    def __init__(self, qps: float, burst: int) -> None:
        self._bucket = TokenBucket(qps, max(1, burst)) if qps > 0 else None

    async def __call__(self) -> None:
        if self._bucket is not None:
            delay = self._bucket.reserve()
            if delay > 0:
                await asyncio.sleep(delay)
