"""``run_session``: one scheduling cycle on a snapshot, as documented in docs/CONTRACTS.md.

Volcano behaviour implemented: session view with the virtual root and soft -> hard conversion,
allocated-HyperNode recovery from running pods, SubJob grouping and two-level gang (minMember,
minTaskMember, minSubGroups, per-SubJob MinAvailable), job/SubJob/task order (priority, gang,
creation, name), hard tier limits by number or tierName, gradients lowest tier first, HyperNode
bin-packing, LCA and tier-fading node scores, binpack and nodeorder (resource scores) plugins,
enqueue, allocate and backfill actions, queue shares (proportion, capacity, drf job order,
overcommit); preempt and reclaim (topology-aware victim choice in ``scheduler_plugin.preemption``;
the room freed is nominated to the preemptor and held across sessions through ``nominations``).
Not modelled: pipelining onto releasing resources.

Deliberate differences, for speed and placement quality: feasibility comes from per-shape fit
counts instead of dry runs; a partitioned job picks its job-level domain by the bin-packing
score of the whole unit (Volcano sums the SubJob scores of a dry run per candidate); inside a
chosen domain pods go to the fewest leaves (best fit) in rank order instead of one node-score
argmax per pod.

Determinism: the result depends only on the snapshot and the configuration. Every tie (equal
HyperNode or node scores) is broken by name (HyperNode name, node name), never by hash or
iteration order; ``seed`` seeds the session RNG, which no built-in plugin currently draws from
(Volcano breaks these ties at random; a name order makes results reproducible and reviewable).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..actions import ACTIONS
from ..actions.reservation import RESERVED_CONDITION, RESERVED_REASON, Reservation
from ..algorithms.queue_shares import Res
from ..config.scheduler_conf import DEFAULT_CONFIG, NOOP_ACTIONS, SchedulerConfig
from ..framework.evictions import Eviction, Nomination
from ..framework.session import Session
from ..model.explanation import CandidateReport, Explanation
from ..model.snapshot import ClusterSnapshot
from ..plugins.queue_accounting import job_sums, queue_state, tasks_res

# PodGroup condition for a topology the scheduler could not honour exactly but placed anyway.
NETWORK_TOPOLOGY_WARNING = "NetworkTopologyWarning"
MAX_LISTED = 10  # pods named in one note

# PodGroup condition of a job whose gang minimum is placed while some of its pods still wait.
PODS_PENDING = "PodsPending"


def reason_parts(reasons: Iterable[str]) -> list[str]:
    """The distinct parts of pod reasons (each is an explanation ``"; "``-joined), in order:
    what the simulator's table lists under "why N pods wait"."""
    out: list[str] = []
    for reason in sorted(set(reasons)):
        out.extend(part for part in reason.split("; ") if part and part not in out)
    return out


@dataclass
class JobOutcome:
    """What the session decided for one PodGroup."""

    phase: str  # "Running" when the gang is satisfied after this session, else "Pending"
    allocated_hypernode: str | None
    subgroups: dict[str, str] = field(default_factory=dict)  # subjob id -> hypernode name
    conditions: list[dict[str, Any]] = field(default_factory=list)
    explanation: Explanation | None = None
    # The PodGroup phase Volcano would write when ``enqueue`` runs: Running, Inqueue (admitted,
    # now or earlier) or Pending (not admitted). None without enqueue: every job considered
    # is then Inqueue, as Volcano's allocate moves it there.
    pg_phase: str | None = None
    # The domain search as the scheduler ran it (only when run_session(record_candidates=True)).
    candidates: CandidateReport | None = None
    # A time-bounded topology relaxation in force: {"tier", "nextDeadline", "nextTier"}.
    relaxation: dict[str, Any] | None = None


@dataclass
class QueueOutcome:
    """One queue after the session: what it holds (running and bound by this session, as
    Volcano writes ``status.allocated``) and, when a queue plugin computed them, its deserved
    share and capability."""

    allocated: Res
    deserved: Res | None = None
    capability: Res | None = None
    state: str = "Open"

    def to_dict(self) -> dict[str, Any]:
        """Resource lists in Kubernetes quantities (Volcano's units back to the wire form)."""
        out: dict[str, Any] = {"state": self.state, "allocated": resource_list(self.allocated)}
        if self.deserved is not None:
            out["deserved"] = resource_list(self.deserved)
        if self.capability is not None:
            out["capability"] = resource_list(self.capability)
        return out


def resource_list(r: Res) -> dict[str, str]:
    """A Volcano Resource as a ResourceList (cpu and memory always; infinite dimensions left out)."""
    out: dict[str, str] = {}
    for name, v in (("cpu", r.cpu), ("memory", r.memory), *sorted((r.scalars or {}).items())):
        if v == math.inf or (name == "pods"):
            continue
        milli = round(v * 1000) if name == "memory" else round(v)
        if name not in ("cpu", "memory") and milli == 0:
            continue
        out[name] = format_quantity(name, max(milli, 0))
    return out


