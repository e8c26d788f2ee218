"""Status writes that work whether or not a CRD declares a ``status`` subresource.

Volcano's PodGroup CRD has no status subresource (Volcano updates the whole object), and
a cluster that runs Volcano keeps Volcano's CRDs. Written blindly, each shape loses status
on the other:

* ``PATCH .../podgroups/<name>/status`` on a CRD without the subresource answers 404,
  which looks exactly like "the object was deleted";
* a ``status`` sent to the main resource of a CRD *with* the subresource is silently
  dropped by the apiserver.

:class:`StatusWriter` asks API discovery (``GET /apis/<group>/<version>``) once per
resource whether ``<plural>/status`` is served and writes accordingly. Because a CRD can
be replaced while we run (installing Volcano's CRDs over ours, or the other way round), it
also notices the two symptoms above: a 404 from the subresource for an object that still
exists, or a main-resource write whose answer does not carry the status just sent. Either
one is logged, the cached answer flipped, and the write retried the other way at once.
A 404 for an object that really is gone is raised as an :class:`ApiError` with
``not_found`` so callers drop the write as before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .api import ApiClient, ApiError, Obj, Resource

log = logging.getLogger(__name__)


async def served_subresources(api: ApiClient, res: Resource) -> set[str] | None:
    """Names discovery lists for ``res``'s group/version (``{"podgroups", "podgroups/status"}``),
    or None when discovery cannot be read (then callers assume the usual shape)."""
    lookup = getattr(api, "api_resources", None)
    if lookup is None:
        return None
    try:
        names = await lookup(res.api_version)
    except ApiError as exc:
        log.warning(
            "discovery of %s failed (%s); assuming %s/status is served", res.api_version, exc, res.plural
        )
        return None
    return {str(n) for n in names}


def _reflected(sent: Mapping[str, Any], got: Mapping[str, Any]) -> bool:
    """Whether ``got`` (the server's answer) carries the scalar status fields we sent.

    Only scalars are compared: lists and maps may come back pruned or normalised by a
    schema that knows fewer fields, which does not mean the write was dropped.
    """
    scalars = {k: v for k, v in sent.items() if isinstance(v, str | int | float | bool)}
    if not scalars:
        return True
    have = got.get("status") or {}
    return isinstance(have, Mapping) and all(have.get(k) == v for k, v in scalars.items())


class StatusWriter:
    """Writes ``status`` through the subresource when it is served, else through the object."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._subresource: dict[str, bool] = {}  # "plural.group" -> status subresource served

    @staticmethod
    def _key(res: Resource) -> str:
        return f"{res.plural}.{res.group}"

    async def has_status_subresource(self, res: Resource) -> bool:
        """Discovery's answer for ``res``, cached until a write shows it changed."""
        key = self._key(res)
        if key not in self._subresource:
            served = await served_subresources(self.api, res)
            has = True if served is None else f"{res.plural}/status" in served
            if not has:
                log.info(
                    "%s has no status subresource (Volcano's CRD shape): status goes through the object", key
                )
            self._subresource[key] = has
        return self._subresource[key]

    def forget(self, res: Resource) -> None:
        """Ask discovery again before the next write (a CRD was replaced)."""
        self._subresource.pop(self._key(res), None)

    async def patch_status(
        self, res: Resource, name: str, patch: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        """Merge-patch ``patch`` (``{"status": {...}}``, optionally with a
        ``metadata.resourceVersion`` precondition) onto the object's status.

        Raises ApiError(404) only when the object itself does not exist.
        """
        key = self._key(res)
        if await self.has_status_subresource(res):
            try:
                return await self.api.patch(res, name, patch, namespace, subresource="status")
            except ApiError as exc:
                if not exc.not_found:
                    raise
                await self.api.get(res, name, namespace)  # raises 404 if the object is gone
                log.warning(
                    "%s %s/%s exists but %s/status is not served (the CRD was replaced by one without "
                    "a status subresource?); writing status through the object",
                    key,
                    namespace or "",
                    name,
                    res.plural,
                )
                self._subresource[key] = False
        got = await self.api.patch(res, name, patch, namespace)
        sent = patch.get("status")
        if isinstance(sent, Mapping) and not _reflected(sent, got):
            log.warning(
                "%s %s/%s: the status sent through the object was dropped (the CRD now has a status "
                "subresource?); writing it through %s/status",
                key,
                namespace or "",
                name,
                res.plural,
            )
            self._subresource[key] = True
            return await self.api.patch(res, name, patch, namespace, subresource="status")
        return got
