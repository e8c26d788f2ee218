"""Every plugin the scheduler has, in one registry (kube-scheduler's ``default_registry``).

A session builds the plugins its configuration names from this registry (see
:meth:`scheduler_plugin.framework.session.Session.open`); nothing registers itself by being
imported. Volcano plugins accepted without effect are listed with the configuration
(:data:`scheduler_plugin.config.scheduler_conf.NOOP_PLUGINS`) and named in the session notes.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..framework.session import PluginBuilder
from . import (
    binpack,
    capacity,
    cdp,
    conformance,
    drf,
    gang,
    network_topology_aware,
    nodegroup,
    nodeorder,
    overcommit,
    pdb,
    predicates,
    priority,
    proportion,
    resourcequota,
    sla,
)

REGISTRY: Mapping[str, PluginBuilder] = {
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
    "cdp": cdp.register,
    "pdb": pdb.register,
    "resourcequota": resourcequota.register,
    "nodegroup": nodegroup.register,
}
