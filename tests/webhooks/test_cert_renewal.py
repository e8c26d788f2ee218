"""The serving certificate renews itself before it expires: at two-thirds of its lifetime
the server signs a new pair with the same CA and names, serves it to new connections
without a restart, and reports the expiry as a metric."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from pathlib import Path

from aiohttp import web
from cryptography import x509
from prometheus_client import CollectorRegistry

from hyperplace.pki.certificates import generate_webhook_certs, write_tls_files
from webhooks.server import create_app
from webhooks.site import GuardedSite
from webhooks.tls import CertReloader

from .test_tls_reload import client_context, peer_cert


def reloader_for(tmp_path: Path, *, days: int = 30, with_ca: bool = True) -> CertReloader:
    certs = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"], days=days)
    write_tls_files(tmp_path, certs, write_ca_key=True)
    r = CertReloader(
        tmp_path / "tls.crt",
        tmp_path / "tls.key",
        ca_cert_file=tmp_path / "ca.crt" if with_ca else None,
        ca_key_file=tmp_path / "ca.key" if with_ca else None,
    )
    assert r.reload_if_changed()
    return r


def test_not_renewed_before_two_thirds_of_the_lifetime(tmp_path):
    r = reloader_for(tmp_path)
    assert r.certificate is not None
    assert not r.renew_if_due(r.certificate.not_valid_before_utc + dt.timedelta(days=19))
    assert r.renewals == 0


async def test_renewed_at_two_thirds_with_the_same_names_and_ca_for_new_connections(tmp_path):
    r = reloader_for(tmp_path)
    old = r.certificate
    assert old is not None
    runner = web.AppRunner(create_app())
    await runner.setup()
    site = GuardedSite(runner, "127.0.0.1", 0, ssl_context=r.context)
    await site.start()
    try:
        ca_pem = (tmp_path / "ca.crt").read_bytes()
        _, keep = await asyncio.open_connection("127.0.0.1", site.bound_port, ssl=client_context(ca_pem))
        later = old.not_valid_before_utc + dt.timedelta(days=21)
        assert r.renew_if_due(later) and r.renewals == 1
        new = r.certificate
        assert new is not None and new.serial_number != old.serial_number
        lifetime = new.not_valid_after_utc - new.not_valid_before_utc
        assert new.not_valid_after_utc >= old.not_valid_after_utc and 29 <= lifetime.days <= 30
        san = x509.SubjectAlternativeName
        assert new.extensions.get_extension_for_class(san) == old.extensions.get_extension_for_class(san)
        # A new handshake, verified against the unchanged CA bundle, sees the new certificate;
        # the connection opened before keeps working.
        served = x509.load_der_x509_certificate(await peer_cert(site.bound_port, ca_pem))
        assert served.serial_number == new.serial_number
        assert not keep.is_closing()
        keep.close()
        with contextlib.suppress(Exception):
            await keep.wait_closed()
    finally:
        await runner.cleanup()


def test_without_the_ca_key_nothing_is_renewed_but_the_expiry_is_known(tmp_path, caplog):
    r = reloader_for(tmp_path, with_ca=False)
    assert r.certificate is not None
    late = r.certificate.not_valid_before_utc + dt.timedelta(days=25)
    assert not r.renew_if_due(late)
    assert "no CA key is available" in caplog.text
    expiry = r.expiry_seconds()
    assert expiry is not None and 29 * 86400 < expiry <= 30 * 86400


async def test_expiry_is_exported_as_a_metric(tmp_path, aiohttp_client):
    r = reloader_for(tmp_path, days=10)
    registry = CollectorRegistry()
    client = await aiohttp_client(create_app(registry=registry, cert_expiry=r.expiry_seconds))
    text = await (await client.get("/metrics")).text()
    assert "hyperplace_webhook_cert_expiry_seconds" in text
    value = registry.get_sample_value("hyperplace_webhook_cert_expiry_seconds")
    assert value is not None and 9.9 * 86400 < value <= 10 * 86400
