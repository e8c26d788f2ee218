"""The filter layer: every filter module is registered once, in kube-scheduler's order, and a
stateful filter's Reserve and Unreserve change what it allows without touching the snapshot."""

from __future__ import annotations

import importlib
import pkgutil
from types import SimpleNamespace

import numpy as np

import scheduler_plugin.filters as filters_pkg
from scheduler_plugin.filters.node_ports import FILTER as NODE_PORTS
from scheduler_plugin.filters.pod_constraints import compile_pod_constraints
from scheduler_plugin.filters.registry import STATEFUL_FILTERS, STATIC_FILTERS


def _pod_with_host_port(port: int) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": port, "hostPort": port}]}]},
    }


def test_every_filter_module_is_registered_once() -> None:
    registered = [*STATIC_FILTERS, *STATEFUL_FILTERS]
    found = []
    for info in pkgutil.iter_modules(filters_pkg.__path__):
        module = importlib.import_module(f"{filters_pkg.__name__}.{info.name}")
        if hasattr(module, "FILTER"):
            found.append(module.FILTER)
    assert sorted(f.name for f in found) == sorted(f.name for f in registered)
    assert len({f.name for f in registered}) == len(registered)


def test_static_filters_run_in_kube_schedulers_order_readiness_first() -> None:
    assert [f.name for f in STATIC_FILTERS] == [
        "NodeReady",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
    ]


def test_stateful_filters_run_in_kube_schedulers_order() -> None:
    assert [f.name for f in STATEFUL_FILTERS] == [
        "NodePorts",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",  # kube-scheduler inserts it before DefaultPreemption
    ]


def test_a_reserved_host_port_keeps_a_second_pod_off_the_node_until_unreserved() -> None:
    taken = {("TCP", "0.0.0.0", 9000)}
    pod = compile_pod_constraints(_pod_with_host_port(8080))
    snapshot = SimpleNamespace(node_ports=[set(), set(taken)], pending=[pod])
    state = NODE_PORTS.cycle_state(snapshot)
    assert state is not None and NODE_PORTS.applies(state, pod)

    counts = np.array([5, 3], dtype=np.int64)
    NODE_PORTS.cap_counts(state, pod, np.arange(2), counts)
    assert counts.tolist() == [1, 1]  # one pod with that host port per node

    NODE_PORTS.reserve(state, pod, np.array([0]))
    counts = np.array([5, 3], dtype=np.int64)
    NODE_PORTS.cap_counts(state, pod, np.arange(2), counts)
    assert counts.tolist() == [0, 1]

    NODE_PORTS.unreserve(state, pod, np.array([0]))
    counts = np.array([5, 3], dtype=np.int64)
    NODE_PORTS.cap_counts(state, pod, np.arange(2), counts)
    assert counts.tolist() == [1, 1]
    assert snapshot.node_ports == [set(), taken]  # the snapshot's sets are never mutated


def test_node_ports_bounds_a_node_to_one_such_pod_whatever_is_placed() -> None:
    assert NODE_PORTS.most_per_node(compile_pod_constraints(_pod_with_host_port(8080))) == 1


def test_a_pod_without_host_ports_is_skipped_by_node_ports() -> None:
    pod = compile_pod_constraints(
        {"metadata": {"name": "q", "namespace": "default"}, "spec": {"containers": []}}
    )
    assert NODE_PORTS.cycle_state(SimpleNamespace(node_ports=[set()], pending=[pod])) is None
    assert not NODE_PORTS.applies([set()], pod)
