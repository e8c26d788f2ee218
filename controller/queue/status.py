"""Queue status as Volcano's queue controller keeps it: pure, no I/O.

Volcano splits a Queue's status between two writers: the controller owns ``state`` and the
PodGroup counts per phase (``pending``, ``running``, ``inqueue``, ``unknown``, ``completed``);
the scheduler owns ``allocated``. This module computes the controller's part.

State (Volcano's queue state machine for a sync): a queue with no state, or Open, is Open; a
Closing queue becomes Closed once no PodGroup names it; Closed stays Closed; anything else is
Unknown. A user opens or closes a queue as in Volcano, with ``vcctl queue operate --name q
--action open|close``, which creates a ``bus.volcano.sh`` Command (see
:mod:`controller.queue.command`); the action then decides the state once
(:func:`state_after`): OpenQueue opens, CloseQueue sets Closing while PodGroups still name the
queue (their jobs keep running; the Job webhook refuses new ones) and Closed when none do, and
the sync carries Closing on to Closed. Writing ``status.state`` through the status subresource
still works too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hyperplace.api.command import CLOSE_QUEUE, OPEN_QUEUE
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


def state_after(current: str | None, action: str, podgroups: int) -> str:
    """The state an OpenQueue or CloseQueue command leaves (Volcano's state/*.go): open from
    any state; close to Closing while ``podgroups`` still name the queue, else Closed (a Closed
    queue stays Closed)."""
    if action == OPEN_QUEUE:
        return "Open"
    if action == CLOSE_QUEUE:
        if current == "Closed":
            return "Closed"
        return "Closed" if podgroups == 0 else "Closing"
    raise ValueError(f"unknown queue action {action!r}")


def queue_status(
    queue: Mapping[str, Any], podgroups: Iterable[Mapping[str, Any]], action: str | None = None
) -> dict[str, Any]:
    """The controller's part of ``queue``'s status from the PodGroups that name it, with
    ``action`` (OpenQueue/CloseQueue, from a Command) applied when given."""
    counts = dict.fromkeys(PHASE_COUNT.values(), 0)
    n = 0
    for pg in podgroups:
        n += 1
        phase = (pg.get("status") or {}).get("phase")
        key = PHASE_COUNT.get(str(phase)) if phase else None
        if key is not None:
            counts[key] += 1
    current = (queue.get("status") or {}).get("state")
    state = state_after(current, action, n) if action else next_state(current, n)
    return {"state": state, **counts}


def owned_part(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The controller's fields of a status (the scheduler's ``allocated`` left out)."""
    status = status or {}
    return {k: status[k] for k in OWNED if k in status}
