"""``sla`` plugin: a job that has waited longer than its waiting time goes first, is admitted,
and gets room held for it (Volcano's ``sla``).

The waiting time comes from the PodGroup annotation ``volcano.sh/sla-waiting-time`` (or the
older ``sla-waiting-time``; Volcano's Job controller copies a Job's annotations onto its
PodGroup), else from the plugin argument ``sla-waiting-time``; both are Go durations
(``1h30m``). A job without either has no SLA. As in Volcano:

* job order: jobs with an SLA before jobs without, the earlier deadline (creation time plus
  waiting time) first;
* enqueue: a job past its deadline is admitted to Inqueue (a PERMIT vote; the plugins of later
  tiers are then not asked, so put ``sla`` in the first tier to let it override ``overcommit``
  and ``proportion``);
* allocate: Volcano "pipelines" such a job, keeping room on releasing nodes for it; here it
  becomes a candidate for the head-of-queue reservation (:mod:`scheduler_plugin.placement.head_of_queue`)
  once past its deadline, whatever the reservation's own threshold is.

A job's waiting starts at its PodGroup's creation time. Without a session clock
(``run_session(now=...)``, the simulator's ``--now``) no deadline ever passes.
"""

from __future__ import annotations

from typing import Any

from hyperplace.api.times import parse_go_duration, parse_rfc3339

from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import ABSTAIN, JOB_ENQUEUEABLE, JOB_ORDER, JOB_WAITING_TIME, PERMIT
from ..framework.session import Session
from ..model.jobs import JobInfo

ARG_WAIT = "sla-waiting-time"
# Volcano reads the prefixed key first, then the bare one.
ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")
_NO_SLA = (1, 0.0)


def _positive_duration(text: object, where: str) -> tuple[float | None, str | None]:
    """Seconds of a positive Go duration, or (None, why not)."""
    try:
        v = parse_go_duration(str(text))
    except ValueError:
        return None, f"{where}: invalid duration {text!r} (a Go duration such as 10m or 1h30m)"
    if v <= 0:
        return None, f"{where}: must be positive, got {text!r}"
    return v, None


class Sla:
    """Per-job waiting times and deadlines of one session."""

    def __init__(self, ssn: Session, args: dict[str, Any]) -> None:
        self.ssn = ssn
        self.default: float | None = None
        if ARG_WAIT in args:
            self.default, why = _positive_duration(args[ARG_WAIT], f"plugin sla: {ARG_WAIT}")
            if why:
                ssn.notes.append(f"{why}; no cluster-wide SLA")
        self._deadline: dict[str, float | None] = {}

    def waiting_time(self, job: JobInfo) -> float | None:
        """The job's own waiting time (annotation), else the plugin's; None: no SLA."""
        ann = job.podgroup.metadata.annotations or {}
        for key in ANNOTATIONS:
            if key in ann:
                v, why = _positive_duration(ann[key], f"PodGroup {job.key} annotation {key}")
                if v is not None:
                    return v
                if why:
                    self.ssn.note(f"{why}; ignored")
        return self.default

    def deadline(self, job: JobInfo) -> float | None:
        """Seconds since the epoch when the job's SLA expires, or None (no SLA)."""
        if job.key not in self._deadline:
            wait = self.waiting_time(job)
            created = parse_rfc3339(job.creation)
            self._deadline[job.key] = None if wait is None or created is None else created + wait
        return self._deadline[job.key]

    def overdue(self, job: JobInfo) -> bool:
        """The job has waited past its SLA (never without a session clock)."""
        d = self.deadline(job)
        return d is not None and self.ssn.now is not None and self.ssn.now >= d

    def job_order(self, job: JobInfo) -> tuple[int, float]:
        """Jobs with an SLA first, the earlier deadline first."""
        d = self.deadline(job)
        return _NO_SLA if d is None else (0, d)

    def job_enqueueable(self, job: JobInfo) -> int:
        """PERMIT past the deadline, else abstain."""
        return PERMIT if self.overdue(job) else ABSTAIN


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> Sla:
    """Register sla's job order, enqueue vote and waiting time (the head-of-queue reservation
    asks it, :mod:`scheduler_plugin.placement.head_of_queue`)."""
    s = Sla(ssn, args)
    ssn.register(JOB_ORDER, s.job_order)
    ssn.register(JOB_ENQUEUEABLE, s.job_enqueueable)
    ssn.register(JOB_WAITING_TIME, s.waiting_time)
    return s