def format_quantity(name: str, milli: int) -> str:
    """A canonical quantity: memory in bytes, others as whole units or ``m``."""
    if name == "memory":
        return str(milli // 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


@dataclass
class SessionResult:
    """Bindings, per-job outcomes and reasons for every pod left pending."""

    bindings: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, JobOutcome] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    decision_seconds: float = 0.0
    queues: dict[str, QueueOutcome] = field(default_factory=dict)
    # Victims the preempt/reclaim actions chose (to evict), and the room held for each preemptor
    # gang (job key -> nomination) until its victims are gone; pass ``nominations`` back to the
    # next ``run_session``.
    evictions: list[Eviction] = field(default_factory=list)
    nominations: dict[str, Nomination] = field(default_factory=dict)
    # Domains held for head-of-queue gangs that waited too long (job key -> Reservation); pass
    # ``reservations`` back to the next ``run_session``, as nominations.
    reservations: dict[str, Reservation] = field(default_factory=dict)


def run_session(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig = DEFAULT_CONFIG,
    seed: int = 0,
    nominations: Mapping[str, Nomination] | None = None,
    *,
    record_candidates: bool = False,
    now: float | None = None,
    reservations: Mapping[str, Reservation] | None = None,
    reserve: bool = True,
) -> SessionResult:
    """Open a session, run the configured actions, and report bindings and reasons.

    ``nominations``: what the previous session nominated (``SessionResult.nominations``): that
    room stays held for its gangs, which are bound once their victims are gone.
    ``record_candidates``: keep each job's domain search (candidate HyperNodes per tier, their
    feasibility, scores and what they lacked) on its JobOutcome, for ``explain``.
    ``now``: the session's time in epoch seconds (wall time when None), which time-bounded
    topology relaxations (``hyperplace.io/relax-topology``) are measured against.
    ``now`` is also the clock of head-of-queue reservations: a gang that waited past its
    threshold gets a domain held (``scheduler_plugin.reservation``); nothing is reserved when
    ``now`` is None or ``reserve`` is False. ``reservations``: the previous session's
    ``reservations``.
    """
    from ..algorithms.victims import explain_without_preemption, hold_nominations
    from .relaxation import record_relaxations, relax_snapshot

    t0 = time.perf_counter()
    snapshot, relaxed = relax_snapshot(snapshot, time.time() if now is None else now)
    ssn = Session.open(snapshot, config, seed)
    ssn.record_candidates = record_candidates
    ssn.now = now if reserve else None
    ssn.previous_reservations = dict(reservations or {})
    ssn.notes.extend(getattr(config, "warnings", []) or [])
    if nominations:
        hold_nominations(ssn, nominations)
    for action in config.actions:
        fn = ACTIONS.get(action)
        if fn is None:
            why = NOOP_ACTIONS.get(action, "not implemented")
            ssn.notes.append(f"action {action!r} not run: {why}")
            continue
        fn(ssn)
    explain_without_preemption(ssn)
    result = _close(ssn)
    _close_nominations(ssn, result)
    record_relaxations(relaxed, result)
    _close_reservations(ssn, result)
    result.decision_seconds = time.perf_counter() - t0
    return result


@dataclass
class LastSession:
    """What a scheduler keeps of its last session to skip the next one when nothing changed
    (:func:`run_session_reusing`)."""

    snapshot: ClusterSnapshot | None = None
    config: SchedulerConfig | None = None
    result: SessionResult | None = None


def settled(snapshot: ClusterSnapshot) -> bool:
    """No job of ``snapshot`` has a pod left to place (once per snapshot)."""
    got = snapshot.memo.get("settled")
    if got is None:
        got = snapshot.memo["settled"] = not any(job.pending for job in snapshot.jobs.values())
    return bool(got)


def run_session_reusing(
    last: LastSession,
    snapshot: ClusterSnapshot,
    config: SchedulerConfig = DEFAULT_CONFIG,
    nominations: Mapping[str, Nomination] | None = None,
    *,
    now: float | None = None,
    reservations: Mapping[str, Reservation] | None = None,
) -> SessionResult:
    """:func:`run_session`, or the last session's result when this one cannot differ, as
    kube-scheduler does nothing while its queue is empty: the same view (no event since),
    the same configuration, no pod of any job left to place (so no clock-driven step, a
    relaxation deadline, a reservation threshold or an SLA, has anything to act on) and a
    last session that bound, evicted, nominated and reserved nothing. ``last`` is updated."""
    prev = last.result
    if (
        prev is not None
        and last.snapshot is snapshot
        and last.config is config
        and not nominations
        and not reservations
        and not (prev.bindings or prev.evictions or prev.nominations or prev.reservations)
        and settled(snapshot)
    ):
        return prev
    result = run_session(snapshot, config=config, nominations=nominations, now=now, reservations=reservations)
    last.snapshot, last.config, last.result = snapshot, config, result
    return result


