"""Queue status as Volcano's queue controller keeps it: pure, no I/O.

Volcano splits a Queue's status between two writers: the controller owns ``state`` and the
PodGroup counts per phase (``pending``, ``running``, ``inqueue``, ``unknown``, ``completed``);
the scheduler owns ``allocated``. This module computes the controller's part.

State (Volcano's queue state machine for a sync): a queue with no state, or Open, is Open; a
Closing queue becomes Closed once no PodGroup names it; Closed stays Closed; anything else is
Unknown. Volcano's close command (``vcctl queue operate``, a ``bus.volcano.sh`` Command) sets
Closing while PodGroups remain; hyperplace serves no Commands: a user writes the state through
the status subresource (``Closing`` to drain, ``Closed`` to shut at once) and the controller
carries Closing on to Closed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hyperplace.api.constants import DEFAULT_QUEUE

OWNED = ("state", "pending", "running", "inqueue", "unknown", "completed")
PHASE_COUNT = {
    "Pending": "pending",
    "Running": "running",
    "Unknown": "unknown",
    "Inqueue": "inqueue",
    "Completed": "completed",
}


def podgroup_queue(pg: Mapping[str, Any]) -> str:
    """The queue a PodGroup names (``default`` when unset)."""
    return str((pg.get("spec") or {}).get("queue") or DEFAULT_QUEUE)


def next_state(current: str | None, podgroups: int) -> str:
    """Volcano's state machine for a sync (no open/close command): unset or Open stays Open,
    Closed stays Closed, Closing becomes Closed once no PodGroup names the queue."""
    if not current or current == "Open":
        return "Open"
    if current == "Closed":
        return "Closed"
    if current == "Closing":
        return "Closed" if podgroups == 0 else "Closing"
    return "Unknown"


def queue_status(queue: Mapping[str, Any], podgroups: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The controller's part of ``queue``'s status from the PodGroups that name it."""
    counts = dict.fromkeys(PHASE_COUNT.values(), 0)
    n = 0
    for pg in podgroups:
        n += 1
        phase = (pg.get("status") or {}).get("phase")
        key = PHASE_COUNT.get(str(phase)) if phase else None
        if key is not None:
            counts[key] += 1
    current = (queue.get("status") or {}).get("state")
    return {"state": next_state(current, n), **counts}


def owned_part(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The controller's fields of a status (the scheduler's ``allocated`` left out)."""
    status = status or {}
    return {k: status[k] for k in OWNED if k in status}
