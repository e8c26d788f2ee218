"""The work queue keeps client-go's promises: dedupe, one worker per key, no lost
re-adds, exponential backoff, clean shutdown."""

from __future__ import annotations

import asyncio

import pytest

from hyperplace.runtime.workqueue import ItemExponentialBackoff, RateLimiter, TokenBucket, WorkQueue


def queue() -> WorkQueue[str]:
    return WorkQueue(RateLimiter())  # no token bucket: delays are exactly the backoff


async def test_adding_a_queued_key_twice_processes_it_once() -> None:
    q = queue()
    for key in ("a", "b", "a", "a", "c"):
        q.add(key)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]


async def test_a_key_is_never_handed_to_two_workers_and_re_adds_are_not_lost() -> None:
    q = queue()
    q.add("job")
    first = await q.get()
    q.add("job")  # changed while a worker holds it
    assert len(q) == 0, "must wait for done(), not hand it to a second worker"
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not second.done()
    assert first is not None
    q.done(first)
    assert await asyncio.wait_for(second, 1) == "job"


async def test_concurrent_workers_never_overlap_on_a_key() -> None:
    q = queue()
    active: set[str] = set()
    overlaps = 0
    handled: list[str] = []

    async def worker() -> None:
        nonlocal overlaps
        while (key := await q.get()) is not None:
            if key in active:
                overlaps += 1
            active.add(key)
            await asyncio.sleep(0.001)
            handled.append(key)
            active.discard(key)
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for i in range(200):
        q.add(f"k{i % 5}")
        if i % 7 == 0:
            await asyncio.sleep(0)
    assert await q.drain(timeout=5)
    q.shutdown()
    await asyncio.gather(*workers)
    assert overlaps == 0
    assert set(handled) == {f"k{i}" for i in range(5)}


def test_backoff_doubles_from_5ms_and_caps_at_1000s() -> None:
    b: ItemExponentialBackoff[str] = ItemExponentialBackoff()
    delays = [b.when("x") for _ in range(20)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 1000.0 and max(delays) == 1000.0
    assert b.num_requeues("x") == 20
    b.forget("x")
    assert b.when("x") == 0.005
    assert b.when("other") == 0.005
    assert all(b.when("y") <= 1000.0 for _ in range(200))  # no float overflow


def test_token_bucket_allows_burst_then_paces() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=2, clock=lambda: now[0])
    assert [bucket.reserve(), bucket.reserve()] == [0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    now[0] = 10.0
    assert bucket.reserve() == 0.0


async def test_rate_limited_add_waits_for_the_backoff_and_forget_resets_it() -> None:
    q = queue()
    loop = asyncio.get_running_loop()
    for expected in (0.005, 0.01, 0.02):
        start = loop.time()
        q.add_rate_limited("k")
        assert len(q) == 0
        key = await asyncio.wait_for(q.get(), 1)
        assert key == "k"
        assert loop.time() - start >= expected * 0.9
        q.done(key)
    assert q.num_requeues("k") == 3
    q.forget("k")
    assert q.num_requeues("k") == 0


async def test_add_after_keeps_the_earliest_deadline_and_dedupes() -> None:
    q = queue()
    q.add_after("k", 10)
    q.add_after("k", 0.01)
    q.add_after("k", 5)
    assert await asyncio.wait_for(q.get(), 1) == "k"
    q.done("k")
    await asyncio.sleep(0.05)
    assert len(q) == 0


async def test_shutdown_hands_out_what_is_queued_then_none_and_refuses_new_keys() -> None:
    q = queue()
    q.add("a")
    q.add_after("late", 0.01)
    waiter_q = queue()
    waiter = asyncio.create_task(waiter_q.get())
    await asyncio.sleep(0)
    q.shutdown()
    waiter_q.shutdown()
    q.add("b")
    assert await q.get() == "a"
    assert await q.get() is None
    assert await asyncio.wait_for(waiter, 1) is None
    await asyncio.sleep(0.03)
    assert len(q) == 0  # the delayed key was cancelled


async def test_drain_waits_for_in_flight_keys() -> None:
    q = queue()
    q.add("a")
    key = await q.get()
    assert not await q.drain(timeout=0.01)
    assert key is not None
    q.done(key)
    assert await q.drain(timeout=1)
