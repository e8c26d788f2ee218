"""Actions run in configuration order: ``enqueue``, ``allocate``, ``backfill``, ``preempt`` and
``reclaim``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .allocate import allocate
from .backfill import backfill
from .enqueue import enqueue
from .preempt import preempt, reclaim

if TYPE_CHECKING:
    from ..framework.session import Session


ACTIONS: dict[str, Callable[[Session], None]] = {
    "enqueue": enqueue,
    "allocate": allocate,
    "backfill": backfill,
    "preempt": preempt,
    "reclaim": reclaim,
}

__all__ = ["ACTIONS", "allocate", "backfill", "enqueue", "preempt", "reclaim"]
