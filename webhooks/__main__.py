"""``hyperplace-webhooks``: serve the admission webhooks.

    hyperplace-webhooks [--port 9443] [--tls-cert-file F --tls-private-key-file F]
                        [--health-port 8080] [--cert-reload-seconds 10s] [--insecure-http]
                        [--ca-key-file F] [--cert-renew-fraction 0.667]
                        [--max-connections 1000] [--keepalive-timeout 60s] ...
                        [--client-ca-file F [--client-cert-name CN]...]      # mTLS
                        [--command-key-file F] [--no-command-authorization]  # queue Commands
                        [--podgroup-status-writer USER]...                   # PodGroup status

Defaults come from the Deployment's environment (``HYPERPLACE_WEBHOOK_PORT``,
``HYPERPLACE_HEALTH_PORT``, ``HYPERPLACE_TLS_DIR``); with
``HYPERPLACE_VALIDATING_WEBHOOK_CONFIGURATION`` / ``..._MUTATING_...`` set (or the
matching flags) the server also writes ``ca.crt`` into those configurations at start-up
where it differs. The webhooks and ``/metrics`` are TLS-only unless ``--insecure-http``
(tests, local runs); the probe port serves only ``/healthz`` and ``/readyz``. With the CA
key (``--ca-key-file``, by default ``ca.key`` in ``HYPERPLACE_TLS_DIR`` when present) the
server renews its serving certificate in memory before expiry. With ``--client-ca-file``
(env ``HYPERPLACE_WEBHOOK_CLIENT_CA_FILE``) handshakes without a client certificate from that
CA are refused. Queue Commands are admitted after a SubjectAccessReview and marked with the
key in ``--command-key-file`` (env ``HYPERPLACE_COMMAND_KEY_FILE``); see webhooks/README.md.
SIGTERM and SIGINT stop the server gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import ssl
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

from hyperplace.pki.certificates import CLIENT_NAME, RENEW_FRACTION
from hyperplace.pki.commandmark import load_key
from hyperplace.pki.tls import DEFAULT_POLL_SECONDS, CertReloader
from hyperplace.runtime import flags
from hyperplace.runtime.flags import SYSTEM_NAMESPACE

from .cache import InformerContext
from .regexcheck import RegexChecker
from .server import STATE, ConnectionCollector, create_app, create_probe_app
from .site import (
    DEFAULT_FIRST_REQUEST_TIMEOUT,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEPALIVE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    ConnectionLimits,
    GuardedSite,
    aiohttp_keepalive,
    track_requests,
)

log = logging.getLogger("hyperplace.webhooks")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


DESCRIPTION = """hyperplace-webhooks: serve the admission webhooks over TLS.

