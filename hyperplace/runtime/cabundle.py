"""The caBundle injection of :mod:`hyperplace.pki.cabundle` with a client of this process's own:
from the in-cluster service account, or from a kubeconfig (``hyperplace-certs inject`` and the
webhook server's ``--*-webhook-configuration`` flags)."""

from __future__ import annotations

from collections.abc import Sequence

from hyperplace.pki.cabundle import ConfigKind, inject_into_cluster


async def inject_with_kubeconfig(
    names: Sequence[tuple[ConfigKind, str]],
    ca_pem: bytes,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    wait_seconds: float = 300.0,
) -> list[str]:
    """``inject_into_cluster`` with a client from the in-cluster service account, or
    from ``kubeconfig`` when given (or when not running in a cluster)."""
    # lazy: a caller with its own ApiClient never loads kubernetes-asyncio
    from kubernetes_asyncio import client

    from .kube import load_client_config

    await load_client_config(kubeconfig, context)
    async with client.ApiClient() as api_client:
        api = client.AdmissionregistrationV1Api(api_client)
        return await inject_into_cluster(api, names, ca_pem, wait_seconds=wait_seconds)
