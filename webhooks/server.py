"""The aiohttp shell around ``webhooks.review``.

Two applications, as the Deployment exposes them:

* ``create_app``: the webhook endpoints (``POST /hypernodes/validate``,
  ``/jobs/validate``, ``/jobs/mutate``, ``/pods/mutate``) and ``GET /metrics``, served
  over TLS with the serving certificate (plus ``/healthz`` and ``/readyz``);
* ``create_probe_app``: only ``GET /healthz`` and ``/readyz`` on a plain-HTTP port for
  the kubelet, kept apart so a full webhook port never fails the liveness probe.

Every request is counted, whatever happens to it: the metric is recorded in a
``finally`` around the whole handler. Bodies are parsed and judged on the event loop
when small, in a thread when large, and HyperNode patterns are compiled in a worker
process (``webhooks.regexcheck``), so ``/healthz`` keeps answering while the costliest
request is being validated. Metrics go to a per-app ``CollectorRegistry``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .command import command_queue
from .context import AdmissionContext
from .hypernode import regex_patterns
from .regexcheck import BUSY, RegexChecker
from .review import (
    MAX_BODY_BYTES,
    WEBHOOKS,
    Answer,
    ReviewRequest,
    ReviewResult,
    answer_review,
    prepare_review,
    review_response,
)

ContextSource = AdmissionContext | Callable[[], AdmissionContext] | None

# Sub-millisecond to a few seconds: the apiserver's timeout for these webhooks is 5 s.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Bodies up to this size are parsed and judged on the event loop (well under a
# millisecond); larger ones in a thread, so the loop keeps serving probes meanwhile.
INLINE_BODY_BYTES = 64 * 1024
BODY_TIMEOUT_SECONDS = 10.0


class WebhookMetrics:
    """Request count and latency by endpoint, verdict and code; certificate expiry."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry
        self.requests = Counter(
            "hyperplace_webhook_requests",
            "Admission requests handled, by endpoint, verdict (allowed, denied, error, bad_request) "
            "and code (HTTP status of a bad request, else the AdmissionReview's: 200, 403, 500).",
            ["endpoint", "verdict", "code"],
            registry=registry,
        )
        self.latency = Histogram(
            "hyperplace_webhook_request_duration_seconds",
            "Time from request received to response ready, by endpoint and verdict.",
            ["endpoint", "verdict"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.cert_expiry = Gauge(
            "hyperplace_webhook_cert_expiry_seconds",
            "Seconds until the serving certificate in use expires (negative: expired).",
            registry=registry,
        )

    def observe(self, endpoint: str, verdict: str, code: int, seconds: float) -> None:
        """Count one request and record its latency."""
        self.requests.labels(endpoint, verdict, str(code)).inc()
        self.latency.labels(endpoint, verdict).observe(seconds)


class ConnectionCollector:
    """``hyperplace_webhook_connections`` (open now) and
    ``hyperplace_webhook_connections_closed_total{reason}`` from a site's counters."""

    REASONS = (
        "refused",
        "evicted",
        "handshake_failed",
        "first_request_timeouts",
        "header_timeouts",
        "unauthorized",
    )

    def __init__(self, stats: Callable[[], Any]):
        self.stats = stats

    def collect(self) -> Any:
        stats = self.stats()
        yield GaugeMetricFamily(
            "hyperplace_webhook_connections", "Open connections on the webhook port.", value=stats.open
        )
        closed = CounterMetricFamily(
            "hyperplace_webhook_connections_closed",
            "Connections the webhook port closed itself, by reason (refused: every slot busy; "
            "evicted: made room for a newer one; handshake_failed; first_request_timeouts; "
            "header_timeouts; unauthorized: client certificate subject not accepted).",
            labels=["reason"],
        )
        for reason in self.REASONS:
            closed.add_metric([reason], getattr(stats, reason))
        yield closed


@dataclass
class ServerState:
    """What the handlers share: the context source, metrics, readiness, regex checker."""

    context: ContextSource
    metrics: WebhookMetrics
    # True when ready; False or a reason (str) when not.
    ready: Callable[[], bool | str]
    regex: RegexChecker | None = None
    # Queue Commands: asks whether userInfo may update a queue (None: authorization off);
    # the key that marks admitted Commands. PodGroup status: who may write it (None: anyone).
    authorize: Callable[[Mapping[str, Any], str], Awaitable[tuple[bool, str]]] | None = None
    command_key: bytes | None = None
    status_writers: frozenset[str] | None = None
    body_timeout: float = BODY_TIMEOUT_SECONDS
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=2, thread_name_prefix="review")
    )

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


async def _off_loop(state: ServerState, size: int, fn: Callable[..., Any], *args: Any) -> Any:
    if size <= INLINE_BODY_BYTES:
        return fn(*args)
    return await asyncio.get_running_loop().run_in_executor(state.executor, fn, *args)


