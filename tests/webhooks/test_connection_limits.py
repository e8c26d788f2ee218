"""Connections cannot exhaust the webhook: a cap on open connections and on those of one
client address (silent ones evicted for a newcomer, refused before any TLS work only when every
slot is mid-request), a TLS handshake timeout, a first-request deadline after the handshake, a
header timeout once a request starts arriving, a bounded keep-alive, client certificates when
required, and TLS 1.2 with AEAD suites only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from pathlib import Path

import pytest
from aiohttp import web

from hyperplace.pki.certificates import (
    KeyPair,
    generate_client_cert,
    generate_webhook_certs,
    read_tls_files,
    write_tls_files,
)
from webhooks.server import create_app
from webhooks.site import ConnectionLimits, GuardedSite, aiohttp_keepalive, track_requests
from webhooks.tls import CertReloader

from .builders import job, review


@pytest.fixture
async def serve(tmp_path: Path):
    """Start the webhook app behind a GuardedSite with the given limits; yields a starter."""
    certs = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"])
    write_tls_files(tmp_path, certs, write_ca_key=True)
    runners = []

    async def start(
        limits: ConnectionLimits, tls: bool = True, client_names: frozenset[str] = frozenset()
    ) -> tuple[GuardedSite, ssl.SSLContext | None]:
        reloader = CertReloader(tmp_path / "tls.crt", tmp_path / "tls.key")
        assert reloader.reload_if_changed()
        if client_names:
            reloader.require_client_certs(tmp_path / "ca.crt")
        runner = web.AppRunner(
            create_app(middlewares=[track_requests]), keepalive_timeout=aiohttp_keepalive(limits)
        )
        await runner.setup()
        runners.append(runner)
        site = GuardedSite(
            runner,
            "127.0.0.1",
            0,
            ssl_context=reloader.context if tls else None,
            limits=limits,
            client_names=client_names,
        )
        await site.start()
        client = ssl.create_default_context(cadata=certs.ca.cert_pem.decode()) if tls else None
        return site, client

    yield start
    for r in runners:
        await r.cleanup()


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        async with asyncio.timeout(seconds):
            while await reader.read(1024):
                pass
        return True
    except (TimeoutError, ConnectionError, ssl.SSLError):
        return False


async def request(port: int, client: ssl.SSLContext | None, path: str = "/healthz") -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    status = int((await reader.readline()).split()[1])
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return status


async def busy(port: int, client: ssl.SSLContext | None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection in the middle of a request: headers sent, the body never comes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    writer.write(b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
    await writer.drain()
    return reader, writer


async def test_connections_over_the_cap_are_closed_on_accept_when_every_slot_is_busy(serve):
    site, client = await serve(ConnectionLimits(max_connections=5, max_per_client=5))
    held = [await busy(site.bound_port, client) for _ in range(5)]
    await asyncio.sleep(0.1)
    assert site.stats.open == 5
    assert "busy" in (site.saturated() or "")  # full of requests in flight: not ready
    extra_reader, _ = await asyncio.open_connection("127.0.0.1", site.bound_port)
    assert await closed_within(extra_reader, 2.0)
    assert site.stats.refused >= 1 and site.stats.evicted == 0
    for _, writer in held:
        writer.close()
    await asyncio.sleep(0.2)
    assert site.stats.open == 0
    assert "refused" in (site.saturated() or "")  # still not ready a few seconds after a refusal
    assert await request(site.bound_port, client) == 200


async def test_silent_connections_cannot_keep_a_real_client_out(serve):
    """1,000 handshakes that never send a request, at the cap: a real request still gets in,
    by taking the slot of the oldest silent connection."""
    site, client = await serve(ConnectionLimits(max_connections=20, max_per_client=20))
    silent = [await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client) for _ in range(20)]
    await asyncio.sleep(0.05)
    assert site.stats.open == 20
    for _ in range(5):
        assert await request(site.bound_port, client) == 200
    assert site.stats.evicted >= 1 and site.stats.refused == 0  # each answered request frees its slot
    assert await closed_within(silent[0][0], 1.0)  # the oldest went first
    assert site.saturated() is None
    for _, writer in silent:
        writer.close()


async def test_a_connection_that_sends_nothing_after_the_handshake_is_closed(serve):
    site, client = await serve(ConnectionLimits(first_request_timeout=0.3, keepalive_timeout=60))
    reader, _writer = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client)
    assert await closed_within(reader, 3.0)
    assert site.stats.first_request_timeouts == 1
    await asyncio.sleep(0.05)
    assert site.stats.open == 0


async def test_one_client_address_cannot_take_every_slot(serve):
    site, client = await serve(ConnectionLimits(max_connections=10, max_per_client=4))
    held = [await busy(site.bound_port, client) for _ in range(4)]
    await asyncio.sleep(0.1)
    assert site.connections_from("127.0.0.1") == 4
    extra_reader, _ = await asyncio.open_connection("127.0.0.1", site.bound_port)
    assert await closed_within(extra_reader, 2.0)  # its own four are busy: refused
    assert site.stats.open == 4 and site.stats.refused == 1
    for _, writer in held:
        writer.close()


async def test_a_client_that_never_finishes_its_handshake_is_dropped(serve):
    site, _ = await serve(ConnectionLimits(handshake_timeout=0.3))
    reader, _writer = await asyncio.open_connection("127.0.0.1", site.bound_port)
    assert await closed_within(reader, 3.0)
    await asyncio.sleep(0.05)
    assert site.stats.handshake_failed == 1 and site.stats.open == 0


async def test_slow_headers_are_cut_off_and_idle_connections_expire(serve):
    # The keep-alive outlasts the header timeout by far: on a busy machine the slow connection's
    # cut-off may take a while to be seen, and the idle one must still be open afterwards.
    site, client = await serve(ConnectionLimits(header_timeout=0.3, keepalive_timeout=2.0))
    slow_reader, slow_writer = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client)
    slow_writer.write(b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\n")  # never finished
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client)
    idle_writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # one request, then idle
    assert (await idle_reader.readline()).startswith(b"HTTP/1.1 200")
    assert await closed_within(slow_reader, 3.0)
    assert site.stats.header_timeouts == 1
    assert not await closed_within(idle_reader, 0.3)  # kept alive a while ...
    assert await closed_within(idle_reader, 5.0)  # ... then closed
    await asyncio.sleep(0.05)
    assert site.stats.open == 0


async def test_a_slow_handler_is_not_mistaken_for_slow_headers(serve):
    site, client = await serve(ConnectionLimits(header_timeout=0.2))
    reader, writer = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client)
    body = json.dumps(review(job())).encode()
    head = f"POST /jobs/mutate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    for _ in range(3):  # keep-alive: several requests, each well inside the limits
        writer.write(head + body)
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        length = 0
        while (line := await reader.readline()) != b"\r\n":
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        await asyncio.sleep(0.3)  # idle longer than the header timeout: not a slow header
    writer.close()
    assert site.stats.header_timeouts == 0


async def test_tls12_offers_only_forward_secret_aead_suites(serve):
    site, client = await serve(ConnectionLimits())
    assert client is not None
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    for suite in ("ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384", "AES128-SHA256"):
        weak = ssl.create_default_context()
        weak.check_hostname, weak.verify_mode = False, ssl.CERT_NONE
        weak.maximum_version = ssl.TLSVersion.TLSv1_2
        weak.set_ciphers(suite)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=weak)
    _, writer = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client)
    name, version, _ = writer.get_extra_info("cipher")
    assert version == "TLSv1.2" and ("GCM" in name or "CHACHA20" in name)
    writer.close()


async def test_plain_http_site_has_the_same_limits(serve):
    site, _ = await serve(ConnectionLimits(max_connections=1), tls=False)
    assert await request(site.bound_port, None) == 200
    held = await busy(site.bound_port, None)
    await asyncio.sleep(0.05)
    extra_reader, _ = await asyncio.open_connection("127.0.0.1", site.bound_port)
    assert await closed_within(extra_reader, 2.0)
    held[1].close()


async def test_clients_that_hang_up_mid_handshake_give_their_slot_back(serve):
    site, _ = await serve(ConnectionLimits(max_connections=3))
    for _ in range(10):
        _, writer = await asyncio.open_connection("127.0.0.1", site.bound_port)
        writer.write(b"\x16\x03\x01\x00\x05hello")  # the start of a ClientHello, then gone
        writer.close()
    await asyncio.sleep(0.5)
    assert site.stats.open == 0 and site.stats.refused == 0


def with_client_cert(client: ssl.SSLContext, pair: KeyPair, tmp: Path) -> ssl.SSLContext:
    (tmp / "c.crt").write_bytes(pair.cert_pem)
    (tmp / "c.key").write_bytes(pair.key_pem)
    client.load_cert_chain(tmp / "c.crt", tmp / "c.key")
    return client


async def test_with_client_certificates_required_only_the_apiserver_gets_a_request_in(serve, tmp_path):
    site, client = await serve(ConnectionLimits(), client_names=frozenset({"hyperplace-webhook-client"}))
    assert client is not None
    ca = read_tls_files(tmp_path).ca
    # No certificate: refused during the handshake, before a byte of HTTP (with TLS 1.3 the
    # client learns it from the alert after its first write: no status line comes back).
    with pytest.raises((ssl.SSLError, ConnectionError, IndexError)):
        await request(site.bound_port, client)
    assert site.stats.handshake_failed >= 1
    # The certificate `hyperplace-certs client` issues: served.
    good = with_client_cert(
        ssl.create_default_context(cadata=ca.cert_pem.decode()), generate_client_cert(ca), tmp_path
    )
    assert await request(site.bound_port, good) == 200
    # Signed by the CA but another subject: closed after the handshake.
    other = with_client_cert(
        ssl.create_default_context(cadata=ca.cert_pem.decode()),
        generate_client_cert(ca, "someone-else"),
        tmp_path,
    )
    with pytest.raises((ssl.SSLError, ConnectionError, IndexError, ValueError)):
        await request(site.bound_port, other)
    assert site.stats.unauthorized == 1
    # The serving certificate (serverAuth only) cannot stand in for a client certificate.
    serving = with_client_cert(
        ssl.create_default_context(cadata=ca.cert_pem.decode()), read_tls_files(tmp_path).serving, tmp_path
    )
    with pytest.raises((ssl.SSLError, ConnectionError, IndexError, ValueError)):
        await request(site.bound_port, serving)


async def test_an_authenticated_connection_is_not_evicted_for_an_unauthenticated_one(serve, tmp_path):
    site, _client = await serve(
        ConnectionLimits(max_connections=2, max_per_client=2), client_names=frozenset({"*"})
    )
    ca = read_tls_files(tmp_path).ca
    good = with_client_cert(
        ssl.create_default_context(cadata=ca.cert_pem.decode()), generate_client_cert(ca), tmp_path
    )
    keep = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=good)
    await asyncio.sleep(0.05)
    for _ in range(5):  # handshakes that never finish: they evict each other, never `keep`
        await asyncio.open_connection("127.0.0.1", site.bound_port)
        await asyncio.sleep(0.02)
    assert not await closed_within(keep[0], 0.3)
    keep[1].write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await keep[0].readline()).startswith(b"HTTP/1.1 200")
    keep[1].close()
