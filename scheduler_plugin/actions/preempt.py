"""``preempt`` and ``reclaim`` actions (Volcano's, domain first; see scheduler_plugin/preemption.py).

* ``preempt``: a starving gang takes room from lower-priority pods of its own queue (victims
  as ``ssn.preemptable`` allows: priority, gang, conformance).
* ``reclaim``: a starving gang of a queue that is not overused takes room from pods of other
  queues whose Queue is reclaimable (victims as ``ssn.reclaimable`` allows; the queue must be
  ``ssn.preemptive``).

Evictions and nominations go to ``ssn.ledger``; the preemptor's pods are bound once the
victims are gone (``scheduler_plugin.preemption.hold_nominations`` in a later session).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..algorithms.victims import run_eviction_action

if TYPE_CHECKING:
    from ..framework.session import Session


def preempt(ssn: Session) -> None:
    """Higher-priority gangs evict lower-priority pods of the same queue."""
    run_eviction_action(ssn, "preempt")


def reclaim(ssn: Session) -> None:
    """Gangs of queues within their share take room back from other queues."""
    run_eviction_action(ssn, "reclaim")
