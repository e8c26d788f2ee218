"""Every action the scheduler runs, in one registry; a session runs those its configuration
lists, in the configuration's order (``enqueue``, ``allocate``, ``backfill``, ``preempt``,
``reclaim``, and Volcano v1.15's ``gangpreempt`` and ``gangreclaim``). The ``repair`` step
(in :mod:`.preempt`) is no configured action: the session runs it after them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..framework.session import Session
from .allocate import allocate
from .backfill import backfill
from .enqueue import enqueue
from .preempt import gangpreempt, gangreclaim, preempt, reclaim

ACTIONS: Mapping[str, Callable[[Session], None]] = {
    "enqueue": enqueue,
    "allocate": allocate,
    "backfill": backfill,
    "preempt": preempt,
    "reclaim": reclaim,
    "gangpreempt": gangpreempt,
    "gangreclaim": gangreclaim,
}
