"""Per-pod static predicates, evaluated the way kube-scheduler's filter plugins do.

What is evaluated here (kube-scheduler plugin in brackets):

* resource requests (NodeResourcesFit): :func:`insufficient_resources`, over the requests of
  :func:`hyperplace.kube.requests.pod_requests`;
* ``spec.unschedulable`` nodes (NodeUnschedulable), unless the pod tolerates
  ``node.kubernetes.io/unschedulable:NoSchedule``;
* taints with effect NoSchedule or NoExecute (TaintToleration); PreferNoSchedule only
  affects scoring and is ignored;
* ``spec.nodeSelector`` and required node affinity (NodeAffinity); *preferred* node
  affinity only affects scoring and is ignored for feasibility;
* host ports (NodePorts): :func:`host_ports_conflict`, which depends on the pods already on
  a node and is therefore not part of the static mask;
* nodes whose Ready condition is False or Unknown. kube-scheduler relies on the
  ``node.kubernetes.io/not-ready`` taint for this; Volcano's cache drops such nodes from
  the session. We report them as "node(s) were not ready".

What is *not* evaluated is listed in :attr:`PodConstraints.unsupported` so the scheduler can
report the pod instead of placing it somewhere kube-scheduler would refuse:

* ``podAffinity`` / ``podAntiAffinity`` with required terms (preferred terms only score);
* ``topologySpreadConstraints`` with ``whenUnsatisfiable: DoNotSchedule`` (ScheduleAnyway
  only scores);
* volumes backed by PersistentVolumeClaims (``persistentVolumeClaim`` and generic
  ``ephemeral`` volumes): VolumeBinding/VolumeZone need PV and StorageClass objects that
  are not in the snapshot;
* ``spec.resourceClaims`` (dynamic resource allocation).

``spec.nodeName`` is the caller's business, and ``spec.schedulingGates`` only sets
:attr:`PodConstraints.gated`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.kube import SelectorError
from hyperplace.kube.labels import node_selector_requirement_matches
from hyperplace.kube.objects import namespaced_key
from hyperplace.kube.requests import PODS, resource_list

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
BIND_ALL_HOST_IP = "0.0.0.0"

# kube-scheduler's reason strings (pkg/scheduler/framework/plugins/*), so that users see
# the messages they know from `kubectl describe pod`.
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NOT_READY = "node(s) were not ready"
REASON_HOST_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS = "Too many pods"

# Resources kube-scheduler always checks first, in this order; the rest follow sorted.
_FIRST_RESOURCES = ("cpu", "memory", "ephemeral-storage")
# Taint effects that keep a pod off a node (PreferNoSchedule only lowers its score).
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")


class PredicateError(ValueError):
    """A pod the predicates cannot evaluate (a host port that is no port); the message names
    the pod and the field."""


# ---------------------------------------------------------------------------------------
# Resource requests


def insufficient_resources(requests: Mapping[str, int], free: Mapping[str, int]) -> list[str]:
    """NodeResourcesFit reasons: ``"Too many pods"``, ``"Insufficient cpu"``, ...

    ``free`` is allocatable minus what is already requested on the node, in milli-units
    (``free["pods"]`` is the number of free pod slots x 1000). A zero request never fails,
    so a node without a GPU still fits a pod that asks for none. Order: pods, cpu, memory,
    ephemeral-storage, then the other resources sorted by name.
    """
    reasons: list[str] = []
    pods = requests.get(PODS, 0)
    if pods > 0 and pods > free.get(PODS, 0):
        reasons.append(REASON_TOO_MANY_PODS)
    others = sorted(r for r in requests if r != PODS and r not in _FIRST_RESOURCES)
    for name in (*_FIRST_RESOURCES, *others):
        want = requests.get(name, 0)
        if want > 0 and want > free.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


# ---------------------------------------------------------------------------------------
# Nodes


@dataclass(frozen=True)
class NodeStatic:
    """What the static predicates need from a Node. Hashes by name (the mappings are dicts).

    ``allocatable`` holds milli-units; a node that reports no ``pods`` has no pod slots,
    as in kube-scheduler.
    """

    name: str
    labels: Mapping[str, str] = field(hash=False)
    taints: tuple[dict[str, str], ...] = field(hash=False)  # each {key, value, effect}
    unschedulable: bool
    ready: bool
    allocatable: Mapping[str, int] = field(hash=False)  # milli-units, includes "pods"


def node_static_from_dict(node: Mapping[str, Any]) -> NodeStatic:
    """A NodeStatic from a Node in wire form.

    Allocatable comes from ``status.allocatable`` (falling back to ``status.capacity`` when
    allocatable is absent). A node is ready unless it has a Ready condition whose status
    is not "True" (False or Unknown); a node without conditions counts as ready.
    """
    meta = node.get("metadata") or {}
    name = str(meta.get("name", ""))
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    owner = f"node {name}"
    if status.get("allocatable"):
        alloc = resource_list(owner, "status.allocatable", status.get("allocatable"))
    else:
        alloc = resource_list(owner, "status.capacity", status.get("capacity"))
    taints = tuple(
        {
            "key": str(t.get("key", "")),
            "value": str(t.get("value") or ""),
            "effect": str(t.get("effect", "")),
        }
        for t in spec.get("taints") or []
    )
    ready = True
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            ready = False
    return NodeStatic(
        name=name,
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        taints=taints,
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
        allocatable=alloc,
    )


# ---------------------------------------------------------------------------------------
# Taints and tolerations


def _canonical_toleration(t: Mapping[str, Any]) -> tuple[str, str, str, str]:
    # tolerationSeconds is dropped on purpose: it only delays NoExecute eviction.
    return (
        str(t.get("key") or ""),
        str(t.get("operator") or "Equal"),
        str(t.get("value") or ""),
        str(t.get("effect") or ""),
    )


def _tolerates(tol: tuple[str, str, str, str], key: str, value: str, effect: str) -> bool:
    """``v1.Toleration.ToleratesTaint`` on a canonical ``(key, operator, value, effect)``."""
    t_key, t_op, t_value, t_effect = tol
    if t_effect and t_effect != effect:
        return False
    if t_key and t_key != key:
        return False
    if t_op == "Exists":
        return True
    if t_op == "Equal":
        return t_value == value
    return False  # an operator kube does not know tolerates nothing


def toleration_tolerates_taint(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``v1.Toleration.ToleratesTaint``: empty effect/key are wildcards, operator Exists
    ignores the value, empty operator means Equal, an unknown operator tolerates nothing.
    tolerationSeconds only matters for eviction, never for scheduling."""
    return _tolerates(
        _canonical_toleration(toleration),
        str(taint.get("key") or ""),
        str(taint.get("value") or ""),
        str(taint.get("effect") or ""),
    )


