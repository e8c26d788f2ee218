"""``gang`` plugin: job validity, job/SubJob readiness and ready-last ordering."""

from __future__ import annotations

from typing import Any

from ..algorithms.victim_units import group_by_job, running_count
from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import (
    JOB_ORDER,
    JOB_READY,
    JOB_VALID,
    PREEMPTABLE,
    RECLAIMABLE,
    SUBJOB_ORDER,
    SUBJOB_READY,
)
from ..framework.session import Session
from ..model.jobs import JobInfo, SubJobInfo, TaskInfo


class Gang:
    """Two-level gang: a SubJob is ready at MinAvailable, a job at minMember/minTaskMember/minSubGroups."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn

    def job_valid(self, job: JobInfo) -> str | None:
        """Enough pods for minMember, every minTaskMember and every minSubGroups."""
        n = len(job.tasks)
        if n < job.min_member:
            return f"not enough valid tasks: {n} pods, minMember {job.min_member}"
        for role, need in sorted(job.enforced_min_task_member.items()):
            have = job.role_counts.get(role, 0)
            if have < need:
                return f"not enough pods of task {role!r}: {have}, minTaskMember {need}"
        for gid, need in sorted(job.min_subjobs.items()):
            have = sum(1 for sj in job.subjobs.values() if sj.gid == gid)
            if have < need:
                return f"not enough sub-groups {gid}: {have}, minSubGroups {need}"
        return None

    def job_ready(self, job: JobInfo) -> bool:
        """minTaskMember, minSubGroups (ready SubJobs) and minMember are all met."""
        ssn = self.ssn
        for role, need in job.enforced_min_task_member.items():
            if ssn.role_ready_count(job, role) < need:
                return False
        for gid, need in job.min_subjobs.items():
            if need > 0:
                ready = sum(1 for sj in job.subjobs.values() if sj.gid == gid and self.subjob_ready(sj))
                if ready < need:
                    return False
        return ssn.job_ready_count(job) >= job.min_member

    def subjob_ready(self, sj: SubJobInfo) -> bool:
        """Ready tasks reach the SubJob's MinAvailable."""
        return self.ssn.subjob_ready_count(sj) >= sj.min_available

    def victims(self, actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Pods a victim job can lose: while it keeps minMember, or all of them when every
        running pod of the job is a candidate (the whole gang then goes, never a part below its
        minimum; the eviction actions evict either spare pods or the whole gang)."""
        gone = self.ssn.ledger.gone
        by_job = group_by_job(candidates)
        out: list[TaskInfo] = []
        for jkey, cands in by_job.items():
            job = self.ssn.snap.jobs.get(jkey)
            if job is None:
                continue
            running = running_count(job, gone)
            if running > job.min_member or len(cands) >= running:
                out.extend(cands)
        return out

    def job_order(self, job: JobInfo) -> bool:
        """Not-ready jobs first (False sorts before True)."""
        return self.job_ready(job)

    def subjob_order(self, sj: SubJobInfo) -> bool:
        """Not-ready SubJobs first."""
        return self.subjob_ready(sj)


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> Gang:
    """Register gang's validity, readiness, order and victim functions."""
    g = Gang(ssn)
    ssn.register(JOB_VALID, g.job_valid)
    ssn.register(JOB_READY, g.job_ready)
    ssn.register(SUBJOB_READY, g.subjob_ready)
    ssn.register(JOB_ORDER, g.job_order)
    ssn.register(SUBJOB_ORDER, g.subjob_order)
    ssn.register(PREEMPTABLE, g.victims)
    ssn.register(RECLAIMABLE, g.victims)
    return g
