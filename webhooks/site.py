"""A listening site for aiohttp with connection limits and timeouts.

aiohttp's ``TCPSite`` accepts every connection, lets a TLS handshake take 60 s, waits for
request headers as long as the keep-alive timeout (an hour by default) and gives each TLS
connection asyncio's 256 KiB read buffer. ``GuardedSite`` serves the same application
with bounds, all counted in ``ConnectionStats``:

* at most ``max_connections`` open at once: one more is closed on accept, before any TLS
  work or buffer is spent on it (the kubelet's probes use another port, so a full webhook
  port never fails liveness);
* the TLS handshake must finish within ``handshake_timeout``;
* once the first byte of a request arrives, its headers must be complete within
  ``header_timeout`` (the handler starts); the body is then bounded by the handler's own
  read timeout (``webhooks.server``);
* a connection idle between requests is closed after ``keepalive_timeout``;
* TLS connections read through a 32 KiB buffer instead of 256 KiB.

The TLS layer is asyncio's own ``SSLProtocol`` with a smaller ``max_size`` (its read
buffer), started on the accepted socket exactly as ``loop.start_tls`` does.
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from dataclasses import dataclass
from typing import Any

from aiohttp import web

DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_KEEPALIVE_TIMEOUT = 60.0

# Open connections of every GuardedSite, by the transport aiohttp's request sees.
_TRACKED: dict[asyncio.BaseTransport, _Tracked] = {}


@dataclass(frozen=True)
class ConnectionLimits:
    """Bounds on the webhook port's connections (seconds, counts)."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    keepalive_timeout: float = DEFAULT_KEEPALIVE_TIMEOUT


@dataclass
class ConnectionStats:
    """What the site did with connections (for metrics and the benchmark)."""

    open: int = 0
    accepted: int = 0
    refused: int = 0
    handshake_failed: int = 0
    header_timeouts: int = 0


class _SmallBufferSSLProtocol(sslproto.SSLProtocol):
    # 32 KiB holds two full TLS records; asyncio's 256 KiB default is per connection.
    max_size = 32 * 1024


class _Tracked(asyncio.Protocol):
    """Wraps aiohttp's protocol: releases the slot on close, enforces the header timeout."""

    def __init__(self, site: GuardedSite, inner: Any):
        self.site = site
        self.inner = inner
        self.transport: asyncio.BaseTransport | None = None
        self.busy = False
        self._released = False
        self._header_timer: asyncio.TimerHandle | None = None

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.site.stats.open -= 1
        self._cancel_timer()

    def _cancel_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if not self.busy and self.transport is not None:
            self.site.stats.header_timeouts += 1
            self.transport.abort()  # type: ignore[attr-defined]

    def request_started(self) -> None:
        self.busy = True
        self._cancel_timer()

    def request_finished(self) -> None:
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        _TRACKED[transport] = self
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.busy and self._header_timer is None:
            loop = asyncio.get_running_loop()
            self._header_timer = loop.call_later(self.site.limits.header_timeout, self._header_timeout)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        result: bool | None = self.inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self.release()
        if self.transport is not None:
            _TRACKED.pop(self.transport, None)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class _Gate(asyncio.Protocol):
    """The protocol of a freshly accepted socket: admit or refuse, then hand over."""

    def __init__(self, site: GuardedSite):
        self.site = site

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        site = self.site
        if site.stats.open >= site.limits.max_connections:
            site.stats.refused += 1
            transport.abort()  # type: ignore[attr-defined]
            return
        site.stats.open += 1
        site.stats.accepted += 1
        tracked = _Tracked(site, site.protocol_factory())
        if site.ssl_context is None:
            transport.set_protocol(tracked)
            tracked.connection_made(transport)
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        tls = _SmallBufferSSLProtocol(
            loop,
            tracked,
            site.ssl_context,
            waiter,
            server_side=True,
            # typeshed says int; asyncio takes any number of seconds
            ssl_handshake_timeout=site.limits.handshake_timeout,  # type: ignore[arg-type]
        )
        # Reading has not started yet (asyncio starts it after connection_made), so no
        # byte of the handshake can reach this gate instead of the TLS protocol.
        transport.set_protocol(tls)
        tls.connection_made(transport)

        def handshake_done(fut: asyncio.Future[None]) -> None:
            if fut.cancelled() or fut.exception() is not None:
                site.stats.handshake_failed += 1
                tracked.release()

        waiter.add_done_callback(handshake_done)

    def connection_lost(self, exc: Exception | None) -> None:
        pass


class GuardedSite(web.BaseSite):
    """``web.TCPSite`` with ``ConnectionLimits`` (see the module docstring)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        limits: ConnectionLimits | None = None,
        backlog: int = 1024,
    ):
        super().__init__(runner, backlog=backlog)
        self._host = host
        self._port = port
        self.ssl_context = ssl_context
        self.limits = limits or ConnectionLimits()
        self.stats = ConnectionStats()
        self.bound_port: int | None = None

    @property
    def name(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{self._host}:{self.bound_port or self._port}"

    def protocol_factory(self) -> Any:
        """A new aiohttp protocol for one connection."""
        server = self._runner.server
        assert server is not None
        return server()

    async def start(self) -> None:
        """Listen (after ``runner.setup()``)."""
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Gate(self), self._host, self._port, backlog=self._backlog, reuse_address=True
        )
        self.bound_port = self._server.sockets[0].getsockname()[1]


@web.middleware
async def track_requests(request: web.Request, handler: Any) -> web.StreamResponse:
    """Marks the connection busy while a request is handled (stops its header timer).

    Install on the app a ``GuardedSite`` serves; harmless elsewhere.
    """
    tracked = _find(request)
    if tracked is not None:
        tracked.request_started()
    try:
        response: web.StreamResponse = await handler(request)
        return response
    finally:
        if tracked is not None:
            tracked.request_finished()


def _find(request: web.Request) -> _Tracked | None:
    transport = request.transport
    return _TRACKED.get(transport) if transport is not None else None
