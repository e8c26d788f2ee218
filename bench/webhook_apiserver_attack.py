"""Finding 1 of issue 21 against the real kube-apiserver: one client holding 1,000 silent TLS
connections to the webhook port (reopening each as it is closed) while Jobs are admitted.

    python bench/webhook_apiserver_attack.py [--connections 1000] [--seconds 30] [--rate 4]
                                             [--keepalive 0.2] [--json]

Starts etcd + kube-apiserver (hack/kube-bin.sh; its AdmissionConfiguration presents the client
certificate ``hyperplace-certs client`` issued) and, twice, ``hyperplace-webhooks`` with its
default limits: once without and once with ``--client-ca-file`` (mTLS). Each time it measures
Volcano Job admission through the apiserver (``POST .../jobs?dryRun=All`` as the admin, which
calls the mutating and validating webhooks) at ``--rate`` per second: first idle for
``--seconds``, then for ``--seconds`` while an attacker process (its own event loop, so it
cannot slow the prober) keeps ``--connections`` connections open to the webhook port: TLS
handshakes completed and nothing sent (without mTLS), or handshakes started without a client
certificate (with mTLS); every connection the server closes is reopened at once. The webhook
runs with ``--keepalive-timeout`` of ``--keepalive`` (0.2 s: shorter than the gap between
probes), so the apiserver's keep-alive connection is closed before every probe and each needs a
new connection: the case in which, before, every admission failed with EOF. (The keep-alive
counts only after a request; the attacker's silent connections are held until the 5 s
first-request deadline, or evicted. ``--keepalive 60``, the default, measures a warm apiserver
connection.) Prints admission p50/p99 and failures idle and under attack, from the same
run, and what the server did with the attacker's connections. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.webhook_latency import free_port, percentile  # noqa: E402
from certs.__main__ import main as certs_main  # noqa: E402
from hyperplace.localup import controlplane  # noqa: E402
from hyperplace.localup.components import webhook_configurations, webhooks_argv  # noqa: E402
from hyperplace.pki.certificates import generate_webhook_certs, write_tls_files  # noqa: E402

ATTACKER = r"""
import asyncio, json, ssl, sys, time
port, count, seconds, cafile = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
ctx = ssl.create_default_context(cafile=cafile)
stats = {"opened": 0, "handshakes_completed": 0, "failed": 0, "closed_by_server": 0}
held = []

async def one(deadline):
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=ctx), timeout=10)
            stats["opened"] += 1
            stats["handshakes_completed"] += 1
        except (OSError, ssl.SSLError, asyncio.TimeoutError):
            stats["failed"] += 1
            await asyncio.sleep(0.05)
            continue
        held.append(writer)
        try:
            # Send nothing; wait until the server closes (then reopen at once).
            await asyncio.wait_for(reader.read(1), timeout=max(0.0, deadline - time.monotonic()))
            stats["closed_by_server"] += 1
        except (OSError, ssl.SSLError, asyncio.TimeoutError):
            if time.monotonic() < deadline:
                stats["closed_by_server"] += 1
        finally:
            held.remove(writer)
            writer.close()

async def sample(deadline, out):
    while time.monotonic() < deadline:
        out.append(len(held))
        await asyncio.sleep(0.5)

