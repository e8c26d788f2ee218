"""The aiohttp shell around ``webhooks.review.handle_review``.

Two applications, as the Deployment exposes them:

* ``create_app``: the webhook endpoints (``POST /hypernodes/validate``,
  ``/jobs/validate``, ``/jobs/mutate``, ``/pods/mutate``), served over TLS;
* ``create_probe_app``: ``GET /healthz``, ``/readyz`` (ready once a certificate is
  loaded) and ``/metrics``, on a plain-HTTP port the kubelet and Prometheus reach.

``create_app`` mounts the probe routes as well, so a single-port setup (tests, the
benchmark) works too. Metrics go to a per-app ``CollectorRegistry``, so tests and
several apps in one process never share counters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from .context import AdmissionContext
from .review import MAX_BODY_BYTES, WEBHOOKS, handle_review

ContextSource = AdmissionContext | Callable[[], AdmissionContext] | None

# Sub-millisecond to a few seconds: the apiserver's timeout for these webhooks is 5 s.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class WebhookMetrics:
    """Request count and latency by endpoint and verdict (allowed, denied, error, bad_request)."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry
        self.requests = Counter(
            "hyperplace_webhook_requests",
            "Admission requests handled, by endpoint and verdict.",
            ["endpoint", "verdict"],
            registry=registry,
        )
        self.latency = Histogram(
            "hyperplace_webhook_request_duration_seconds",
            "Time from request received to response ready, by endpoint and verdict.",
            ["endpoint", "verdict"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )

    def observe(self, endpoint: str, verdict: str, seconds: float) -> None:
        """Count one request and record its latency."""
        self.requests.labels(endpoint, verdict).inc()
        self.latency.labels(endpoint, verdict).observe(seconds)


@dataclass
class ServerState:
    """What the handlers share: the context source, metrics and readiness."""

    context: ContextSource
    metrics: WebhookMetrics
    ready: Callable[[], bool]

    def current_context(self) -> AdmissionContext:
        """The context for this request (a callable source is asked every time)."""
        if self.context is None:
            return AdmissionContext()
        if isinstance(self.context, AdmissionContext):
            return self.context
        return self.context()


STATE = web.AppKey("hyperplace_state", ServerState)


class _TooLarge(Exception):
    pass


async def _read_body(request: web.Request) -> bytes:
    """The body, refusing more than MAX_BODY_BYTES without buffering it all."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise _TooLarge(request.content_length)
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.read(64 * 1024)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _TooLarge(size)
        chunks.append(chunk)
    return b"".join(chunks)


async def _review(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    path = request.path
    start = time.perf_counter()
    try:
        body = await _read_body(request)
    except _TooLarge:
        state.metrics.observe(path, "bad_request", time.perf_counter() - start)
        return web.Response(status=400, text=f"request body exceeds {MAX_BODY_BYTES} bytes")
    result = handle_review(path, body, state.current_context())
    state.metrics.observe(path, result.verdict, time.perf_counter() - start)
    if isinstance(result.body, str):
        return web.Response(status=result.status, text=result.body)
    return web.json_response(result.body, status=result.status)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _readyz(request: web.Request) -> web.Response:
    if request.app[STATE].ready():
        return web.Response(text="ok")
    return web.Response(status=503, text="serving certificate not loaded")


async def _metrics(request: web.Request) -> web.Response:
    data = generate_latest(request.app[STATE].metrics.registry)
    return web.Response(body=data, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _always_ready() -> bool:
    return True


def _add_probes(app: web.Application) -> None:
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)


def create_app(
    context: ContextSource = None,
    *,
    registry: CollectorRegistry | None = None,
    ready: Callable[[], bool] | None = None,
) -> web.Application:
    """The webhook application (plus probe routes).

    ``context`` is an AdmissionContext or a callable returning the current one (for a
    cache kept up to date elsewhere). ``ready`` backs ``/readyz``; by default always
    ready. ``registry`` receives the metrics (a fresh one when omitted).
    """
    # client_max_size is set above our own limit: _read_body enforces MAX_BODY_BYTES
    # and answers 400 with a message, where aiohttp would answer 413.
    app = web.Application(client_max_size=MAX_BODY_BYTES + 1)
    metrics = WebhookMetrics(registry if registry is not None else CollectorRegistry())
    app[STATE] = ServerState(context=context, metrics=metrics, ready=ready or _always_ready)
    for path in WEBHOOKS:
        app.router.add_post(path, _review)
    _add_probes(app)
    return app


def create_probe_app(webhook_app: web.Application) -> web.Application:
    """Only ``/healthz``, ``/readyz`` and ``/metrics``, reporting on ``webhook_app``
    (its metrics and readiness), for a separate plain-HTTP port."""
    app = web.Application()
    app[STATE] = webhook_app[STATE]
    _add_probes(app)
    return app
