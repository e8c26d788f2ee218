"""Prometheus series of :mod:`scheduler_plugin.algorithms.fragmentation`, refreshed once per cycle.

The scheduler hands each cycle's snapshot and bindings to :meth:`FragmentationMetrics.observe`
(in its worker thread); a scrape reads the last report as one consistent set, so tiers and
shapes that disappear from the cluster disappear from the series too (no stale label sets).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler_plugin.algorithms.fragmentation import (
    FragmentationConfig,
    FragmentationReport,
    snapshot_fragmentation,
)
from scheduler_plugin.model.snapshot import ClusterSnapshot

PREFIX = "hyperplace_scheduler_"
log = logging.getLogger(__name__)


class FragmentationMetrics(Collector):
    """Per-tier free HyperNodes and per-shape fits, as gauges (see ``manifests/README.md``)."""

    def __init__(self, config: FragmentationConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.report: FragmentationReport | None = None
        self.seconds = 0.0  # cost of the last computation
        self._failed = False
        if registry is not None:
            registry.register(self)

    def observe(self, snap: ClusterSnapshot, bindings: Mapping[str, str] | None = None) -> None:
        """Recompute from a cycle's snapshot plus the bindings its session made."""
        t0 = time.perf_counter()
        try:
            report = snapshot_fragmentation(snap, self.config, bindings)
        except Exception:  # a gauge must never stop scheduling: keep the last figures, say why
            if not self._failed:
                log.exception("fragmentation figures could not be computed; the gauges keep the last ones")
            self._failed = True
            return
        self._failed = False
        self.seconds = time.perf_counter() - t0
        self.report = report  # one reference swap: a scrape sees the old or the new set

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges of the last report (nothing before the first cycle)."""
        report = self.report
        if report is None:
            return
        hns = GaugeMetricFamily(PREFIX + "tier_hypernodes", "HyperNodes of the tier", labels=["tier"])
        free = GaugeMetricFamily(
            PREFIX + "tier_free_hypernodes",
            "HyperNodes of the tier entirely free (every node schedulable, none of the accelerator in use)",
            labels=["tier"],
        )
        fit = GaugeMetricFamily(
            PREFIX + "tier_shape_fit_pods",
            "Pods of the shape that still fit on the tier's nodes in total",
            labels=["tier", "shape"],
        )
        best = GaugeMetricFamily(
            PREFIX + "tier_shape_best_domain_fit_pods",
            "Pods of the shape that still fit in the tier's best single HyperNode",
            labels=["tier", "shape"],
        )
        for t in report.tiers:
            tier = str(t.tier)
            hns.add_metric([tier], t.hypernodes)
            free.add_metric([tier], t.free_hypernodes)
            for shape in t.fit:
                fit.add_metric([tier, shape], t.fit[shape])
                best.add_metric([tier, shape], t.best[shape])
        cost = GaugeMetricFamily(
            PREFIX + "fragmentation_duration_seconds", "Time the last fragmentation figures took to compute"
        )
        cost.add_metric([], self.seconds)
        yield from (hns, free, fit, best, cost)
