"""kube-scheduler's NodePorts filter: a pod asking for a host port cannot share a node with a
pod that already binds it. The ports in use start from the pods the snapshot has on each node
and change with every placement of the cycle (Reserve/Unreserve), so this filter is stateful."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hyperplace.kube.objects import namespaced_key

from .plugin import I64, CompiledPod, CycleInput, HostPort, LocalFilter, PredicateError

BIND_ALL_HOST_IP = "0.0.0.0"
REASON_HOST_PORTS = "node(s) didn't have free ports for the requested pod ports"


def pod_host_ports(pod: Mapping[str, Any]) -> frozenset[HostPort]:
    """``(protocol, hostIP, hostPort)`` of every container port with hostPort > 0.

    Like ``schedutil.GetHostPorts``: regular containers plus sidecar init containers
    (restartPolicy Always), which run for the pod's whole life. An empty protocol means
    TCP and an empty hostIP means 0.0.0.0, as ``HostPortInfo`` sanitizes them.
    """
    spec = pod.get("spec") or {}
    owner = f"pod {namespaced_key(pod)}"
    containers = [
        (f"spec.initContainers[{i}]", c)
        for i, c in enumerate(spec.get("initContainers") or [])
        if c.get("restartPolicy") == "Always"
    ]
    containers += [(f"spec.containers[{i}]", c) for i, c in enumerate(spec.get("containers") or [])]
    out: set[HostPort] = set()
    for path, c in containers:
        for j, p in enumerate(c.get("ports") or []):
            raw = p.get("hostPort") or 0
            if isinstance(raw, bool) or not isinstance(raw, int | str):
                raise PredicateError(f"{owner}: {path}.ports[{j}].hostPort: must be an integer, got {raw!r}")
            try:
                port = int(raw)
            except ValueError:
                raise PredicateError(
                    f"{owner}: {path}.ports[{j}].hostPort: must be an integer, got {raw!r}"
                ) from None
            if port > 0:
                out.add((str(p.get("protocol") or "TCP"), str(p.get("hostIP") or BIND_ALL_HOST_IP), port))
    return frozenset(out)


def host_ports_conflict(
    want: frozenset[HostPort] | set[HostPort],
    used: frozenset[HostPort] | set[HostPort],
) -> bool:
    """kube-scheduler NodePorts: a wanted port conflicts with a used one of the same
    protocol and port when either side binds 0.0.0.0 or both bind the same IP."""
    if not want or not used:
        return False
    used_any_ip = {(proto, port) for proto, _ip, port in used}
    used_all = {(proto, port) for proto, ip, port in used if ip == BIND_ALL_HOST_IP}
    for proto, ip, port in want:
        if ip == BIND_ALL_HOST_IP:
            if (proto, port) in used_any_ip:
                return True
        elif (proto, port) in used_all or (proto, ip, port) in used:
            return True
    return False


class NodePorts(LocalFilter):
    """Host ports in use per node (the state: one set per node, replaced, never mutated, so the
    snapshot's sets stay intact)."""

    name = "NodePorts"

    def applies(self, state: list[set[HostPort]], pod: CompiledPod) -> bool:
        """Only pods that ask for a host port."""
        return bool(pod.host_ports)

    def most_per_node(self, pod: CompiledPod) -> int:
        """One: a second pod asking for the same host ports would conflict with the first."""
        return 1

    def cycle_state(self, snapshot: CycleInput) -> list[set[HostPort]] | None:
        """The ports the snapshot's pods hold, per node (a shallow copy); None when no pod of
        the cycle asks for a host port."""
        if not any(p.host_ports for p in snapshot.pending):
            return None
        return list(snapshot.node_ports)

    def cap_counts(self, state: list[set[HostPort]], pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """At most one such pod per node (:meth:`most_per_node`), none where a port is taken."""
        np.minimum(counts, self.most_per_node(pod), out=counts)
        want = pod.host_ports
        for k, n in enumerate(nodes.tolist()):
            if counts[k] and state[n] and host_ports_conflict(want, state[n]):
                counts[k] = 0

    def node_reasons(self, state: list[set[HostPort]], pod: CompiledPod, node: int) -> tuple[str, ...]:
        """The host-port conflict, where a wanted port is taken."""
        return (REASON_HOST_PORTS,) if host_ports_conflict(pod.host_ports, state[node]) else ()

    def reserve(self, state: list[set[HostPort]], pod: CompiledPod, nodes: I64) -> None:
        """The pod's ports are taken on ``nodes``."""
        if pod.host_ports:
            for n in nodes.tolist():
                state[n] = state[n] | set(pod.host_ports)

    def unreserve(self, state: list[set[HostPort]], pod: CompiledPod, nodes: I64) -> None:
        """The pod's ports are free again on ``nodes``."""
        if pod.host_ports:
            for n in nodes.tolist():
                state[n] = state[n] - set(pod.host_ports)


FILTER = NodePorts()
