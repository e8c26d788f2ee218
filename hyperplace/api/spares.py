"""Hot spares per domain: the annotations an operator puts on a HyperNode.

* ``hyperplace.io/spare-nodes: "N"`` keeps N nodes free in every leaf at or under the HyperNode
  (a leaf: a HyperNode of the lowest tier, whose members are nodes). A leaf takes the value of
  the nearest annotated HyperNode at or above it, so a spine annotated ``"1"`` and one of its
  leaves annotated ``"2"`` keep two there and one in each other leaf; ``"0"`` keeps none.
* ``hyperplace.io/spare-nodes-lend: "preemptable,time-limited"`` lends the spares, until a
  replacement needs them, to jobs whose every pod is marked ``volcano.sh/preemptable: "true"``
  (the repair step evicts them) or sets ``activeDeadlineSeconds`` (they end by themselves).
  Default: nothing is lent.
* ``hyperplace.io/spare-nodes-queues: "training,inference"``: only gangs of these queues may
  use the spares (default: any queue).

Only the replacements of a gang that ran and lost pods (a node failed under it) use spare nodes,
so the gang is whole again in its own leaf without evicting anyone. The pure rules live here:
the webhook refuses a bad value at admission naming the field, and the scheduler, meeting one
anyway (an object admitted before the webhook), keeps no spares for that HyperNode and says so
in its notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SPARE_NODES_ANNOTATION = "hyperplace.io/spare-nodes"
SPARE_LEND_ANNOTATION = "hyperplace.io/spare-nodes-lend"
SPARE_QUEUES_ANNOTATION = "hyperplace.io/spare-nodes-queues"
SPARE_ANNOTATIONS = (SPARE_NODES_ANNOTATION, SPARE_LEND_ANNOTATION, SPARE_QUEUES_ANNOTATION)
LEND_PREEMPTABLE = "preemptable"
LEND_TIME_LIMITED = "time-limited"
LEND_KINDS = (LEND_PREEMPTABLE, LEND_TIME_LIMITED)
# More than any leaf has: a typo such as "100" would otherwise fence a whole leaf off.
MAX_SPARES = 64


class SpareError(ValueError):
    """A spare annotation that cannot be read; the message starts with the field path."""


@dataclass(frozen=True)
class SparePolicy:
    """What one HyperNode's annotations ask for its leaves."""

    count: int
    lend: frozenset[str] = frozenset()
    queues: frozenset[str] | None = None  # None: any queue


def _field(key: str) -> str:
    return f"metadata.annotations[{key}]"


def _names(text: str, key: str) -> list[str]:
    items = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in items):
        raise SpareError(f'{_field(key)}: "{text}" must be a comma-separated list without empty items')
    return items


def spare_policy(annotations: Mapping[str, str] | None) -> SparePolicy | None:
    """The spare policy ``annotations`` ask for, or None when they name no spare count.

    Raises :class:`SpareError` naming the field for a value that cannot be read, and for
    ``-lend``/``-queues`` without a count beside them."""
    ann = annotations or {}
    raw = ann.get(SPARE_NODES_ANNOTATION)
    if raw is None:
        for key in (SPARE_LEND_ANNOTATION, SPARE_QUEUES_ANNOTATION):
            if key in ann:
                raise SpareError(f"{_field(key)}: set without {SPARE_NODES_ANNOTATION} on the same HyperNode")
        return None
    text = str(raw).strip()
    if not text.isdigit() or int(text) > MAX_SPARES:
        raise SpareError(
            f'{_field(SPARE_NODES_ANNOTATION)}: "{raw}" must be a whole number from 0 to {MAX_SPARES}'
        )
    lend: frozenset[str] = frozenset()
    if SPARE_LEND_ANNOTATION in ann:
        kinds = _names(str(ann[SPARE_LEND_ANNOTATION]), SPARE_LEND_ANNOTATION)
        bad = [k for k in kinds if k not in LEND_KINDS]
        if bad:
            raise SpareError(
                f'{_field(SPARE_LEND_ANNOTATION)}: unknown "{bad[0]}"; expected any of {", ".join(LEND_KINDS)}'
            )
        lend = frozenset(kinds)
    queues = None
    if SPARE_QUEUES_ANNOTATION in ann:
        queues = frozenset(_names(str(ann[SPARE_QUEUES_ANNOTATION]), SPARE_QUEUES_ANNOTATION))
    return SparePolicy(int(text), lend, queues)


def spare_problems(annotations: Mapping[str, str] | None) -> list[str]:
    """Refusal messages (each starting with the field path) for the spare annotations."""
    try:
        spare_policy(annotations)
    except SpareError as err:
        return [str(err)]
    return []


def spare_marks(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """The spare annotations among ``annotations`` (what the scheduler keeps of a HyperNode's)."""
    ann = annotations or {}
    return {k: str(ann[k]) for k in SPARE_ANNOTATIONS if k in ann}
