"""Kubernetes helpers without I/O: quantities, label/node selectors, object keys."""

from .labels import (
    SelectorError,
    label_selector_matches,
    node_selector_term_matches,
    selector_is_empty,
)
from .quantity import QuantityError, format_milli, milli_value, parse_quantity

__all__ = [
    "QuantityError",
    "SelectorError",
    "format_milli",
    "label_selector_matches",
    "milli_value",
    "node_selector_term_matches",
    "parse_quantity",
    "selector_is_empty",
]
