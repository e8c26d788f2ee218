"""Webhook latency under load: the mutating Job webhook over keep-alive TLS on one core.

    python bench/webhook_latency.py [--rate 500] [--duration 10] [--connections 32] [--json]

Starts ``hyperplace-webhooks`` with a fresh certificate on 127.0.0.1 in a subprocess
pinned to one CPU, then drives an open-loop load from this process (pinned to another
CPU when there is one): requests are *scheduled* at a fixed rate and each latency is
measured from its scheduled send time, so a stalled server shows up as latency instead
of silently lowering the offered load (no coordinated omission).

Two phases, same rate, duration, TLS session setup and connection pool:

1. baseline: ``GET /healthz`` (a handler that does nothing);
2. ``POST /jobs/mutate`` with a ~3 KB AdmissionReview of a Volcano Job.

It prints p50/p95/p99/max, the achieved rate and the ratio of the two phases. This is a
measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hyperplace.pki.certificates import generate_webhook_certs, write_tls_files  # noqa: E402


def job_review(target_bytes: int = 3072) -> bytes:
    """An AdmissionReview (CREATE) of a two-task partitioned Job, padded to about
    ``target_bytes`` with the env vars a real training pod carries."""
    template = {
        "metadata": {"labels": {"app": "llm-train", "team": "research"}},
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "registry.example.com/llm/trainer:2026.11",
                    "command": ["torchrun", "--nnodes=$(WORLD_SIZE)", "train.py"],
                    "resources": {
                        "requests": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                        "limits": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                    },
                    "env": [],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "dataset"}}],
        },
    }
    review: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000000",
            "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
            "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"},
            "operation": "CREATE",
            "namespace": "research",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "llm-train", "namespace": "research"},
                "spec": {
                    "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                    "tasks": [
                        {
                            "name": "worker",
                            "replicas": 16,
                            "partitionPolicy": {
                                "totalPartitions": 4,
                                "partitionSize": 4,
                                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                            },
                            "template": template,
                        },
                        {
                            "replicas": 1,
                            "template": {"spec": {"containers": [{"name": "ps", "image": "ps:1"}]}},
                        },
                    ],
                },
            },
            "dryRun": False,
        },
    }
    env = template["spec"]["containers"][0]["env"]
    i = 0
    while len(json.dumps(review)) < target_bytes:
        env.append({"name": f"NCCL_SETTING_{i}", "value": f"value-{i:04d}"})
        i += 1
    return json.dumps(review).encode()


def server_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


async def run_phase(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    body: bytes | None,
    rate: float,
    duration: float,
    check: bool,
) -> dict[str, Any]:
    """Open-loop load; latency from each request's scheduled time to its full response."""
    total = int(rate * duration)
    latencies: list[float] = []
    errors: list[str] = []
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05
    headers = {"Content-Type": "application/json"}

    async def one(scheduled: float) -> None:
        try:
            async with session.request(method, url, data=body, headers=headers) as resp:
                payload = await resp.read()
                if resp.status != 200:
                    errors.append(f"HTTP {resp.status}")
                    return
                if check:
                    answer = json.loads(payload)["response"]
                    if not answer.get("allowed") or "patch" not in answer:
                        errors.append("unexpected answer")
                        return
        except (TimeoutError, aiohttp.ClientError) as exc:
            errors.append(type(exc).__name__)
            return
        latencies.append(loop.time() - scheduled)

    tasks = []
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    elapsed = loop.time() - start
    latencies.sort()
    return {
        "requests": total,
        "ok": len(latencies),
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
        "achieved_rps": len(latencies) / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(latencies, 0.50) * 1e3,
        "p95_ms": percentile(latencies, 0.95) * 1e3,
        "p99_ms": percentile(latencies, 0.99) * 1e3,
        "max_ms": (latencies[-1] if latencies else float("nan")) * 1e3,
    }