Validates HyperNodes and Volcano Jobs, fills in Job defaults and stamps pods with their partition.
With --validating-webhook-configuration / --mutating-webhook-configuration the server writes its
CA (--ca-file) into those configurations' caBundle at start-up where it differs. Serves /healthz
and /readyz over plain HTTP on --health-port and /metrics on the TLS port; with the CA key
(--ca-key-file) it renews its serving certificate before expiry. SIGTERM and SIGINT stop it
gracefully."""


def _parser() -> argparse.ArgumentParser:
    tls_dir = os.environ.get("HYPERPLACE_TLS_DIR")
    p = flags.parser("hyperplace-webhooks", DESCRIPTION)
    p.add_argument("--host", metavar="ADDRESS", default="0.0.0.0", help="address to listen on")
    p.add_argument(
        "--port",
        metavar="PORT",
        type=int,
        default=_env_int("HYPERPLACE_WEBHOOK_PORT", 9443),
        help="HTTPS port of the webhooks (env HYPERPLACE_WEBHOOK_PORT)",
    )
    p.add_argument(
        "--tls-cert-file",
        metavar="FILE",
        default=str(Path(tls_dir, "tls.crt")) if tls_dir else None,
        help="serving certificate, re-read when it changes (env HYPERPLACE_TLS_DIR/tls.crt)",
    )
    p.add_argument(
        "--tls-private-key-file",
        metavar="FILE",
        default=str(Path(tls_dir, "tls.key")) if tls_dir else None,
        help="its private key (env HYPERPLACE_TLS_DIR/tls.key)",
    )
    p.add_argument(
        "--ca-file",
        metavar="FILE",
        default=str(Path(tls_dir, "ca.crt")) if tls_dir else None,
        help="CA bundle to inject into the webhook configurations (env HYPERPLACE_TLS_DIR/ca.crt)",
    )
    p.add_argument(
        "--ca-key-file",
        metavar="FILE",
        default=str(Path(tls_dir, "ca.key")) if tls_dir else None,
        help="CA key to renew the serving certificate with; renewal is off when the file is missing "
        "(env HYPERPLACE_TLS_DIR/ca.key)",
    )
    p.add_argument(
        "--cert-renew-fraction",
        metavar="F",
        type=float,
        default=float(os.environ.get("HYPERPLACE_CERT_RENEW_FRACTION") or RENEW_FRACTION),
        help="renew once this fraction of the certificate's lifetime has passed "
        "(env HYPERPLACE_CERT_RENEW_FRACTION)",
    )
    p.add_argument(
        "--health-port",
        "--metrics-port",
        dest="metrics_port",
        metavar="PORT",
        type=int,
        default=_env_int("HYPERPLACE_HEALTH_PORT", 8080),
        help="plain-HTTP port for /healthz and /readyz; 0 disables; /metrics is on the TLS port "
        "(env HYPERPLACE_HEALTH_PORT)",
    )
    p.add_argument("--probe-host", metavar="ADDRESS", default="0.0.0.0", help="address of the probe port")
    p.add_argument(
        "--metrics-on-probe-port",
        action="store_true",
        help="also serve /metrics on the probe port (bind it to localhost with --probe-host 127.0.0.1)",
    )
    p.add_argument(
        "--cert-reload-seconds",
        metavar="DURATION",
        type=flags.duration,
        default=DEFAULT_POLL_SECONDS,
        help="how often to check the certificate files for changes",
    )
    p.add_argument(
        "--max-connections",
        metavar="N",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        help="open connections at most; more are closed on accept",
    )
    p.add_argument(
        "--max-connections-per-client",
        metavar="N",
        type=int,
        default=0,
        help="open connections from one client address at most (0: half of --max-connections); "
        "beyond either cap the oldest connection that is not mid-request is closed to make room",
    )
    p.add_argument(
        "--first-request-timeout",
        metavar="DURATION",
        type=flags.duration,
        default=DEFAULT_FIRST_REQUEST_TIMEOUT,
        help="a new connection's first request must arrive (headers complete) within this of "
        "the TLS handshake",
    )
    p.add_argument(
        "--client-ca-file",
        metavar="FILE",
        default=os.environ.get("HYPERPLACE_WEBHOOK_CLIENT_CA_FILE") or None,
        help="require TLS client certificates signed by this CA (mTLS: the kube-apiserver "
        "authenticates with `hyperplace-certs client`); handshakes without one are refused "
        "(env HYPERPLACE_WEBHOOK_CLIENT_CA_FILE)",
    )
    p.add_argument(
        "--client-cert-name",
        metavar="CN",
        action="append",
        default=None,
        help=f"with --client-ca-file, a client certificate subject CN to accept; repeatable; "
        f"* accepts any the CA signed (default {CLIENT_NAME}; env HYPERPLACE_WEBHOOK_CLIENT_NAMES, "
        "comma-separated)",
    )
    p.add_argument(
        "--tls-handshake-timeout",
        metavar="DURATION",
        type=flags.duration,
        default=DEFAULT_HANDSHAKE_TIMEOUT,
        help="a TLS handshake must finish within this",
    )
    p.add_argument(
        "--header-timeout",
        metavar="DURATION",
        type=flags.duration,
        default=DEFAULT_HEADER_TIMEOUT,
        help="request headers must arrive within this of their first byte",
    )
    p.add_argument(
        "--keepalive-timeout",
        metavar="DURATION",
        type=flags.duration,
        default=DEFAULT_KEEPALIVE_TIMEOUT,
        help="an idle keep-alive connection is closed after this",
    )
    p.add_argument(
        "--command-key-file",
        metavar="FILE",
        default=os.environ.get("HYPERPLACE_COMMAND_KEY_FILE") or None,
        help="secret key marking admitted queue Commands; the controller reads the same file and "
        "obeys only marked Commands (env HYPERPLACE_COMMAND_KEY_FILE)",
    )
    p.add_argument(
        "--command-authorization",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="admit a queue Command only when its creator may update the Queue "
        "(SubjectAccessReview); --no-command-authorization is Volcano's behaviour (anyone)",
    )
    p.add_argument(
        "--podgroup-status-writer",
        metavar="USER",
        action="append",
        default=None,
        help="a user allowed to change a PodGroup's status; repeatable (default the scheduler's and "
        "the controller's ServiceAccounts in POD_NAMESPACE; env HYPERPLACE_PODGROUP_STATUS_WRITERS, "
        "comma-separated; * lets anyone, Volcano's behaviour)",
    )
    p.add_argument(
        "--regex-workers",
        metavar="N",
        type=int,
        default=0,
        help="processes compiling new HyperNode patterns (0: one per core, at most 4)",
    )
    p.add_argument("--insecure-http", action="store_true", help="serve webhooks over plain HTTP (tests only)")
    p.add_argument(
        "--validating-webhook-configuration",
        metavar="NAME",
        action="append",
        default=[v for v in [os.environ.get("HYPERPLACE_VALIDATING_WEBHOOK_CONFIGURATION")] if v],
        help="ValidatingWebhookConfiguration to inject the CA into; repeatable "
        "(env HYPERPLACE_VALIDATING_WEBHOOK_CONFIGURATION)",
    )
    p.add_argument(
        "--mutating-webhook-configuration",
        metavar="NAME",
        action="append",
        default=[v for v in [os.environ.get("HYPERPLACE_MUTATING_WEBHOOK_CONFIGURATION")] if v],
        help="MutatingWebhookConfiguration to inject the CA into; repeatable "
        "(env HYPERPLACE_MUTATING_WEBHOOK_CONFIGURATION)",
    )
    p.add_argument(
        "--hypernode-cache",
        action=argparse.BooleanOptionalAction,
        default=bool(os.environ.get("KUBERNETES_SERVICE_HOST")),
        help="watch HyperNodes (tree checks) and Queues (a Job naming a missing or closed queue) "
        "(on by default inside a cluster)",
    )
    flags.add_kubeconfig(p)
    flags.add_log_level(p)
    return p


async def _inject_ca(args: argparse.Namespace) -> None:
    # lazy: only a webhook that injects its own CA bundle loads the injector and kubernetes-asyncio
    from hyperplace.pki.cabundle import ConfigKind
    from hyperplace.runtime.cabundle import inject_with_kubeconfig

    names: list[tuple[ConfigKind, str]] = [("validating", n) for n in args.validating_webhook_configuration]
    names += [("mutating", n) for n in args.mutating_webhook_configuration]
    if not names or not args.ca_file:
        return
    try:
        await inject_with_kubeconfig(names, Path(args.ca_file).read_bytes(), kubeconfig=args.kubeconfig)
    except Exception:
        # Not fatal: the bundle may be managed elsewhere (hyperplace-certs inject, or
        # an operator); the apiserver then reports TLS errors, which are visible.
        log.exception("caBundle injection failed")


async def _informers(args: argparse.Namespace, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
    """HyperNode and Queue informers (hyperplace.runtime) on the cluster's API, not started."""
    # lazy: only a webhook that watches a real API server loads kubernetes-asyncio
    from kubernetes_asyncio import client

    from hyperplace.runtime.api import HYPERNODES, QUEUES
    from hyperplace.runtime.informer import Informer
    from hyperplace.runtime.kube import KubeApiClient, load_client_config

    await load_client_config(args.kubeconfig)
    api_client = await stack.enter_async_context(client.ApiClient())
    api = KubeApiClient(api_client)
    return Informer(api, HYPERNODES), Informer(api, QUEUES)


