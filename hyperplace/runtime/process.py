"""Process lifecycle shared by the controller and scheduler entry points.

Both run one piece of work (usually under a leader elector) until SIGTERM/SIGINT or a stop
event, then shut down in order. Work that ends on its own means leadership was lost: like
client-go's OnStoppedLeading default, the process then exits so a fresh one (empty caches,
no stale assumptions) campaigns again instead of resuming with stale state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine, Iterator
from typing import Any, NoReturn

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """Set ``stop`` on SIGTERM/SIGINT while the block runs (where the loop supports it)."""
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in _SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


async def run_until_stopped(
    work: Coroutine[Any, Any, None], stop: asyncio.Event, log: logging.Logger
) -> bool:
    """Run ``work`` until ``stop`` is set or it ends; cancel it and wait for it either way.

    Returns True when the work ended by itself (leadership lost, or a crash it swallowed).
    """
    task = asyncio.create_task(work)
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        return task.done() and not stop.is_set()
    finally:
        log.info("shutting down")
        task.cancel()
        stopper.cancel()
        await asyncio.gather(task, stopper, return_exceptions=True)


async def close_client(raw: object) -> None:
    """Close the raw kubernetes-asyncio client, if there is one."""
    close = getattr(raw, "close", None)
    if close is not None:
        await close()


def exit_after_lost_leadership(log: logging.Logger) -> NoReturn:
    """Exit 1 so a fresh process campaigns again (see the module docstring)."""
    log.error("stopped leading; exiting")
    raise SystemExit(1)
