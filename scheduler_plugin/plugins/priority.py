"""``priority`` plugin: higher PriorityClass value first, for jobs, SubJobs and tasks."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any

from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import JOB_ORDER, PREEMPTABLE, SUBJOB_ORDER, TASK_ORDER
from ..framework.session import Session
from ..model.jobs import JobInfo, SubJobInfo, TaskInfo

_JOB = operator.attrgetter("job")


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


def preemptable(ssn: Session) -> Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]:
    """Volcano's priority preemptableFn: another job's pods only if that job's priority is lower;
    pods of the preemptor's own job only if their pod priority is lower."""
    jobs = ssn.snap.jobs

    def fn(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        me = jobs.get(preemptor.job)
        if me is None:
            return []
        out: list[TaskInfo] = []
        # One verdict per job (candidates come job by job), not one per pod.
        for jkey, group in itertools.groupby(candidates, key=_JOB):
            if jkey == me.key:
                out.extend(t for t in group if t.priority < preemptor.priority)
                continue
            other = jobs.get(jkey)
            if other is not None and other.priority < me.priority:
                out.extend(group)
        return out

    return fn


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> None:
    """Register the priority comparators and the preemptable filter."""
    ssn.register(PREEMPTABLE, preemptable(ssn))
    ssn.register(JOB_ORDER, job_order)
    ssn.register(SUBJOB_ORDER, subjob_order)
    ssn.register(TASK_ORDER, task_order)
