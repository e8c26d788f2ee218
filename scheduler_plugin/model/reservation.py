"""A domain held for a gang at the head of its queue, as the session records it and as its
PodGroup condition carries it across a restart (the hold itself: ``actions/reservation.py``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .jobs import JobInfo

RESERVED_CONDITION = "HyperNodeReserved"
RESERVED_REASON = "HeadOfQueueReservation"

_MSG = re.compile(r"HyperNode (\S+) is held")


@dataclass(frozen=True)
class Reservation:
    """A domain held for one gang: which HyperNode, since when (RFC 3339) and why."""

    job: str
    hypernode: str
    since: str
    reason: str = ""

    def message(self) -> str:
        """The PodGroup condition's message (parsed back after a restart)."""
        return (
            f"HyperNode {self.hypernode} is held for this gang since {self.since}: {self.reason}; "
            "other jobs are placed there only in room the gang will not need"
        )


def held_hypernode(message: str) -> str | None:
    """The HyperNode a ``HyperNodeReserved`` condition message names, or None."""
    m = _MSG.search(message)
    return m.group(1) if m else None


def from_condition(job: JobInfo) -> Reservation | None:
    """The reservation a PodGroup carries (what a restarted scheduler starts from)."""
    st = job.podgroup.status
    for c in (st.conditions if st is not None else None) or []:
        if c.type == RESERVED_CONDITION and c.status == "True":
            m = _MSG.search(c.message or "")
            if m:
                return Reservation(
                    job.key, m.group(1), c.last_transition_time or "", "recovered from the PodGroup"
                )
    return None
