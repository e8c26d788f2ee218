"""Hostile AdmissionReviews against the webhook server: every answer must be explained.

    python bench/webhook_fuzz.py [--requests 100000] [--concurrency 16] [--seed 1] [--json]

Starts ``hyperplace-webhooks`` (plain HTTP on loopback, so the machine's CPU goes to
admission rather than TLS; the TLS layer is exercised by bench/webhook_connections.py)
and sends seeded hostile requests to all four webhooks: random bytes, nesting around and
far beyond the depth limit, lone surrogates, invalid UTF-8, NaN and huge numbers,
wrong types at random places of valid objects, broken envelopes, Go's own regexp test
patterns and compile-heavy ones, more new patterns than a request may bring, and bodies
over the size limit. ``classify`` sorts every answer:

* ``allowed`` / ``denied``: HTTP 200; a denial must carry code 403 and messages that each
  name a field (``spec.members[0]...: ...``);
* ``busy``: HTTP 200, a refusal with code 429 "the pattern checker is busy; retry" (the
  retryable answer when others' patterns hold the regex checker);
* ``bad_request``: HTTP 400/404 with one of the documented reasons;
* ``unexplained``: anything else (a 5xx, a code-500 refusal, an empty or unknown message).

At the end the server's own counter must account for every request. The run reports the
counts per class and kind, throughput, and fails (exit 1) on any 5xx or unexplained
answer. ``hostile_body`` and ``classify`` are reused by tests/webhooks/test_hostile_fuzz.py
at a smaller size.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import copy
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "webhooks" / "fixtures" / "go_regex_corpus.jsonl"
PATHS = ["/hypernodes/validate", "/jobs/validate", "/jobs/mutate", "/pods/mutate"]
DEPTH_LIMIT = 100
MAX_BODY = 3 * 1024 * 1024

FIELD_MESSAGE = re.compile(r"^[A-Za-z][\w.\[\]/-]*: \S")
BAD_REQUEST_REASONS = (
    "request body is not valid JSON",
    "request body nests",
    "request body is ",  # ... N bytes; the limit is ...
    "request body exceeds",
    "request body must be a JSON object",
    "request body could not be read",
    "kind must be AdmissionReview",
    "apiVersion must be admission.k8s.io/v1",
    "AdmissionReview.request",
    "request.operation must be",
    "request.object",
    "request.oldObject",
    "no webhook at",
)


def _patterns() -> list[str]:
    out = []
    if CORPUS.exists():
        with CORPUS.open(encoding="utf-8") as fh:
            next(fh)
            out = [json.loads(line)[0] for line in fh]
    return out or ["^n[0-9]+$", "(?=x)", "a{1001}"]


_CORPUS_PATTERNS: list[str] | None = None


def corpus_patterns() -> list[str]:
    """Go's regexp test patterns (cached)."""
    global _CORPUS_PATTERNS
    if _CORPUS_PATTERNS is None:
        _CORPUS_PATTERNS = _patterns()
    return _CORPUS_PATTERNS


def _hostile_value(rng: random.Random) -> Any:
    choice = rng.randrange(16)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, -1, 2**31, 2**63, -(2**64), 10**300])
    if choice == 3:
        return rng.choice([0.5, -0.0, 1e308, 1e-320])
    if choice == 4:
        return ""
    if choice == 5:
        return "\udb90" + rng.choice(["", "x", "\udc00"])  # lone surrogates
    if choice == 6:
        return "x" * rng.choice([64, 300, 10_000])
    if choice == 7:
        return []
    if choice == 8:
        return {}
    if choice == 9:
        nested: Any = "leaf"
        for _ in range(rng.randrange(1, 80)):
            nested = [nested] if rng.random() < 0.5 else {"a": nested}
        return nested
    if choice == 10:
        return "".join(chr(rng.randrange(0x20, 0x2FFFF)) for _ in range(rng.randrange(1, 20))).replace(
            "\ud800", ""
        )
    if choice == 11:
        return rng.choice(corpus_patterns())
    if choice == 12:
        return {"exactMatch": {"name": rng.choice(["n0", "", "Bad_Name", "a" * 300])}}
    if choice == 13:
        return [{"name": "c", "image": "x"}] * rng.randrange(0, 3)
    if choice == 14:
        return rng.choice(["CREATE", "UPDATE", "DELETE", "hard", "soft", "Node", "HyperNode"])
    return rng.randrange(-5, 20)


