"""The server in a cluster: tree checks follow a watched HyperNode cache, and the
``hyperplace-webhooks`` command starts, serves and stops cleanly."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from webhooks.cache import InformerContext

from .builders import hypernode, review

ROOT = Path(__file__).resolve().parents[2]


class FakeInformer:
    def __init__(self):
        self.store = {}
        self.synced = asyncio.Event()
        self.handlers = []

    def add_handler(self, on_add=None, on_update=None, on_delete=None):
        self.handlers.append((on_add, on_update, on_delete))

    def put(self, obj):
        old = self.store.get(obj["metadata"]["name"])
        self.store[obj["metadata"]["name"]] = obj
        for add, update, _ in self.handlers:
            update(old, obj) if old is not None else add(obj)

    def delete(self, name):
        obj = self.store.pop(name)
        for _, _, delete in self.handlers:
            delete(obj)


def test_tree_checks_are_skipped_until_the_cache_has_synced():
    informer = FakeInformer()
    source = InformerContext(hypernodes=informer)
    assert source().hypernodes is None
    informer.put(hypernode("s0", 1, nodes=("n0",)))
    informer.synced.set()
    assert list(source().hypernodes or {}) == ["s0"]


def test_cache_changes_reach_the_next_request_and_models_are_reused_otherwise():
    informer = FakeInformer()
    informer.synced.set()
    source = InformerContext(hypernodes=informer)
    informer.put(hypernode("s0", 1, nodes=("n0",)))
    first = source()
    assert source() is first  # nothing changed: no rebuild
    informer.put(hypernode("s1", 2, children=("s0",)))
    assert sorted(source().hypernodes or {}) == ["s0", "s1"]
    informer.delete("s0")
    assert sorted(source().hypernodes or {}) == ["s1"]


def test_invalid_stored_objects_are_left_out():
    informer = FakeInformer()
    informer.synced.set()
    informer.put({"metadata": {"name": "broken"}, "spec": {"tier": "x"}})
    informer.put(hypernode("s0", 1, nodes=("n0",)))
    assert list(InformerContext(hypernodes=informer)().hypernodes or {}) == ["s0"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, data: bytes | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_command_serves_plain_http_for_tests_and_stops_on_sigterm():
    port, probes = _free_port(), _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhooks", "--insecure-http", "--host", "127.0.0.1", "--port", str(port),
         "--metrics-port", str(probes), "--no-hypernode-cache"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # start-up wait, generous for a loaded CI machine
        while True:
            try:
                if _get(f"http://127.0.0.1:{probes}/readyz")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        status, body = _get(
            f"http://127.0.0.1:{port}/hypernodes/validate", json.dumps(review(hypernode("s0", 1))).encode()
        )
        assert status == 200
        assert (
            json.loads(body)["response"]["status"]["message"]
            == "spec.members: member must have at least one member"
        )
        # Metrics are served on the webhook port (TLS in a cluster), not on the probe port.
        assert b"hyperplace_webhook_requests_total" in _get(f"http://127.0.0.1:{port}/metrics")[1]
        assert _get(f"http://127.0.0.1:{probes}/metrics")[0] == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err.decode()
    assert b"shutting down" in err


def test_command_refuses_to_start_without_a_certificate(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "webhooks", "--tls-cert-file", str(tmp_path / "tls.crt"),
         "--tls-private-key-file", str(tmp_path / "tls.key"), "--no-hypernode-cache"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert b"cannot load the serving certificate" in proc.stderr
