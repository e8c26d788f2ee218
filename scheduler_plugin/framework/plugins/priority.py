"""``priority`` plugin: higher PriorityClass value first, for jobs, SubJobs and tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...job_info import JobInfo, SubJobInfo, TaskInfo
from .gang import _enabled

if TYPE_CHECKING:
    from ..session import Session


def job_order(job: JobInfo) -> int:
    """Higher PriorityClass value first."""
    return -job.priority


def subjob_order(sj: SubJobInfo) -> int:
    """A SubJob's priority is its highest task priority."""
    return -max((t.priority for t in sj.tasks), default=0)


def task_order(t: TaskInfo) -> int:
    """Higher pod priority first."""
    return -t.priority


# The session sorts by the precomputed ``TaskInfo.prio_order_key`` when this is the only task key.
task_order.precomputed = "prio_order_key"  # type: ignore[attr-defined]


def register(ssn: Session, args: dict[str, Any], opt: Any) -> None:
    """Register the priority comparators."""
    if _enabled(opt, "enableJobOrder"):
        ssn.job_order_fns.append(job_order)
    if _enabled(opt, "enabledSubJobOrder"):
        ssn.subjob_order_fns.append(subjob_order)
    if _enabled(opt, "enableTaskOrder"):
        ssn.task_order_fns.append(task_order)