def _valid_object(rng: random.Random, path: str) -> dict[str, Any]:
    if path == "/hypernodes/validate":
        members = []
        for i in range(rng.randrange(1, 5)):
            kind = rng.randrange(3)
            if kind == 0:
                sel: dict[str, Any] = {"exactMatch": {"name": f"node-{i}"}}
            elif kind == 1:
                sel = {"regexMatch": {"pattern": rng.choice(corpus_patterns())}}
            else:
                sel = {"labelMatch": {"matchLabels": {"rack": f"r{i}"}}}
            members.append({"type": rng.choice(["Node", "Node", "HyperNode"]), "selector": sel})
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": rng.choice(["s0", "rack-a", "leaf-1"])},
            "spec": {"tier": rng.randrange(1, 4), "tierName": "leaf", "members": members},
        }
    if path.startswith("/jobs"):
        total, size = rng.randrange(1, 4), rng.randrange(1, 4)
        return {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {
                "minAvailable": rng.randrange(0, 5),
                "networkTopology": {"mode": "hard", "highestTierAllowed": rng.randrange(1, 4)},
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": total * size,
                        "partitionPolicy": {"totalPartitions": total, "partitionSize": size},
                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                    }
                ],
            },
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-worker-0",
            "namespace": "default",
            "labels": {"volcano.sh/job-name": "train", "volcano.sh/task-spec": "worker"},
            "annotations": {"volcano.sh/task-index": "3", "volcano.sh/partition-size": "2"},
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def _mutate(rng: random.Random, obj: Any, count: int) -> Any:
    """Replace ``count`` random places of ``obj`` with hostile values."""
    for _ in range(count):
        cur = obj
        for _ in range(rng.randrange(1, 7)):
            if isinstance(cur, dict) and cur:
                key = rng.choice(list(cur))
                if rng.random() < 0.35 or not isinstance(cur[key], dict | list):
                    cur[key] = _hostile_value(rng)
                    break
                cur = cur[key]
            elif isinstance(cur, list) and cur:
                i = rng.randrange(len(cur))
                if rng.random() < 0.35 or not isinstance(cur[i], dict | list):
                    cur[i] = _hostile_value(rng)
                    break
                cur = cur[i]
            else:
                break
    return obj


def _review(obj: Any, rng: random.Random, operation: str = "CREATE") -> dict[str, Any]:
    req: dict[str, Any] = {"uid": f"fuzz-{rng.randrange(10**9)}", "operation": operation, "object": obj}
    if operation == "UPDATE":
        req["oldObject"] = copy.deepcopy(obj)
    req["namespace"] = "default"
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def _dumps(doc: Any) -> bytes:
    # Surrogates leave as \\u escapes (ensure_ascii); huge ints as digits; NaN as the token.
    return json.dumps(doc, allow_nan=True).encode()


