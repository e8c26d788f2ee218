"""Pydantic v2 models of the suite's API objects: the single source of truth for
their wire format and for the CRD schemas generated in ``manifests/crds``."""

from __future__ import annotations

from typing import Any

from .command import CLOSE_QUEUE, OPEN_QUEUE, QUEUE_ACTIONS, Command
from .common import (
    Condition,
    KubeModel,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    OwnerReference,
    Quantity,
    TypedObject,
)
from .errors import field_path, format_validation_error
from .hypernode import (
    ExactMatch,
    HyperNode,
    HyperNodeSpec,
    HyperNodeStatus,
    MemberSelector,
    MemberSpec,
    RegexMatch,
)
from .job import Job, JobSpec, JobState, JobStatus, LifecyclePolicy, PartitionPolicySpec, TaskSpec
from .podgroup import (
    NetworkTopologySpec,
    PodGroup,
    PodGroupCondition,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueSpec,
    SubGroupPolicySpec,
)

# (apiVersion group, kind) -> model. Core kinds (Node, Pod, ...) stay plain dicts.
MODELS: dict[tuple[str, str], type[TypedObject]] = {
    ("topology.volcano.sh", "HyperNode"): HyperNode,
    ("batch.volcano.sh", "Job"): Job,
    ("scheduling.volcano.sh", "PodGroup"): PodGroup,
    ("scheduling.volcano.sh", "Queue"): Queue,
    ("bus.volcano.sh", "Command"): Command,
}


def model_for(obj: dict[str, Any]) -> type[TypedObject] | None:
    """The model class for a wire object, or None for kinds we keep as dicts."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return MODELS.get((group, str(obj.get("kind", ""))))


__all__ = [
    "CLOSE_QUEUE",
    "MODELS",
    "OPEN_QUEUE",
    "QUEUE_ACTIONS",
    "Command",
    "Condition",
    "ExactMatch",
    "HyperNode",
    "HyperNodeSpec",
    "HyperNodeStatus",
    "Job",
    "JobSpec",
    "JobState",
    "JobStatus",
    "KubeModel",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LifecyclePolicy",
    "MemberSelector",
    "MemberSpec",
    "NetworkTopologySpec",
    "ObjectMeta",
    "OwnerReference",
    "PartitionPolicySpec",
    "PodGroup",
    "PodGroupCondition",
    "PodGroupSpec",
    "PodGroupStatus",
    "Quantity",
    "Queue",
    "QueueSpec",
    "RegexMatch",
    "SubGroupPolicySpec",
    "TaskSpec",
    "TypedObject",
    "field_path",
    "format_validation_error",
    "model_for",
]
