"""Host ports: which ports a pod claims, and kube-scheduler NodePorts conflicts."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_plugin.filters.node_ports import host_ports_conflict, pod_host_ports
from scheduler_plugin.filters.plugin import PredicateError
from scheduler_plugin.filters.pod_constraints import compile_pod_constraints

from .helpers import make_pod


def with_ports(*ports: dict[str, Any]) -> dict[str, Any]:
    pod = make_pod()
    pod["spec"]["containers"][0]["ports"] = list(ports)
    return pod


def test_host_port_defaults_to_tcp_on_all_addresses() -> None:
    pod = with_ports({"containerPort": 80, "hostPort": 8080})
    assert compile_pod_constraints(pod).host_ports == frozenset({("TCP", "0.0.0.0", 8080)})


def test_container_ports_without_host_port_claim_nothing() -> None:
    assert (
        pod_host_ports(with_ports({"containerPort": 80}, {"containerPort": 81, "hostPort": 0})) == frozenset()
    )


def test_protocol_and_host_ip_are_kept() -> None:
    pod = with_ports({"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"})
    assert pod_host_ports(pod) == frozenset({("UDP", "10.0.0.1", 53)})


def test_sidecar_ports_count_but_plain_init_container_ports_do_not() -> None:
    pod = with_ports({"containerPort": 80, "hostPort": 80})
    pod["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "ports": [{"containerPort": 15001, "hostPort": 15001}]},
        {"name": "setup", "ports": [{"containerPort": 9000, "hostPort": 9000}]},
    ]
    assert pod_host_ports(pod) == frozenset({("TCP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 15001)})


def test_non_numeric_host_port_is_refused_naming_the_pod() -> None:
    with pytest.raises(PredicateError, match=r"pod default/p: spec\.containers\[0\]\.ports\[0\]\.hostPort"):
        pod_host_ports(with_ports({"containerPort": 80, "hostPort": "http"}))


@pytest.mark.parametrize(
    ("want", "used", "conflict"),
    [
        # same port, same protocol, both on all addresses
        (("TCP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 80), True),
        # a wildcard bind conflicts with a specific one either way round
        (("TCP", "0.0.0.0", 80), ("TCP", "10.0.0.1", 80), True),
        (("TCP", "10.0.0.1", 80), ("TCP", "0.0.0.0", 80), True),
        # two different specific addresses can share a port
        (("TCP", "10.0.0.1", 80), ("TCP", "10.0.0.2", 80), False),
        (("TCP", "10.0.0.1", 80), ("TCP", "10.0.0.1", 80), True),
        # protocols and ports are separate spaces
        (("UDP", "0.0.0.0", 53), ("TCP", "0.0.0.0", 53), False),
        (("TCP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 81), False),
    ],
)
def test_node_ports_conflict_rules(
    want: tuple[str, str, int], used: tuple[str, str, int], conflict: bool
) -> None:
    assert host_ports_conflict(frozenset({want}), {used}) is conflict


def test_no_ports_never_conflict() -> None:
    assert not host_ports_conflict(frozenset(), {("TCP", "0.0.0.0", 80)})
    assert not host_ports_conflict(frozenset({("TCP", "0.0.0.0", 80)}), set())


def test_any_conflicting_port_is_enough() -> None:
    want = frozenset({("TCP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 443)})
    assert host_ports_conflict(want, {("TCP", "10.1.1.1", 443)})