def _same_order(new: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> bool:
    """An update that leaves a Command's action and target as they were."""
    if new is None or old is None:
        return False
    return all(new.get(k) == old.get(k) for k in ("action", "target"))


def busy_answer() -> Answer:
    """Too many new patterns queued by others: 429, so the client retries (no verdict on the object)."""
    return Answer(allowed=False, messages=[f"spec.members: {BUSY}"], code=429)


async def _judge(state: ServerState, path: str, body: bytes) -> ReviewResult:
    prepared = await _off_loop(state, len(body), prepare_review, path, body)
    if isinstance(prepared, ReviewResult):
        return prepared
    req: ReviewRequest = prepared
    ctx = state.current_context()
    if state.regex is not None and path == "/hypernodes/validate" and req.operation in ("CREATE", "UPDATE"):
        patterns = regex_patterns(req.object or {})
        if patterns:
            verdicts = await state.regex.verdicts(patterns, req.username)
            ctx = dataclasses.replace(ctx, regex_verdicts=verdicts)
            if BUSY in verdicts.values():
                # Not an answer about the object: the apiserver reports 429, a retryable error.
                return ReviewResult(200, review_response(req.uid, busy_answer()), "busy")
    if path in ("/commands/validate", "/commands/mutate") and req.operation in ("CREATE", "UPDATE"):
        queue = command_queue(req.object or {})
        access, key = None, state.command_key
        if req.operation == "UPDATE" and _same_order(req.object, req.old_object):
            # Metadata only (labels, finalizers, the garbage collector's owner references):
            # nothing to authorise, and the marker already there stays valid.
            access, key = (True, ""), None
        elif queue is not None and state.authorize is not None:
            access = await state.authorize(req.user_info, queue)
        ctx = dataclasses.replace(ctx, command_access=access, command_key=key, now=time.time())
    elif path == "/podgroups/validate":
        ctx = dataclasses.replace(ctx, status_writers=state.status_writers)
    result: ReviewResult = await _off_loop(state, len(body), answer_review, path, req, ctx)
    return result


async def _review(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    path = request.path
    start = time.perf_counter()
    verdict, code = "error", 500
    try:
        try:
            async with asyncio.timeout(state.body_timeout):
                body = await _read_body(request)
        except _TooLarge:
            verdict, code = "bad_request", 400
            return web.Response(status=400, text=f"request body exceeds {MAX_BODY_BYTES} bytes")
        except TimeoutError:
            verdict, code = "bad_request", 400
            return web.Response(
                status=400,
                text=f"request body not received within {state.body_timeout:g} s",
                headers={"Connection": "close"},
            )
        result = await _judge(state, path, body)
        verdict, code = result.verdict, result.code
        if isinstance(result.body, str):
            return web.Response(status=result.status, text=result.body)
        return web.json_response(result.body, status=result.status)
    finally:
        state.metrics.observe(path, verdict, code, time.perf_counter() - start)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _readyz(request: web.Request) -> web.Response:
    ready = request.app[STATE].ready()
    if ready is True:
        return web.Response(text="ok")
    reason = ready if isinstance(ready, str) and ready else "serving certificate not loaded"
    return web.Response(status=503, text=reason)


async def _metrics(request: web.Request) -> web.Response:
    data = generate_latest(request.app[STATE].metrics.registry)
    return web.Response(body=data, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _always_ready() -> bool:
    return True


def create_app(
    context: ContextSource = None,
    *,
    registry: CollectorRegistry | None = None,
    ready: Callable[[], bool | str] | None = None,
    regex: RegexChecker | None = None,
    cert_expiry: Callable[[], float | None] | None = None,
    middlewares: list[Callable[..., Awaitable[web.StreamResponse]]] | None = None,
    authorize: Callable[[Mapping[str, Any], str], Awaitable[tuple[bool, str]]] | None = None,
    command_key: bytes | None = None,
    status_writers: frozenset[str] | None = None,
) -> web.Application:
    """The webhook application, with ``/metrics``, ``/healthz`` and ``/readyz``.

    ``context`` is an AdmissionContext or a callable returning the current one (for a
    cache kept up to date elsewhere). ``ready`` backs ``/readyz``; by default always
    ready; it returns True, or False or the reason (served with 503). ``registry`` receives the metrics (a fresh one when omitted). ``regex`` judges
    HyperNode patterns off the event loop (without it they compile in-process).
    ``cert_expiry`` returns the serving certificate's seconds to expiry, for the gauge.
    ``authorize``, ``command_key`` and ``status_writers``: see ``ServerState`` and
    ``webhooks.command`` (without them queue Commands and PodGroup status are not checked).
    """
    # client_max_size is set above our own limit: _read_body enforces MAX_BODY_BYTES
    # and answers 400 with a message, where aiohttp would answer 413.
    app = web.Application(client_max_size=MAX_BODY_BYTES + 1, middlewares=middlewares or [])
    metrics = WebhookMetrics(registry if registry is not None else CollectorRegistry())
    if cert_expiry is not None:
        metrics.cert_expiry.set_function(lambda: cert_expiry() or 0.0)
    app[STATE] = ServerState(
        context=context,
        metrics=metrics,
        ready=ready or _always_ready,
        regex=regex,
        authorize=authorize,
        command_key=command_key,
        status_writers=status_writers,
    )
    for path in WEBHOOKS:
        app.router.add_post(path, _review)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)

    async def _startup(app: web.Application) -> None:
        regex = app[STATE].regex
        if regex is not None:
            await regex.start()

    async def _shutdown(app: web.Application) -> None:
        state = app[STATE]
        if state.regex is not None:
            await state.regex.close()
        state.executor.shutdown(wait=False, cancel_futures=True)

    app.on_startup.append(_startup)
    app.on_cleanup.append(_shutdown)
    return app


def create_probe_app(webhook_app: web.Application, *, metrics: bool = False) -> web.Application:
    """``/healthz`` and ``/readyz`` reporting on ``webhook_app``, for a plain-HTTP port.

    ``/metrics`` is served here only with ``metrics=True`` (for a probe port bound to
    localhost); otherwise it is on the TLS port alone.
    """
    app = web.Application()
    app[STATE] = webhook_app[STATE]
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    if metrics:
        app.router.add_get("/metrics", _metrics)
    return app
