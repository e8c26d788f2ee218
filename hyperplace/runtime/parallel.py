"""Bounded parallelism for API writes: many requests in flight over one connection pool."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def run_bounded(
    items: Iterable[T], fn: Callable[[T], Awaitable[None]], limit: int
) -> list[BaseException]:
    """Run ``fn(item)`` for every item, at most ``limit`` at once; wait for all of them.

    Returns the exceptions raised, in item order (empty when every call succeeded). Every
    item is tried even when an earlier one failed, as Volcano's job controller does when it
    creates a job's pods (one goroutine per pod, errors collected after all returned):
    stopping at the first error would leave the rest for a later retry, one failure at a
    time. Cancellation propagates and cancels the calls still running.
    """
    sem = asyncio.Semaphore(max(1, limit))

    async def one(item: T) -> BaseException | None:
        async with sem:
            try:
                await fn(item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                return exc
        return None

    results = await asyncio.gather(*(one(i) for i in items))
    return [r for r in results if r is not None]


__all__ = ["run_bounded"]
