"""What one session decided, as the scheduler process and the simulator read it: bindings,
per-PodGroup outcomes with their conditions, per-queue sums, reasons for every pod left
pending, evictions, nominations and reservations."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..filters.dra_allocator import ClaimAllocation
from ..filters.volume_binding import Decision
from ..framework.evictions import Eviction, Nomination
from ..framework.session import SpareReport
from ..model.explanation import CandidateReport, Explanation
from ..model.reservation import Reservation
from ..model.resources import Res

# PodGroup condition for a topology the scheduler could not honour exactly but placed anyway.
NETWORK_TOPOLOGY_WARNING = "NetworkTopologyWarning"

# PodGroup condition of a job whose gang minimum is placed while some of its pods still wait.
PODS_PENDING = "PodsPending"
# A PodGroup condition naming the annotations and labels its pods carry that could not be read.
INVALID_MARK = "InvalidAnnotation"


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
    # The outcome of a job with nothing to decide (every pod bound, its gang ready) is made once
    # and shared by the results of later sessions: to change an entry, take it with
    # :meth:`own_job` (a copy of its own), never change the object in place.
    jobs: dict[str, JobOutcome] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    decision_seconds: float = 0.0
    # Time to open the session and to run each action (Volcano's session metrics).
    open_seconds: float = 0.0
    action_seconds: dict[str, float] = field(default_factory=dict)
    queues: dict[str, QueueOutcome] = field(default_factory=dict)
    # Victims the preempt/reclaim actions chose (to evict), and the room held for each preemptor
    # gang (job key -> nomination) until its victims are gone; pass ``nominations`` back to the
    # next ``run_session``.
    evictions: list[Eviction] = field(default_factory=list)
    nominations: dict[str, Nomination] = field(default_factory=dict)
    # Domains held for head-of-queue gangs that waited too long (job key -> Reservation); pass
    # ``reservations`` back to the next ``run_session``, as nominations.
    reservations: dict[str, Reservation] = field(default_factory=dict)
    # Claims the session chose a PersistentVolume or a node for (claim key -> decision): what
    # the binder writes (kube-scheduler's VolumeBinding PreBind) before it binds their pods.
    volumes: dict[str, Decision] = field(default_factory=dict)
    # ResourceClaims the session allocated devices for (claim key -> allocation): what the
    # binder writes (kube-scheduler's DynamicResources PreBind: status.allocation and the pods
    # in reservedFor) before it binds their pods.
    claims: dict[str, ClaimAllocation] = field(default_factory=dict)
    # Hot spares per leaf: wanted, held, and pods placed on them (placement/spares.py).
    spares: SpareReport = field(default_factory=SpareReport)

    def own_job(self, key: str) -> JobOutcome:
        """The outcome of job ``key`` as this result's own copy, safe to change (outcomes of
        settled jobs are shared between results)."""
        o = self.jobs[key]
        mine = dataclasses.replace(
            o,
            subgroups=dict(o.subgroups),
            conditions=[dict(c) for c in o.conditions],
            relaxation=dict(o.relaxation) if o.relaxation is not None else None,
        )
        self.jobs[key] = mine
        return mine
