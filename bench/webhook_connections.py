"""Connection exhaustion: idle and slow-header TLS connections against the webhook server.

    python bench/webhook_connections.py [--idle 2000] [--slow 1000] [--hold 15] [--quick] [--json]
    python bench/webhook_connections.py --apiserver [...]   # bench/webhook_apiserver_attack.py

Serves the webhook app over TLS on 127.0.0.1 twice, with the same certificate:

1. baseline: the same app behind aiohttp's own ``web.TCPSite`` with aiohttp's defaults
   (no connection cap, 60 s handshakes, an hour of keep-alive), as the server ran before;
2. guarded: ``hyperplace-webhooks`` with its defaults (``webhooks.site.ConnectionLimits``).

Each time it opens ``--idle`` TLS connections that send nothing and ``--slow`` ones that
send a request line and then one header line per second (interleaved, one slow for every
two idle), holds them ``--hold`` seconds, then closes them. Meanwhile it samples the
server's resident memory (its own plus its children's, as a container's cgroup counts
it), times ``/healthz`` on the probe port, and tries one real admission request on a new
connection. Loopback only; every loop is bounded by the counts and the hold time.
This is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

from bench.webhook_latency import free_port, job_review  # noqa: E402
from hyperplace.pki.certificates import generate_webhook_certs, write_tls_files  # noqa: E402

LIMIT_MIB = 512  # the Deployment's memory limit


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its children (the regex worker)."""
    total = 0
    pids = [pid]
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    for p in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


async def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as s:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"webhook server exited with {proc.returncode}")
            with contextlib.suppress(aiohttp.ClientError):
                async with s.get(url) as resp:
                    if resp.status == 200:
                        return
            if time.monotonic() > deadline:
                raise RuntimeError("webhook server did not become ready")
            await asyncio.sleep(0.1)


async def post_once(port: int, ctx: ssl.SSLContext, body: bytes) -> str:
    """A legitimate admission request on a fresh connection: "HTTP 200" or why not."""
    connector = aiohttp.TCPConnector(ssl=ctx, force_close=True)
    timeout = aiohttp.ClientTimeout(total=10)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout) as s,
            s.post(f"https://127.0.0.1:{port}/jobs/mutate", data=body) as resp,
        ):
            return f"HTTP {resp.status}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"refused ({type(exc).__name__})"


class Attack:
    """Holds the attacker's connections and counts what the server did with them."""

    def __init__(self, port: int, ctx: ssl.SSLContext):
        self.port = port
        self.ctx = ctx
        self.writers: list[asyncio.StreamWriter] = []
        self.readers: list[asyncio.StreamReader] = []
        self.refused = 0
        self.opened = 0
        self.slow_tasks: list[asyncio.Task[None]] = []

    async def open(self, slow: bool, hold: float) -> None:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.port, ssl=self.ctx), timeout=20
            )
        except (OSError, ssl.SSLError, TimeoutError):
            self.refused += 1
            return
        self.opened += 1
        self.readers.append(reader)
        self.writers.append(writer)
        if slow:
            self.slow_tasks.append(asyncio.create_task(self._drip(writer, hold)))

    async def _drip(self, writer: asyncio.StreamWriter, hold: float) -> None:
        with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
            writer.write(b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\n")
            for i in range(int(hold)):  # one header line per second, never the blank line
                await asyncio.sleep(1.0)
                if writer.is_closing():
                    return
                writer.write(f"X-Slow-{i}: {i}\r\n".encode())
                await writer.drain()

    def still_open(self) -> int:
        """Connections the server has not closed yet."""
        return sum(1 for r in self.readers if not r.at_eof() and r.exception() is None)

    async def close(self) -> None:
        for t in self.slow_tasks:
            t.cancel()
        for w in self.writers:
            w.close()
        for w in self.writers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.wait_closed(), 1)


# The server as it was: the same app, aiohttp's TCPSite and defaults, probes on a second site.
BASELINE_SERVER = """
import asyncio, sys
from aiohttp import web
from webhooks.server import create_app, create_probe_app
from webhooks.tls import CertReloader
async def main(port, probes, cert, key):
    reloader = CertReloader(cert, key)
    assert reloader.reload_if_changed()
    app = create_app()
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=reloader.context, backlog=1024).start()
    probe = web.AppRunner(create_probe_app(app), access_log=None)
    await probe.setup()
    await web.TCPSite(probe, "127.0.0.1", probes).start()
    await asyncio.Event().wait()
asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]))
"""

# /healthz timed from its own process, so the attacker's busy event loop does not count.
HEALTH_SAMPLER = """
import sys, time, urllib.request
url, seconds = sys.argv[1], float(sys.argv[2])
worst, end = 0.0, time.monotonic() + seconds
while time.monotonic() < end:
    t0 = time.perf_counter()
    try:
        urllib.request.urlopen(url, timeout=5).read()
    except OSError:
        pass
    worst = max(worst, time.perf_counter() - t0)
    time.sleep(0.2)
print(worst * 1e3)
"""


