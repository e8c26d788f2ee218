"""An attacker who can reach the webhook port gets an answer, never a 5xx, and cannot
stall the server: deep nesting, lone surrogates and costly patterns are refused with a
message, every outcome is counted, and /healthz keeps answering meanwhile."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from prometheus_client import CollectorRegistry

from webhooks.regexcheck import RegexChecker, VerdictCache
from webhooks.review import MAX_JSON_DEPTH, handle_review, json_depth
from webhooks.server import create_app

from .builders import hypernode, job, member, review


def hn_with_patterns(*patterns: str) -> dict:
    hn = hypernode("rack", 1)
    hn["spec"]["members"] = [member("Node", {"regexMatch": {"pattern": p}}) for p in patterns]
    return hn


@pytest.mark.parametrize("opener,closer", [(b"[", b"]"), (b'{"a":', b"}")])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 10_000, 400_000])
def test_deep_nesting_is_a_400_with_a_message(opener, closer, depth):
    result = handle_review("/jobs/validate", opener * depth + b"1" + closer * depth)
    assert result.status == 400 and result.verdict == "bad_request"
    assert f"nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}" in str(result.body)


def test_nesting_inside_an_object_up_to_the_limit_is_judged_normally():
    obj = job()
    deep: dict = {}
    cur = deep
    for _ in range(MAX_JSON_DEPTH - 12):
        cur["a"] = {}
        cur = cur["a"]
    obj["spec"]["tasks"][0]["template"]["metadata"] = {"annotations": {}, "x": deep}
    body = json.dumps(review(obj)).encode()
    assert json_depth(body) <= MAX_JSON_DEPTH
    result = handle_review("/jobs/validate", body)
    assert result.status == 200 and result.verdict in ("allowed", "denied")


def test_brackets_inside_strings_do_not_count_as_nesting():
    body = json.dumps(review(job(), uid="[" * 5000 + '\\"{' * 100)).encode()
    assert json_depth(body) <= json.dumps(review(job())).count("[") + json.dumps(review(job())).count("{")
    assert handle_review("/jobs/mutate", body).status == 200


def test_a_lone_surrogate_pattern_is_refused_as_invalid_utf8():
    body = json.dumps(review(hn_with_patterns("node-\udb90"))).encode()  # "\udb90" escaped
    result = handle_review("/hypernodes/validate", body)
    resp = result.body["response"]  # type: ignore[index]
    assert result.status == 200 and resp["status"]["code"] == 403
    assert (
        "invalid UTF-8: the pattern contains a lone UTF-16 surrogate (\\udb90)" in resp["status"]["message"]
    )


async def test_patterns_beyond_the_per_request_budget_are_refused_and_not_remembered():
    checker = RegexChecker(max_new=3, max_new_bytes=1 << 20)
    await checker.start()
    try:
        patterns = [f"^n{i}$" for i in range(5)]
        verdicts = await checker.verdicts(patterns)
        assert [verdicts[p] for p in patterns[:3]] == [None, None, None]
        for p in patterns[3:]:
            assert "more than 3 new patterns" in str(verdicts[p])
        assert len(checker.cache) == 3
        # A later request finds the first three cached and judges the other two.
        again = await checker.verdicts(patterns)
        assert all(v is None for v in again.values())
    finally:
        await checker.close()


async def test_failures_are_remembered_so_a_bad_pattern_is_compiled_once():
    checker = RegexChecker()
    await checker.start()
    try:
        first = await checker.verdicts(["(?=x)"])
        assert "invalid or unsupported Perl syntax" in str(first["(?=x)"])
        restarts = [w.restarts for w in checker.workers]
        served = [w._served for w in checker.workers]
        assert await checker.verdicts(["(?=x)"]) == first
        assert [w._served for w in checker.workers] == served  # not compiled again
        assert [w.restarts for w in checker.workers] == restarts
    finally:
        await checker.close()


async def test_a_compile_over_the_time_budget_kills_the_worker_and_refuses_uncached():
    checker = RegexChecker(budget_seconds=0.05)
    await checker.start()
    try:
        costly = [rf"\pL{{300}}[{i}]" for i in range(3)]
        verdicts = await checker.verdicts(costly)
        assert any("took longer than 0.05 s" in str(v) for v in verdicts.values())
        assert not any(p in checker.cache for p, v in verdicts.items() if v and "took longer" in v)
        # The next request (with a budget that allows starting a process) gets a fresh worker.
        checker.budget_seconds = 10.0
        assert (await checker.verdicts(["^ok$"]))["^ok$"] is None
    finally:
        await checker.close()


def test_verdict_cache_is_bounded_by_bytes():
    cache = VerdictCache(max_entries=1000, max_bytes=10_000)
    for i in range(500):
        cache.put(f"pattern-{i}-" + "x" * 100, None)
    assert cache.bytes <= 10_000 and 0 < len(cache) < 500
    assert "pattern-499-" + "x" * 100 in cache and "pattern-0-" + "x" * 100 not in cache


async def test_healthz_answers_quickly_while_the_worst_request_is_judged(aiohttp_client):
    registry = CollectorRegistry()
    client = await aiohttp_client(create_app(registry=registry, regex=RegexChecker()))
    # 32 patterns that each take RE2 hundreds of milliseconds: the worst a request may bring.
    worst = hn_with_patterns(*(rf"\pL{{300}}<{i}>" for i in range(32)))
    task = asyncio.create_task(client.post("/hypernodes/validate", data=json.dumps(review(worst))))
    await asyncio.sleep(0.3)  # the worker is busy compiling by now
    slowest = 0.0
    for _ in range(10):
        start = time.perf_counter()
        assert (await client.get("/healthz")).status == 200
        slowest = max(slowest, time.perf_counter() - start)
        await asyncio.sleep(0.05)
    resp = await task
    body = await resp.json()
    assert resp.status == 200 and body["response"]["allowed"] is False
    assert "per-request limit" in body["response"]["status"]["message"]
    # Generous for a loaded CI machine; a blocked loop would take seconds.
    assert slowest < 0.5
    labels = {"endpoint": "/hypernodes/validate", "verdict": "denied", "code": "403"}
    assert registry.get_sample_value("hyperplace_webhook_requests_total", labels) == 1


async def test_every_outcome_is_counted_even_a_broken_body(aiohttp_client):
    registry = CollectorRegistry()
    client = await aiohttp_client(create_app(registry=registry))
    for body in (b"[" * 50_000, b"\xff\xfe", b"{}", json.dumps(review(job())).encode()):
        resp = await client.post("/jobs/validate", data=body)
        assert resp.status in (200, 400)
    bad = {"endpoint": "/jobs/validate", "verdict": "bad_request", "code": "400"}
    ok = {"endpoint": "/jobs/validate", "verdict": "allowed", "code": "200"}
    assert registry.get_sample_value("hyperplace_webhook_requests_total", bad) == 3
    assert registry.get_sample_value("hyperplace_webhook_requests_total", ok) == 1