def _first_untolerated(
    taints: Iterable[Mapping[str, str]], tolerations: tuple[tuple[str, str, str, str], ...]
) -> Mapping[str, str] | None:
    for taint in taints:
        effect = taint.get("effect", "")
        if effect not in SCHEDULING_EFFECTS:
            continue  # PreferNoSchedule only lowers the score
        key, value = taint.get("key", ""), taint.get("value", "")
        if not any(_tolerates(t, key, value, effect) for t in tolerations):
            return taint
    return None


def taint_reason(taint: Mapping[str, Any]) -> str:
    """kube-scheduler's TaintToleration message for one taint."""
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value') or ''}}}"


# ---------------------------------------------------------------------------------------
# Node affinity


def _match_fields_requirement(req: Mapping[str, Any], node_name: str) -> bool:
    """One matchFields entry, as ``nodeSelectorRequirementsAsFieldSelector`` parses it.

    Only In/NotIn with exactly one value are valid; kube treats an invalid term as one
    that matches no node (the error is only logged), so we do too.
    """
    values = list(req.get("values") or [])
    if req.get("key") != "metadata.name" or len(values) != 1:
        raise SelectorError(f"invalid matchFields requirement {dict(req)!r}")
    op = req.get("operator")
    if op == "In":
        return node_name == values[0]
    if op == "NotIn":
        return node_name != values[0]
    raise SelectorError(f"matchFields operator {op!r} is not supported")


