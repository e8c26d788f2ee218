"""``run_session``: one scheduling cycle on a snapshot, as documented in docs/CONTRACTS.md.

Open a session on the snapshot (its time-bounded topology relaxations applied), hold the room
of earlier nominations, run the configured actions, tell a waiting gang what preemption would
do when it is off, and close the session into a :class:`~.result.SessionResult`.

Volcano behaviour implemented: session view with the virtual root and soft -> hard conversion,
allocated-HyperNode recovery from running pods, SubJob grouping and two-level gang (minMember,
minTaskMember, minSubGroups, per-SubJob MinAvailable), job/SubJob/task order (priority, gang,
creation, name), hard tier limits by number or tierName, gradients lowest tier first, HyperNode
bin-packing, LCA and tier-fading node scores, binpack and nodeorder (resource scores) plugins,
enqueue, allocate and backfill actions, queue shares (proportion, capacity, drf job order,
overcommit); preempt and reclaim (topology-aware victim choice in ``placement/victim_search.py``;
the room freed is nominated to the preemptor and held across sessions through ``nominations``).
Not modelled: pipelining onto releasing resources.

Deliberate differences, for speed and placement quality: feasibility comes from per-shape fit
counts instead of dry runs; a partitioned job picks its job-level domain by the bin-packing
score of the whole unit (Volcano sums the SubJob scores of a dry run per candidate); inside a
chosen domain pods go to the fewest leaves (best fit) in rank order instead of one node-score
argmax per pod, and a job's identical partitions fill the fewest domains of their tier (Volcano
fills the best bin-packing score first, which spreads them over the fullest leaves).

Determinism: the result depends only on the snapshot, the configuration and the session's
clock. Every tie (equal HyperNode or node scores) is broken by name (HyperNode name, node name),
never by hash or iteration order (Volcano breaks these ties at random; a name order makes
results reproducible and reviewable).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..actions import ACTIONS
from ..actions.preempt import REPAIR, explain_without_preemption, repair
from ..config.scheduler_conf import DEFAULT_CONFIG, NOOP_ACTIONS, SchedulerConfig
from ..framework.evictions import Nomination
from ..framework.session import Session
from ..model.memo import MemoKey
from ..model.reservation import Reservation
from ..model.runtime_history import RuntimeHistory
from ..model.snapshot import ClusterSnapshot
from ..plugins import REGISTRY
from .close import close_session
from .nominations import hold_nominations
from .relaxation import relax_snapshot
from .result import SessionResult

# No job of the snapshot has a pod left to place.
SETTLED: MemoKey[bool] = MemoKey("settled")


def open_session(
    snapshot: ClusterSnapshot, config: SchedulerConfig = DEFAULT_CONFIG, clock: float | None = None
) -> Session:
    """A session on ``snapshot`` with the configured plugins of the scheduler's registry
    (``clock``: the session's time in epoch seconds, wall time when None)."""
    return Session.open(snapshot, config, REGISTRY, clock)


def run_session(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig = DEFAULT_CONFIG,
    *,
    nominations: Mapping[str, Nomination] | None = None,
    record_candidates: bool = False,
    now: float | None = None,
    reservations: Mapping[str, Reservation] | None = None,
    reserve: bool = True,
    history: RuntimeHistory | None = None,
) -> SessionResult:
    """Open a session, run the configured actions, and report bindings and reasons.

    ``nominations``: what the previous session nominated (``SessionResult.nominations``): that
    room stays held for its gangs, which are bound once their victims are gone.
    ``record_candidates``: keep each job's domain search (candidate HyperNodes per tier, their
    feasibility, scores and what they lacked) on its JobOutcome, for ``explain``.
    ``now``: the session's time in epoch seconds (wall time when None), which time-bounded
    topology relaxations (``hyperplace.io/relax-topology``) are measured against.
    ``now`` is also the clock of head-of-queue reservations: a gang that waited past its
    threshold gets a domain held (``placement/head_of_queue.py``); nothing is reserved when
    ``now`` is None or ``reserve`` is False. ``reservations``: the previous session's
    ``reservations``.
    ``history``: run times of finished gangs, kept by the caller from session to session; the
    session records the gangs it sees ended (at ``now``) and a hold for the head of a queue
    that opts in picks the domain its running gangs are expected to leave soonest
    (``model/runtime_history.py``).
    """
    t0 = time.perf_counter()
    clock = time.time() if now is None else now
    snapshot, relaxed = relax_snapshot(snapshot, clock)
    ssn = open_session(snapshot, config, clock)
    ssn.record_candidates = record_candidates
    ssn.now = now if reserve else None
    ssn.previous_reservations = dict(reservations or {})
    if history is not None and now is not None:
        history.observe(snapshot, now)
        ssn.history = history
    ssn.notes.extend(config.warnings)
    ssn.notes.extend(_extended_resource_notes(snapshot))
    if nominations:
        hold_nominations(ssn, nominations)
    opened = time.perf_counter()
    action_seconds: dict[str, float] = {}
    for action in config.actions:
        fn = ACTIONS.get(action)
        if fn is None:
            why = NOOP_ACTIONS.get(action, "not implemented")
            ssn.notes.append(f"action {action!r} not run: {why}")
            continue
        started = time.perf_counter()
        fn(ssn)
        action_seconds[action] = action_seconds.get(action, 0.0) + time.perf_counter() - started
    # Not a configured action: gangs that lost pods are made whole in every session.
    started = time.perf_counter()
    repair(ssn)
    action_seconds[REPAIR] = time.perf_counter() - started
    explain_without_preemption(ssn)
    result = close_session(ssn, relaxed)
    result.decision_seconds = time.perf_counter() - t0
    result.open_seconds = opened - t0
    result.action_seconds = action_seconds
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
    return snapshot.memo.get_or_put(SETTLED, lambda: not any(job.pending for job in snapshot.jobs.values()))


def run_session_reusing(
    last: LastSession,
    snapshot: ClusterSnapshot,
    config: SchedulerConfig = DEFAULT_CONFIG,
    nominations: Mapping[str, Nomination] | None = None,
    *,
    now: float | None = None,
    reservations: Mapping[str, Reservation] | None = None,
    history: RuntimeHistory | None = None,
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
    result = run_session(
        snapshot, config=config, nominations=nominations, now=now, reservations=reservations, history=history
    )
    last.snapshot, last.config, last.result = snapshot, config, result
    return result


def _extended_resource_notes(snap: ClusterSnapshot) -> list[str]:
    """What a DeviceClass's ``extendedResourceName`` would do in kube-scheduler 1.37 and does not
    here: a pod asking that extended resource is placed only where a node publishes it in its
    allocatable (a device plugin), never given the class's devices through a claim made for it."""
    out: list[str] = []
    for cls in sorted(snap.dra.classes.values(), key=lambda c: c.name):
        name = cls.extended_resource
        if name is None or name not in snap.resources:
            continue
        col = snap.resources.index(name)
        if not any(int(s.requests[col]) > 0 for s in snap.shapes):
            continue
        out.append(
            f"DeviceClass {cls.name} backs the extended resource {name} (extendedResourceName): "
            f"pods asking {name} are placed only on nodes whose allocatable has it (a device plugin); "
            "the class's devices are not allocated for them (Kubernetes 1.37's DRAExtendedResource). "
            "Claim those devices with resourceClaims instead"
        )
    return out
