"""What no filter judges yet, so the scheduler reports the pod instead of placing it somewhere
kube-scheduler would refuse:

* ``spec.resourceClaims`` (dynamic resource allocation).

A filter that comes to judge one of these takes its line out of :func:`unsupported_constraints`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def unsupported_constraints(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The pod's constraints no filter judges, in the words the scheduler reports them."""
    out: list[str] = []
    if spec.get("resourceClaims"):
        out.append("resourceClaims")
    return tuple(out)
