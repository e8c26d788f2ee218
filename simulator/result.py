"""What a simulation gives back: the cluster as the last cycle left it and what happened on
the way (:class:`SimResult`), the objects admission refused (:class:`Rejection`), and the
error raised when a simulation cannot run at all (:class:`SimulationError`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .store import Key


class SimulationError(Exception):
    """The simulation cannot run (for example an unreadable scheduler configuration)."""


@dataclass
class Rejection:
    """An object admission refused."""

    kind: str
    namespace: str | None
    name: str
    message: str
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``rejected[]`` entry of the JSON output."""
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "message": self.message}

    def line(self) -> str:
        """``<Kind> [<namespace>/]<name>: <message>`` (the validate format)."""
        ref = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {ref}: {self.message}"


@dataclass
class SimResult:
    """Everything the outputs need after the last cycle."""

    objects: dict[Key, dict[str, Any]]
    bindings: dict[str, str]  # "ns/pod" -> node, this run only, in binding order
    bound_in_cycle: dict[str, int]
    evictions: list[str]
    rejected: list[Rejection]
    warnings: list[str]
    created: list[Key]
    updated: list[Key]
    outcomes: dict[str, Any]  # "ns/podgroup" -> the scheduler's last JobOutcome for it
    unschedulable: dict[str, str]  # "ns/pod" -> reason, from the last session that tried it
    cycles: int
    scheduler_ran: bool
    notes: list[str] = field(default_factory=list)  # what the scheduler said about its configuration
    # preempt/reclaim: every eviction of the run (victim, node, preemptor, reason) in order, and
    # per preemptor job why its domain and victims were chosen.
    preemptions: list[Any] = field(default_factory=list)
    preemption_reasons: dict[str, str] = field(default_factory=dict)
    snapshot: Any = None  # the last ClusterSnapshot (its .tree is the scheduler's view)
    session: Any = None  # the last SessionResult
    config: Any = None  # the SchedulerConfig the sessions ran with
    clock: float | None = None  # the last session's time (epoch seconds)
    # The HyperNodes' models as the run left them (specs; parsed once per spec in the run), in
    # object order; None when not given, and readers parse ``objects`` themselves.
    hypernodes: list[Any] | None = None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for k, o in self.objects.items() if k[0] == kind]

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace or "", name))
