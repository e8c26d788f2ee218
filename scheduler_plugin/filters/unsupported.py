"""What no filter judges yet, so the scheduler reports the pod instead of placing it somewhere
kube-scheduler would refuse. Nothing today: every pod constraint kube-scheduler v1.34 filters on
has its filter (``spec.resourceClaims`` is DynamicResources', :mod:`.dynamic_resources`).

A constraint that comes to need reporting is listed by :func:`unsupported_constraints`, and the
filter that comes to judge it takes its line out again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def unsupported_constraints(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The pod's constraints no filter judges, in the words the scheduler reports them."""
    return ()
