"""A listening site for aiohttp with connection limits and timeouts.

aiohttp's ``TCPSite`` accepts every connection, lets a TLS handshake take 60 s, waits for
request headers as long as the keep-alive timeout (an hour by default) and gives each TLS
connection asyncio's 256 KiB read buffer. ``GuardedSite`` serves the same application
with bounds, all counted in ``ConnectionStats``:

* at most ``max_connections`` open at once, and at most ``max_per_client`` from one client
  address (below the total, so one address cannot take every slot). A connection beyond
  either cap *evicts* the oldest connection in the same scope that is not in the middle of a
  request, preferring one that never completed a request (connected and silent, then still
  handshaking) over one idling between requests; only when every connection in scope is busy
  is the new one closed on accept, before any TLS work. So connections that are opened and
  left silent cannot keep a real client (the kube-apiserver) out: its new connection takes
  the slot of the oldest silent one. With client certificates required (mTLS), a connection
  that presented a valid certificate is never evicted;
* the TLS handshake must finish within ``handshake_timeout``;
* after the handshake (on accept, without TLS) the first request's headers must be
  complete within ``first_request_timeout``: a connection opened and left silent is closed
  after a few seconds, not held for the keep-alive timeout;
* once the first byte of a later request arrives, its headers must be complete within
  ``header_timeout`` (the handler starts); the body is then bounded by the handler's own
  read timeout (``webhooks.server``);
* a connection idle between requests is closed after ``keepalive_timeout``;
* TLS connections read through a 32 KiB buffer instead of 256 KiB.

``GuardedSite.saturated()`` says when the site cannot take a new connection (every slot
busy, or a connection refused within the last ``SATURATION_WINDOW`` seconds); readiness
reports it (``webhooks.__main__``), so a Service stops routing to a replica that cannot
accept and an operator sees why.

The TLS layer is asyncio's own ``SSLProtocol`` with a smaller ``max_size`` (its read
buffer), started on the accepted socket exactly as ``loop.start_tls`` does.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from asyncio import sslproto
from dataclasses import dataclass
from typing import Any

from aiohttp import web

DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_HANDSHAKE_TIMEOUT = 5.0
DEFAULT_FIRST_REQUEST_TIMEOUT = 5.0
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_KEEPALIVE_TIMEOUT = 60.0
# A refusal this recent makes the site report itself saturated (not ready).
SATURATION_WINDOW = 5.0

# Open connections of every GuardedSite, by the transport aiohttp's request sees.
_TRACKED: dict[asyncio.BaseTransport, _Tracked] = {}


def default_max_per_client(max_connections: int) -> int:
    """Half the total: one address can never hold every slot, and an apiserver that opens
    many connections at once still has room."""
    return max(1, max_connections // 2)


def aiohttp_keepalive(limits: ConnectionLimits) -> float:
    """The keep-alive timeout to give aiohttp's runner: a backstop well beyond the site's own
    first-request and keep-alive timers, since aiohttp's also runs before the first request."""
    return 2 * max(limits.keepalive_timeout, limits.first_request_timeout) + 10