async def run(limits_on: bool, args: argparse.Namespace, tmp: Path, ca_pem: bytes) -> dict[str, Any]:
    port, probes = free_port(), free_port()
    cert, key = str(tmp / "tls.crt"), str(tmp / "tls.key")
    if limits_on:
        cmd = [
            sys.executable, "-m", "webhooks",
            "--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(probes),
            "--probe-host", "127.0.0.1", "--no-hypernode-cache",
            "--tls-cert-file", cert, "--tls-private-key-file", key, "--log-level", "ERROR",
        ]  # fmt: skip
    else:
        cmd = [sys.executable, "-c", BASELINE_SERVER, str(port), str(probes), cert, key]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        await wait_ready(f"http://127.0.0.1:{probes}/readyz", proc)
        ctx = ssl.create_default_context(cadata=ca_pem.decode())
        body = job_review()
        assert await post_once(port, ctx, body) == "HTTP 200"
        rss_start = rss_bytes(proc.pid)
        attack = Attack(port, ctx)
        samples: list[int] = []
        stop = asyncio.Event()
        health = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HEALTH_SAMPLER, f"http://127.0.0.1:{probes}/healthz",
            str(args.hold + 10), stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip

        async def sample() -> None:
            while not stop.is_set():
                samples.append(rss_bytes(proc.pid))
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample())
        t_open = time.monotonic()
        order = []
        slow_left, idle_left = args.slow, args.idle
        while slow_left or idle_left:  # one slow for every two idle, bounded by the counts
            for _ in range(2):
                if idle_left:
                    order.append(False)
                    idle_left -= 1
            if slow_left:
                order.append(True)
                slow_left -= 1
        for i in range(0, len(order), 100):
            await asyncio.gather(*(attack.open(slow, args.hold) for slow in order[i : i + 100]))
        open_seconds = time.monotonic() - t_open
        await asyncio.sleep(1.0)
        held_after_open = attack.still_open()
        # A legitimate request on a fresh connection while the attack holds its connections.
        legit = await post_once(port, ctx, body)
        await asyncio.sleep(max(0.0, args.hold - 1.0))
        held_at_end = attack.still_open()
        rss_peak = max(samples) if samples else rss_bytes(proc.pid)
        await attack.close()
        await asyncio.sleep(2.0)
        stop.set()
        await sampler
        rss_after = rss_bytes(proc.pid)
        legit_after = await post_once(port, ctx, body)
        health_out, _ = await health.communicate()
        return {
            "limits": "guarded (defaults)" if limits_on else "baseline (no limits)",
            "attempted": args.idle + args.slow,
            "opened": attack.opened,
            "refused_on_connect": attack.refused,
            "open_seconds": round(open_seconds, 1),
            "held_after_open": held_after_open,
            "held_at_end": held_at_end,
            "rss_start_mib": round(rss_start / 2**20, 1),
            "rss_peak_mib": round(rss_peak / 2**20, 1),
            "rss_after_close_mib": round(rss_after / 2**20, 1),
            "healthz_max_ms": round(float(health_out or b"nan"), 1),
            "legit_during": legit,
            "legit_after": legit_after,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="hyperplace-bench-"))
    try:
        certs = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"])
        write_tls_files(tmp / "tls", certs)
        out = []
        if not args.skip_baseline:
            out.append(await run(False, args, tmp / "tls", certs.ca.cert_pem))
        out.append(await run(True, args, tmp / "tls", certs.ca.cert_pem))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--apiserver" in argv:
        # lazy: the real-apiserver variant needs the Go-built control plane; loaded only when asked
        from bench.webhook_apiserver_attack import main as attack_main

        return attack_main([a for a in argv if a != "--apiserver"])
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--idle", type=int, default=2000)
    p.add_argument("--slow", type=int, default=1000)
    p.add_argument("--hold", type=float, default=15.0, help="seconds the attack holds its connections")
    p.add_argument("--skip-baseline", action="store_true")
    p.add_argument("--quick", action="store_true", help="200 idle, 100 slow, 12 s")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.idle, args.slow, args.hold = 200, 100, 12.0
    rows = asyncio.run(bench(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{args.idle} idle + {args.slow} slow-header TLS connections held {args.hold:g} s on loopback; "
        f"Deployment memory limit {LIMIT_MIB} MiB; load average {os.getloadavg()[0]:.1f}"
    )
    keys = [k for k in rows[0] if k != "limits"]
    print(f"{'':24}" + "".join(f"{r['limits']:>24}" for r in rows))
    for k in keys:
        print(f"{k:24}" + "".join(f"{r[k]!s:>24}" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
