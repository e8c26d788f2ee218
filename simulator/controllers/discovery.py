"""Adapter of the HyperNode controller's discovery: label discovery and UFM discovery from a
saved answer (``file://``), when a controller ConfigMap enables them."""

from __future__ import annotations

from hyperplace.api import HyperNode
from hyperplace.kube.objects import namespaced_key

from ..cluster import Cluster
from ..loader import controller_conf_configmap
from ..store import key_of


class Discovery:
    """HyperNodes created, updated and deleted as discovery finds the fabric."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reconcile(self) -> bool:
        """One pass; whether it changed anything."""
        c = self.cluster
        cm = controller_conf_configmap(c.of_kind("ConfigMap"))
        if cm is None:
            return False
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.hypernode.discovery import (
            DiscoveryConfigError,
            DiscoveryError,
            discover_offline,
            parse_discovery_config,
        )

        try:
            config = parse_discovery_config(cm)
        except DiscoveryConfigError as exc:
            c.warn_once(f"ConfigMap {namespaced_key(cm)}: {exc}")
            return False
        if config.enabled("label") is None and config.enabled("ufm") is None:
            return False
        existing = [hn for _, hn in c.models(HyperNode)]
        try:
            # Label discovery, and UFM discovery from a saved answer (endpoint file://PATH).
            result = discover_offline(config, c.of_kind("Node"), existing, c.rng)
        except DiscoveryError as exc:
            c.warn_once(f"HyperNode discovery: {exc}")
            return False
        for w in result.warnings:
            c.warn_once(f"HyperNode discovery: {w}")
        changed = False
        for name in result.delete:
            if c.objects.pop(("HyperNode", "", name), None) is not None:
                changed = True
        for hn in result.create:
            if c.create(hn.to_dict(), "HyperNode discovery", namespaced=False) is not None:
                changed = True
        for hn in result.update:
            obj = hn.to_dict()
            k = key_of(obj)
            if c.objects.get(k) != obj:
                c.objects[k] = obj
                changed = True
        return changed