@dataclass(frozen=True)
class ConnectionLimits:
    """Bounds on the webhook port's connections (seconds, counts). ``max_per_client`` 0
    means ``default_max_per_client(max_connections)``."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    keepalive_timeout: float = DEFAULT_KEEPALIVE_TIMEOUT
    first_request_timeout: float = DEFAULT_FIRST_REQUEST_TIMEOUT
    max_per_client: int = 0

    @property
    def per_client(self) -> int:
        """The effective per-address cap (never above the total)."""
        cap = self.max_per_client or default_max_per_client(self.max_connections)
        return min(cap, self.max_connections)


@dataclass
class ConnectionStats:
    """What the site did with connections (for metrics and the benchmark)."""

    open: int = 0
    accepted: int = 0
    refused: int = 0
    evicted: int = 0
    handshake_failed: int = 0
    header_timeouts: int = 0
    first_request_timeouts: int = 0
    unauthorized: int = 0  # a verified client certificate with a subject not allowed
    last_refused: float = float("-inf")  # time.monotonic() of the last refusal


class _SmallBufferSSLProtocol(sslproto.SSLProtocol):
    # 32 KiB holds two full TLS records; asyncio's 256 KiB default is per connection.
    max_size = 32 * 1024


class _Tracked(asyncio.Protocol):
    """Wraps aiohttp's protocol: releases the slot on close, enforces the first-request and
    header timeouts, and says how evictable the connection is."""

    def __init__(self, site: GuardedSite, inner: Any, peer: str, raw: asyncio.BaseTransport):
        self.site = site
        self.inner = inner
        self.peer = peer
        self.raw = raw  # the socket's transport: aborting it works in every state
        self.opened = time.monotonic()
        self.transport: asyncio.BaseTransport | None = None
        self.busy = False
        self.served = 0  # requests completed on this connection
        self.authenticated = False  # a client certificate was verified (mTLS)
        self.received = False  # a byte of a request arrived
        self._released = False
        self._first_timer: asyncio.TimerHandle | None = None
        self._header_timer: asyncio.TimerHandle | None = None
        self._idle_timer: asyncio.TimerHandle | None = None

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.site._forget(self)
        self._cancel_timer()

    def abort(self) -> None:
        """Close now, whatever the state (handshaking, silent or idle)."""
        self.release()
        self.raw.abort()  # type: ignore[attr-defined]

    def rank(self) -> int | None:
        """Eviction preference, lowest first: 0 for a connection past its handshake that has
        sent no byte (and presented no client certificate), 1 for one still handshaking or
        sending its first request's headers,
        2 for one idle between requests, 3 for an authenticated idle one (never evicted: a
        newcomer's identity is not known yet), None for one in the middle of a request
        (never evicted). Silent connections go before handshaking
        ones, so a real client's new connection, handshaking for a moment before it sends
        its request at once, is the last of the unproven to go."""
        if self.busy:
            return None
        if self.authenticated:
            return 3
        if self.served:
            return 2
        return 0 if self.transport is not None and not self.received else 1

    def _cancel_timer(self) -> None:
        for timer in (self._first_timer, self._header_timer, self._idle_timer):
            if timer is not None:
                timer.cancel()
        self._first_timer = self._header_timer = self._idle_timer = None

    def _idle_timeout(self) -> None:
        self._idle_timer = None
        if not self.busy and self.transport is not None:
            self.transport.close()  # a graceful close: the client opens a new connection

    def _first_request_timeout(self) -> None:
        self._first_timer = None
        if not self.busy and self.served == 0:
            self.site.stats.first_request_timeouts += 1
            self.abort()

    def _header_timeout(self) -> None:
        self._header_timer = None
        if not self.busy and self.transport is not None:
            self.site.stats.header_timeouts += 1
            self.abort()

    def request_started(self) -> None:
        self.busy = True
        self._cancel_timer()

    def request_finished(self) -> None:
        self.busy = False
        self.served += 1
        # Keep-alive between requests is timed here, from the end of each request (aiohttp's
        # own timer also runs before the first request; the server sets it as a backstop).
        self._idle_timer = asyncio.get_running_loop().call_later(
            self.site.limits.keepalive_timeout, self._idle_timeout
        )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Called once the TLS handshake is done (at once without TLS): the first request
        # must now arrive within first_request_timeout.
        self.transport = transport
        _TRACKED[transport] = self
        self.inner.connection_made(transport)
        peercert = transport.get_extra_info("peercert")
        if peercert:
            names = self.site.client_names
            if names and "*" not in names and _common_name(peercert) not in names:
                self.site.stats.unauthorized += 1
                self.abort()
                return
            self.authenticated = True
        self._first_timer = asyncio.get_running_loop().call_later(
            self.site.limits.first_request_timeout, self._first_request_timeout
        )

    def data_received(self, data: bytes) -> None:
        self.received = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if not self.busy and self._header_timer is None:
            self._header_timer = asyncio.get_running_loop().call_later(
                self.site.limits.header_timeout, self._header_timeout
            )
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
    """The protocol of a freshly accepted socket: admit (evicting if need be) or refuse,
    then hand over."""

    def __init__(self, site: GuardedSite):
        self.site = site

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        site = self.site
        peername = transport.get_extra_info("peername")
        peer = str(peername[0]) if isinstance(peername, tuple) and peername else "?"
        if not site._make_room(peer):
            site.stats.refused += 1
            site.stats.last_refused = time.monotonic()
            transport.abort()  # type: ignore[attr-defined]
            return
        site.stats.accepted += 1
        tracked = _Tracked(site, site.protocol_factory(), peer, transport)
        site._admit(tracked)
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
        client_names: frozenset[str] = frozenset(),
    ):
        """``client_names``: with client certificates required by ``ssl_context``, the
        subject CNs accepted (empty or ``*``: any the CA signed)."""
        super().__init__(runner, backlog=backlog)
        self.client_names = client_names
        self._host = host
        self._port = port
        self.ssl_context = ssl_context
        self.limits = limits or ConnectionLimits()
        self.stats = ConnectionStats()
        self.bound_port: int | None = None
        # Open connections in the order they were accepted (dicts keep insertion order).
        self._conns: dict[_Tracked, None] = {}
        self._per_peer: dict[str, int] = {}

    @property
    def name(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{self._host}:{self.bound_port or self._port}"

    def protocol_factory(self) -> Any:
        """A new aiohttp protocol for one connection."""
        server = self._runner.server
        assert server is not None
        return server()

    def connections_from(self, peer: str) -> int:
        """Open connections from one client address."""
        return self._per_peer.get(peer, 0)

    def _admit(self, conn: _Tracked) -> None:
        self._conns[conn] = None
        self._per_peer[conn.peer] = self._per_peer.get(conn.peer, 0) + 1
        self.stats.open += 1

    def _forget(self, conn: _Tracked) -> None:
        if conn in self._conns:
            del self._conns[conn]
            self.stats.open -= 1
            left = self._per_peer.get(conn.peer, 0) - 1
            if left > 0:
                self._per_peer[conn.peer] = left
            else:
                self._per_peer.pop(conn.peer, None)

    def _victim(self, peer: str | None) -> _Tracked | None:
        """The connection to evict (oldest of the lowest rank, from ``peer`` when given)."""
        best: _Tracked | None = None
        best_rank = 3  # an authenticated connection (rank 3) is never evicted
        for conn in self._conns:  # oldest first
            if peer is not None and conn.peer != peer:
                continue
            rank = conn.rank()
            if rank is not None and rank < best_rank:
                best, best_rank = conn, rank
                if rank == 0:
                    break
        return best

    def _make_room(self, peer: str) -> bool:
        """Evict what must go for one more connection from ``peer``; False when it cannot
        be admitted (every connection in the way is busy)."""
        while self.connections_from(peer) >= self.limits.per_client:
            victim = self._victim(peer)
            if victim is None:
                return False
            self.stats.evicted += 1
            victim.abort()
        while self.stats.open >= self.limits.max_connections:
            victim = self._victim(None)
            if victim is None:
                return False
            self.stats.evicted += 1
            victim.abort()
        return True

    def saturated(self, now: float | None = None) -> str | None:
        """Why the site cannot take a new connection now, or None when it can."""
        now = time.monotonic() if now is None else now
        if self.stats.open >= self.limits.max_connections and self._victim(None) is None:
            return f"all {self.limits.max_connections} connections are busy with requests"
        if now - self.stats.last_refused < SATURATION_WINDOW:
            return f"refused a connection less than {SATURATION_WINDOW:g} s ago (every slot busy)"
        return None

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
    """Marks the connection busy while a request is handled (stops its timers).

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


def _common_name(peercert: Any) -> str | None:
    """The subject CN of a certificate as ``SSLSocket.getpeercert()`` returns it."""
    for rdn in peercert.get("subject", ()) if isinstance(peercert, dict) else ():
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _find(request: web.Request) -> _Tracked | None:
    transport = request.transport
    return _TRACKED.get(transport) if transport is not None else None
