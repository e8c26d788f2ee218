"""Closing a session: what it decided, as a :class:`~.result.SessionResult`.

Volcano's ``CloseSession`` writes job and queue status from the session; here the session is
read into outcomes (the process writes them, the simulator shows them): bindings, each
PodGroup's phase and conditions with the reason for every pod left pending, each queue's
allocation and limits, evictions and nominations, and the domains held for the head of a queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..algorithms.queue_sums import queue_job_sums, queue_state, tasks_res
from ..filters import dynamic_resources
from ..filters.volume_binding import BindingState, decisions
from ..framework.evictions import ACTION_REASONS
from ..framework.session import Session
from ..model.explanation import Explanation
from ..model.hypernode_tree import HyperNodeTree
from ..model.jobs import JobInfo
from ..model.memo import MemoKey
from ..model.reservation import RESERVED_CONDITION, RESERVED_REASON
from ..model.resources import Res
from .relaxation import Relaxation, record_relaxations
from .result import (
    INVALID_MARK,
    NETWORK_TOPOLOGY_WARNING,
    PODS_PENDING,
    JobOutcome,
    QueueOutcome,
    SessionResult,
    reason_parts,
)

MAX_LISTED = 10  # pods named in one note

# A job with every pod bound and its gang ready had nothing to decide: (tree, configuration,
# its outcome), shared by the results of later sessions while the tree and the configuration
# are the same (SessionResult.own_job copies one before it is changed).
SETTLED_OUTCOME: MemoKey[tuple[HyperNodeTree, Any, JobOutcome]] = MemoKey("settled outcome")


def close_session(ssn: Session, relaxed: Mapping[str, Relaxation]) -> SessionResult:
    """The session's decisions as a result; ``relaxed``: the topology relaxations in force."""
    snap = ssn.snap
    out = SessionResult(notes=list(ssn.notes))
    for key, n in sorted(ssn.bindings.items()):
        out.bindings[key] = snap.node_names[n]
    for _f, st in ssn.state.filters:
        if isinstance(st, BindingState):
            out.volumes = decisions(st)
        elif isinstance(st, dynamic_resources.DraState):
            out.claims = dynamic_resources.decisions(st)
    standalone = set(snap.standalone)
    for key, job in sorted(snap.jobs.items()):
        outcome, waiting = _job_outcome(ssn, job)
        out.unschedulable.update(waiting)
        if key not in standalone:
            out.jobs[key] = outcome
    out.queues = _queue_outcomes(ssn)
    for key, reason in sorted(snap.orphan_pods.items()):
        out.unschedulable[key] = reason
    if snap.missing_node_pods:
        shown = sorted(snap.missing_node_pods.items())
        listed = ", ".join(f"{k} on {n}" for k, n in shown[:MAX_LISTED])
        more = f" and {len(shown) - MAX_LISTED} more" if len(shown) > MAX_LISTED else ""
        out.notes.append(
            f"{len(shown)} pod(s) bound to a node with no Node object, counted as running for their "
            f"gang as Volcano does: {listed}{more}"
        )
    _close_nominations(ssn, out)
    record_relaxations(relaxed, out)
    _close_reservations(ssn, out)
    out.spares = ssn.spare_report
    return out


def _placement(ssn: Session, job: JobInfo) -> tuple[bool, str | None, dict[str, str]]:
    """(gang ready, allocated HyperNode, SubJob domains) of ``job`` after the session."""
    tree = ssn.snap.tree
    ready = ssn.job_ready(job) and ssn.job_valid(job) is None and bool(job.tasks)
    hn = ssn.job_hn.get(job.key, -1)
    hn_name = tree.names[hn] if hn >= 0 and job.with_topology else None
    subgroups: dict[str, str] = {}
    for sid in sorted(job.subjobs):
        sh = ssn.subjob_hn.get(sid, -1)
        if sh >= 0 and sid != job.key:
            subgroups[sid] = tree.names[sh]
    return ready, hn_name, subgroups


def _waiting(ssn: Session, job: JobInfo, expl: Explanation | None) -> dict[str, str]:
    """Why each of the job's pods not bound by this session waits."""
    waiting: dict[str, str] = {}
    fallback: str | None = None  # the job's message, made once for all its pods
    for t in job.pending:
        if t.key in ssn.bindings:
            continue
        reason = ssn.task_reasons.get(t.key)
        if reason is None:
            if fallback is None:
                fallback = expl.message() if expl is not None else "not placed this cycle"
            reason = fallback
        waiting[t.key] = reason
    return waiting


def _job_outcome(ssn: Session, job: JobInfo) -> tuple[JobOutcome, dict[str, str]]:
    """The PodGroup's outcome and the reasons of its waiting pods."""
    # A job whose every pod is bound had nothing to decide: its outcome depends on the job,
    # the tree and the configuration only, so it is made once and shared while they stand.
    settled = (
        bool(job.tasks)
        and not job.pending
        and job.key not in ssn.explanations
        and job.key not in ssn.candidates
    )
    if settled:
        cached = job.memo.get(SETTLED_OUTCOME)
        if cached is not None and cached[0] is ssn.snap.tree and cached[1] is ssn.config:
            return cached[2], {}
    outcome, waiting = _made_outcome(ssn, job)
    if settled and outcome.phase == "Running" and not waiting:
        job.memo.put(SETTLED_OUTCOME, (ssn.snap.tree, ssn.config, outcome))
    return outcome, waiting


