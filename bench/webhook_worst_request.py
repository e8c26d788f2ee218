"""How long /healthz takes while the costliest admission requests are being judged.

    python bench/webhook_worst_request.py [--rounds 3] [--json]

Starts ``hyperplace-webhooks`` over TLS on 127.0.0.1 and, from a separate process, polls
``/healthz`` on the probe port every 20 ms. Three phases, same poller:

1. baseline: nothing else happens;
2. patterns: HyperNodes each bringing 32 new compile-heavy patterns (``\\pL{300}<n>``, about
   a second of RE2 each), the most a request may bring, sent back to back;
3. bodies: 3 MiB Jobs (the size limit) and bodies nested right at the depth limit.

It prints the /healthz latency percentiles per phase and the admission requests' own
latency. Loopback only; bounded by ``--rounds``. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
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

from bench.webhook_connections import wait_ready  # noqa: E402
from bench.webhook_latency import free_port, percentile  # noqa: E402
from hyperplace.pki.certificates import generate_webhook_certs, write_tls_files  # noqa: E402

POLLER = """
import sys, time, urllib.request, json
url, path = sys.argv[1], sys.argv[2]
out = []
with open(path, "a") as fh:
    while True:
        t0 = time.perf_counter()
        try:
            urllib.request.urlopen(url, timeout=10).read()
        except OSError:
            pass
        fh.write(f"{time.time()} {(time.perf_counter() - t0) * 1e3}\\n")
        fh.flush()
        time.sleep(0.02)
"""


def review(obj: dict[str, Any], uid: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": "CREATE", "object": obj},
        }
    ).encode()


def costly_hypernode(n: int) -> bytes:
    members = [
        {"type": "Node", "selector": {"regexMatch": {"pattern": rf"\pL{{300}}<{n}-{i}>"}}} for i in range(32)
    ]
    hn = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": f"s{n}"},
        "spec": {"tier": 1, "members": members},
    }
    return review(hn, f"hn-{n}")


def big_job(n: int, target: int = 3 * 1024 * 1024 - 4096) -> bytes:
    tasks = []
    task = {
        "replicas": 1,
        "template": {"spec": {"containers": [{"name": "c", "image": "x", "env": []}]}},
    }
    env = task["template"]["spec"]["containers"][0]["env"]  # type: ignore[index]
    for i in range(2000):
        env.append({"name": f"E{i}", "value": "v" * 40})
    for i in range(300):
        t = json.loads(json.dumps(task))
        t["name"] = f"t{i}"
        tasks.append(t)
        if len(json.dumps(tasks)) > target:
            tasks.pop()
            break
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"big-{n}", "namespace": "default"},
        "spec": {"tasks": tasks},
    }
    return review(job, f"job-{n}")


def deep_body(n: int) -> bytes:
    deep: Any = 1
    for _ in range(92):
        deep = {"a": deep}
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"deep-{n}", "namespace": "default"},
        "spec": {"tasks": [{"replicas": 1, "template": {"metadata": {"x": deep}}}]},
    }
    return review(job, f"deep-{n}")


def window(path: Path, start: float, end: float) -> list[float]:
    out = []
    for line in path.read_text().splitlines():
        ts, ms = line.split()
        if start <= float(ts) <= end:
            out.append(float(ms))
    return sorted(out)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 0.5), 2),
        "p99_ms": round(percentile(values, 0.99), 2),
        "max_ms": round(values[-1], 2) if values else float("nan"),
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="hyperplace-bench-"))
    try:
        certs = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"])
        write_tls_files(tmp / "tls", certs)
        port, probes = free_port(), free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "webhooks", "--host", "127.0.0.1", "--port", str(port),
             "--metrics-port", str(probes), "--probe-host", "127.0.0.1", "--no-hypernode-cache",
             "--tls-cert-file", str(tmp / "tls" / "tls.crt"),
             "--tls-private-key-file", str(tmp / "tls" / "tls.key"), "--log-level", "ERROR"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        samples = tmp / "healthz.txt"
        poller = None
        try:
            await wait_ready(f"http://127.0.0.1:{probes}/readyz", proc)
            poller = subprocess.Popen(
                [sys.executable, "-c", POLLER, f"http://127.0.0.1:{probes}/healthz", str(samples)]
            )
            ctx = ssl.create_default_context(cadata=certs.ca.cert_pem.decode())
            results: dict[str, Any] = {}
            async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ctx), timeout=aiohttp.ClientTimeout(total=30)
            ) as s:
                t0 = time.time()
                await asyncio.sleep(args.baseline_seconds)
                results["baseline"] = {"healthz": summary(window(samples, t0, time.time()))}
                for phase, make, path in (
                    ("patterns", costly_hypernode, "/hypernodes/validate"),
                    ("bodies", lambda n: big_job(n) if n % 2 == 0 else deep_body(n), "/jobs/validate"),
                ):
                    bodies = [make(n) for n in range(args.rounds * (1 if phase == "patterns" else 2))]
                    t0 = time.time()
                    took = []
                    for body in bodies:
                        r0 = time.perf_counter()
                        async with s.post(f"https://127.0.0.1:{port}{path}", data=body) as resp:
                            await resp.read()
                            assert resp.status in (200, 400), resp.status
                        took.append((time.perf_counter() - r0) * 1e3)
                    results[phase] = {
                        "healthz": summary(window(samples, t0, time.time())),
                        "request_ms": [round(x) for x in took],
                        "body_bytes": max(len(b) for b in bodies),
                    }
            return results
        finally:
            if poller is not None:
                poller.terminate()
                poller.wait(timeout=10)
            proc.terminate()
            proc.wait(timeout=20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline-seconds", type=float, default=5.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    res = asyncio.run(bench(args))
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"/healthz polled every 20 ms from another process; load average {os.getloadavg()[0]:.1f}")
    print(f"{'phase':10} {'polls':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}   admission requests (ms)")
    for phase, r in res.items():
        h = r["healthz"]
        extra = (
            f"   {r.get('request_ms', '')} (largest body {r['body_bytes']} B)" if "request_ms" in r else ""
        )
        print(f"{phase:10} {h['n']:>6} {h['p50_ms']:>8} {h['p99_ms']:>8} {h['max_ms']:>8}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
