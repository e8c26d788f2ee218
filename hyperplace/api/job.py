"""Volcano Job (batch.volcano.sh/v1alpha1): the fields the suite reads and writes.

Pod templates are kept as plain dicts so that any field in them survives unchanged.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import Field

from .common import Condition, KubeModel, TypedObject
from .constants import BATCH_GROUP, BATCH_VERSION
from .podgroup import NetworkTopologySpec

# Job phases (Volcano's batch/v1alpha1 JobPhase).
PENDING: Final = "Pending"
ABORTING: Final = "Aborting"
ABORTED: Final = "Aborted"
RUNNING: Final = "Running"
RESTARTING: Final = "Restarting"
COMPLETING: Final = "Completing"
COMPLETED: Final = "Completed"
TERMINATING: Final = "Terminating"
TERMINATED: Final = "Terminated"
FAILED: Final = "Failed"

# Lifecycle events (Volcano's bus/v1alpha1 Event). The last three are the controller's own and
# may not be named in a policy.
ANY_EVENT: Final = "*"
POD_FAILED: Final = "PodFailed"
POD_EVICTED: Final = "PodEvicted"
POD_PENDING: Final = "PodPending"
JOB_UNKNOWN: Final = "Unknown"
TASK_COMPLETED: Final = "TaskCompleted"
TASK_FAILED: Final = "TaskFailed"
JOB_UPDATED: Final = "JobUpdated"
OUT_OF_SYNC: Final = "OutOfSync"
COMMAND_ISSUED: Final = "CommandIssued"
POD_RUNNING: Final = "PodRunning"
POLICY_EVENTS: Final = (
    ANY_EVENT,
    POD_FAILED,
    POD_EVICTED,
    POD_PENDING,
    JOB_UNKNOWN,
    TASK_COMPLETED,
    TASK_FAILED,
    JOB_UPDATED,
)

# Lifecycle actions (Volcano's bus/v1alpha1 Action) a policy or a Command may name; SyncJob is
# the controller's own (what happens when no policy matches).
ABORT_JOB: Final = "AbortJob"
RESTART_JOB: Final = "RestartJob"
RESTART_TASK: Final = "RestartTask"
RESTART_POD: Final = "RestartPod"
RESTART_PARTITION: Final = "RestartPartition"
TERMINATE_JOB: Final = "TerminateJob"
COMPLETE_JOB: Final = "CompleteJob"
RESUME_JOB: Final = "ResumeJob"
SYNC_JOB: Final = "SyncJob"
POLICY_ACTIONS: Final = (
    ABORT_JOB,
    RESTART_JOB,
    RESTART_TASK,
    RESTART_POD,
    RESTART_PARTITION,
    TERMINATE_JOB,
    COMPLETE_JOB,
    RESUME_JOB,
)


# What the job controller does on an event or an exit code: ``event``/``events`` or ``exitCode``,
# an ``action``, and (required for PodPending) a ``timeout``. A comment, not a docstring: a
# docstring becomes a description in the generated CRDs (and must then match the chart's copy).
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
