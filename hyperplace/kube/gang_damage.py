"""When a gang that ran stopped being whole: the one rule the scheduler (whose hold and
relaxation clocks restart then, and which repairs such a gang in its domain) and the Job
controller (which restarts it elsewhere after a while) both read from the pods.

A gang's minimum is bound only once all its pods exist, so the pods of a gang that was never
whole were all created before any of them was bound, and no later than their siblings. A pending
pod created after the first bind of the bound ones *and* after every bound pod was made is a
replacement (a failed pod made again, a pod lost with its node): the gang stopped being whole
when the first replacement was made. Timestamps are whole seconds and a bind's time may come
from another clock than a creation's, hence both conditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hyperplace.api.times import parse_rfc3339


def replacements_since(
    bound: Iterable[tuple[float | None, float | None]], pending_created: Iterable[float | None]
) -> float | None:
    """Epoch seconds when the first replacement was made, or None when no pending pod is one.

    ``bound``: (scheduled or started at, created at) of each bound pod of the gang;
    ``pending_created``: the creation time of each of its pending pods."""
    scheduled: list[float] = []
    created: list[float] = []
    for at, made in bound:
        if at is not None:
            scheduled.append(at)
        if made is not None:
            created.append(made)
    if not scheduled:
        return None
    after = max(min(scheduled), max(created, default=0.0))
    made_later = [c for c in pending_created if c is not None and c > after]
    return min(made_later) if made_later else None


def running_since(pod: Mapping[str, Any]) -> float | None:
    """Since when a pod runs, as Volcano's cdp plugin counts it: the last transition of its
    ``PodScheduled`` condition when True (the apiserver sets it on binding), else
    ``status.startTime``; None while it is not Running."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return None
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            got = parse_rfc3339(c.get("lastTransitionTime"))
            if got is not None:
                return got
            break
    return parse_rfc3339(status.get("startTime"))
