"""Statement: tentative allocations committed or discarded as a unit (Volcano's framework.Statement).

Allocations are applied to the session state immediately (so later decisions in the same
dry run see them, as in Volcano) and undone in one vectorised step on :meth:`discard`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model.jobs import TaskInfo
from .session import Session


class Statement:
    """A list of (task, node) allocations that succeed or fail together."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[tuple[TaskInfo, int]] = []
        self.closed = False

    def allocate(self, tasks: Sequence[TaskInfo], nodes: Sequence[int]) -> None:
        """Allocate ``tasks[i]`` on ``nodes[i]`` (resources, host ports, counts, HyperNode sums)."""
        if not tasks:
            return
        self.ssn.state.apply([t.shape for t in tasks], nodes, +1)
        self.ssn.mark_placed_many(list(tasks), list(nodes))
        self.ops.extend(zip(tasks, nodes, strict=True))

    def discard(self) -> None:
        """Undo every allocation of this statement."""
        self.rollback(0)
        self.closed = True

    def commit(self) -> None:
        """Make the allocations final: they become bindings in the session result."""
        for t, n in self.ops:
            self.ssn.bindings[t.key] = n
        self.closed = True

    def mark(self) -> int:
        """A position to roll back to with :meth:`rollback`."""
        return len(self.ops)

    def rollback(self, mark: int) -> None:
        """Undo the allocations made after ``mark``."""
        tail = self.ops[mark:]
        if tail:
            self.ssn.state.apply([t.shape for t, _ in tail], [n for _, n in tail], -1)
            for t, _ in tail:
                self.ssn.unmark_placed(t)
            del self.ops[mark:]
