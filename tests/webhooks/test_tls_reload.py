"""An operator rotates the serving certificate; the webhook picks it up without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509

from hyperplace.pki.certificates import generate_ca, generate_webhook_certs, write_tls_files
from webhooks.server import create_app
from webhooks.site import GuardedSite, track_requests
from webhooks.tls import CertReloader

from .builders import job, review


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    ctx.check_hostname = True
    return ctx


async def peer_cert(port: int, ca_pem: bytes) -> bytes:
    """DER of the certificate a fresh TLS handshake presents."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(ca_pem))
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        assert der is not None
        return bytes(der)
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await writer.wait_closed()


def der_of(pem: bytes) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


@pytest.fixture
async def tls_server(tmp_path: Path):
    ca = generate_ca()
    first = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"], ca=ca)
    write_tls_files(tmp_path, first)
    reloader = CertReloader(tmp_path / "tls.crt", tmp_path / "tls.key", interval=0.05)
    assert reloader.reload_if_changed()
    runner = web.AppRunner(create_app(ready=lambda: reloader.loaded, middlewares=[track_requests]))
    await runner.setup()
    # The production site: connection limits and asyncio's TLS with a smaller read buffer.
    site = GuardedSite(runner, "127.0.0.1", 0, ssl_context=reloader.context)
    await site.start()
    port = runner.addresses[0][1]
    watcher = asyncio.create_task(reloader.watch())
    try:
        yield {"dir": tmp_path, "ca": ca, "first": first, "reloader": reloader, "port": port}
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await runner.cleanup()


async def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_new_handshakes_see_the_rotated_certificate(tls_server):
    ca, port = tls_server["ca"], tls_server["port"]
    assert await peer_cert(port, ca.cert_pem) == der_of(tls_server["first"].serving.cert_pem)

    second = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"], ca=ca)
    write_tls_files(tls_server["dir"], second)
    await wait_for(lambda: tls_server["reloader"].reloads == 1)

    assert await peer_cert(port, ca.cert_pem) == der_of(second.serving.cert_pem)


async def test_open_keep_alive_connection_survives_rotation(tls_server):
    ca, port = tls_server["ca"], tls_server["port"]
    url = f"https://127.0.0.1:{port}/jobs/validate"
    connector = aiohttp.TCPConnector(ssl=client_context(ca.cert_pem), limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        body = json.dumps(review(job()))
        async with session.post(url, data=body) as resp:
            assert (await resp.json())["response"]["allowed"] is True
        second = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"], ca=ca)
        write_tls_files(tls_server["dir"], second)
        await wait_for(lambda: tls_server["reloader"].reloads == 1)
        async with session.post(url, data=body) as resp:
            assert (await resp.json())["response"]["allowed"] is True


async def test_a_half_written_rotation_keeps_serving_the_old_pair(tls_server):
    ca, port, d = tls_server["ca"], tls_server["port"], tls_server["dir"]
    reloader = tls_server["reloader"]
    other = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"], ca=ca)
    (d / "tls.crt").write_bytes(other.serving.cert_pem)  # new certificate, old key
    await wait_for(lambda: reloader.last_error is not None)
    assert "not loaded" in reloader.last_error
    assert reloader.reloads == 0
    assert await peer_cert(port, ca.cert_pem) == der_of(tls_server["first"].serving.cert_pem)
    (d / "tls.key").write_bytes(other.serving.key_pem)  # the rotation completes
    await wait_for(lambda: reloader.reloads == 1)
    assert reloader.last_error is None
    assert await peer_cert(port, ca.cert_pem) == der_of(other.serving.cert_pem)


def test_missing_files_leave_the_server_not_ready(tmp_path):
    reloader = CertReloader(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert reloader.reload_if_changed() is False
    assert reloader.loaded is False
    assert "cannot read" in (reloader.last_error or "")


def test_unchanged_files_are_not_reloaded(tmp_path):
    write_tls_files(tmp_path, generate_webhook_certs("svc", "ns"))
    reloader = CertReloader(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert reloader.reload_if_changed() is True
    assert reloader.reload_if_changed() is False
    assert reloader.reloads == 0
