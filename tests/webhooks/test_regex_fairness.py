"""One client's costly patterns cannot get another client's valid HyperNode refused: clients take
turns at the regex workers, a pattern is compiled once however many requests bring it, a
worker is watched for memory while it compiles, and "the checker is busy" is a retryable 429,
never a refusal of the object."""

from __future__ import annotations

import asyncio
import json

from prometheus_client import CollectorRegistry

from webhooks.regexcheck import BUSY, RegexChecker, RegexWorker
from webhooks.server import create_app

from .builders import review
from .test_hostile_requests import hn_with_patterns

COSTLY = r"\pL{100}"  # legal, and tens to hundreds of milliseconds of RE2 compiling each


class HeldWorker(RegexWorker):
    """A worker that answers (valid) only once released: the checker kept busy on cue."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.started_one = asyncio.Event()

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def judge(self, patterns: list[str], timeout: float) -> list[str | None]:
        self.started_one.set()
        await self.release.wait()
        self._served += len(patterns)
        return [None for _ in patterns]


async def test_a_trivial_pattern_is_judged_before_other_clients_finish_their_costly_ones():
    checker = RegexChecker(workers=1, budget_seconds=30, wait_seconds=60)
    await checker.start()
    try:
        floods = [
            asyncio.create_task(
                checker.verdicts([f"{COSTLY}<{c}-{i}>" for i in range(6)], client=f"flood-{c}")
            )
            for c in range(4)
        ]
        await asyncio.sleep(0)  # the floods are queued first
        legit = await checker.verdicts(["^rack-1-node-[0-9]+$"], client="admin")
        assert legit == {"^rack-1-node-[0-9]+$": None}
        # Its turn came after one pattern of each other client, not after all 24 of theirs.
        assert sum(f.done() for f in floods) == 0
        assert checker.worker._served <= 4 + 1
        results = await asyncio.gather(*floods)
        assert all(v is None for r in results for v in r.values())  # legal, all of them
    finally:
        await checker.close()


async def test_a_pattern_two_requests_bring_is_compiled_once():
    checker = RegexChecker(workers=2, wait_seconds=30)
    await checker.start()
    try:
        pattern = f"{COSTLY}<shared>"
        a, b = await asyncio.gather(
            checker.verdicts([pattern], client="a"), checker.verdicts([pattern], client="b")
        )
        assert a == b == {pattern: None}
        assert sum(w._served for w in checker.workers) == 1
    finally:
        await checker.close()


async def test_waiting_too_long_for_the_checker_is_busy_not_a_refusal():
    worker = HeldWorker()
    checker = RegexChecker(worker, wait_seconds=0.1)
    await checker.start()
    try:
        flood = asyncio.create_task(checker.verdicts([f"{COSTLY}<{i}>" for i in range(3)], client="flood"))
        await worker.started_one.wait()
        verdicts = await checker.verdicts(["^ok$"], client="admin")
        assert verdicts == {"^ok$": BUSY}
        assert "^ok$" not in checker.cache
        assert checker.busy_answers >= 1
        worker.release.set()
        await flood
    finally:
        await checker.close()


async def test_the_apiserver_gets_429_for_busy_and_a_verdict_once_the_checker_is_free(aiohttp_client):
    worker = HeldWorker()
    checker = RegexChecker(worker, wait_seconds=0.1)
    client = await aiohttp_client(create_app(registry=CollectorRegistry(), regex=checker))
    flood = asyncio.create_task(
        client.post(
            "/hypernodes/validate",
            data=json.dumps(
                review(hn_with_patterns(*(f"{COSTLY}<{i}>" for i in range(5))), userInfo={"username": "f"})
            ),
        )
    )
    await worker.started_one.wait()
    resp = await client.post(
        "/hypernodes/validate",
        data=json.dumps(review(hn_with_patterns("^node-1$"), userInfo={"username": "admin"})),
    )
    body = (await resp.json())["response"]
    assert resp.status == 200 and body["allowed"] is False
    assert body["status"]["code"] == 429
    assert body["status"]["message"] == f"spec.members: {BUSY}"
    worker.release.set()
    await flood
    # Retried when the checker is free: admitted.
    checker.wait_seconds = 30
    resp = await client.post(
        "/hypernodes/validate",
        data=json.dumps(review(hn_with_patterns("^node-1$"), userInfo={"username": "admin"})),
    )
    assert (await resp.json())["response"]["allowed"] is True


async def test_a_worker_growing_past_its_memory_cap_is_killed_mid_compile():
    worker = RegexWorker(kill_rss=1 << 20)  # any Python process is past 1 MiB
    checker = RegexChecker(worker, wait_seconds=30)
    await checker.start()
    try:
        verdicts = await checker.verdicts([f"{COSTLY}<m>"], client="x")
        assert "needed more than 1 MiB" in str(verdicts[f"{COSTLY}<m>"])
        assert worker.restarts == 1 and f"{COSTLY}<m>" not in checker.cache
    finally:
        await checker.close()


class BrokenOnce(HeldWorker):
    """Fails to start its process once, then works."""

    def __init__(self) -> None:
        super().__init__()
        self.release.set()
        self.failed = False

    async def judge(self, patterns: list[str], timeout: float) -> list[str | None]:
        if not self.failed:
            self.failed = True
            raise OSError("the regex worker did not start")
        return await super().judge(patterns, timeout)


async def test_a_worker_that_cannot_start_makes_the_request_retry_and_serves_the_next():
    checker = RegexChecker(BrokenOnce(), wait_seconds=5)
    await checker.start()
    try:
        assert await checker.verdicts(["^a$"], client="x") == {"^a$": BUSY}
        assert await checker.verdicts(["^a$"], client="x") == {"^a$": None}
    finally:
        await checker.close()
