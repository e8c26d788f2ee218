"""Put the CA bundle into our webhook configurations, touching them only when needed.

``inject_ca_bundle`` is a pure function on the configuration dict; ``inject_into_cluster``
is the thin kubernetes-asyncio adapter that reads, compares and patches (Volcano's
webhook-manager does the same at start-up: it rewrites ``caBundle`` only where it
differs, so restarts do not churn the objects or their resourceVersion). The same with a
client made from the process's kubeconfig is ``hyperplace.runtime.cabundle``: making a
client is the runtime's, which stands above this package.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
from collections.abc import Sequence
from typing import Any, Literal

log = logging.getLogger("hyperplace.certs")

ConfigKind = Literal["validating", "mutating"]


def inject_ca_bundle(config: dict[str, Any], ca_pem: bytes) -> tuple[bool, dict[str, Any]]:
    """Set ``clientConfig.caBundle`` of every webhook in a Validating- or
    MutatingWebhookConfiguration to ``ca_pem``.

    Returns ``(changed, new)``: ``new`` is a copy (the input is not modified) and
    ``changed`` tells whether any webhook's bundle differed. An existing bundle that
    decodes to the same PEM counts as unchanged, whatever its base64 line breaks.
    """
    want = base64.b64encode(ca_pem).decode()
    new = copy.deepcopy(config)
    changed = False
    webhooks = new.get("webhooks")
    for hook in webhooks if isinstance(webhooks, list) else []:
        if not isinstance(hook, dict):
            continue
        client = hook.get("clientConfig")
        if not isinstance(client, dict):
            client = hook["clientConfig"] = {}
        current = client.get("caBundle")
        if not _same_bundle(current, ca_pem):
            client["caBundle"] = want
            changed = True
    return changed, new


def _same_bundle(current: Any, ca_pem: bytes) -> bool:
    if not isinstance(current, str | bytes) or not current:
        return False
    try:
        raw = base64.b64decode(current, validate=False)
    except ValueError:
        return False
    return raw.strip() == ca_pem.strip()


def bundle_patch(new: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch setting every webhook's caBundle to the one in ``new``.

    It starts with a ``test`` of the resourceVersion that was read, so a configuration
    changed in between (webhooks reordered, say) makes the patch fail instead of writing
    a bundle into the wrong entry. (A list body makes kubernetes-asyncio send it as
    ``application/json-patch+json``.)
    """
    ops: list[dict[str, Any]] = []
    rv = (new.get("metadata") or {}).get("resourceVersion")
    if rv:
        ops.append({"op": "test", "path": "/metadata/resourceVersion", "value": rv})
    for i, hook in enumerate(new.get("webhooks") or []):
        ops.append(
            {
                "op": "add",
                "path": f"/webhooks/{i}/clientConfig/caBundle",
                "value": hook["clientConfig"]["caBundle"],
            }
        )
    return ops


async def inject_into_cluster(
    api: Any,
    names: Sequence[tuple[ConfigKind, str]],
    ca_pem: bytes,
    *,
    wait_seconds: float = 300.0,
    poll_seconds: float = 1.0,
) -> list[str]:
    """Patch the caBundle into each named configuration that needs it.

    ``api`` is a ``kubernetes_asyncio.client.AdmissionregistrationV1Api`` (or anything
    with the same four methods). A configuration not found yet is waited for, up to
    ``wait_seconds`` (it may be applied after the webhook starts, as Volcano allows).
    Returns the names that were patched; raises TimeoutError for ones never found.
    """
    patched: list[str] = []
    for kind, name in names:
        read = (
            api.read_validating_webhook_configuration
            if kind == "validating"
            else api.read_mutating_webhook_configuration
        )
        patch = (
            api.patch_validating_webhook_configuration
            if kind == "validating"
            else api.patch_mutating_webhook_configuration
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            try:
                obj = await read(name)
                break
            except Exception as exc:
                if getattr(exc, "status", None) != 404 or loop.time() >= deadline:
                    if getattr(exc, "status", None) == 404:
                        raise TimeoutError(f"{kind} webhook configuration {name} not found") from exc
                    raise
                await asyncio.sleep(poll_seconds)
        config = obj if isinstance(obj, dict) else api.api_client.sanitize_for_serialization(obj)
        changed, new = inject_ca_bundle(config, ca_pem)
        if changed:
            await patch(name, bundle_patch(new))
            patched.append(name)
            log.info("caBundle updated in %s webhook configuration %s", kind, name)
        else:
            log.info("caBundle already current in %s webhook configuration %s", kind, name)
    return patched
