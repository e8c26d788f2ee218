"""kube-scheduler's NodeAffinity plugin: its filter, ``spec.nodeSelector`` (every label equal)
and required node affinity (any NodeSelectorTerm); its score, the weights of the preferred
node affinity terms a node matches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.kube import SelectorError
from hyperplace.kube.labels import node_selector_requirement_matches

from .nodes import NodeStatic
from .plugin import CompiledPod

REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def compile_node_affinity(
    spec: Mapping[str, Any],
) -> tuple[tuple[tuple[str, str], ...], tuple[Mapping[str, Any], ...] | None]:
    """(nodeSelector sorted, required NodeSelectorTerms or None when there is no required
    node affinity)."""
    node_selector = tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items()))
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    # A present required selector with no terms matches no node (NodeSelector.Match).
    terms = None if required is None else tuple(required.get("nodeSelectorTerms") or [])
    return node_selector, terms


def compile_preferred_node_affinity(spec: Mapping[str, Any]) -> tuple[tuple[int, Mapping[str, Any]], ...]:
    """``preferredDuringSchedulingIgnoredDuringExecution`` as (weight, NodeSelectorTerm), the
    terms of weight 0 left out as kube-scheduler leaves them out."""
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    out: list[tuple[int, Mapping[str, Any]]] = []
    for t in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        if not isinstance(t, Mapping):
            continue  # the API server refuses such pods
        weight = t.get("weight")
        if isinstance(weight, int) and not isinstance(weight, bool) and weight:
            out.append((weight, t.get("preference") or {}))
    return tuple(out)


def preferred_node_affinity_score(terms: tuple[tuple[int, Mapping[str, Any]], ...], node: NodeStatic) -> int:
    """NodeAffinity's Score: the sum of the weights of the preferred terms the node matches
    (before NormalizeScore)."""
    return sum(w for w, t in terms if node_selector_term_matches_node(t, node.name, node.labels))


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


def matches_node_affinity(pod: CompiledPod, node: NodeStatic) -> bool:
    """nodeSelector (every label equal) and required node affinity (any term)."""
    for k, v in pod.node_selector:
        if node.labels.get(k) != v:
            return False
    if pod.required_terms is None:
        return True
    return any(node_selector_term_matches_node(t, node.name, node.labels) for t in pod.required_terms)


class NodeAffinity:
    """Refuses a node the pod's nodeSelector or required node affinity does not match."""

    name = "NodeAffinity"

    def filter(self, pod: CompiledPod, node: NodeStatic) -> str | None:
        """None when the node matches."""
        return None if matches_node_affinity(pod, node) else REASON_NODE_AFFINITY


FILTER = NodeAffinity()
