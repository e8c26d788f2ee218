"""The kubernetes-asyncio adapter speaks the API server's HTTP dialect: REST paths, merge
patches for custom objects, streamed watches, Status errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as kclient

from hyperplace.runtime.api import HYPERNODES, JOBS, PODS, ApiError
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.kube import KubeApiClient

seen: list[tuple[str, str, str, str]] = []  # method, path, query, content-type


def status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    return web.json_response(body, status=code)


async def pods(request: web.Request) -> web.StreamResponse:
    seen.append((request.method, request.path, request.query_string, request.content_type))
    if request.query.get("watch") != "true":
        pod = {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5"}}
        return web.json_response({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [pod]})
    if request.query.get("resourceVersion") == "1":
        return status(410, "Expired", "too old resource version: 1 (7)")
    resp = web.StreamResponse()
    resp.content_type = "application/json"
    await resp.prepare(request)
    events = [
        {"type": "ADDED", "object": {"metadata": {"name": "b", "namespace": "ns", "resourceVersion": "8"}}},
        {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}},
    ]
    for e in events:
        await resp.write(json.dumps(e).encode() + b"\n")
    await resp.write_eof()
    return resp


async def create_pod(request: web.Request) -> web.Response:
    seen.append((request.method, request.path, request.query_string, request.content_type))
    return status(409, "AlreadyExists", 'pods "a" already exists')


async def patch_any(request: web.Request) -> web.Response:
    seen.append((request.method, request.path, request.query_string, request.content_type))
    body = await request.json()
    return web.json_response({"metadata": {"name": request.match_info["name"]}, **body})


@pytest.fixture
async def adapter() -> AsyncIterator[KubeApiClient]:
    seen.clear()
    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    app.router.add_post("/api/v1/namespaces/ns/pods", create_pod)
    app.router.add_patch("/apis/topology.volcano.sh/v1alpha1/hypernodes/{name}/status", patch_any)
    app.router.add_patch("/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs/{name}/status", patch_any)
    app.router.add_patch("/api/v1/namespaces/ns/pods/{name}", patch_any)
    server = TestServer(app)
    await server.start_server()
    cfg = kclient.Configuration(host=str(server.make_url("")).rstrip("/"))
    raw = kclient.ApiClient(cfg)
    yield KubeApiClient(raw)
    await raw.close()
    await server.close()


async def test_list_returns_items_with_kind_and_the_list_resource_version(adapter: KubeApiClient) -> None:
    items, rv = await adapter.list(PODS, resource_version="0")
    assert rv == "7"
    assert items[0]["kind"] == "Pod" and items[0]["apiVersion"] == "v1"
    assert seen[-1][:3] == ("GET", "/api/v1/pods", "resourceVersion=0")


async def test_watch_streams_events_with_bookmarks_requested(adapter: KubeApiClient) -> None:
    events = [e async for e in adapter.watch(PODS, resource_version="7", timeout_seconds=5)]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    query = seen[-1][2]
    assert "watch=true" in query and "allowWatchBookmarks=true" in query and "timeoutSeconds=5" in query


async def test_watch_from_a_compacted_version_raises_410(adapter: KubeApiClient) -> None:
    with pytest.raises(ApiError) as err:
        _ = [e async for e in adapter.watch(PODS, resource_version="1")]
    assert err.value.gone and err.value.reason == "Expired"


async def test_informer_over_the_adapter_relists_after_410(adapter: KubeApiClient) -> None:
    inf = Informer(adapter, PODS)
    await inf.list_once()
    assert inf.resource_version == "7"
    assert await inf.watch_once()  # stream ends normally after ADDED + BOOKMARK
    assert sorted(inf.store) == ["ns/a", "ns/b"] and inf.resource_version == "9"
    inf.resource_version = "1"
    assert not await inf.watch_once()  # 410: the caller must relist


async def test_errors_carry_the_status_reason(adapter: KubeApiClient) -> None:
    with pytest.raises(ApiError) as err:
        await adapter.create(PODS, {"metadata": {"name": "a", "namespace": "ns"}})
    assert err.value.already_exists and "already exists" in err.value.message


@pytest.mark.parametrize(
    ("res", "ns", "path"),
    [
        (HYPERNODES, None, "/apis/topology.volcano.sh/v1alpha1/hypernodes/h1/status"),
        (JOBS, "ns", "/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs/h1/status"),
    ],
)
async def test_custom_object_status_patches_are_merge_patches(
    adapter: KubeApiClient, res: Any, ns: str | None, path: str
) -> None:
    out = await adapter.patch(res, "h1", {"status": {"nodeCount": 3}}, ns, subresource="status")
    assert out["status"] == {"nodeCount": 3}
    assert seen[-1][0] == "PATCH" and seen[-1][1] == path
    assert seen[-1][3] == "application/merge-patch+json"


async def test_core_patches_are_merge_patches_too(adapter: KubeApiClient) -> None:
    await adapter.patch(PODS, "a", {"metadata": {"labels": {"x": "1"}}}, "ns")
    assert seen[-1][1] == "/api/v1/namespaces/ns/pods/a" and seen[-1][3] == "application/merge-patch+json"


def _kubeconfig(tmp_path: Any, server: str) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize(
    ("env", "trusts_env"),
    [
        ({}, False),  # no proxy: no netrc lookup (a thread hop) on every request
        ({"HTTP_PROXY": "http://proxy.invalid:3128"}, True),  # the environment's proxy still applies
        ({"HTTP_PROXY": "http://proxy.invalid:3128", "NO_PROXY": "127.0.0.1"}, False),
    ],
)
async def test_connect_uses_one_sized_pool_and_trusts_the_environment_only_for_a_proxy(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], trusts_env: bool
) -> None:
    from hyperplace.runtime.kube import connect

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen.clear()
    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    server = TestServer(app)
    await server.start_server()
    api, raw = await connect(_kubeconfig(tmp_path, str(server.make_url("")).rstrip("/")), pool_size=7)
    try:
        session = raw.rest_client.pool_manager
        assert session.trust_env is trusts_env
        assert session.connector is not None and session.connector.limit == 7
        if not trusts_env:
            items, _rv = await api.list(PODS)  # requests still carry the token and work
            assert [i["metadata"]["name"] for i in items] == ["a"]
    finally:
        await raw.close()
        await server.close()
