"""With client certificates required, the real kube-apiserver still reaches the webhooks (it presents
the certificate ``hyperplace-certs client`` issued, through its AdmissionConfiguration), while a
client without one is refused during the TLS handshake; and silent connections held open against
the webhook port do not stop Job admission.

This module runs its own etcd + kube-apiserver: the AdmissionConfiguration is a start-up flag.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from certs.__main__ import main as certs_main
from hyperplace.localup import controlplane
from hyperplace.localup.components import webhook_configurations, webhooks_argv
from hyperplace.pki.certificates import generate_webhook_certs, write_tls_files

from ..kube_bin import kube_bin_dir
from .conftest import _established
from .kube import REPO, Kubectl, in_namespace, load_yaml, wait_for

pytestmark = pytest.mark.apiserver

FIXTURES = REPO / "tests" / "webhooks" / "fixtures"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Setup:
    def __init__(self, kubectl: Kubectl, tls: Path, port: int, health: int, log: Path) -> None:
        self.kubectl = kubectl
        self.tls = tls
        self.port = port
        self.health = health
        self.log = log

    def job(self, namespace: str) -> dict[str, Any]:
        job = in_namespace(load_yaml(FIXTURES / "user_guide_jobs.yaml")[0], namespace)
        job["metadata"]["name"] = f"job-{uuid.uuid4().hex[:6]}"
        return job

    def admitted(self, namespace: str) -> bool:
        """A server-side dry-run create shows the mutating webhook's default."""
        out = self.kubectl.run(
            "create",
            "--dry-run=server",
            "-o",
            "json",
            "-f",
            "-",
            input=json.dumps(self.job(namespace)),
            check=False,
        )
        return out.returncode == 0 and '"maxRetry": 3' in out.stdout

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    bin_dir = kube_bin_dir()
    tls = tmp_path_factory.mktemp("mtls")
    write_tls_files(
        tls,
        generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"]),
        write_ca_key=True,
    )
    assert certs_main(["client", f"--out-dir={tls}", "--server=*"]) == 0
    with controlplane.control_plane(
        bin_dir, apiserver_args=[f"--admission-control-config-file={tls / 'admission-config.yaml'}"]
    ) as cp:
        kubectl = Kubectl(cp.kubeconfig)
        kubectl.run("apply", "-f", str(REPO / "manifests" / "crds"))
        wait_for(lambda: _established(kubectl), "the CRDs to be Established", describe=cp.logs)
        wait_for(
            lambda: kubectl.run("get", "jobs.batch.volcano.sh", "-A", check=False).returncode == 0,
            "the CRDs to be served",
        )
        kubectl.run("apply", "-f", str(REPO / "manifests" / "default-queue.yaml"))
        port, health = _free_port(), _free_port()
        log = tls / "webhooks.log"
        kubectl.apply(webhook_configurations(port))
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                webhooks_argv(
                    cp.kubeconfig,
                    port=port,
                    tls_dir=tls,
                    health_port=health,
                    extra=[f"--client-ca-file={tls / 'ca.crt'}"],
                ),
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env={**os.environ, "KUBECONFIG": str(cp.kubeconfig)},
            )
        setup = Setup(kubectl, tls, port, health, log)
        try:
            kubectl.run("create", "namespace", "mtls")
            wait_for(
                lambda: setup.admitted("mtls"), "the webhooks to answer the apiserver", describe=setup.tail
            )
            yield setup
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_the_apiserver_authenticates_with_its_client_certificate_and_jobs_are_admitted(mtls: Setup) -> None:
    assert mtls.admitted("mtls")
    assert "client certificates required: CN hyperplace-webhook-client" in mtls.log.read_text()


def test_a_client_without_a_certificate_is_refused_during_the_handshake(mtls: Setup) -> None:
    ctx = ssl.create_default_context(cafile=str(mtls.tls / "ca.crt"))
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        urllib.request.urlopen(f"https://127.0.0.1:{mtls.port}/healthz", context=ctx, timeout=5).read()


def test_silent_connections_against_the_port_do_not_stop_admission(mtls: Setup) -> None:
    """300 TCP connections opened and left silent (they cannot finish a handshake without a
    certificate) while Jobs are created: every admission succeeds, and readiness stays true."""

    async def attack(stop: asyncio.Event) -> int:
        opened = 0
        writers: list[asyncio.StreamWriter] = []
        while not stop.is_set():
            for _ in range(300 - len(writers)):
                with contextlib.suppress(OSError):
                    _, w = await asyncio.open_connection("127.0.0.1", mtls.port)
                    writers.append(w)
                    opened += 1
            writers = [w for w in writers if not w.is_closing() and not w.transport.is_closing()]
            await asyncio.sleep(0.2)
        for w in writers:
            w.close()
        return opened

    async def run() -> tuple[int, list[bool], str]:
        stop = asyncio.Event()
        task = asyncio.create_task(attack(stop))
        await asyncio.sleep(2)
        results = [await asyncio.to_thread(mtls.admitted, "mtls") for _ in range(5)]
        ready = await asyncio.to_thread(
            lambda: (
                urllib.request.urlopen(f"http://127.0.0.1:{mtls.health}/readyz", timeout=5).read().decode()
            )
        )
        stop.set()
        return await task, results, ready

    opened, results, ready = asyncio.run(run())
    assert opened >= 300
    assert all(results), f"admission failed under attack: {results}\n{mtls.tail()}"
    assert ready == "ok"
