"""Label selector and node-selector-term matching, as apimachinery evaluates them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hyperplace.api.common import LabelSelector

# Kubernetes qualified-name and label-value syntax.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
QUALIFIED_NAME = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
LABEL_VALUE = re.compile(rf"^({_NAME})?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class SelectorError(ValueError):
    """A selector that cannot be evaluated (unknown operator, missing values)."""


_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def go_int64(text: str) -> int:
    """``strconv.ParseInt(text, 10, 64)``, which Gt and Lt compare with: an optional sign and
    decimal digits within int64. Python's ``int`` would also take ``3_0`` and any size, both
    valid label values that kube-scheduler reads as no number; ValueError for them here."""
    if not _GO_INT.fullmatch(text):
        raise ValueError(f"invalid syntax: {text!r}")
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"value out of range: {text!r}")
    return value


def _as_dict(selector: LabelSelector | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if selector is None:
        return None
    if isinstance(selector, LabelSelector):
        # Hot path (labelMatch over thousands of nodes): read the fields, do not dump the model.
        return {
            "matchLabels": selector.match_labels,
            "matchExpressions": [
                {"key": r.key, "operator": r.operator, "values": r.values}
                for r in selector.match_expressions or []
            ],
        }
    return selector


def selector_is_empty(selector: LabelSelector | Mapping[str, Any] | None) -> bool:
    """True when the selector has neither matchLabels nor matchExpressions."""
    sel = _as_dict(selector)
    return not sel or (not sel.get("matchLabels") and not sel.get("matchExpressions"))


def _requirement_matches(labels: Mapping[str, str], key: str, op: str, values: list[str]) -> bool:
    if op == "In":
        if not values:
            raise SelectorError(f"values: Required value: must be specified when `operator` is 'In' ({key})")
        return key in labels and labels[key] in values
    if op == "NotIn":
        if not values:
            raise SelectorError(
                f"values: Required value: must be specified when `operator` is 'NotIn' ({key})"
            )
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise SelectorError(f"{op!r} is not a valid label selector operator")


def label_selector_matches(
    selector: LabelSelector | Mapping[str, Any] | None, labels: Mapping[str, str] | None
) -> bool:
    """metav1.LabelSelector semantics: an empty (but present) selector matches everything.

    Raises SelectorError for a selector Kubernetes would refuse to convert.
    """
    sel = _as_dict(selector)
    labels = labels or {}
    if sel is None:
        return True
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for req in sel.get("matchExpressions") or []:
        if not _requirement_matches(
            labels, req.get("key", ""), req.get("operator", ""), list(req.get("values") or [])
        ):
            return False
    return True


def node_selector_requirement_matches(
    req: Mapping[str, Any], labels: Mapping[str, str], fields: Mapping[str, str] | None = None
) -> bool:
    """One NodeSelectorRequirement (matchExpressions or matchFields entry).

    Operators In, NotIn, Exists, DoesNotExist, Gt, Lt (Gt/Lt compare integers).
    ``fields`` holds the node fields matchFields may use (``metadata.name``).
    """
    source = fields if fields is not None else labels
    key = req.get("key", "")
    op = req.get("operator", "")
    values = list(req.get("values") or [])
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise SelectorError(f"{op} needs exactly one value ({key})")
        try:
            want = go_int64(str(values[0]))
        except ValueError as exc:
            raise SelectorError(f"{op} value must be an integer ({key}={values[0]!r})") from exc
        if key not in source:
            return False
        try:
            have = go_int64(source[key])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return _requirement_matches(source, key, op, values)


def node_selector_term_matches(term: Mapping[str, Any], node_name: str, labels: Mapping[str, str]) -> bool:
    """A NodeSelectorTerm: all matchExpressions and all matchFields must hold.

    An empty term matches nothing (as in kube-scheduler).
    """
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    node_fields = {"metadata.name": node_name}
    for req in exprs:
        if not node_selector_requirement_matches(req, labels):
            return False
    for req in fields:
        if req.get("key") != "metadata.name":
            raise SelectorError(f"matchFields supports only metadata.name, got {req.get('key')!r}")
        if not node_selector_requirement_matches(req, labels, node_fields):
            return False
    return True
