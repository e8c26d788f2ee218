"""A Job's tasks as Volcano's job controller counts them: names and minimum members. Pure; both
the PodGroup build (:mod:`controller.job.reconcile`) and the lifecycle
(:mod:`controller.job.lifecycle`) read them here."""

from __future__ import annotations

from hyperplace.api import Job, TaskSpec

# Volcano names a task without a name ``default<i>`` (mutating webhook).
DEFAULT_TASK_PREFIX = "default"


def task_name(task: TaskSpec, index: int) -> str:
    """The task's name, or ``default<i>`` as Volcano's mutating webhook would set it."""
    return task.name or f"{DEFAULT_TASK_PREFIX}{index}"


def min_task_member(task: TaskSpec) -> int:
    """Volcano's per-task minimum member count."""
    if task.min_available is not None:
        return task.min_available
    pp = task.partition_policy
    if pp is not None and pp.min_partitions != 0 and pp.partition_size != 0:
        return pp.min_partitions * pp.partition_size
    return task.replicas


def effective_min_available(job: Job) -> int:
    """``job.spec.minAvailable``, or the sum of the tasks' minimum members when unset
    (what Volcano's mutating webhook writes; only a job that bypassed admission lacks it)."""
    if job.spec.min_available is not None:
        return job.spec.min_available
    return sum(min_task_member(t) for t in job.spec.tasks)
