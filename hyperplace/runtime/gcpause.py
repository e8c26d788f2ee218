"""Pausing Python's cyclic garbage collector around allocation-heavy work.

Building tens of thousands of small objects (tasks of a job, parsed input objects) makes the
collector run its full pass again and again; each pass walks the whole heap, so on a large
cluster the work grows faster than the objects made. The objects made here hold no reference
cycles, so reference counting frees them all the same; a cycle made meanwhile waits for the
next pass after the block.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic collector while the block runs (restored as it was)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
