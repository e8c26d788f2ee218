"""A smaller run of bench/webhook_fuzz.py: seeded hostile requests of every kind get an
explained answer (allowed, denied naming a field, or a 400 with a documented reason),
never a 5xx, and the server counts every one of them."""

from __future__ import annotations

import collections
import json
import random

from prometheus_client import CollectorRegistry

from bench.webhook_fuzz import classify, hostile_body
from webhooks.regexcheck import RegexChecker
from webhooks.review import handle_review
from webhooks.server import create_app

# Costly patterns need the server's per-request budget (the second test); in-process,
# without it, they would only make this test slow.
SERVER_ONLY = {"costly_patterns", "many_patterns"}


def test_two_thousand_hostile_bodies_in_process_are_all_explained():
    rng = random.Random(7)
    classes: collections.Counter[str] = collections.Counter()
    unexplained = []
    done = 0
    while done < 2000:
        path, kind, body = hostile_body(rng)
        if kind in SERVER_ONLY:
            continue
        result = handle_review(path, body)
        text = result.body if isinstance(result.body, str) else json.dumps(result.body)
        cls, detail = classify(result.status, text)
        classes[cls] += 1
        if cls == "unexplained":
            unexplained.append((kind, path, detail))
        done += 1
    assert unexplained == []
    # The mix reaches every outcome, so the classifier is not vacuous.
    assert min(classes[c] for c in ("allowed", "denied", "bad_request")) > 100


async def test_hostile_requests_over_http_are_answered_and_all_counted(aiohttp_client):
    rng = random.Random(11)
    registry = CollectorRegistry()
    client = await aiohttp_client(create_app(registry=registry, regex=RegexChecker()))
    kinds: collections.Counter[str] = collections.Counter()
    unexplained = []
    for _ in range(300):
        path, kind, body = hostile_body(rng)
        resp = await client.post(path, data=body)
        cls, detail = classify(resp.status, await resp.text(errors="replace"))
        kinds[kind] += 1
        if cls == "unexplained":
            unexplained.append((kind, path, detail))
    assert unexplained == []
    counted = sum(
        s.value
        for metric in registry.collect()
        if metric.name == "hyperplace_webhook_requests"
        for s in metric.samples
        if s.name.endswith("_total")
    )
    assert counted == 300
    assert registry.get_sample_value(
        "hyperplace_webhook_requests_total", {"endpoint": "/jobs/validate", "verdict": "error", "code": "500"}
    ) in (None, 0)
