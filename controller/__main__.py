"""``hyperplace-controller``: the Job and HyperNode controllers as one process.

Flags default from the environment the Deployment sets (``manifests/controller``), so
the manifest needs no arguments. Serves ``/healthz`` (alive and, when leading, the
lease is fresh), ``/readyz`` (every informer synced) and ``/metrics`` on one port.
On SIGTERM/SIGINT: stop taking work, finish in-flight reconciles, release the Lease.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
from collections.abc import Sequence

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from hyperplace.runtime.api import ApiClient
from hyperplace.runtime.leader import LeaderElector
from hyperplace.runtime.process import (
    close_client,
    exit_after_lost_leadership,
    run_until_stopped,
    stop_on_signals,
)

from .manager import ControllerManager, ManagerConfig

log = logging.getLogger("hyperplace.controller")


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    pod_ns = os.environ.get("POD_NAMESPACE") or "volcano-system"
    p = argparse.ArgumentParser(prog="hyperplace-controller", description=__doc__.splitlines()[0])
    p.add_argument(
        "--kubeconfig", default=os.environ.get("KUBECONFIG"), help="kubeconfig path (default: in-cluster)"
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("HYPERPLACE_LEADER_ELECTION_NAMESPACE") or pod_ns,
        help="namespace of the leader-election Lease",
    )
    p.add_argument(
        "--lease-name", default=os.environ.get("HYPERPLACE_LEADER_ELECTION_LEASE") or "hyperplace-controller"
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=_env_bool("HYPERPLACE_LEADER_ELECT", True),
        help="run only while holding the Lease (default: on)",
    )
    p.add_argument(
        "--health-port",
        "--metrics-port",
        dest="health_port",
        type=int,
        default=int(os.environ.get("HYPERPLACE_HEALTH_PORT") or 8080),
        help="port for /healthz, /readyz and /metrics (0 disables)",
    )
    p.add_argument(
        "--config-namespace",
        default=os.environ.get("KUBE_POD_NAMESPACE") or pod_ns,
        help="namespace of Volcano's controller ConfigMap (HyperNode discovery)",
    )
    p.add_argument(
        "--config-map",
        default=os.environ.get("HYPERPLACE_CONTROLLER_CONFIGMAP") or "volcano-controller-configmap",
    )
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--log-level", default=os.environ.get("HYPERPLACE_LOG_LEVEL") or "INFO")
    return p.parse_args(argv)


def health_app(manager: ControllerManager, elector: LeaderElector | None) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        ok = elector is None or elector.healthy()
        return web.Response(status=200 if ok else 500, text="ok" if ok else "lease not renewed")

    async def readyz(_: web.Request) -> web.Response:
        # A standby replica (not leading) has not started its informers yet: it is ready
        # to take over, which is what a readiness probe on a controller should mean.
        ok = manager.synced() or (elector is not None and not elector.is_leader)
        return web.Response(status=200 if ok else 503, text="ok" if ok else "caches not synced")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", make_aiohttp_handler(manager.registry))
    return app


async def run(args: argparse.Namespace, api: ApiClient | None = None) -> None:
    """Run the controllers until SIGTERM/SIGINT (or cancellation)."""
    raw: object = None
    if api is None:
        from hyperplace.runtime.kube import connect

        api, raw = await connect(args.kubeconfig)
    manager = ControllerManager(
        api,
        ManagerConfig(
            workers=args.workers, config_namespace=args.config_namespace, config_map=args.config_map
        ),
    )
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"
    elector = LeaderElector(api, args.namespace, args.lease_name, identity) if args.leader_elect else None

    runner: web.AppRunner | None = None
    if args.health_port:
        runner = web.AppRunner(health_app(manager, elector))
        await runner.setup()
        await web.TCPSite(runner, "0.0.0.0", args.health_port).start()

    stop = asyncio.Event()
    try:
        with stop_on_signals(stop):
            lost = await run_until_stopped(elector.run(manager.run) if elector else manager.run(), stop, log)
    finally:
        if runner is not None:
            await runner.cleanup()
        await close_client(raw)
    if lost:
        exit_after_lost_leadership(log)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