async def wait_ready(
    url: str, ctx: ssl.SSLContext, proc: subprocess.Popen[bytes], timeout: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"webhook server exited with {proc.returncode}")
            try:
                async with s.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("webhook server did not become ready")
            await asyncio.sleep(0.1)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpu = cpus[0], cpus[1] if len(cpus) > 1 else cpus[0]
    tmp = Path(tempfile.mkdtemp(prefix="hyperplace-bench-"))
    try:
        certs = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"])
        write_tls_files(tmp, certs)
        port = free_port()
        cmd = [
            sys.executable, "-m", "webhooks",
            "--host", "127.0.0.1", "--port", str(port), "--metrics-port", "0",
            "--tls-cert-file", str(tmp / "tls.crt"), "--tls-private-key-file", str(tmp / "tls.key"),
            "--log-level", "WARNING",
        ]  # fmt: skip
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            preexec_fn=lambda: os.sched_setaffinity(0, {server_cpu}),  # the server gets one core
        )
        os.sched_setaffinity(0, {client_cpu})
        try:
            ctx = ssl.create_default_context(cadata=certs.ca.cert_pem.decode())
            base = f"https://127.0.0.1:{port}"
            await wait_ready(base + "/readyz", ctx, proc)
            body = job_review(args.body_bytes)
            connector = aiohttp.TCPConnector(ssl=ctx, limit=args.connections, keepalive_timeout=60)
            timeout = aiohttp.ClientTimeout(total=10)
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                # Warm-up: open the pool's TLS connections and let both sides settle.
                await run_phase(session, "POST", base + "/jobs/mutate", body, args.rate, 1.0, check=True)
                cpu0 = server_cpu_seconds(proc.pid)
                baseline = await run_phase(
                    session, "GET", base + "/healthz", None, args.rate, args.duration, check=False
                )
                cpu1 = server_cpu_seconds(proc.pid)
                mutate = await run_phase(
                    session, "POST", base + "/jobs/mutate", body, args.rate, args.duration, check=True
                )
                cpu2 = server_cpu_seconds(proc.pid)
                # CPU time the server spent per request: unlike latency, this barely
                # depends on what else the machine is running.
                baseline["server_cpu_ms_per_request"] = (cpu1 - cpu0) * 1e3 / max(baseline["ok"], 1)
                mutate["server_cpu_ms_per_request"] = (cpu2 - cpu1) * 1e3 / max(mutate["ok"], 1)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        return {
            "load_average_1m": os.getloadavg()[0],
            "cpus": len(cpus),
            "rate": args.rate,
            "duration_s": args.duration,
            "connections": args.connections,
            "body_bytes": len(body),
            "server_cpu": server_cpu,
            "client_cpu": client_cpu,
            "baseline_healthz": baseline,
            "jobs_mutate": mutate,
            "ratio": {
                q: mutate[f"{q}_ms"] / baseline[f"{q}_ms"] if baseline[f"{q}_ms"] > 0 else float("nan")
                for q in ("p50", "p95", "p99")
            },
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rate", type=float, default=500.0, help="requests per second offered")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per phase")
    p.add_argument("--connections", type=int, default=32, help="keep-alive TLS connections in the pool")
    p.add_argument("--body-bytes", type=int, default=3072, help="AdmissionReview size")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    result = asyncio.run(bench(args))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"offered {result['rate']:.0f} req/s for {result['duration_s']:.0f} s per phase, "
        f"{result['connections']} keep-alive TLS connections, server pinned to CPU {result['server_cpu']}, "
        f"client on CPU {result['client_cpu']}, request body {result['body_bytes']} bytes"
    )
    print(
        f"1-minute load average at the end: {result['load_average_1m']:.2f} on {result['cpus']} CPUs "
        "(other processes on these CPUs inflate the latencies)"
    )
    print(
        f"{'phase':<20}{'ok':>7}{'err':>5}{'rate/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        f"{'srv cpu ms/req':>16}"
    )
    for name in ("baseline_healthz", "jobs_mutate"):
        r = result[name]
        print(
            f"{name:<20}{r['ok']:>7}{r['errors']:>5}{r['achieved_rps']:>9.1f}"
            f"{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['max_ms']:>9.2f}"
            f"{r['server_cpu_ms_per_request']:>16.3f}"
        )
        if r["error_kinds"]:
            print(f"  errors: {', '.join(r['error_kinds'])}")
    ratio = result["ratio"]
    print(f"ratio mutate/baseline: p50 {ratio['p50']:.2f}x  p95 {ratio['p95']:.2f}x  p99 {ratio['p99']:.2f}x")
    cpu = result["jobs_mutate"]["server_cpu_ms_per_request"]
    base_cpu = result["baseline_healthz"]["server_cpu_ms_per_request"]
    print(
        f"server CPU per request: mutate {cpu:.3f} ms vs baseline {base_cpu:.3f} ms "
        f"({cpu / base_cpu if base_cpu else float('nan'):.2f}x); one core sustains about "
        f"{1e3 / cpu if cpu else float('nan'):.0f} mutate req/s at full load"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
