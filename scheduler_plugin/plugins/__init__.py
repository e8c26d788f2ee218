"""Plugin registry: configuration tiers -> plugin objects registering their functions.

Unknown plugins are reported in the session notes, not fatal; Volcano plugins whose effect is
outside what a planner models (fairness, eviction, SLAs) are accepted and noted once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config.scheduler_conf import NOOP_PLUGINS
from . import (
    binpack,
    capacity,
    conformance,
    drf,
    gang,
    network_topology_aware,
    nodeorder,
    overcommit,
    predicates,
    priority,
    proportion,
    sla,
)

if TYPE_CHECKING:
    from ..framework.session import Session

Builder = Callable[["Session", dict[str, Any], Any], Any]

REGISTRY: dict[str, Builder] = {
    "gang": gang.register,
    "priority": priority.register,
    "predicates": predicates.register,
    "binpack": binpack.register,
    "nodeorder": nodeorder.register,
    "network-topology-aware": network_topology_aware.register,
    "proportion": proportion.register,
    "drf": drf.register,
    "overcommit": overcommit.register,
    "capacity": capacity.register,
    "conformance": conformance.register,
    "sla": sla.register,
}


def build_plugins(ssn: Session) -> None:
    """Instantiate every configured plugin in tier order (first entry of a name wins)."""
    for i, tier in enumerate(ssn.config.tiers):
        ssn.plugins["__tier__"] = i  # read by tier_list while this tier's plugins register
        for opt in tier:
            if opt.name in ssn.plugins:
                continue
            builder = REGISTRY.get(opt.name)
            if builder is None:
                if opt.name in NOOP_PLUGINS:
                    ssn.notes.append(f"plugin {opt.name} accepted without effect: {NOOP_PLUGINS[opt.name]}")
                else:
                    ssn.notes.append(f"unknown plugin {opt.name!r} ignored")
                continue
            ssn.plugins[opt.name] = builder(ssn, dict(opt.arguments), opt)
    ssn.plugins.pop("__tier__", None)
