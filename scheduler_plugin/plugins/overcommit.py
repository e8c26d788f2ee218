"""``overcommit`` plugin: admit jobs while the cluster, overcommitted, has room (Volcano's ``overcommit``).

A PodGroup moves to Inqueue only while its minResources, on top of what admitted jobs have
reserved, fit the idle resource ``total x overcommit-factor - used`` (factor 1.2 by default;
a factor below 1 is refused with a warning and the default used). Jobs without minResources
are always admitted. A rejected job stays Pending with "resource in cluster is overused".
"""

from __future__ import annotations

from typing import Any

from ..algorithms.queue_sums import job_sums, total_resource, used_resource
from ..config.arguments import get_float
from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import JOB_ENQUEUEABLE, JOB_ENQUEUED, JOB_RELEASED, PERMIT, REJECT
from ..framework.session import Session
from ..model.jobs import JobInfo
from ..model.resources import Res
from .queue_ledger import job_inqueue

DEFAULT_FACTOR = 1.2


class Overcommit:
    """The idle resource and the reservations of admitted jobs, for one session."""

    def __init__(self, ssn: Session, factor: float) -> None:
        self.ssn = ssn
        self.factor = factor
        snap = ssn.snap
        self.idle = total_resource(snap).multi(factor).sub(used_resource(snap))
        self.inqueue = Res()
        for job in snap.jobs.values():
            # Running jobs' unallocated minimum (Inqueue jobs reserve within their session
            # only: see queue_accounting.job_inqueue).
            inq = job_inqueue(ssn, job)
            if inq is not None:
                self.inqueue.add(inq)

    def job_enqueueable(self, job: JobInfo) -> int:
        """PERMIT while minResources fit the overcommitted idle resource, else REJECT."""
        mr = job_sums(self.ssn.snap, job).admission
        if mr is None:
            return PERMIT
        want = self.inqueue.clone().add(mr)
        ok, short = want.less_equal_on(self.idle, mr)
        if ok:
            return PERMIT
        self.ssn.enqueue_reasons.setdefault(
            job.key,
            f"resource in cluster is overused: overused {', '.join(short)} "
            f"(overcommit-factor {self.factor:g})",
        )
        return REJECT

    def job_enqueued(self, job: JobInfo) -> None:
        """An admitted job's minResources are reserved."""
        mr = job_sums(self.ssn.snap, job).admission
        if mr is not None:
            self.inqueue.add(mr)

    def job_released(self, job: JobInfo) -> None:
        """An admitted job allocate could not place gives its reservation back (see allocate)."""
        mr = job_sums(self.ssn.snap, job).admission
        if mr is not None:
            self.inqueue.sub(mr)


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> Overcommit:
    """Read ``overcommit-factor`` and register the enqueue vote and admission callbacks."""
    warnings: list[str] = []
    factor = get_float(args, "overcommit-factor", DEFAULT_FACTOR, warnings)
    ssn.notes.extend(f"plugin overcommit: {w}" for w in warnings)
    if factor < 1.0:
        ssn.notes.append(
            f"plugin overcommit: overcommit-factor {factor:g} is below 1, using the default {DEFAULT_FACTOR:g}"
        )
        factor = DEFAULT_FACTOR
    o = Overcommit(ssn, factor)
    ssn.register(JOB_ENQUEUEABLE, o.job_enqueueable)
    ssn.register(JOB_ENQUEUED, o.job_enqueued)
    ssn.register(JOB_RELEASED, o.job_released)
    return o
