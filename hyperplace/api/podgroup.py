"""PodGroup and Queue (scheduling.volcano.sh/v1beta1)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .common import KubeModel, LabelSelector, Quantity, TypedObject
from .constants import SCHEDULING_GROUP, SCHEDULING_VERSION
from .topology_annotations import operator_podgroup_topology

NetworkTopologyMode = Literal["hard", "soft"]


class NetworkTopologySpec(KubeModel):
    """Where a job (or partition) may be placed in the HyperNode tree.

    ``highestTierAllowed`` and ``highestTierName`` are mutually exclusive (admission).
    """

    mode: NetworkTopologyMode = "hard"
    highest_tier_allowed: int | None = Field(default=None, ge=0)
    highest_tier_name: str | None = Field(default=None, max_length=253)


class SubGroupPolicySpec(KubeModel):
    name: str
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: int | None = Field(default=None, ge=0)
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    min_sub_groups: int | None = Field(default=None, ge=0)


class PodGroupSpec(KubeModel):
    min_member: int = Field(default=0, ge=0)
    min_task_member: dict[str, int] | None = None
    queue: str | None = None
    priority_class_name: str | None = None
    min_resources: dict[str, Quantity] | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicySpec] | None = None


PodGroupPhase = Literal["Pending", "Running", "Unknown", "Inqueue", "Completed"]


class PodGroupCondition(KubeModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    transition_id: str | None = Field(default=None, alias="transitionID")
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class PodGroupStatus(KubeModel):
    phase: PodGroupPhase | None = None
    conditions: list[PodGroupCondition] | None = None
    running: int | None = None
    succeeded: int | None = None
    failed: int | None = None


class PodGroup(TypedObject):
    """The scheduler's unit of gang scheduling (Volcano's "job")."""

    api_version: str = f"{SCHEDULING_GROUP}/{SCHEDULING_VERSION}"
    kind: str = "PodGroup"
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus | None = None

    @model_validator(mode="before")
    @classmethod
    def _operator_topology(cls, data: Any) -> Any:
        """A training operator's PodGroup reads its job's topology annotations as its
        ``networkTopology`` (hyperplace.api.topology_annotations says why)."""
        if isinstance(data, dict):
            nt, _ = operator_podgroup_topology(data)
            if nt is not None:
                data = {**data, "spec": {**(data.get("spec") or {}), "networkTopology": nt}}
        return data


class QueueCluster(KubeModel):
    """A cluster a queue may extend to (multi-cluster; kept so no field is pruned)."""

    name: str | None = None
    weight: int | None = None
    capacity: dict[str, Quantity] | None = None


class NodeGroupAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: list[str] | None = None
    preferred_during_scheduling_ignored_during_execution: list[str] | None = None


class QueueAffinity(KubeModel):
    """Node groups a queue's jobs must, or prefer to, run in (Volcano's nodegroup plugin)."""

    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAffinity | None = None


class QueueSpec(KubeModel):
    """Volcano's Queue spec: fair-share weight, limits (capability), guaranteed and deserved
    resources, priority among queues, and the parent of a hierarchical queue."""

    weight: int | None = Field(default=None, ge=0)
    capability: dict[str, Quantity] | None = None
    reclaimable: bool | None = None
    extend_clusters: list[QueueCluster] | None = None
    guarantee: dict[str, dict[str, Quantity]] | None = None
    affinity: QueueAffinity | None = None
    type: str | None = None
    parent: str | None = None
    deserved: dict[str, Quantity] | None = None
    priority: int | None = None
    dequeue_strategy: Literal["fifo", "traverse"] | None = None


class QueueReservation(KubeModel):
    nodes: list[str] | None = None
    resource: dict[str, Quantity] | None = None


class QueueStatus(KubeModel):
    """Volcano's Queue status: state, PodGroup counts per phase, and what the queue holds."""

    state: Literal["Open", "Closed", "Closing", "Unknown"] | None = None
    unknown: int | None = None
    pending: int | None = None
    running: int | None = None
    inqueue: int | None = None
    completed: int | None = None
    reservation: QueueReservation | None = None
    allocated: dict[str, Quantity] | None = None


class Queue(TypedObject):
    """A Volcano queue (cluster-scoped); jobs name one, ``default`` always exists."""

    api_version: str = f"{SCHEDULING_GROUP}/{SCHEDULING_VERSION}"
    kind: str = "Queue"
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus | None = None
