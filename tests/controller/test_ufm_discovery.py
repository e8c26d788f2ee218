"""UFM discovery: leaf switches become tier-1 HyperNodes, the spine a tier-2 one, named as
Volcano names them; a failed or partial fetch never deletes anything.

The fabric is served by a fake UFM over HTTPS on loopback, answering
``GET /ufmRest/resources/ports`` with basic auth like the real one, from a saved answer in
the documented shape (``fixtures/ufm_ports.json``: two scalable units of four GPU nodes,
each node cabled to two rail leaves, leaves uplinked to one spine).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from controller.hypernode.discovery import DiscoveryConfig, DiscoverySource, discover_offline
from controller.hypernode.sync import DISCOVERY_CONDITION
from controller.hypernode.ufm import (
    UfmError,
    UfmPort,
    UfmSettings,
    build_hypernodes,
    fetch_ports,
    parse_ports,
    ufm_settings,
)
from controller.manager import ControllerManager, ManagerConfig
from hyperplace.pki.certificates import generate_ca, generate_serving_cert
from hyperplace.runtime.api import CONFIGMAPS, HYPERNODES, NODES, SECRETS
from hyperplace.runtime.fakeapi import FakeApi

FIXTURE = Path(__file__).parent / "fixtures" / "ufm_ports.json"
RECORDED = json.loads(FIXTURE.read_text())


def spec_of(hn: Any) -> tuple[int, list[tuple[str, str]]]:
    return hn.spec.tier, [(m.type, m.selector.exact_match.name) for m in hn.spec.members]


# --- the pure rules ------------------------------------------------------------------------


def test_volcanos_own_example_gives_volcanos_hypernodes() -> None:
    # ufm_test.go: node0-3 on leaf0-3 (every node on every leaf), node4-7 on leaf4-7 (node4
    # and node7 on three leaves only): two leaf groups and a spine.
    wiring = {n: [f"leaf{i}" for i in range(4)] for n in ("node0", "node1", "node2", "node3")}
    wiring |= {"node4": ["leaf4", "leaf5", "leaf6"], "node7": ["leaf4", "leaf5", "leaf6"]}
    wiring |= {"node5": ["leaf4", "leaf5", "leaf6", "leaf7"], "node6": ["leaf4", "leaf5", "leaf6", "leaf7"]}
    ports = [UfmPort("Computer IB Port", n, leaf) for n, leaves in wiring.items() for leaf in leaves]
    got = {hn.name: spec_of(hn) for hn in build_hypernodes(ports)}
    assert got == {
        "leaf-hn-0": (1, [("Node", f"node{i}") for i in range(4)]),
        "leaf-hn-1": (1, [("Node", f"node{i}") for i in range(4, 8)]),
        "spine-hn": (2, [("HyperNode", "leaf-hn-0"), ("HyperNode", "leaf-hn-1")]),
    }
    assert all(
        hn.metadata.labels == {"volcano.sh/network-topology-source": "ufm"} for hn in build_hypernodes(ports)
    )


def test_the_recorded_fabric_groups_rails_per_scalable_unit_and_ignores_switch_ports() -> None:
    got = {hn.name: spec_of(hn) for hn in build_hypernodes(parse_ports(FIXTURE.read_bytes()))}
    assert got == {
        "leaf-hn-0": (1, [("Node", f"gpu-0{i}") for i in range(4)]),
        "leaf-hn-1": (1, [("Node", f"gpu-0{i}") for i in range(4, 8)]),
        "spine-hn": (2, [("HyperNode", "leaf-hn-0"), ("HyperNode", "leaf-hn-1")]),
    }


def test_spine_members_follow_gos_string_order() -> None:
    ports = [UfmPort("Computer IB Port", f"n{i}", f"leaf{i:02d}") for i in range(12)]
    spine = build_hypernodes(ports)[-1]
    assert [m.selector.exact_match.name for m in spine.spec.members][:4] == [  # type: ignore[union-attr]
        "leaf-hn-0",
        "leaf-hn-1",
        "leaf-hn-10",
        "leaf-hn-11",
    ]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            b'[{"description": "Computer IB Port", "system_name": "a", "peer_node_name": "l"',
            "truncated or not JSON",
        ),
        (b'{"ports": []}', "expected a JSON list"),
        (b"[]", "no host port"),
        (json.dumps([p for p in RECORDED if "Switch" in p["description"]]).encode(), "no host port"),
        (b'["x"]', "port [0] is not an object"),
        (b'[{"description": "Computer IB Port", "system_name": "gpu-00"}]', "no host port"),
    ],
)
def test_an_answer_that_is_not_a_complete_port_list_is_refused(body: bytes, why: str) -> None:
    with pytest.raises(UfmError, match=re.escape(why)):
        parse_ports(body)


def test_settings_follow_volcanos_configuration() -> None:
    assert (
        ufm_settings({"endpoint": "ufm.example.com"}).url == "https://ufm.example.com/ufmRest/resources/ports"
    )
    assert ufm_settings({"endpoint": "http://ufm:8080/"}).url == "http://ufm:8080/ufmRest/resources/ports"
    assert ufm_settings({"endpoint": "https://u", "insecureSkipVerify": True}).insecure_skip_verify
    with pytest.raises(UfmError, match=r"config\.endpoint"):
        ufm_settings({})
    with pytest.raises(UfmError, match=r"config\.insecureSkipVerify"):
        ufm_settings({"endpoint": "u", "insecureSkipVerify": "yes"})


def test_offline_preview_reads_a_saved_answer_through_file_urls(tmp_path: Path) -> None:
    import random

    saved = tmp_path / "ports.json"
    saved.write_text(FIXTURE.read_text())
    config = DiscoveryConfig([DiscoverySource("ufm", True, config={"endpoint": f"file://{saved}"})])
    result = discover_offline(config, [], [], random.Random(0))
    assert sorted(hn.name for hn in result.create) == ["leaf-hn-0", "leaf-hn-1", "spine-hn"]
    remote = DiscoveryConfig([DiscoverySource("ufm", True, config={"endpoint": "https://ufm"})])
    preview = discover_offline(remote, [], [], random.Random(0))
    assert preview.create == [] and "file://" in preview.warnings[0]


# --- a fake UFM over HTTPS on loopback ---------------------------------------------------------


@dataclass
class FakeUfm:
    """Answers like UFM: basic auth, the ports list, or whatever a test makes it do."""

    url: str
    ca_pem: bytes
    username: str = "admin"
    password: str = "s3cret"
    answer: bytes = field(default_factory=FIXTURE.read_bytes)
    status: int = 200
    truncate: bool = False
    requests: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        expected = "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401, text="Unauthorized")
        if self.status != 200:
            return web.Response(status=self.status, text="Server Error")
        if self.truncate:
            # The connection drops half-way through the body: a partial answer.
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.content_length = len(self.answer)
            await resp.prepare(request)
            await resp.write(self.answer[: len(self.answer) // 2])
            request.transport.close()  # type: ignore[union-attr]
            return resp
        return web.Response(body=self.answer, content_type="application/json")


@pytest.fixture
async def fake_ufm(tmp_path: Path) -> AsyncIterator[FakeUfm]:
    import ssl

    ca = generate_ca("fake-ufm-ca")
    serving = generate_serving_cert(ca, ["localhost"], ["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    app = web.Application()
    runner = web.AppRunner(app)
    fake = FakeUfm(url="", ca_pem=ca.cert_pem)
    app.router.add_get("/ufmRest/resources/ports", fake.handle)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    fake.url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    try:
        yield fake
    finally:
        await runner.cleanup()


def _settings(fake: FakeUfm, tmp_path: Path, **kw: Any) -> UfmSettings:
    return UfmSettings(endpoint=fake.url, ca_file=str(tmp_path / "ca.crt"), **kw)


async def test_fetch_over_https_with_basic_auth(fake_ufm: FakeUfm, tmp_path: Path) -> None:
    ports = await fetch_ports(_settings(fake_ufm, tmp_path), "admin", "s3cret")
    assert len(ports) == len(RECORDED)
    with pytest.raises(UfmError, match="401"):
        await fetch_ports(_settings(fake_ufm, tmp_path), "admin", "wrong")


async def test_an_untrusted_certificate_fails_unless_insecure_skip_verify_is_opted_into(
    fake_ufm: FakeUfm,
) -> None:
    with pytest.raises(UfmError, match="failed to send request"):
        await fetch_ports(UfmSettings(endpoint=fake_ufm.url), "admin", "s3cret")
    ports = await fetch_ports(
        UfmSettings(endpoint=fake_ufm.url, insecure_skip_verify=True), "admin", "s3cret"
    )
    assert len(ports) == len(RECORDED)


async def test_a_connection_dropped_mid_answer_is_an_error(fake_ufm: FakeUfm, tmp_path: Path) -> None:
    fake_ufm.truncate = True
    with pytest.raises(UfmError):
        await fetch_ports(_settings(fake_ufm, tmp_path), "admin", "s3cret")


# --- the controller against the fake UFM --------------------------------------------------------


async def _eventually(cond: Any, timeout: float = 30.0) -> None:  # bounds a hang only
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def _names(api: FakeApi) -> set[str]:
    return set(api.objects.get("hypernodes", {}))


def _discovery_condition(api: FakeApi, name: str) -> dict[str, Any] | None:
    hn = api.peek(HYPERNODES, name) or {}
    return next(
        (c for c in (hn.get("status") or {}).get("conditions") or [] if c["type"] == DISCOVERY_CONDITION),
        None,
    )


def _configmap(endpoint: str, ca: str, interval: str = "50ms") -> dict[str, Any]:
    conf = {
        "networkTopologyDiscovery": [
            {
                "source": "ufm",
                "enabled": True,
                "interval": interval,
                "credentials": {"secretRef": {"name": "ufm-credentials", "namespace": "volcano-system"}},
                "config": {"endpoint": endpoint, "caFile": ca},
            }
        ]
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
        "data": {"volcano-controller.conf": json.dumps(conf)},
    }


def _secret(username: str, password: str) -> dict[str, Any]:
    enc = {
        k: base64.b64encode(v.encode()).decode() for k, v in (("username", username), ("password", password))
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "ufm-credentials", "namespace": "volcano-system"},
        "data": enc,
    }


async def test_the_controller_discovers_keeps_the_tree_on_failures_and_deletes_only_when_told(
    fake_ufm: FakeUfm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = FakeApi()
    api.seed(SECRETS, _secret("admin", "s3cret"))
    api.seed(CONFIGMAPS, _configmap(fake_ufm.url, str(tmp_path / "ca.crt")))
    for i in range(8):
        api.seed(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-0{i}", "labels": {}}})
    mgr = ControllerManager(api, ManagerConfig(workers=1, seed=0), now=lambda: "2026-01-01T00:00:00Z")
    task = asyncio.create_task(mgr.run())
    try:
        await _eventually(lambda: _names(api) == {"leaf-hn-0", "leaf-hn-1", "spine-hn"})
        await _eventually(lambda: (_discovery_condition(api, "spine-hn") or {}).get("status") == "True")
        assert (api.peek(HYPERNODES, "spine-hn") or {})["status"]["nodeCount"] == 8

        # UFM fails: 500, then a connection dropped mid-answer, then an empty list. Nothing is
        # deleted; every UFM HyperNode says why.
        for breakage in ("status", "truncate", "empty"):
            seen = fake_ufm.requests
            if breakage == "status":
                fake_ufm.status = 500
            elif breakage == "truncate":
                fake_ufm.status, fake_ufm.truncate = 200, True
            else:
                fake_ufm.truncate, fake_ufm.answer = False, b"[]"
            await _eventually(lambda seen=seen: fake_ufm.requests >= seen + 2)
            await _eventually(lambda: (_discovery_condition(api, "leaf-hn-0") or {}).get("status") == "False")
            assert _names(api) == {"leaf-hn-0", "leaf-hn-1", "spine-hn"}, breakage
        cond = _discovery_condition(api, "leaf-hn-1")
        assert (
            cond is not None and cond["reason"] == "FetchFailed" and "last good tree kept" in cond["message"]
        )
        assert "keeping the HyperNodes from the last good answer" in caplog.text

        # A complete answer without the second scalable unit: now its leaf group goes.
        fake_ufm.answer = json.dumps(
            [p for p in RECORDED if p["system_name"] < "gpu-04" and "Computer" in p["description"]]
        ).encode()
        await _eventually(lambda: _names(api) == {"leaf-hn-0", "spine-hn"})
        await _eventually(lambda: (_discovery_condition(api, "spine-hn") or {}).get("status") == "True")
        spine = api.peek(HYPERNODES, "spine-hn") or {}
        assert [m["selector"]["exactMatch"]["name"] for m in spine["spec"]["members"]] == ["leaf-hn-0"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_missing_credentials_keep_the_tree_and_say_so(
    fake_ufm: FakeUfm, caplog: pytest.LogCaptureFixture
) -> None:
    from controller.hypernode.discovery import parse_discovery_config

    api = FakeApi()  # no Secret
    mgr = ControllerManager(api, ManagerConfig(workers=1, seed=0))
    source = parse_discovery_config(_configmap(fake_ufm.url, "unused")).enabled("ufm")
    assert source is not None
    with caplog.at_level(logging.ERROR, logger="controller.hypernode.discovery_sync"):
        assert await mgr.discovery_ctl.run_ufm_discovery(source) is False
    status, reason, message = mgr.hypernode_ctl.source_conditions["ufm"]
    assert (status, reason) == ("False", "FetchFailed")
    assert "secret volcano-system/ufm-credentials not found" in message
    assert fake_ufm.requests == 0 and "ufm discovery" in caplog.text