def hostile_body(rng: random.Random) -> tuple[str, str, bytes]:
    """One hostile request: (webhook path, kind of hostility, body)."""
    path = rng.choice(PATHS)
    kind = rng.choices(
        [
            "random_bytes", "deep_nesting", "mutated_object", "regex_patterns", "many_patterns",
            "costly_patterns", "broken_envelope", "encoding", "numbers", "oversize", "valid",
        ],
        weights=[6, 6, 30, 14, 2, 0.1, 10, 8, 6, 0.05, 10],
    )[0]  # fmt: skip
    if kind == "random_bytes":
        return path, kind, bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
    if kind == "deep_nesting":
        depth = rng.choice(
            [DEPTH_LIMIT - 20, DEPTH_LIMIT - 1, DEPTH_LIMIT, DEPTH_LIMIT + 1, 1000, 10_000, 200_000]
        )
        inner = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        core = inner[0] * depth + b"1" + inner[1] * depth
        if rng.random() < 0.5:  # inside a real review, under object.spec
            doc = _review(_valid_object(rng, path), rng)
            head = _dumps(doc)
            marker = b'"spec": {'
            at = head.find(marker)
            if at >= 0:
                return (
                    path,
                    kind,
                    head[: at + len(marker)] + b'"deep": ' + core + b", " + head[at + len(marker) :],
                )
        return path, kind, core
    if kind == "mutated_object":
        obj = _mutate(rng, _valid_object(rng, path), rng.randrange(1, 6))
        return path, kind, _dumps(_review(obj, rng, rng.choice(["CREATE", "UPDATE"])))
    if kind in ("regex_patterns", "many_patterns", "costly_patterns"):
        path = "/hypernodes/validate"
        obj = _valid_object(rng, path)
        if kind == "regex_patterns":
            pats = [rng.choice(corpus_patterns()) for _ in range(rng.randrange(1, 8))]
        elif kind == "many_patterns":
            pats = [f"^node-{rng.randrange(10**9)}-[0-9]+$" for _ in range(rng.randrange(33, 120))]
        else:
            pats = [
                rf"\pL{{{rng.randrange(100, 400)}}}<{rng.randrange(10**9)}>"
                for _ in range(rng.randrange(1, 40))
            ]
        obj["spec"]["members"] = [{"type": "Node", "selector": {"regexMatch": {"pattern": p}}} for p in pats]
        return path, kind, _dumps(_review(obj, rng))
    if kind == "broken_envelope":
        doc = _review(_valid_object(rng, path), rng)
        victim = rng.choice(["apiVersion", "kind", "request", "uid", "operation", "object", "oldObject"])
        if victim in ("apiVersion", "kind", "request"):
            doc[victim] = _hostile_value(rng)
        else:
            doc["request"][victim] = _hostile_value(rng)
        return path, kind, _dumps(rng.choice([doc, [doc], doc["request"]]))
    if kind == "encoding":
        body = _dumps(_review(_valid_object(rng, path), rng))
        cut = rng.randrange(len(body))
        bad = rng.choice(
            [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\ud800", b"\\udfff\\ud800", b"\x00", b"\xef\xbb\xbf"]
        )
        if bad.startswith(b"\\u"):
            at = body.find(b'"name": "')
            if at >= 0:
                return path, kind, body[: at + 9] + bad + body[at + 9 :]
        return path, kind, body[:cut] + bad + body[cut:]
    if kind == "numbers":
        doc = _review(_valid_object(rng, path), rng)
        body = _dumps(doc)
        token = rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e999999", b"9" * 5000, b"-0", b"1.5e-400"])
        return path, kind, re.sub(rb"(?<=: )\d+", lambda _m: token, body, count=rng.randrange(1, 4))
    if kind == "oversize":
        return path, kind, b'{"x": "' + b"a" * (MAX_BODY + 10) + b'"}'
    return (
        path,
        kind,
        _dumps(_review(_valid_object(rng, path), rng, rng.choice(["CREATE", "UPDATE", "DELETE"]))),
    )


def classify(status: int, text: str) -> tuple[str, str]:
    """(class, detail) of one answer: allowed, denied, busy, bad_request or unexplained."""
    if status >= 500:
        return "unexplained", f"HTTP {status}: {text[:200]}"
    if status in (400, 404):
        if text and text.startswith(BAD_REQUEST_REASONS):
            return "bad_request", ""
        return "unexplained", f"HTTP {status} with an unknown reason: {text[:200]}"
    if status != 200:
        return "unexplained", f"HTTP {status}"
    try:
        response = json.loads(text)["response"]
    except (ValueError, KeyError, TypeError):
        return "unexplained", f"HTTP 200 without an AdmissionReview: {text[:200]}"
    if response.get("allowed") is True:
        return "allowed", ""
    code = response.get("status", {}).get("code")
    message = response.get("status", {}).get("message", "")
    if code == 429 and "the pattern checker is busy" in message:
        return "busy", ""  # retryable: others' patterns held the checker (webhooks.regexcheck)
    if code != 403:
        return "unexplained", f"refusal with code {code}: {message[:200]}"
    parts = [m for m in message.split("; ") if m]
    unnamed = [m for m in parts if not FIELD_MESSAGE.match(m)]
    # A message may itself contain "; " (a regex pattern); accept when the first names a field.
    if not parts or (unnamed and not FIELD_MESSAGE.match(message)):
        return "unexplained", f"refusal naming no field: {message[:200]}"
    return "denied", ""


async def _drive(base: str, args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    rng = random.Random(args.seed)
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    statuses: collections.Counter[int] = collections.Counter()
    examples: list[str] = []
    sent = 0
    queue: asyncio.Queue[tuple[str, str, bytes] | None] = asyncio.Queue(maxsize=args.concurrency * 4)

    async def producer() -> None:
        for _ in range(args.requests):
            await queue.put(hostile_body(rng))
        for _ in range(args.concurrency):
            await queue.put(None)

    async def consumer(session: aiohttp.ClientSession) -> None:
        nonlocal sent
        while (item := await queue.get()) is not None:
            path, kind, body = item
            try:
                async with session.post(base + path, data=body) as resp:
                    text = await resp.text(errors="replace")
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError) as exc:
                status, text = 599, f"transport error {type(exc).__name__}"
            sent += 1
            statuses[status] += 1
            cls, detail = classify(status, text)
            counts[(cls, kind)] += 1
            if cls == "unexplained" and len(examples) < 20:
                examples.append(f"{kind} {path}: {detail}")

    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    start = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(producer(), *(consumer(session) for _ in range(args.concurrency)))
        elapsed = time.perf_counter() - start
        async with session.get(base + "/metrics") as resp:
            metrics = await resp.text()
    counted = 0.0
    server_5xx = 0.0
    for line in metrics.splitlines():
        if line.startswith("hyperplace_webhook_requests_total{"):
            value = float(line.rsplit(" ", 1)[1])
            counted += value
            if 'code="500"' in line:
                server_5xx += value
    by_class: collections.Counter[str] = collections.Counter()
    for (cls, _), n in counts.items():
        by_class[cls] += n
    return {
        "requests": sent,
        "seconds": round(elapsed, 1),
        "rate_per_s": round(sent / elapsed, 1),
        "by_class": dict(by_class),
        "by_kind": {f"{cls}/{kind}": n for (cls, kind), n in sorted(counts.items())},
        "http_status": dict(sorted(statuses.items())),
        "http_5xx": sum(n for s, n in statuses.items() if s >= 500),
        "server_counted": int(counted),
        "server_code_500": int(server_5xx),
        "unexplained_examples": examples,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from bench.webhook_latency import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhooks", "--insecure-http", "--host", "127.0.0.1", "--port", str(port),
         "--metrics-port", "0", "--no-hypernode-cache", "--log-level", "CRITICAL"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        import urllib.request

        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2)
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("webhook server did not start")
            time.sleep(0.1)
        result = asyncio.run(_drive(f"http://127.0.0.1:{port}", args))
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    ok = result["http_5xx"] == 0 and "unexplained" not in result["by_class"]
    ok = ok and result["server_counted"] == result["requests"] and result["server_code_500"] == 0
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{result['requests']} hostile requests in {result['seconds']} s ({result['rate_per_s']}/s), "
            f"seed {args.seed}, concurrency {args.concurrency}, load average {os.getloadavg()[0]:.1f}"
        )
        print(f"answers by class: {result['by_class']}")
        print(f"HTTP statuses: {result['http_status']}; 5xx: {result['http_5xx']}")
        print(
            f"server counted {result['server_counted']} requests ({result['server_code_500']} with code 500)"
        )
        for k, n in result["by_kind"].items():
            print(f"  {k:40} {n}")
        for ex in result["unexplained_examples"]:
            print(f"UNEXPLAINED {ex}")
        print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
