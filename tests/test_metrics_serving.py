"""An operator scrapes the controller's and scheduler's ``/metrics``: inside the pod over plain
HTTP on localhost, or from Prometheus over HTTPS with the serving certificate the operator
mounted. The probes stay plain HTTP on their own port, and never show the metrics."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.aiohttp import make_aiohttp_handler

from controller.__main__ import health_app as controller_health_app
from controller.manager import ControllerManager
from hyperplace.pki.certificates import generate_ca, generate_webhook_certs, write_tls_files
from hyperplace.runtime.fakeapi import FakeApi
from hyperplace.runtime.serving import MetricsServer, MetricsServing


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter("hyperplace_example_total", "an example", registry=reg).inc(3)
    return reg


async def test_metrics_on_localhost_are_plain_http() -> None:
    server = MetricsServer(MetricsServing("127.0.0.1", _free_port()), make_aiohttp_handler(_registry()))
    await server.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(server.serving.url) as resp:
            assert resp.status == 200
            assert "hyperplace_example_total 3.0" in await resp.text()
    finally:
        await server.stop()


async def test_prometheus_scrapes_over_https_with_the_serving_certificate(tmp_path: Path) -> None:
    ca = generate_ca()
    write_tls_files(
        tmp_path, generate_webhook_certs("hyperplace-scheduler", "hyperplace-system", ["127.0.0.1"], ca=ca)
    )
    serving = MetricsServing("127.0.0.1", _free_port(), str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    server = MetricsServer(serving, make_aiohttp_handler(_registry()))
    await server.start()
    try:
        assert serving.url.startswith("https://")
        trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
        async with aiohttp.ClientSession() as http:
            async with http.get(serving.url, ssl=trust) as resp:
                assert resp.status == 200 and "hyperplace_example_total 3.0" in await resp.text()
            # Plain HTTP on the TLS port gets no metrics.
            with pytest.raises(aiohttp.ClientError):
                async with http.get(serving.url.replace("https://", "http://")) as resp:
                    assert resp.status != 200
            # Nor does a client that does not trust the certificate.
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                async with http.get(serving.url) as resp:
                    pass
    finally:
        await server.stop()


async def test_a_missing_certificate_stops_the_start_with_a_reason(tmp_path: Path) -> None:
    serving = MetricsServing("127.0.0.1", _free_port(), str(tmp_path / "no.crt"), str(tmp_path / "no.key"))
    server = MetricsServer(serving, make_aiohttp_handler(_registry()))
    with pytest.raises(RuntimeError, match="metrics serving certificate not loaded"):
        await server.start()
    await server.stop()


async def test_the_probe_port_shows_no_metrics() -> None:
    app: web.Application = controller_health_app(ControllerManager(FakeApi()), None)
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/metrics")).status == 404
