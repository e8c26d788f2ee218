"""``priority`` plugin: higher PriorityClass value first, for jobs, SubJobs and tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...job_info import JobInfo, SubJobInfo, TaskInfo
from .gang import _enabled

if TYPE_CHECKING:
    from ..session import Session


def _cmp_desc(a: int, b: int) -> int:
    return -1 if a > b else (1 if a < b else 0)


def job_order(a: JobInfo, b: JobInfo) -> int:
    return _cmp_desc(a.priority, b.priority)


def subjob_order(a: SubJobInfo, b: SubJobInfo) -> int:
    pa = max((t.priority for t in a.tasks), default=0)
    pb = max((t.priority for t in b.tasks), default=0)
    return _cmp_desc(pa, pb)


def task_order(a: TaskInfo, b: TaskInfo) -> int:
    return _cmp_desc(a.priority, b.priority)


def register(ssn: Session, args: dict[str, Any], opt: Any) -> None:
    """Register the priority comparators."""
    if _enabled(opt, "enableJobOrder"):
        ssn.job_order_fns.append(job_order)
    if _enabled(opt, "enabledSubJobOrder"):
        ssn.subjob_order_fns.append(subjob_order)
    if _enabled(opt, "enableTaskOrder"):
        ssn.task_order_fns.append(task_order)
