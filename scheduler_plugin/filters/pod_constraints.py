"""A pod's node-independent constraints, compiled once per pod by each filter's PreFilter, and
the walk of the static filters over nodes.

``spec.nodeName`` is the caller's business, and ``spec.schedulingGates`` only sets
:attr:`PodConstraints.gated`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .dra import NO_CLAIMS, PodClaims, compile_pod_claims
from .node_affinity import compile_node_affinity, compile_preferred_node_affinity
from .node_ports import pod_host_ports
from .nodes import NodeStatic
from .plugin import HostPort, PredicateError, Toleration, freeze
from .pod_terms import NO_TERMS, PodTerms, compile_pod_terms
from .registry import STATIC_FILTERS
from .taint_toleration import compile_tolerations
from .unsupported import unsupported_constraints
from .volumes import NO_VOLUMES, PodVolumes, compile_pod_volumes


@dataclass(frozen=True)
class PodConstraints:
    """A pod's node-independent scheduling constraints, compiled once per pod.

    ``signature`` covers exactly what :meth:`node_reason` looks at, so pods with equal
    signatures share one :func:`static_feasibility_mask`. Host ports, volumes and resources
    are not in it: they depend on what already runs on a node and on the storage objects (the
    shape signature adds them, :meth:`PodVolumes.signature` for the claims).
    """

    signature: tuple[Any, ...]
    unsupported: tuple[str, ...]
    host_ports: frozenset[HostPort]
    gated: bool = False
    node_selector: tuple[tuple[str, str], ...] = ()
    # None: no required node affinity; otherwise the NodeSelectorTerms (ORed).
    required_terms: tuple[Mapping[str, Any], ...] | None = field(default=None, compare=False)
    tolerations: tuple[Toleration, ...] = ()  # (key, operator, value, effect)
    # For InterPodAffinity and PodTopologySpread: the pod's namespace, labels and terms (not in
    # the static signature: the shape's signature adds them, see cache.records).
    namespace: str = field(default="default", compare=False)
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)
    terms: PodTerms = field(default=NO_TERMS, compare=False)
    # Why the pod's terms cannot be evaluated (a malformed selector, naming the field): the pod
    # waits with this message instead of being placed against half its rules.
    error: str | None = None
    volumes: PodVolumes = NO_VOLUMES  # the claims the volume filters judge
    claims: PodClaims = NO_CLAIMS  # the ResourceClaims DynamicResources judges
    # Preferred node affinity (weight, NodeSelectorTerm): NodeAffinity's score only, so kept
    # out of the static signature (the shape's signature adds it, see cache.records).
    preferred_node_terms: tuple[tuple[int, Mapping[str, Any]], ...] = field(default=(), compare=False)

    @property
    def score_signature(self) -> tuple[Any, ...]:
        """What the node scores of a pod read beyond the static signature and its terms."""
        return freeze(list(self.preferred_node_terms)) if self.preferred_node_terms else ()

    def node_reason(self, node: NodeStatic) -> str | None:
        """None if the node passes every static filter, else the first refusing filter's
        reason, in kube-scheduler's filter order (:mod:`.registry`)."""
        for f in STATIC_FILTERS:
            reason = f.filter(self, node)
            if reason is not None:
                return reason
        return None


def compile_pod_constraints(pod: Mapping[str, Any]) -> PodConstraints:
    """Compile the pod's static constraints (what each filter precomputes of it)."""
    spec = pod.get("spec") or {}
    node_selector, terms = compile_node_affinity(spec)
    tolerations = compile_tolerations(spec)
    meta = pod.get("metadata") or {}
    error = None
    try:
        pod_terms = compile_pod_terms(pod)
    except PredicateError as exc:
        pod_terms, error = NO_TERMS, str(exc)
    signature = (node_selector, None if terms is None else freeze(list(terms)), tolerations)
    return PodConstraints(
        signature=signature,
        unsupported=unsupported_constraints(spec),
        host_ports=pod_host_ports(pod),
        gated=bool(spec.get("schedulingGates")),
        node_selector=node_selector,
        required_terms=terms,
        tolerations=tolerations,
        namespace=str(meta.get("namespace") or "default"),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        terms=pod_terms,
        error=error,
        volumes=compile_pod_volumes(pod),
        claims=compile_pod_claims(pod),
        preferred_node_terms=compile_preferred_node_affinity(spec),
    )


def static_feasibility_mask(c: PodConstraints, nodes: Sequence[NodeStatic]) -> npt.NDArray[np.bool_]:
    """``bool[len(nodes)]``: True where :meth:`PodConstraints.node_reason` is None."""
    return np.fromiter((c.node_reason(n) is None for n in nodes), dtype=bool, count=len(nodes))
