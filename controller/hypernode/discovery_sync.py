"""HyperNode discovery: informers, a work queue and the UFM loop around
:mod:`controller.hypernode.discovery`.

Volcano's ``volcano-controller-configmap`` says which sources are enabled. When the ``label``
source is, node label changes and HyperNode deletions re-run
:func:`controller.hypernode.discovery.discover_from_labels` (one key, one worker) and its diff
is applied. An enabled ``ufm`` source is fetched at its interval (and at once after a
ConfigMap change) by :meth:`DiscoveryController.run_ufm_discovery`; a failed or partial fetch
keeps the last good HyperNodes, and every HyperNode of a source carries a ``Discovery``
condition with the outcome of that source's last run (written by
:class:`controller.hypernode.sync.HyperNodeController`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Mapping

from controller.kube_io import KubeIO, labels_of
from hyperplace.runtime.api import HYPERNODES, SECRETS, ApiError, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.workqueue import WorkQueue

from .discovery import (
    LABEL_SOURCE,
    DiscoveryConfig,
    DiscoveryConfigError,
    DiscoveryError,
    DiscoveryResult,
    DiscoverySource,
    discover_from_labels,
    discover_from_ufm,
    label_tiers,
    parse_discovery_config,
)
from .sync import HyperNodeController
from .ufm import UFM_SOURCE, UfmError, credentials_from_secret, fetch_ports, leaf_groups, ufm_settings

log = logging.getLogger(__name__)

DISCOVERY_KEY = "discovery"
# What a label discovery run may fail with and be retried for, besides the API's errors.
RETRYABLE = (ApiError, DiscoveryError)


class DiscoveryController:
    """Label and UFM discovery of HyperNodes; see the module docstring."""

    def __init__(
        self,
        io: KubeIO,
        nodes: Informer,
        hypernodes: Informer,
        configmaps: Informer,
        hypernode_ctl: HyperNodeController,
        *,
        config_map: str,
        config_namespace: str,
        seed: int | None = None,
    ) -> None:
        self.io = io
        self.nodes = nodes
        self.hypernodes = hypernodes
        self.configmaps = configmaps
        self.hypernode_ctl = hypernode_ctl
        self.config_map = config_map
        self.config_namespace = config_namespace  # also where a UFM Secret without a namespace is
        # Seeds the random HyperNode name suffixes (None: from the OS).
        self._rng = random.Random(seed)
        self.queue: WorkQueue[str] = WorkQueue(name="discovery")
        self.discovery: DiscoveryConfig = DiscoveryConfig()
        self._ufm_wake = asyncio.Event()  # config changed: re-read and run UFM discovery now
        self._insecure_warned = False
        self._wire()

    def _wire(self) -> None:
        self.hypernodes.add_handler(None, None, lambda _o: self.trigger())

        def node_changed(old: Obj, new: Obj) -> None:
            if labels_of(old) != labels_of(new):
                self.trigger()

        self.nodes.add_handler(lambda _o: self.trigger(), node_changed, lambda _o: self.trigger())

        def cm_event(o: Obj) -> None:
            if meta(o).get("name") == self.config_map:
                self._load_config(o)

        def cm_deleted(o: Obj) -> None:
            if meta(o).get("name") == self.config_map:
                self.discovery = DiscoveryConfig()
                self._ufm_wake.set()

        self.configmaps.add_handler(cm_event, lambda _old, new: cm_event(new), cm_deleted)

    def tier_of_label(self, key: str) -> int | None:
        """The HyperNode tier label discovery builds from the node label ``key`` (None: none)."""
        source = self.discovery.enabled(LABEL_SOURCE)
        if source is None:
            return None
        types, _ = label_tiers(source.config)
        return next((t for keys in types.values() for t, k in enumerate(keys, start=1) if k == key), None)

    def trigger(self) -> None:
        """Queue a label discovery run, when that source is enabled."""
        if self.discovery.enabled(LABEL_SOURCE) is not None:
            # A short delay coalesces a burst of node events into one run (as Volcano does).
            self.queue.add_after(DISCOVERY_KEY, 0.001)

    def _load_config(self, cm: Obj) -> None:
        try:
            self.discovery = parse_discovery_config(cm)
        except DiscoveryConfigError as exc:
            log.error("discovery config %s: %s", self.config_map, exc)
            self.discovery = DiscoveryConfig()
            return
        # Any ConfigMap change restarts discovery in Volcano; here it re-runs it.
        self.trigger()
        self._ufm_wake.set()

    # -- label discovery --------------------------------------------------------------------

    async def reconcile(self, _key: str) -> None:
        """The discovery queue's one key: a label discovery run."""
        await self.run_discovery()

    async def run_discovery(self) -> None:
        """Label discovery, its diff applied (nothing when the source is not enabled)."""
        if self.discovery.enabled(LABEL_SOURCE) is None:
            return
        existing = list(self.hypernode_ctl.hypernode_models().values())
        result = discover_from_labels(self.discovery, self.nodes.objects(), existing, self._rng)
        await self._apply(LABEL_SOURCE, result)

    # -- UFM discovery ----------------------------------------------------------------------

    async def run_ufm_discovery(self, source: DiscoverySource) -> bool:
        """One UFM fetch and, when the answer is complete, its diff applied. Never deletes
        on a failed or partial fetch: the HyperNodes stay as they are and carry a
        ``Discovery=False`` condition saying why. Returns whether the run succeeded."""
        try:
            settings = ufm_settings(source.config)
            username = password = None
            if not settings.is_file:
                username, password = await self._ufm_credentials(source)
            if settings.insecure_skip_verify and not self._insecure_warned:
                self._insecure_warned = True
                log.warning("ufm discovery: TLS certificate verification is disabled (insecureSkipVerify)")
            ports = await fetch_ports(settings, username, password)
        except UfmError as exc:
            log.error("ufm discovery: %s; keeping the HyperNodes from the last good answer", exc)
            self.hypernode_ctl.set_source_condition(
                UFM_SOURCE, "False", "FetchFailed", f"{exc}; last good tree kept"
            )
            self.io.metrics.reconciles.labels("ufm-discovery", "retry").inc()
            return False
        result = discover_from_ufm(ports, list(self.hypernode_ctl.hypernode_models().values()))
        await self._apply(UFM_SOURCE, result)
        groups = leaf_groups(ports)
        nodes = len({n for _, ns in groups for n in ns})
        self.hypernode_ctl.set_source_condition(
            UFM_SOURCE,
            "True",
            "Fetched",
            f"{len(groups)} leaf group(s), {nodes} node(s) from {settings.endpoint}",
        )
        self.io.metrics.reconciles.labels("ufm-discovery", "ok").inc()
        return True

    async def _ufm_credentials(self, source: DiscoverySource) -> tuple[str, str]:
        ref = (source.credentials or {}).get("secretRef") or {}
        name = ref.get("name") if isinstance(ref, Mapping) else None
        if not name:
            raise UfmError("credentials.secretRef: UFM authentication credentials are not configured")
        ns = str(ref.get("namespace") or self.config_namespace)
        try:
            secret: Obj | None = await self.io.api.get(SECRETS, str(name), ns)
        except ApiError as exc:
            if not exc.not_found:
                raise UfmError(f"failed to get secret {ns}/{name}: {exc}") from None
            secret = None
        return credentials_from_secret(secret, f"{ns}/{name}")

    async def ufm_loop(self) -> None:
        """Run UFM discovery at its interval while a ``ufm`` source is enabled; a config
        change runs it at once (Volcano restarts its discoverers on any change)."""
        while True:
            self._ufm_wake.clear()
            source = self.discovery.enabled(UFM_SOURCE)
            if source is None:
                await self._ufm_wake.wait()
                continue
            try:
                await self.run_ufm_discovery(source)
            except Exception:  # an API write failed: try again at the next interval
                log.exception("ufm discovery failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ufm_wake.wait(), timeout=source.interval_seconds)

    # -- writing ----------------------------------------------------------------------------

    async def _apply(self, source: str, result: DiscoveryResult) -> None:
        for warning in result.warnings:
            log.warning("%s discovery: %s", source, warning)
        for hn in result.create:
            await self.io.create(HYPERNODES, hn.to_dict(), None)
        for hn in result.update:
            body = hn.to_dict()
            body.pop("status", None)
            await self.io.api.replace(HYPERNODES, body, None)
            self.io.wrote("hypernodes", "update")
        for name in result.delete:
            try:
                await self.io.api.delete(HYPERNODES, name)
                self.io.wrote("hypernodes", "delete")
            except ApiError as exc:
                if not exc.not_found:
                    raise