def node_selector_term_matches_node(
    term: Mapping[str, Any], node_name: str, labels: Mapping[str, str]
) -> bool:
    """A required NodeSelectorTerm: expressions and fields ANDed; an empty or invalid term
    matches nothing (kube's LazyErrorNodeSelector skips terms that fail to parse)."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    try:
        return all(node_selector_requirement_matches(r, labels) for r in exprs) and all(
            _match_fields_requirement(r, node_name) for r in fields
        )
    except SelectorError:
        return False


# ---------------------------------------------------------------------------------------
# Host ports


def pod_host_ports(pod: Mapping[str, Any]) -> frozenset[tuple[str, str, int]]:
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
    out: set[tuple[str, str, int]] = set()
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
    want: frozenset[tuple[str, str, int]] | set[tuple[str, str, int]],
    used: frozenset[tuple[str, str, int]] | set[tuple[str, str, int]],
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


# ---------------------------------------------------------------------------------------
# Per-pod compiled constraints


def _freeze(value: Any) -> Any:
    """A hashable, order-preserving copy of a JSON-like value (maps sorted by key)."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass(frozen=True)
class PodConstraints:
    """A pod's node-independent scheduling constraints, compiled once per pod.

    ``signature`` covers exactly what :meth:`node_reason` looks at, so pods with equal
    signatures share one :func:`static_feasibility_mask`. Host ports and resources are
    not in it: they depend on what already runs on a node.
    """

    signature: tuple[Any, ...]
    unsupported: tuple[str, ...]
    host_ports: frozenset[tuple[str, str, int]]
    gated: bool = False
    node_selector: tuple[tuple[str, str], ...] = ()
    # None: no required node affinity; otherwise the NodeSelectorTerms (ORed).
    required_terms: tuple[Mapping[str, Any], ...] | None = field(default=None, compare=False)
    tolerations: tuple[tuple[str, str, str, str], ...] = ()  # (key, operator, value, effect)

    def node_reason(self, node: NodeStatic) -> str | None:
        """None if the node passes every static predicate, else kube-scheduler's reason.

        Checked in kube-scheduler's filter order (after a readiness check), reporting the
        first failure: not ready, unschedulable, untolerated taint, node affinity/selector.
        """
        if not node.ready:
            return REASON_NOT_READY
        if node.unschedulable and not any(
            _tolerates(t, UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule") for t in self.tolerations
        ):
            return REASON_UNSCHEDULABLE
        taint = _first_untolerated(node.taints, self.tolerations)
        if taint is not None:
            return taint_reason(taint)
        if not self.matches_node_affinity(node):
            return REASON_NODE_AFFINITY
        return None

    def matches_node_affinity(self, node: NodeStatic) -> bool:
        """nodeSelector (every label equal) and required node affinity (any term)."""
        for k, v in self.node_selector:
            if node.labels.get(k) != v:
                return False
        if self.required_terms is None:
            return True
        return any(node_selector_term_matches_node(t, node.name, node.labels) for t in self.required_terms)


def _unsupported(spec: Mapping[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution"):
            out.append(kind)
    if any(
        (c.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule"
        for c in spec.get("topologySpreadConstraints") or []
    ):
        out.append("topologySpreadConstraints")
    if any(v.get("persistentVolumeClaim") or v.get("ephemeral") for v in spec.get("volumes") or []):
        out.append("volumes with PVC")
    if spec.get("resourceClaims"):
        out.append("resourceClaims")
    return tuple(out)


def compile_pod_constraints(pod: Mapping[str, Any]) -> PodConstraints:
    """Compile the pod's static constraints (see the module docstring for what is covered)."""
    spec = pod.get("spec") or {}
    node_selector = tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items()))
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    # A present required selector with no terms matches no node (NodeSelector.Match).
    terms = None if required is None else tuple(required.get("nodeSelectorTerms") or [])
    # Duplicates and order of tolerations do not change the outcome; sorting lets more
    # pods share a signature.
    tolerations = tuple(sorted({_canonical_toleration(t) for t in spec.get("tolerations") or []}))
    signature = (node_selector, None if terms is None else _freeze(list(terms)), tolerations)
    return PodConstraints(
        signature=signature,
        unsupported=_unsupported(spec),
        host_ports=pod_host_ports(pod),
        gated=bool(spec.get("schedulingGates")),
        node_selector=node_selector,
        required_terms=terms,
        tolerations=tolerations,
    )


def static_feasibility_mask(c: PodConstraints, nodes: Sequence[NodeStatic]) -> npt.NDArray[np.bool_]:
    """``bool[len(nodes)]``: True where :meth:`PodConstraints.node_reason` is None."""
    return np.fromiter((c.node_reason(n) is None for n in nodes), dtype=bool, count=len(nodes))
