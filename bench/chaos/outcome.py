"""What one chaos run saw: its violations (and which of them a user would see), its counts, and
a line to print for it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Invariants a user would see (what each means: invariants.py). ``exited`` (a process stopped on
# its own, e.g. --verify-state found a drift) and ``hang`` (the harness's wall budget) are failures
# of a run, never a catch.
USER_VISIBLE = frozenset(
    (
        "overcommit",
        "partial",
        "stuck",
        "lost",
        "double-bind",
        "topology",
        "unexplained",
        "starved",
        "spinning",
        "recovered",
        "escaped",
    )
)


@dataclass(frozen=True)
class Violation:
    """An invariant seen broken at virtual time ``at``, in the words a user would be told."""

    at: float
    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"t={self.at:7.2f}s {self.invariant}: {self.detail}"


@dataclass
class Outcome:
    """What one run saw."""

    seed: int
    violations: list[Violation]
    jobs: int = 0
    placed: int = 0
    explained: int = 0
    events: Counter[str] = field(default_factory=Counter)
    virtual_seconds: float = 0.0
    wall_seconds: float = 0.0
    longest_partial: float = 0.0  # the longest a gang stayed partly bound, virtual seconds
    longest_idle: float = 0.0  # the longest a waiting gang with room saw nothing happen
    # The longest a gang hit by a node death waited with room, past its release (``recovered``),
    # and, per gang that ran whole again, the seconds from the death to that.
    longest_unrecovered: float = 0.0
    recoveries: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def caught(self) -> list[Violation]:
        """The violations a user would see (what scores a mutation)."""
        return [v for v in self.violations if v.invariant in USER_VISIBLE]


def describe(out: Outcome) -> str:
    """One line per run: the seed, what happened, and the first violations."""
    faults = ", ".join(f"{k} {v}" for k, v in sorted(out.events.items()))
    head = f"seed {out.seed}: {out.jobs} jobs, {out.placed} placed, {out.explained} explained; {faults}"
    return "\n  ".join([head, *map(str, out.violations[:5])])