async def main():
    deadline = time.monotonic() + seconds
    samples = []
    await asyncio.gather(sample(deadline, samples), *(one(deadline) for _ in range(count)))
    stats["held_median"] = sorted(samples)[len(samples) // 2] if samples else 0
    print(json.dumps(stats))

asyncio.run(main())
"""


def job(namespace: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"probe-{i}", "namespace": namespace},
        "spec": {
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }


async def probe(
    session: aiohttp.ClientSession, server: str, seconds: float, rate: float, start_index: int
) -> tuple[list[float], list[str]]:
    """Admissions at ``rate`` per second for ``seconds``: latencies (s) and failures."""
    url = f"{server}/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs?dryRun=All"
    latencies: list[float] = []
    failures: list[str] = []
    end = time.monotonic() + seconds
    i = start_index
    while time.monotonic() < end:
        t0 = time.perf_counter()
        try:
            async with session.post(
                url, json=job("default", i), timeout=aiohttp.ClientTimeout(total=15)
            ) as r:
                body = await r.text()
                if r.status == 201 and '"maxRetry":3' in body.replace(" ", ""):
                    latencies.append(time.perf_counter() - t0)
                else:
                    # The apiserver's message ends with why the call failed (EOF, reset, deadline).
                    failures.append(f"HTTP {r.status}: ...{body[-160:]}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            failures.append(type(exc).__name__)
        i += 1
        await asyncio.sleep(max(0.0, 1.0 / rate - (time.perf_counter() - t0)))
    return latencies, failures


def summary(latencies: list[float], failures: list[str]) -> dict[str, Any]:
    s = sorted(latencies)
    return {
        "admitted": len(latencies),
        "failed": len(failures),
        "p50_ms": round(percentile(s, 0.5) * 1e3, 1),
        "p99_ms": round(percentile(s, 0.99) * 1e3, 1),
        "max_ms": round(max(s) * 1e3, 1) if s else float("nan"),
        "first_failures": sorted(set(failures))[:3],
    }


async def one_run(cp: Any, tls: Path, mtls: bool, args: argparse.Namespace) -> dict[str, Any]:
    port, health = free_port(), free_port()
    kube = ["kubectl", f"--kubeconfig={cp.kubeconfig}"]
    subprocess.run([*kube, "apply", "-f", "-"], input=yaml.safe_dump_all(webhook_configurations(port)),
                   text=True, check=True, capture_output=True)  # fmt: skip
    extra = [f"--keepalive-timeout={args.keepalive}s", "--log-level=WARNING"]
    if mtls:
        extra.append(f"--client-ca-file={tls / 'ca.crt'}")
    log = tls / f"webhooks-{'mtls' if mtls else 'plain'}.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            webhooks_argv(cp.kubeconfig, port=port, tls_dir=tls, health_port=health, extra=extra),
            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "KUBECONFIG": str(cp.kubeconfig), "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    ctx = ssl.create_default_context(cafile=str(cp.pki.ca_crt))
    ctx.load_cert_chain(str(cp.pki.admin_crt), str(cp.pki.admin_key))
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            deadline = time.monotonic() + 60
            while True:  # the caBundle and the configurations reach the apiserver
                lat, _ = await probe(session, cp.server, 0.5, 2, 0)
                if lat:
                    break
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the webhooks never answered:\n" + log.read_text()[-2000:])
            idle = summary(*await probe(session, cp.server, args.seconds, args.rate, 1000))
            attacker = await asyncio.create_subprocess_exec(
                sys.executable, "-c", ATTACKER, str(port), str(args.connections),
                str(args.seconds + 5), str(tls / "ca.crt"), stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            await asyncio.sleep(5)  # let it fill the port
            attack = summary(*await probe(session, cp.server, args.seconds, args.rate, 100000))
            ready = urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=5).read().decode()
            out, _ = await attacker.communicate()
            metrics = ""
            with contextlib.suppress(OSError):
                metrics = subprocess.run(
                    ["curl", "-s", "--cacert", str(tls / "ca.crt"),
                     *(["--cert", str(tls / "client.crt"), "--key", str(tls / "client.key")] if mtls else []),
                     f"https://127.0.0.1:{port}/metrics"],
                    capture_output=True, text=True, timeout=10,
                ).stdout  # fmt: skip
            closed = {
                line.split('"')[1]: float(line.rsplit(" ", 1)[1])
                for line in metrics.splitlines()
                if line.startswith("hyperplace_webhook_connections_closed_total{")
            }
            return {
                "mode": "mTLS" if mtls else "no mTLS",
                "idle": idle,
                "attack": attack,
                "attacker": json.loads(out or b"{}"),
                "server_closed": closed,
                "readyz_during_attack": ready,
            }
    finally:
        proc.terminate()
        proc.wait(20)


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    bin_dir = controlplane.kube_bin_dir()
    with tempfile.TemporaryDirectory(prefix="hyperplace-bench-") as tmp:
        tls = Path(tmp) / "tls"
        write_tls_files(tls, generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"]),
                        write_ca_key=True)  # fmt: skip
        assert certs_main(["client", f"--out-dir={tls}", "--server=*"]) == 0
        with controlplane.control_plane(
            bin_dir, apiserver_args=[f"--admission-control-config-file={tls / 'admission-config.yaml'}"]
        ) as cp:
            kube = ["kubectl", f"--kubeconfig={cp.kubeconfig}"]
            subprocess.run(
                [*kube, "apply", "-f", str(ROOT / "manifests" / "crds")], check=True, capture_output=True
            )
            for _ in range(120):
                if (
                    subprocess.run([*kube, "get", "jobs.batch.volcano.sh"], capture_output=True).returncode
                    == 0
                ):
                    break
                time.sleep(0.5)
            subprocess.run([*kube, "apply", "-f", str(ROOT / "manifests" / "default-queue.yaml")],
                           check=True, capture_output=True)  # fmt: skip
            return [await one_run(cp, tls, False, args), await one_run(cp, tls, True, args)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=30.0, help="idle phase and attack phase, each")
    p.add_argument("--rate", type=float, default=4.0, help="admissions per second")
    p.add_argument("--keepalive", type=float, default=0.2, help="the webhook's --keepalive-timeout (s)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = asyncio.run(bench(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{args.connections} silent TLS connections (reopened as closed) vs Job admission through the "
        f"real kube-apiserver, {args.rate:g}/s, {args.seconds:g} s idle then {args.seconds:g} s under attack; "
        f"webhook keep-alive {args.keepalive:g} s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    for r in rows:
        i, a = r["idle"], r["attack"]
        print(f"\n[{r['mode']}]")
        print(
            f"  idle:   {i['admitted']} admitted, {i['failed']} failed, p50 {i['p50_ms']} ms, p99 {i['p99_ms']} ms"
        )
        print(
            f"  attack: {a['admitted']} admitted, {a['failed']} failed, p50 {a['p50_ms']} ms, p99 {a['p99_ms']} ms "
            f"(p99 ratio attack/idle {a['p99_ms'] / i['p99_ms']:.2f})"
        )
        if a["first_failures"]:
            print(f"  failures: {a['first_failures']}")
        print(f"  attacker: {r['attacker']}")
        print(f"  server closed: {r['server_closed']}; /readyz during attack: {r['readyz_during_attack']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