def _made_outcome(ssn: Session, job: JobInfo) -> tuple[JobOutcome, dict[str, str]]:
    ready, hn_name, subgroups = _placement(ssn, job)
    expl = ssn.explanations.get(job.key)
    outcome = JobOutcome(
        phase="Running" if ready else "Pending",
        allocated_hypernode=hn_name,
        explanation=None if ready else expl,
        subgroups=dict(subgroups),
        candidates=ssn.candidates.get(job.key),
    )
    if "enqueue" in ssn.config.actions:
        outcome.pg_phase = (
            "Running" if ready else ("Inqueue" if ssn.job_phase(job) == "Inqueue" else "Pending")
        )
    waiting = _waiting(ssn, job, expl)
    if ready:
        outcome.conditions.append(
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "GangReady",
                "message": "gang minimum is placed",
            }
        )
        if waiting:
            # Volcano says nothing about the pods beyond the gang minimum; a user asking
            # "why are 4 of my 8 pods Pending" finds the answer on the PodGroup.
            outcome.conditions.append(
                {
                    "type": PODS_PENDING,
                    "status": "True",
                    "reason": expl.reason if expl is not None else "NotEnoughResources",
                    "message": f"{len(waiting)} of {len(job.tasks)} pods wait: "
                    + "; ".join(reason_parts(waiting.values())),
                }
            )
    elif expl is not None:
        outcome.conditions.append(
            {"type": "Unschedulable", "status": "True", "reason": expl.reason, "message": expl.message()}
        )
    if job.warnings:
        # What Volcano's webhook only warns about at admission, kept visible on the PodGroup.
        outcome.conditions.append(
            {
                "type": NETWORK_TOPOLOGY_WARNING,
                "status": "True",
                "reason": "UnknownTierName",
                "message": "; ".join(job.warnings),
            }
        )
    if job.bad_marks:
        # An annotation or label the scheduler could not read (Volcano only logs it).
        outcome.conditions.append(
            {
                "type": INVALID_MARK,
                "status": "True",
                "reason": "InvalidPreemptable",
                "message": "; ".join(job.bad_marks),
            }
        )
    return outcome, waiting


def _queue_outcomes(ssn: Session) -> dict[str, QueueOutcome]:
    """Per queue: allocated (carried between snapshots, patched by the jobs that changed) plus
    what this session bound, and the deserved share and capability of the queue plugin that
    computed them."""
    snap = ssn.snap
    held = queue_job_sums(snap)
    out = {
        name: QueueOutcome(held[name].allocated.clone() if name in held else Res(), state=queue_state(q))
        for name, q in sorted(snap.queues.items())
    }
    if ssn.bindings:
        # Only jobs whose ready count moved in this session had pods bound.
        base = ssn.base_ready_job
        for key, n in ssn.n_ready_job.items():
            job = snap.jobs[key]
            qo = out.get(job.queue)
            if qo is None or n == base.get(key):
                continue
            qo.allocated.add(tasks_res(snap, [t for t in job.pending if t.key in ssn.bindings]))
    for qname, (deserved, capability) in ssn.queue_limits().items():
        qo = out.get(qname)
        if qo is not None:
            qo.deserved = deserved
            qo.capability = capability
    return out


def _close_nominations(ssn: Session, out: SessionResult) -> None:
    """Evictions and held nominations into the result; a nominated gang is still Pending."""
    out.evictions = list(ssn.ledger.evictions)
    out.nominations = dict(ssn.ledger.nominations)
    for key, nom in out.nominations.items():
        if key not in out.jobs:
            continue
        outcome = out.own_job(key)
        outcome.phase = "Pending"
        waiting = [v for v in nom.victims if v in ssn.ledger.gone]
        outcome.conditions = [
            c for c in outcome.conditions if c.get("type") not in ("Scheduled", PODS_PENDING)
        ]
        outcome.conditions.append(
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": ACTION_REASONS.get(nom.action, "Preempting"),
                "message": f"{len(nom.pods)} pods nominated, waiting for {len(waiting)} victim pod(s) to "
                f"terminate; {nom.reason}",
            }
        )


def _close_reservations(ssn: Session, out: SessionResult) -> None:
    """Held domains into the result and onto their PodGroups (condition ``HyperNodeReserved``,
    its transition time the start of the hold); a job backfilled into held room has its
    ``Scheduled`` condition say so (its time limit ends before the held gang's estimated start)."""
    out.reservations = dict(ssn.reservations)
    for res in out.reservations.values():
        for job, line in res.backfilled:
            placed = out.own_job(job) if job in out.jobs else None
            for c in placed.conditions if placed is not None else []:
                if c.get("type") == "Scheduled" and c.get("status") == "True":
                    c["message"] = f"{c.get('message') or ''}; {line}"
    for key, res in out.reservations.items():
        if key not in out.jobs:
            continue
        outcome = out.own_job(key)
        outcome.conditions.append(
            {
                "type": RESERVED_CONDITION,
                "status": "True",
                "reason": RESERVED_REASON,
                "message": res.message(),
                "lastTransitionTime": res.since,
            }
        )
