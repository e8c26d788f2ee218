"""Every filter, registered once, in the order kube-scheduler runs them: the first that refuses
a node names the reason (a readiness check first, as Volcano's cache drops not-ready nodes)."""

from __future__ import annotations

from typing import Any

from . import (
    dynamic_resources,
    inter_pod_affinity,
    node_affinity,
    node_ports,
    node_ready,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)
from .plugin import ScoringFilter, StatefulFilter, StaticFilter

STATIC_FILTERS: tuple[StaticFilter, ...] = (
    node_ready.FILTER,
    node_unschedulable.FILTER,
    taint_toleration.FILTER,
    node_affinity.FILTER,
)
# Judged against what the cycle has placed so far; NodeResourcesFit is the fit counts themselves
# and runs between the first FIT_AFTER of these and the rest (it names a node's reason there).
# The volume filters read the cycle's storage view and the claims chosen so far;
# DynamicResources (after InterPodAffinity, as kube-scheduler inserts it) the devices taken so far.
STATEFUL_FILTERS: tuple[StatefulFilter[Any], ...] = (
    node_ports.FILTER,
    volume_restrictions.FILTER,
    node_volume_limits.FILTER,
    volume_binding.FILTER,
    volume_zone.FILTER,
    pod_topology_spread.FILTER,
    inter_pod_affinity.FILTER,
    dynamic_resources.FILTER,
)
FIT_AFTER = 1
# The filters whose kube-scheduler plugin also scores (the nodeorder plugin's podaffinity and
# podtopologyspread weights), by name.
SCORING_FILTERS: dict[str, ScoringFilter[Any]] = {
    "InterPodAffinity": inter_pod_affinity.FILTER,
    "PodTopologySpread": pod_topology_spread.FILTER,
}
