"""The :class:`~hyperplace.runtime.api.ApiClient` protocol over kubernetes-asyncio.

Deliberately thin: requests go through ``ApiClient.call_api`` (auth, TLS, retries and
kubeconfig handling stay the library's) with ``_preload_content=False``, so we get raw
JSON dicts for every kind, core or custom, without the generated models'
client-side validation (which is known to choke on some server answers). Two library
gotchas handled here:

* CRDs do not support strategic merge patch, and the generated client would pick it
  for a dict body; custom-object patches go through ``CustomObjectsApi`` with
  ``_content_type="application/merge-patch+json"``, core patches send that header.
* kubernetes-asyncio's ``Watch`` retries a 410 once with the same stale
  resourceVersion; we stream the watch response ourselves and surface 410 to the
  informer, which relists.
* ``POST pods/{name}/binding`` answers with a ``Status``, which the generated
  ``create_namespaced_pod_binding`` fails to deserialise as a ``V1Binding``; our raw
  call reads whatever JSON comes back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

from kubernetes_asyncio import client as kclient
from kubernetes_asyncio import config
from kubernetes_asyncio.config.config_exception import ConfigException

from .api import ApiError, Obj, Resource, meta

MERGE_PATCH = "application/merge-patch+json"


async def load_client_config(kubeconfig: str | None = None, context: str | None = None) -> None:
    """Configure kubernetes-asyncio: ``kubeconfig`` when given, else the in-cluster service
    account, else the default kubeconfig (running outside a cluster)."""
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, context=context)
        return
    try:
        config.load_incluster_config()
    except ConfigException:
        await config.load_kube_config(context=context)


async def connect(
    kubeconfig: str | None = None, *, pool_size: int | None = None
) -> tuple[KubeApiClient, kclient.ApiClient]:
    """A KubeApiClient and the raw kubernetes-asyncio client behind it (close the latter).

    Every request of the process shares one connection pool (one aiohttp connector, keep-alive
    connections to the apiserver). ``pool_size`` caps its connections (kubernetes-asyncio's
    default is 100); a process with more requests in flight than that, watches included,
    would queue them in the pool however high its own concurrency limits are."""
    await load_client_config(kubeconfig)
    cfg = kclient.Configuration.get_default_copy()
    if pool_size is not None:
        cfg.connection_pool_maxsize = max(1, pool_size)
    raw = kclient.ApiClient(configuration=cfg)
    _skip_netrc_lookups(raw, cfg)
    return KubeApiClient(raw), raw


def _skip_netrc_lookups(raw: kclient.ApiClient, cfg: kclient.Configuration) -> bool:
    """Stop aiohttp from reading ``~/.netrc`` in a worker thread on every request.

    kubernetes-asyncio opens its session with ``trust_env=True`` (for a proxy named in the
    environment); aiohttp then looks for netrc credentials, in the default executor, for
    every request that has no ``auth=`` argument, which is every one of ours (they carry an
    Authorization header). That thread hop per request was about a third of the scheduler's
    CPU while binding, and queued binds on the executor's few threads. When the environment
    names no proxy for the apiserver, trusting it does nothing else, so it is turned off;
    otherwise nothing changes. Returns whether it was turned off."""
    session = raw.rest_client.pool_manager
    if cfg.proxy or not hasattr(session, "_trust_env"):
        return False
    # What aiohttp would find: the scheme's proxy from the environment, unless no_proxy exempts the host.
    url = urlsplit(str(cfg.host))
    if url.scheme in getproxies() and not proxy_bypass(url.hostname or ""):
        return False
    session._trust_env = False
    return True


async def _raise_for_status(resp: Any) -> None:
    if resp.status < 400:
        return
    text = await resp.text()
    resp.release()
    reason, message = "", text
    try:
        status = json.loads(text)
        reason, message = str(status.get("reason", "")), str(status.get("message", text))
    except (ValueError, AttributeError):
        pass
    raise ApiError(resp.status, reason, message)


async def _json(resp: Any) -> Obj:
    await _raise_for_status(resp)
    try:
        text = await resp.text()
    finally:
        resp.release()
    return json.loads(text) if text else {}


class KubeApiClient:
    """ApiClient backed by a configured ``kubernetes_asyncio.client.ApiClient``."""

    def __init__(self, api_client: kclient.ApiClient) -> None:
        self._client = api_client
        self._custom = kclient.CustomObjectsApi(api_client)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        return await self._client.call_api(
            path,
            method,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )

    async def list(
        self, res: Resource, namespace: str | None = None, *, resource_version: str | None = None
    ) -> tuple[list[Obj], str]:
        query: list[tuple[str, Any]] = []
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        doc = await _json(await self._call("GET", res.path(namespace), query=query))
        items = doc.get("items") or []
        # List items omit apiVersion/kind; fill them so stored objects are self-describing.
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return items, str(meta(doc).get("resourceVersion", ""))

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[Obj]:
        query: list[tuple[str, Any]] = [("watch", "true"), ("resourceVersion", resource_version)]
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if timeout_seconds:
            query.append(("timeoutSeconds", timeout_seconds))
        # The client-side timeout outlives the server's so a healthy stream ends cleanly.
        timeout = (timeout_seconds + 30) if timeout_seconds else None
        resp = await self._call("GET", res.path(namespace), query=query, timeout=timeout)
        await _raise_for_status(resp)
        try:
            async for line in resp.content:
                if line.strip():
                    yield json.loads(line)
        finally:
            resp.release()

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        return await _json(await self._call("GET", res.path(namespace, name)))

    async def api_resources(self, api_version: str) -> tuple[str, ...]:
        """Resource names discovery serves for ``api_version`` (``"podgroups/status"`` and the like)."""
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        doc = await _json(await self._call("GET", path))
        return tuple(str(r.get("name")) for r in doc.get("resources") or [] if isinstance(r, dict))

    async def create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        ns = namespace or meta(obj).get("namespace")
        # pods/binding answers with a Status, not a Binding (see the module docstring): the raw
        # response is read as JSON, so no generated model ever tries to deserialise it.
        path = res.path(ns, str(meta(obj).get("name", "")), subresource) if subresource else res.path(ns)
        return await _json(await self._call("POST", path, body=dict(obj)))

    async def replace(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        ns = namespace or meta(obj).get("namespace")
        return await _json(
            await self._call("PUT", res.path(ns, str(meta(obj).get("name", ""))), body=dict(obj))
        )

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        body = dict(patch)
        if not res.custom:
            return await _json(
                await self._call(
                    "PATCH", res.path(namespace, name, subresource), body=body, content_type=MERGE_PATCH
                )
            )
        kw: dict[str, Any] = {"_content_type": MERGE_PATCH, "_preload_content": False}
        g, v, p, ns = res.group, res.version, res.plural, namespace or ""
        if res.namespaced:
            if subresource == "status":
                resp = await self._custom.patch_namespaced_custom_object_status(g, v, ns, p, name, body, **kw)
            else:
                resp = await self._custom.patch_namespaced_custom_object(g, v, ns, p, name, body, **kw)
        elif subresource == "status":
            resp = await self._custom.patch_cluster_custom_object_status(g, v, p, name, body, **kw)
        else:
            resp = await self._custom.patch_cluster_custom_object(g, v, p, name, body, **kw)
        return await _json(resp)

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        body: dict[str, Any] | None = None
        if uid is not None or grace_period_seconds is not None:
            body = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if uid is not None:
                body["preconditions"] = {"uid": uid}
            if grace_period_seconds is not None:
                body["gracePeriodSeconds"] = grace_period_seconds
        await _json(
            await self._call(
                "DELETE",
                res.path(namespace, name),
                body=body,
                content_type="application/json" if body is not None else None,
            )
        )
