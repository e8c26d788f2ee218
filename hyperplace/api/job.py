"""Volcano Job (batch.volcano.sh/v1alpha1): the fields the suite reads and writes.

Pod templates are kept as plain dicts so that any field in them survives unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .common import Condition, KubeModel, TypedObject
from .constants import BATCH_GROUP, BATCH_VERSION
from .podgroup import NetworkTopologySpec


class LifecyclePolicy(KubeModel):
    event: str | None = None
    events: list[str] | None = None
    action: str | None = None
    exit_code: int | None = None
    timeout: str | None = None


class PartitionPolicySpec(KubeModel):
    """Splits a task's pods into partitions of ``partitionSize`` consecutive indexes."""

    total_partitions: int = Field(ge=1)
    partition_size: int = Field(ge=1)
    network_topology: NetworkTopologySpec | None = None
    min_partitions: int = Field(default=0, ge=0)


class TaskSpec(KubeModel):
    name: str | None = None
    replicas: int = Field(default=0, ge=0)
    min_available: int | None = Field(default=None, ge=0)
    template: dict[str, Any] | None = None
    policies: list[LifecyclePolicy] | None = None
    topology_policy: str | None = None
    max_retry: int | None = Field(default=None, ge=0)
    depends_on: dict[str, Any] | None = None
    partition_policy: PartitionPolicySpec | None = None


class JobSpec(KubeModel):
    scheduler_name: str | None = None
    min_available: int | None = Field(default=None, ge=0)
    volumes: list[dict[str, Any]] | None = None
    tasks: list[TaskSpec] = Field(default_factory=list)
    policies: list[LifecyclePolicy] | None = None
    plugins: dict[str, list[str]] | None = None
    running_estimate: str | None = None
    queue: str | None = None
    max_retry: int | None = Field(default=None, ge=0)
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    priority_class_name: str | None = None
    min_success: int | None = Field(default=None, ge=1)
    network_topology: NetworkTopologySpec | None = None


class JobState(KubeModel):
    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None


class TaskState(KubeModel):
    phase: dict[str, int] | None = None


class JobStatus(KubeModel):
    state: JobState | None = None
    min_available: int | None = None
    task_status_count: dict[str, TaskState] | None = None
    pending: int | None = None
    running: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    terminating: int | None = None
    unknown: int | None = None
    version: int | None = None
    retry_count: int | None = None
    running_duration: str | None = None
    controlled_resources: dict[str, str] | None = None
    conditions: list[Condition | dict[str, Any]] | None = None


class Job(TypedObject):
    api_version: str = f"{BATCH_GROUP}/{BATCH_VERSION}"
    kind: str = "Job"
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus | None = None
