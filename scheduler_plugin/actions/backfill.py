"""``backfill`` action: pending best-effort pods (no resource requests) of admitted jobs.

Best-effort pods count as ready for the gang (Volcano's ReadyTaskNum), so ``allocate`` leaves
them alone; here each takes the best-scoring node that passes the predicates and has a pod slot,
within its queue's limit and off the nodes fenced for it (its queue's node groups, domains held
exclusively for another job).
"""

from __future__ import annotations

import numpy as np

from ..framework.session import Session
from ..framework.statement import Statement
from ..model.jobs import JobInfo, TaskInfo
from ..placement.exclusive_fences import Fences
from ..placement.gang_units import Group, job_skip_reason, within_queue


def backfill(ssn: Session) -> None:
    """Place pending best-effort pods one by one."""
    snap = ssn.snap
    # Only jobs with pending best-effort pods have anything to do here: sort just those.
    candidates = [j for j in snap.jobs.values() if any(t.best_effort for t in j.pending)]
    fences = Fences(ssn)  # a queue's node groups, exclusive domains
    for job in sorted(candidates, key=ssn.job_sort_key()):
        pending = [t for t in job.pending if t.best_effort and t.key not in ssn.placed]
        if not pending or job_skip_reason(ssn, job) is not None:
            continue
        fences.before(job)
        try:
            _backfill_job(ssn, job, pending)
        finally:
            fences.after(job, False)
    fences.finish()


def _backfill_job(ssn: Session, job: JobInfo, pending: list[TaskInfo]) -> None:
    """One job's pending best-effort pods, each on the best-scoring node with room."""
    snap = ssn.snap
    stmt = Statement(ssn)
    sj_of = job.subjobs
    for t in sorted(pending, key=ssn.task_sort_key()):
        # The queue's limit, asked as every action asks it (a best-effort pod asks for no
        # cpu or memory, but may ask for extended resources a queue limits).
        _, why = within_queue(ssn, job, [Group(sj_of[t.subjob], [t], atomic=True)])
        if why is not None:
            ssn.task_reasons.setdefault(t.key, why)
            continue
        c = ssn.state.node_counts(snap.shapes[t.shape])
        cand = np.flatnonzero(c > 0)
        if not len(cand):
            ssn.task_reasons.setdefault(
                t.key, f"0/{snap.num_nodes} nodes are available for a best-effort pod"
            )
            continue
        sj = sj_of[t.subjob]
        scores = ssn.node_scores(t, sj, cand)
        stmt.allocate([t], [int(cand[int(np.argmax(scores))])])
    stmt.commit()
