"""A small async REST client for the test kube-apiserver, with its admin client certificate.

The differential runs create and delete a few thousand objects; one kubectl process per object
would take most of the run, so this speaks HTTP directly (aiohttp, one keep-alive pool)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

# Where each kind lives: (API prefix, plural, namespaced).
KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "PersistentVolume": ("/api/v1", "persistentvolumes", False),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims", True),
    "StorageClass": ("/apis/storage.k8s.io/v1", "storageclasses", False),
    "CSINode": ("/apis/storage.k8s.io/v1", "csinodes", False),
    "CSIDriver": ("/apis/storage.k8s.io/v1", "csidrivers", False),
    "RuntimeClass": ("/apis/node.k8s.io/v1", "runtimeclasses", False),
    "DeviceClass": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "ResourceSlice": ("/apis/resource.k8s.io/v1", "resourceslices", False),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", True),
    "DeviceTaintRule": ("/apis/resource.k8s.io/v1", "devicetaintrules", False),
}


class ApiError(RuntimeError):
    """The apiserver answered with an error; the message carries its Status text."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:2000]}")
        self.status = status


def collection_path(kind: str, namespace: str | None = None) -> str:
    """The collection URL path of ``kind`` (in ``namespace`` when the kind is namespaced)."""
    prefix, plural, namespaced = KINDS[kind]
    if namespaced:
        if not namespace:
            raise ValueError(f"{kind} is namespaced: a namespace is needed")
        return f"{prefix}/namespaces/{namespace}/{plural}"
    return f"{prefix}/{plural}"


def object_path(obj: Mapping[str, Any]) -> str:
    """The URL path of one object (its kind, namespace and name)."""
    meta = obj.get("metadata") or {}
    return f"{collection_path(str(obj['kind']), meta.get('namespace'))}/{meta['name']}"


class Rest:
    """``async with Rest(server, ca, cert, key) as api``: JSON in, JSON out, errors raised."""

    def __init__(self, server: str, ca_file: Path, cert_file: Path, key_file: Path) -> None:
        self.server = server.rstrip("/")
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._ssl.load_cert_chain(str(cert_file), str(key_file))
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Rest:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=16),
            timeout=aiohttp.ClientTimeout(total=60),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        ok_missing: bool = False,
    ) -> Any:
        """One call; the decoded JSON answer (None for 404 when ``ok_missing``)."""
        assert self._session is not None, "use `async with Rest(...)`"
        async with self._session.request(
            method,
            self.server + path,
            json=body,
            params=params,
            headers={"Content-Type": content_type} if body is not None else None,
        ) as resp:
            text = await resp.text()
            if resp.status == 404 and ok_missing:
                return None
            if resp.status >= 300:
                raise ApiError(method, path, resp.status, text)
            return await resp.json(content_type=None) if text else None

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST the object; the object as stored (defaulted, admitted)."""
        meta = obj.get("metadata") or {}
        got = await self.request("POST", collection_path(str(obj["kind"]), meta.get("namespace")), obj)
        return dict(got)

    async def get(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The object as stored now, or None when it is gone."""
        got = await self.request("GET", object_path(obj), ok_missing=True)
        return None if got is None else dict(got)

    async def replace_status(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the object's status subresource (what a controller would have written)."""
        return dict(await self.request("PUT", object_path(obj) + "/status", obj))

    async def merge_patch(self, obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any] | None:
        """A JSON merge patch of the object; None when it is gone."""
        got = await self.request(
            "PATCH", object_path(obj), patch, content_type="application/merge-patch+json", ok_missing=True
        )
        return None if got is None else dict(got)

    async def delete(self, obj: Mapping[str, Any], grace_seconds: int = 0) -> None:
        """Delete one object, by default now (no grace period); gone already is fine."""
        await self.request(
            "DELETE",
            object_path(obj),
            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": grace_seconds},
            ok_missing=True,
        )

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """The items of a collection."""
        params = {"labelSelector": label_selector} if label_selector else None
        got = await self.request("GET", collection_path(kind, namespace), params=params)
        return list(got.get("items") or [])

    async def delete_all(self, kind: str, namespace: str | None = None) -> None:
        """Delete every object of a collection at once, with no grace period: a bound pod would
        otherwise wait for a kubelet that does not exist."""
        await self.request(
            "DELETE",
            collection_path(kind, namespace),
            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
        )