def _close_nominations(ssn: Session, out: SessionResult) -> None:
    """Evictions and held nominations into the result; a nominated gang is still Pending."""
    out.evictions = list(ssn.ledger.evictions)
    out.nominations = dict(ssn.ledger.nominations)
    for key, nom in out.nominations.items():
        outcome = out.jobs.get(key)
        if outcome is None:
            continue
        outcome.phase = "Pending"
        waiting = [v for v in nom.victims if v in ssn.ledger.gone]
        outcome.conditions = [
            c for c in outcome.conditions if c.get("type") not in ("Scheduled", PODS_PENDING)
        ]
        outcome.conditions.append(
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": "Preempting" if nom.action == "preempt" else "Reclaiming",
                "message": f"{len(nom.pods)} pods nominated, waiting for {len(waiting)} victim pod(s) to "
                f"terminate; {nom.reason}",
            }
        )


def _close_reservations(ssn: Session, out: SessionResult) -> None:
    """Held domains into the result and onto their PodGroups (condition ``HyperNodeReserved``,
    its transition time the start of the hold)."""
    out.reservations = dict(ssn.reservations)
    for key, res in out.reservations.items():
        outcome = out.jobs.get(key)
        if outcome is None:
            continue
        outcome.conditions.append(
            {
                "type": RESERVED_CONDITION,
                "status": "True",
                "reason": RESERVED_REASON,
                "message": res.message(),
                "lastTransitionTime": res.since,
            }
        )


def _close(ssn: Session) -> SessionResult:
    snap, tree = ssn.snap, ssn.snap.tree
    out = SessionResult(notes=list(ssn.notes))
    for key, n in sorted(ssn.bindings.items()):
        out.bindings[key] = snap.node_names[n]
    standalone = set(snap.standalone)
    gated = "enqueue" in ssn.config.actions
    for key, job in sorted(snap.jobs.items()):
        # A job whose every pod is bound had nothing to decide: its outcome depends on the job,
        # the tree and the configuration only, so it is computed once and reused.
        settled = bool(job.tasks) and not job.pending and key not in ssn.explanations
        cached = job.cache.get("outcome") if settled else None
        if cached is not None and cached[0] is tree and cached[1] is ssn.config:
            _, _, ready, hn_name, subgroups = cached
        else:
            ready = ssn.job_ready(job) and ssn.job_valid(job) is None and bool(job.tasks)
            hn = ssn.job_hn.get(key, -1)
            hn_name = tree.names[hn] if hn >= 0 and job.with_topology else None
            subgroups = {}
            for sid in sorted(job.subjobs):
                sh = ssn.subjob_hn.get(sid, -1)
                if sh >= 0 and sid != key:
                    subgroups[sid] = tree.names[sh]
            if settled:
                job.cache["outcome"] = (tree, ssn.config, ready, hn_name, subgroups)
        expl = ssn.explanations.get(key)
        outcome = JobOutcome(
            phase="Running" if ready else "Pending",
            allocated_hypernode=hn_name,
            explanation=None if ready else expl,
            subgroups=dict(subgroups),
            candidates=ssn.candidates.get(key),
        )
        if gated:
            outcome.pg_phase = (
                "Running" if ready else ("Inqueue" if ssn.job_phase(job) == "Inqueue" else "Pending")
            )
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
        out.unschedulable.update(waiting)
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
    return out


def _queue_outcomes(ssn: Session) -> dict[str, QueueOutcome]:
    """Per queue: allocated (O(jobs): per-job sums are cached) plus what this session bound,
    and the deserved share and capability of the queue plugin that computed them."""
    snap = ssn.snap
    base_alloc = snap.memo.get("queue_allocated")
    if base_alloc is None:
        # What the snapshot's running pods hold per queue: once per snapshot, not per session.
        base_alloc = {name: Res() for name in snap.queues}
        for job in snap.jobs.values():
            acc = base_alloc.get(job.queue)
            if acc is not None and (job.tasks and len(job.pending) < len(job.tasks)):
                acc.add(job_sums(snap, job).allocated)
        snap.memo["queue_allocated"] = base_alloc
    out = {
        name: QueueOutcome(base_alloc[name].clone(), state=queue_state(q))
        for name, q in sorted(snap.queues.items())
    }
    if ssn.bindings:
        # Only jobs whose ready count moved in this session had pods bound.
        base = snap.memo["ready_counters"][0]
        for key, n in ssn.n_ready_job.items():
            job = snap.jobs[key]
            qo = out.get(job.queue)
            if qo is None or n == base.get(key):
                continue
            qo.allocated.add(tasks_res(snap, [t for t in job.pending if t.key in ssn.bindings]))
    for name in ("capacity", "proportion"):
        attrs = getattr(ssn.plugins.get(name), "attrs", None)
        if not attrs:
            continue
        for qname, a in attrs.items():
            qo = out.get(qname)
            if qo is not None and qo.deserved is None:
                qo.deserved = a.deserved.clone()
                cap = getattr(a, "real_capability", None)
                qo.capability = cap.clone() if cap is not None else None
    return out
