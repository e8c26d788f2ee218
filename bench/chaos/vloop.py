"""An asyncio event loop on a virtual clock: sleeping costs no wall time.

When nothing is ready to run, the loop jumps its clock to the next timer instead of waiting
for it, so a campaign of minutes of cluster time (lease periods, bind back-off, slow API
windows) runs in the time its CPU work takes. Work handed to a thread (``asyncio.to_thread``,
the scheduler's session) runs inline and costs a fixed virtual time, so the interleaving of tasks is a function of the
program alone and a seed replays the same run. There is no real I/O: everything talks to
the in-memory API server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import selectors
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0


class _NoWaitSelector(selectors.BaseSelector):
    """Never blocks: a wait for ``timeout`` seconds advances the virtual clock instead."""

    def __init__(self, clock: _Clock) -> None:
        self._clock = clock
        self._keys: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(
            fileobj, fileobj if isinstance(fileobj, int) else fileobj.fileno(), events, data
        )
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise RuntimeError("virtual-time loop: every task waits and no timer is set (a deadlock)")
        if timeout > 0:
            self._clock.now += timeout
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


class _InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs submitted work at once, in the loop's thread (never starts a thread), and lets
    ``cost`` virtual seconds pass for it: work is not free, and a loop that does nothing
    but work (a livelock) must still let the clock move."""

    def __init__(self, clock: _Clock, cost: float) -> None:
        super().__init__(max_workers=1)
        self._clock, self._cost = clock, cost

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        self._clock.now += self._cost
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the awaiting task, as a thread would
            fut.set_exception(exc)
        return fut


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """See the module docstring."""

    def __init__(self, work_cost: float = 0.02) -> None:
        self._vclock = _Clock()
        super().__init__(_NoWaitSelector(self._vclock))
        self.set_default_executor(_InlineExecutor(self._vclock, work_cost))

    def time(self) -> float:
        return self._vclock.now


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a fresh :class:`VirtualTimeLoop`."""
    loop = VirtualTimeLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
