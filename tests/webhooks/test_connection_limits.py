"""Connections cannot exhaust the webhook: a cap on open connections (refused before any
TLS work), a TLS handshake timeout, a header timeout once a request starts arriving, a
bounded keep-alive, and TLS 1.2 with AEAD suites only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from pathlib import Path

import pytest
from aiohttp import web

from hyperplace.pki.certificates import generate_webhook_certs, write_tls_files
from webhooks.server import create_app
from webhooks.site import ConnectionLimits, GuardedSite, track_requests
from webhooks.tls import CertReloader

from .builders import job, review


@pytest.fixture
async def serve(tmp_path: Path):
    """Start the webhook app behind a GuardedSite with the given limits; yields a starter."""
    certs = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"])
    write_tls_files(tmp_path, certs)
    runners = []

    async def start(limits: ConnectionLimits, tls: bool = True) -> tuple[GuardedSite, ssl.SSLContext | None]:
        reloader = CertReloader(tmp_path / "tls.crt", tmp_path / "tls.key")
        assert reloader.reload_if_changed()
        runner = web.AppRunner(
            create_app(middlewares=[track_requests]), keepalive_timeout=limits.keepalive_timeout
        )
        await runner.setup()
        runners.append(runner)
        site = GuardedSite(
            runner, "127.0.0.1", 0, ssl_context=reloader.context if tls else None, limits=limits
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


async def test_connections_over_the_cap_are_closed_on_accept_and_slots_come_back(serve):
    site, client = await serve(ConnectionLimits(max_connections=5))
    held = [await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client) for _ in range(5)]
    await asyncio.sleep(0.05)
    assert site.stats.open == 5
    extra_reader, _ = await asyncio.open_connection("127.0.0.1", site.bound_port)
    assert await closed_within(extra_reader, 2.0)
    assert site.stats.refused >= 1
    for _, writer in held:
        writer.close()
    await asyncio.sleep(0.2)
    assert site.stats.open == 0
    assert await request(site.bound_port, client) == 200


async def test_a_client_that_never_finishes_its_handshake_is_dropped(serve):
    site, _ = await serve(ConnectionLimits(handshake_timeout=0.3))
    reader, _writer = await asyncio.open_connection("127.0.0.1", site.bound_port)
    assert await closed_within(reader, 3.0)
    await asyncio.sleep(0.05)
    assert site.stats.handshake_failed == 1 and site.stats.open == 0


async def test_slow_headers_are_cut_off_and_idle_connections_expire(serve):
    site, client = await serve(ConnectionLimits(header_timeout=0.3, keepalive_timeout=0.6))
    slow_reader, slow_writer = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client)
    slow_writer.write(b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\n")  # never finished
    idle_reader, _ = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client)
    assert await closed_within(slow_reader, 3.0)
    assert site.stats.header_timeouts == 1
    assert await closed_within(idle_reader, 3.0)
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
    held = await asyncio.open_connection("127.0.0.1", site.bound_port)
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
