"""What the controller and the scheduler serve besides their work: probes and metrics.

* ``/healthz`` and ``/readyz`` are plain HTTP on ``--health-port``, every interface: the kubelet
  probes the pod's IP, and the answers say only "ok" or why not.
* ``/metrics`` listens on ``--metrics-bind-address`` (controller-runtime's flag), by default
  ``127.0.0.1:9090``: reachable inside the pod only (``kubectl port-forward``, or a sidecar such
  as kube-rbac-proxy in front of it). Given a serving certificate
  (``--metrics-tls-cert-file`` and ``--metrics-tls-private-key-file``) it is HTTPS, with the
  webhook's TLS settings (TLS 1.2+, AEAD suites only, the pair reloaded when the mounted files
  change) and may listen on every interface (``:9090``) for Prometheus to scrape. Plain HTTP on
  an address other than loopback is refused at start-up.

Also here: the leader elector both processes build from the shared leader-election flags, and
:func:`run_served`, the start-up and shutdown both run their work in: probes and ``/metrics``
up, the work run until SIGTERM/SIGINT (:mod:`hyperplace.runtime.process`), then both down.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from .api import ApiClient
from .leader import LeaderElector
from .process import close_client, exit_after_lost_leadership, run_until_stopped, stop_on_signals

log = logging.getLogger("hyperplace.runtime.serving")

DEFAULT_METRICS_BIND_ADDRESS = "127.0.0.1:9090"


def parse_bind_address(text: str) -> tuple[str, int] | None:
    """``host:port`` (``:port`` is every interface, ``[::1]:port`` an IPv6 host); ``0`` or an
    empty string disables the endpoint (None). Raises ValueError naming what is wrong."""
    s = text.strip()
    if s in ("", "0"):
        return None
    host, sep, port_text = s.rpartition(":")
    if not sep:
        raise ValueError(f"bind address {text!r} needs a port (host:port, or :port for every interface)")
    host = host.strip("[]") or "0.0.0.0"
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"bind address {text!r}: port {port_text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"bind address {text!r}: port {port} is out of range 1-65535")
    return host, port


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class MetricsServing:
    """Where and how ``/metrics`` is served (see the module docstring)."""

    host: str
    port: int
    cert_file: str | None = None
    key_file: str | None = None

    @property
    def tls(self) -> bool:
        return self.cert_file is not None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/metrics"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MetricsServing | None:
        """From the flags ``flags.add_metrics_serving`` adds (checked by ``check_metrics_serving``)."""
        address = parse_bind_address(args.metrics_bind_address)
        if address is None:
            return None
        host, port = address
        if args.metrics_port is not None:
            port = args.metrics_port
        if port == 0:
            return None
        return cls(host, port, args.metrics_tls_cert_file, args.metrics_tls_private_key_file)


def check_metrics_serving(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse what would expose plain-HTTP metrics or cannot start, naming the flag."""
    try:
        serving = MetricsServing.from_args(args)
    except ValueError as exc:
        p.error(f"--metrics-bind-address: {exc}")
    if (args.metrics_tls_cert_file is None) != (args.metrics_tls_private_key_file is None):
        p.error("--metrics-tls-cert-file and --metrics-tls-private-key-file go together")
    if serving is None:
        return
    if not serving.tls and not is_loopback(serving.host):
        p.error(
            f"--metrics-bind-address {serving.host}:{serving.port} would serve /metrics in plain HTTP "
            "beyond this pod: bind it to 127.0.0.1, or give --metrics-tls-cert-file and "
            "--metrics-tls-private-key-file to serve it over HTTPS"
        )
    if serving.port == getattr(args, "health_port", None):
        p.error(f"/metrics and the probes cannot share port {serving.port}: choose another --metrics-port")


async def serve(
    app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None = None
) -> web.AppRunner:
    """Start ``app`` on ``host:port`` (HTTPS with ``ssl_context``); cleanup() the runner to stop."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
    return runner


class MetricsServer:
    """``/metrics`` on its own listener, HTTPS when a certificate is configured."""

    def __init__(self, serving: MetricsServing, handler: Callable[[web.Request], object]) -> None:
        self.serving = serving
        self.app = web.Application()
        self.app.router.add_get("/metrics", handler)  # type: ignore[arg-type]
        self._runner: web.AppRunner | None = None
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the certificate (failing loudly when it cannot be) and listen."""
        context: ssl.SSLContext | None = None
        s = self.serving
        if s.cert_file is not None and s.key_file is not None:
            # lazy: cryptography loads only when /metrics is served over TLS
            from hyperplace.pki.tls import CertReloader

            reloader = CertReloader(s.cert_file, s.key_file)
            if not reloader.reload_if_changed():
                raise RuntimeError(f"metrics serving certificate not loaded: {reloader.last_error}")
            context = reloader.context
            self._watch = asyncio.create_task(reloader.watch())
        self._runner = await serve(self.app, s.host, s.port, context)
        log.info("serving metrics on %s", s.url)

    async def stop(self) -> None:
        """Stop listening and watching the certificate."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()


def default_identity() -> str:
    """``$POD_NAME_<pid>`` (the host name outside a pod): unique per process incarnation."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"


def leader_elector(api: ApiClient, args: argparse.Namespace, identity: str) -> LeaderElector | None:
    """The elector the leader-election flags (``flags.add_leader_election``) describe, or None
    with ``--no-leader-elect``."""
    if not args.leader_elect:
        return None
    return LeaderElector(
        api,
        args.lease_namespace,
        args.lease_name,
        identity,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )


def probes_app(
    elector: LeaderElector | None, readyz: Callable[[web.Request], Awaitable[web.Response]]
) -> web.Application:
    """``/healthz`` (alive and, when leading, the lease renewed in time) and the process's own
    ``/readyz`` (``/metrics`` is served apart: :class:`MetricsServer`)."""

    async def healthz(_: web.Request) -> web.Response:
        ok = elector is None or elector.healthy()
        return web.Response(status=200 if ok else 500, text="ok" if ok else "lease not renewed")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def run_served(
    work: Callable[[], Coroutine[Any, Any, None]],
    args: argparse.Namespace,
    probes: web.Application,
    registry: CollectorRegistry,
    log: logging.Logger,
    *,
    client: object = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``probes`` on ``--health-port`` (0: not at all) and ``registry`` on ``/metrics`` as
    the metrics flags say, run ``work()`` until SIGTERM/SIGINT, ``stop`` or cancellation, then
    stop serving and close ``client`` (the raw kubernetes-asyncio client, if any). Work that
    ended by itself lost leadership: the process exits (see :mod:`hyperplace.runtime.process`)."""
    runner: web.AppRunner | None = None
    metrics: MetricsServer | None = None
    serving = MetricsServing.from_args(args)
    stop = stop or asyncio.Event()
    try:
        if args.health_port:
            runner = await serve(probes, "0.0.0.0", args.health_port)
        if serving is not None:
            metrics = MetricsServer(serving, make_aiohttp_handler(registry))
            await metrics.start()
        with stop_on_signals(stop):
            lost = await run_until_stopped(work(), stop, log)
    finally:
        if metrics is not None:
            await metrics.stop()
        if runner is not None:
            await runner.cleanup()
        await close_client(client)
    if lost:
        exit_after_lost_leadership(log)
