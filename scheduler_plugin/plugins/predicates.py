"""``predicates`` plugin.

Static predicates (node selector/affinity, taints, unschedulable, Ready) are compiled per pod
signature by :mod:`scheduler_plugin.filters` (one module per filter) and folded into the per-shape fit counts of the
session state; resource fit and host ports are part of the counts too. They are always
evaluated: placing a pod where kube-scheduler would refuse it is never useful, so leaving this
plugin out of the configuration changes nothing.
"""

from __future__ import annotations

from typing import Any

from ..config.scheduler_conf import PluginOption
from ..framework.session import Session


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> bool:
    """Nothing to register: the state's fit counts already apply the predicates."""
    return True
