"""Finding 2 of issue 21: clients flooding the regex checker with costly, individually legal
patterns while an administrator creates HyperNodes with one trivial new pattern each.

    python bench/webhook_regex_fairness.py [--clients 4,8] [--seconds 30] [--workers 0] [--json]

Starts ``hyperplace-webhooks`` (plain HTTP on loopback, so the measurement is the checker, not
TLS) and, for each client count (0 first: the same run's baseline), runs for ``--seconds``:

* ``N`` flooding clients, each its own user, sending HyperNodes with 32 new ``\\pL{100}``-class
  patterns (new every time, so never cached) back to back;
* one administrator sending a HyperNode with one new valid pattern every 0.5 s, retrying a 429
  ("the checker is busy, retry") up to 3 times, as a client should.

Prints, per client count: the administrator's requests, how many were admitted, refused (403:
a valid object refused, the finding) and answered busy (429) at first try and in the end,
admission latency p50/p99, the flood's answers (own patterns too costly, busy, admitted), and the
server's peak memory (parent + workers). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.webhook_connections import rss_bytes, wait_ready  # noqa: E402
from bench.webhook_latency import free_port, percentile  # noqa: E402


def hypernode_review(name: str, patterns: list[str], user: str, uid: str) -> dict[str, Any]:
    members = [{"type": "Node", "selector": {"regexMatch": {"pattern": p}}} for p in patterns]
    obj = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": 1, "members": members},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": "CREATE", "object": obj, "userInfo": {"username": user}},
    }


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[bool, int, str]:
    async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=10)) as resp:
        out = (await resp.json())["response"]
    code = 200 if out["allowed"] else int(out["status"]["code"])
    return out["allowed"], code, out.get("status", {}).get("message", "")


async def flood(session: aiohttp.ClientSession, url: str, c: int, end: float, tally: dict[str, int]) -> None:
    i = 0
    while time.monotonic() < end:
        patterns = [rf"\pL{{100}}<{c}-{i}-{k}>" for k in range(32)]
        i += 1
        try:
            allowed, code, msg = await post(
                session, url, hypernode_review(f"f{c}-{i}", patterns, f"flood-{c}", f"f{c}{i}")
            )
        except (aiohttp.ClientError, TimeoutError):
            tally["error"] += 1
            continue
        key = (
            "admitted"
            if allowed
            else "busy"
            if code == 429
            else "too_costly"
            if "own patterns" in msg
            else "other"
        )
        tally[key] += 1


async def admin(session: aiohttp.ClientSession, url: str, end: float, out: dict[str, Any]) -> None:
    n = 0
    while time.monotonic() < end:
        n += 1
        t0 = time.perf_counter()
        body = hypernode_review(f"rack-{n}", [f"^run{int(t0 * 1e6)}-rack-{n}-node-[0-9]+$"], "admin", f"a{n}")
        first = None
        final = None
        for _attempt in range(4):  # the first try and up to 3 retries of a 429
            try:
                allowed, code, msg = await post(session, url, body)
            except (aiohttp.ClientError, TimeoutError) as exc:
                allowed, code, msg = False, 0, type(exc).__name__
            first = first or ("admitted" if allowed else "busy" if code == 429 else "refused")
            final = "admitted" if allowed else "busy" if code == 429 else "refused"
            if code != 429:
                break
            await asyncio.sleep(0.2)
        if final == "refused":
            out["refusals"].append(msg[:200])
        out["first"][first] += 1
        out["final"][final] += 1
        out["latency"].append(time.perf_counter() - t0)
        await asyncio.sleep(max(0.0, 0.5 - (time.perf_counter() - t0)))


async def one(port: int, pid: int, clients: int, seconds: float) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/hypernodes/validate"
    tally = dict.fromkeys(("admitted", "busy", "too_costly", "other", "error"), 0)
    mine: dict[str, Any] = {
        "first": dict.fromkeys(("admitted", "busy", "refused"), 0),
        "final": dict.fromkeys(("admitted", "busy", "refused"), 0),
        "latency": [],
        "refusals": [],
    }
    peak = 0
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, rss_bytes(pid))
            await asyncio.sleep(0.1)

    end = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        sampler = asyncio.create_task(sample())
        await asyncio.gather(
            admin(session, url, end, mine), *(flood(session, url, c, end, tally) for c in range(clients))
        )
        stop.set()
        await sampler
    lat = sorted(mine["latency"])
    return {
        "clients": clients,
        "admin_requests": len(lat),
        "admin_first_try": mine["first"],
        "admin_final": mine["final"],
        "admin_refusals": sorted(set(mine["refusals"]))[:3],
        "admin_p50_ms": round(percentile(lat, 0.5) * 1e3, 1),
        "admin_p99_ms": round(percentile(lat, 0.99) * 1e3, 1),
        "flood": tally,
        "server_peak_rss_mib": round(peak / 2**20, 1),
    }


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    port, probes = free_port(), free_port()
    cmd = [
        sys.executable, "-m", "webhooks", "--insecure-http", "--host", "127.0.0.1", "--port", str(port),
        "--metrics-port", str(probes), "--probe-host", "127.0.0.1", "--no-hypernode-cache",
        "--no-command-authorization", "--log-level", "ERROR", "--regex-workers", str(args.workers),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        await wait_ready(f"http://127.0.0.1:{probes}/readyz", proc)
        await asyncio.sleep(2)  # the workers are up
        return [await one(port, proc.pid, n, args.seconds) for n in [0, *args.clients]]
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(20)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--clients", default="4,8", help="flooding client counts, comma-separated")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--workers", type=int, default=0, help="--regex-workers of the server (0: per core)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    args.clients = [int(c) for c in args.clients.split(",") if c]
    rows = asyncio.run(bench(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"regex checker under flood: {args.seconds:g} s per row, cores {os.cpu_count()}, "
        f"load average {os.getloadavg()[0]:.1f}; row 0 (no flood) is the same run's baseline"
    )
    for r in rows:
        print(
            f"clients {r['clients']}: admin {r['admin_requests']} requests, first try {r['admin_first_try']}, "
            f"final {r['admin_final']}, p50 {r['admin_p50_ms']} ms, p99 {r['admin_p99_ms']} ms; "
            f"flood answers {r['flood']}; server peak {r['server_peak_rss_mib']} MiB"
        )
        if r["admin_refusals"]:
            print(f"  refusals: {r['admin_refusals']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