async def _reviewer(args: argparse.Namespace, stack: contextlib.AsyncExitStack) -> Any:
    """A SubjectAccessReview client on the cluster's API (for queue Commands)."""
    # lazy: only a webhook that talks to a real API server loads kubernetes-asyncio
    from kubernetes_asyncio import client

    from hyperplace.runtime.kube import load_client_config

    from .authz import SubjectAccessReviewer

    try:
        await load_client_config(args.kubeconfig)
    except Exception as exc:  # no kubeconfig, no in-cluster credentials
        log.warning("no API access for SubjectAccessReviews (%s): every queue Command is refused", exc)
        return _NoApi(f"the webhook has no API access to check the permission: {exc}"[:200])
    return SubjectAccessReviewer(await stack.enter_async_context(client.ApiClient()))


class _NoApi:
    """Refuses every queue Command, saying why: without the apiserver nobody's permission is known."""

    def __init__(self, reason: str):
        self.reason = reason

    async def authorize(self, _user_info: Any, _queue: str) -> tuple[bool, str]:
        return False, self.reason


def _status_writers(args: argparse.Namespace) -> frozenset[str] | None:
    names = args.podgroup_status_writer
    if names is None:
        env = os.environ.get("HYPERPLACE_PODGROUP_STATUS_WRITERS")
        if env:
            names = [n.strip() for n in env.split(",")]
        else:
            ns = os.environ.get("POD_NAMESPACE") or SYSTEM_NAMESPACE
            names = [
                f"system:serviceaccount:{ns}:{sa}" for sa in ("hyperplace-scheduler", "hyperplace-controller")
            ]
    names = [n for n in names if n]
    return None if "*" in names else frozenset(names)


