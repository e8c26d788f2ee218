"""Per-session time-bounded topology relaxation (``hyperplace.io/relax-topology``).

A job's relaxation depends on the session's time, while a snapshot's JobInfos are shared by
every session that sees them (and cache what they derive). So a session with relaxed jobs runs
on a shallow copy of the snapshot whose relaxed jobs are fresh copies carrying the tier limit in
force now; the snapshot itself is never changed. Without any annotated job the snapshot is
returned as is, so placements without the annotation cannot change.

The clock starts at the PodGroup's creation (the Job controller creates it with the Job); for a
gang that ran and lost pods (a node failed under it) or restarted whole, when it stopped being
whole (:mod:`..model.gang_damage`): it tries its tightest domain again first, for as long as a
new gang would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hyperplace.api.relax import RelaxState, relax_state, relax_steps
from hyperplace.api.times import rfc3339

from ..model.gang_damage import waiting_since
from ..model.jobs import JobInfo, TopologyConstraint
from ..model.memo import Memo
from ..model.snapshot import ClusterSnapshot
from .result import SessionResult

RELAXATION_CONDITION = "TopologyRelaxation"


@dataclasses.dataclass(frozen=True)
class Relaxation:
    """A job's relaxation in one session: the state and the instant it started from."""

    state: RelaxState
    start: float  # epoch seconds
    ceiling: int | None = None  # the job's own hard tier limit (None: none)

    def deadline_text(self) -> str | None:
        """The next widening as RFC 3339, or None when the limit is final."""
        if self.state.next_deadline is None:
            return None
        return rfc3339(self.start + self.state.next_deadline)

    def line(self, ceiling: int | None) -> str:
        """One human line: the tier in force and what comes next."""
        if self.state.tier is None:
            own = f"tier {ceiling}" if ceiling is not None else "no tier limit"
            return f"topology relaxation finished: the job's own limit ({own}) applies"
        nxt = f"tier {self.state.next_tier}" if self.state.next_tier is not None else "the job's own limit"
        return f"topology relaxed to tier {self.state.tier} until {self.deadline_text()}, then {nxt}"


def _ceiling(topo: TopologyConstraint | None) -> int | None:
    """The job's own hard tier limit (None: none)."""
    if topo is not None and topo.mode == "hard" and topo.limit is not None:
        return topo.limit
    return None


def _relaxed_job(job: JobInfo, tier: int) -> JobInfo:
    """A copy of ``job`` limited to ``tier`` (its SubJobs' limits capped at ``tier`` too)."""
    old = job.topology
    topo = TopologyConstraint(
        "hard", tier, None, None, declared_soft=old.declared_soft if old is not None else False
    )
    subjobs = {}
    for sid, sj in job.subjobs.items():
        st = sj.topology
        if sj.is_default:
            st = topo
        elif st is not None and st.mode == "hard" and st.limit is not None and st.limit > tier:
            st = dataclasses.replace(st, limit=tier)
        subjobs[sid] = dataclasses.replace(sj, topology=st)
    # A fresh cache: what was derived under the job's own limit does not hold here.
    return dataclasses.replace(job, topology=topo, subjobs=subjobs, memo=Memo())


def relax_snapshot(snap: ClusterSnapshot, now: float) -> tuple[ClusterSnapshot, dict[str, Relaxation]]:
    """The snapshot this session schedules, with every annotated job's limit as of ``now``.

    Returns ``snap`` itself when no job carries a valid annotation.
    """
    found: dict[str, Relaxation] = {}
    jobs: dict[str, JobInfo] | None = None
    for key, job in snap.jobs.items():
        steps = relax_steps(job.podgroup.metadata.annotations)
        if not steps:
            continue
        start = waiting_since(job)
        if start is None:
            continue
        ceiling = _ceiling(job.topology)
        state = relax_state(steps, now - start, ceiling)
        found[key] = Relaxation(state, start, ceiling)
        if state.tier is None or (ceiling is not None and state.tier >= ceiling):
            continue  # the job's own limit is in force
        if jobs is None:
            jobs = dict(snap.jobs)
        jobs[key] = _relaxed_job(job, state.tier)
    if not found:
        return snap, {}
    if jobs is None:
        return snap, found
    # memo holds only what does not depend on tier limits (ready counters, sums), so it is shared.
    return dataclasses.replace(snap, jobs=jobs), found


def relaxation_condition(rel: Relaxation, ceiling: int | None) -> dict[str, Any]:
    """The PodGroup condition recording the tier in force and the next deadline."""
    final = rel.state.tier is None
    return {
        "type": RELAXATION_CONDITION,
        "status": "False" if final else "True",
        "reason": "OwnLimit" if final else f"Tier{rel.state.tier}",
        "message": rel.line(ceiling),
    }


def record_relaxations(relaxed: Mapping[str, Relaxation], result: SessionResult) -> None:
    """Add the relaxation condition (and an explanation line) to each relaxed job's outcome."""
    for key, rel in relaxed.items():
        if key not in result.jobs:
            continue
        outcome = result.own_job(key)
        ceiling = rel.ceiling
        outcome.conditions = [c for c in outcome.conditions if c.get("type") != RELAXATION_CONDITION]
        outcome.conditions.append(relaxation_condition(rel, ceiling))
        if outcome.explanation is not None:
            outcome.explanation.add_detail(rel.line(ceiling))
        outcome.relaxation = {
            "tier": rel.state.tier,
            "nextDeadline": rel.deadline_text(),
            "nextTier": rel.state.next_tier,
        }
