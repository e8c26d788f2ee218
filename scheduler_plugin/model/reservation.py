"""A domain held for a gang at the head of its queue, as the session records it and as its
PodGroup condition carries it across a restart (the hold itself: ``placement/head_of_queue.py``)."""

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
    # When the gang can start there at the latest (RFC 3339): the pods its room waits for all
    # have a time limit (activeDeadlineSeconds). None: some may run for ever.
    estimated_start: str | None = None
    # Jobs that run inside the held room because their own limit ends before that start:
    # (job key, the line that says so).
    backfilled: tuple[tuple[str, str], ...] = ()

    def message(self) -> str:
        """The PodGroup condition's message (parsed back after a restart)."""
        text = f"HyperNode {self.hypernode} is held for this gang since {self.since}: {self.reason}; "
        if self.estimated_start is None:
            return text + "other jobs are placed there only in room the gang will not need"
        return text + (
            f"estimated start {self.estimated_start} (the pods it waits for end by their "
            "activeDeadlineSeconds); other jobs are placed there only in room the gang will not "
            "need, or when their own limit ends before that start"
        )

    def backfill_line(self, job: str) -> str | None:
        """What a job backfilled into this held room is told (None: it was not)."""
        for key, line in self.backfilled:
            if key == job:
                return line
        return None


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
