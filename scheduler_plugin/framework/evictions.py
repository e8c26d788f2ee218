"""What the eviction actions (``preempt``, ``reclaim``, the ``repair`` step) decided in one session.

Kept apart from the session so the pure victim choice (``scheduler_plugin.placement.victim_search``), the
session result and the runtime share one small vocabulary without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The word for what a preemptor does, by eviction action: its Event's reason and its PodGroup
# condition's while its victims leave.
ACTION_REASONS = {"preempt": "Preempting", "reclaim": "Reclaiming", "repair": "Repairing"}


@dataclass(frozen=True)
class Eviction:
    """One victim pod, who takes its place and why."""

    victim: str  # "ns/pod"
    node: str
    victim_job: str  # "ns/podgroup"
    preemptor: str  # job key of the gang that takes the room
    action: str  # "preempt", "reclaim" or "repair" (ACTION_REASONS)
    reason: str  # one line for the event and the pod condition


@dataclass
class Nomination:
    """Room held for a preemptor gang while its victims terminate (Volcano's pipelined tasks /
    ``nominatedNodeName``): the scheduler keeps it across cycles and binds the pods on these
    nodes once the victims are gone."""

    job: str
    pods: dict[str, str]  # "ns/pod" -> node name
    victims: tuple[str, ...] = ()
    action: str = "preempt"
    domain: str | None = None  # HyperNode the gang was placed in, when it has topology
    reason: str = ""


@dataclass
class EvictionLedger:
    """Per-session record: evictions decided, nominations held or made, pods already leaving."""

    evictions: list[Eviction] = field(default_factory=list)
    nominations: dict[str, Nomination] = field(default_factory=dict)  # job key -> nomination
    # Pods that are no longer there for this session's decisions: victims chosen in this session
    # and victims of earlier nominations still terminating (never chosen twice).
    gone: set[str] = field(default_factory=set)
    # Jobs whose nomination was bound in this session (victims gone).
    bound: set[str] = field(default_factory=set)
