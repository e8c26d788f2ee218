"""The controllers a simulated control plane runs between two scheduler sessions, one adapter
module each: HyperNode discovery, HyperNode status, the Volcano Job controller, Kubernetes'
workload controllers (and the operators the simulator stands in for), the PodGroup controller,
the queue controller, and kube-controller-manager's ephemeral volume, PersistentVolume and
resourceclaim controllers, and NVIDIA's ComputeDomain controller.

Each adapter is made with the simulation's :class:`~simulator.cluster.Cluster` and has one
step, ``reconcile() -> bool``: one pass over its objects, saying whether it changed anything.
The conductor (``simulator.engine``) runs them in :data:`CONTROLLERS` order, round after
round, until a round changes nothing. Adapters do not import each other; what they share is
the Cluster. Adding an object kind touches one adapter (and, for a new one, this list).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..cluster import Cluster
from .compute_domains import ComputeDomains
from .discovery import Discovery
from .ephemeral_volumes import EphemeralVolumes
from .hypernode_status import HyperNodeStatus
from .persistent_volumes import PersistentVolumes
from .podgroup import PodGroups
from .queue import Queues
from .resource_claims import ResourceClaims
from .volcano_job import VolcanoJobs
from .workloads import Workloads


class Controller(Protocol):
    """A controller adapter."""

    def reconcile(self) -> bool:
        """One pass over the adapter's objects; whether it changed anything."""
        ...


# In the order one round runs them: discovery makes the HyperNodes whose status follows;
# the Job and workload controllers make the pods the PodGroup controller groups, and the
# queue controller counts the PodGroups; the pods' ephemeral volumes get their claims, which
# the PersistentVolume controller binds (the ones the scheduler chose volumes or nodes for); pods
# with ResourceClaimTemplates get their ResourceClaims (a ComputeDomain's template first).
CONTROLLERS: tuple[Callable[[Cluster], Controller], ...] = (
    Discovery,
    HyperNodeStatus,
    VolcanoJobs,
    Workloads,
    PodGroups,
    Queues,
    EphemeralVolumes,
    PersistentVolumes,
    ComputeDomains,
    ResourceClaims,
)

__all__ = ["CONTROLLERS", "Controller"]