async def serve(args: argparse.Namespace) -> None:
    """Run until SIGTERM/SIGINT."""
    reloader: CertReloader | None = None
    if not args.insecure_http:
        if not args.tls_cert_file or not args.tls_private_key_file:
            raise SystemExit("hyperplace-webhooks: --tls-cert-file and --tls-private-key-file are required")
        reloader = CertReloader(
            args.tls_cert_file,
            args.tls_private_key_file,
            args.cert_reload_seconds,
            ca_cert_file=args.ca_file,
            ca_key_file=args.ca_key_file,
            renew_fraction=args.cert_renew_fraction,
        )
        if not reloader.reload_if_changed():
            raise SystemExit(
                f"hyperplace-webhooks: cannot load the serving certificate: {reloader.last_error}"
            )
        reloader.renew_if_due()
        if args.client_ca_file:
            try:
                reloader.require_client_certs(args.client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise SystemExit(f"hyperplace-webhooks: cannot load --client-ca-file: {exc}") from exc
    elif args.client_ca_file:
        raise SystemExit("hyperplace-webhooks: --client-ca-file needs TLS (not --insecure-http)")
    client_names = args.client_cert_name or [
        n.strip() for n in (os.environ.get("HYPERPLACE_WEBHOOK_CLIENT_NAMES") or CLIENT_NAME).split(",")
    ]
    site: GuardedSite | None = None

    def ready() -> bool | str:
        if reloader is not None and not reloader.loaded:
            return False
        saturated = site.saturated() if site is not None else None
        return f"webhook port cannot accept: {saturated}" if saturated else True

    stack = contextlib.AsyncExitStack()
    informer = queue_informer = None
    if args.hypernode_cache:
        informer, queue_informer = await _informers(args, stack)
    command_key = None
    if args.command_key_file:
        try:
            command_key = load_key(Path(args.command_key_file).read_bytes())
        except FileNotFoundError:
            # The Deployment mounts the key's Secret as optional: not created yet.
            log.warning(
                "%s does not exist: admitted queue Commands are not marked, so the controller "
                "ignores them (create the Secret hyperplace-command-key)",
                args.command_key_file,
            )
        except (OSError, ValueError) as exc:
            raise SystemExit(f"hyperplace-webhooks: --command-key-file: {exc}") from exc
    authorize = None
    if args.command_authorization:
        authorize = (await _reviewer(args, stack)).authorize
    writers = _status_writers(args)
    app = create_app(
        InformerContext(hypernodes=informer, queues=queue_informer) if informer is not None else None,
        ready=ready,
        regex=RegexChecker(workers=args.regex_workers or None),
        cert_expiry=reloader.expiry_seconds if reloader is not None else None,
        middlewares=[track_requests],
        authorize=authorize,
        command_key=command_key,
        status_writers=writers,
    )
    limits = ConnectionLimits(
        max_connections=args.max_connections,
        handshake_timeout=args.tls_handshake_timeout,
        header_timeout=args.header_timeout,
        keepalive_timeout=args.keepalive_timeout,
        first_request_timeout=args.first_request_timeout,
        max_per_client=args.max_connections_per_client,
    )
    runners = [web.AppRunner(app, access_log=None, keepalive_timeout=aiohttp_keepalive(limits))]
    await runners[0].setup()
    site = GuardedSite(
        runners[0],
        args.host,
        args.port,
        ssl_context=reloader.context if reloader else None,
        limits=limits,
        client_names=frozenset(n for n in client_names if n) if args.client_ca_file else frozenset(),
    )
    await site.start()
    app[STATE].metrics.registry.register(ConnectionCollector(lambda: site.stats))
    if args.metrics_port:
        probe = web.AppRunner(
            create_probe_app(app, metrics=args.metrics_on_probe_port), access_log=None, keepalive_timeout=15
        )
        await probe.setup()
        await web.TCPSite(probe, args.probe_host, args.metrics_port).start()
        runners.append(probe)
    log.info(
        "serving webhooks and /metrics on %s://%s:%d%s%s",
        "http" if reloader is None else "https",
        args.host,
        args.port,
        f" (client certificates required: CN {', '.join(sorted(site.client_names)) or 'any'})"
        if args.client_ca_file
        else "",
        f", probes on http://{args.probe_host}:{args.metrics_port}" if args.metrics_port else "",
    )

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks = [asyncio.create_task(_inject_ca(args))]
    if informer is not None:
        tasks.append(asyncio.create_task(informer.run()))
    if queue_informer is not None:
        tasks.append(asyncio.create_task(queue_informer.run()))
    if reloader is not None:
        tasks.append(asyncio.create_task(reloader.watch()))
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for r in reversed(runners):
            await r.cleanup()
        await stack.aclose()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``hyperplace-webhooks``; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
