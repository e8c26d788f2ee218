"""Statement: tentative allocations committed or discarded as a unit (Volcano's framework.Statement).

Allocations are applied to the session state immediately (so later decisions in the same
dry run see them, as in Volcano) and undone in one vectorised step on :meth:`discard`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..job_info import TaskInfo

if TYPE_CHECKING:
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
        shapes = [self.ssn.snap.shapes[t.shape] for t in tasks]
        self.ssn.state.apply(shapes, nodes, +1)
        for t, n in zip(tasks, nodes, strict=True):
            self.ssn.placed[t.key] = n
            self.ops.append((t, n))

    def discard(self) -> None:
        """Undo every allocation of this statement."""
        if self.ops:
            tasks = [t for t, _ in self.ops]
            nodes = [n for _, n in self.ops]
            self.ssn.state.apply([self.ssn.snap.shapes[t.shape] for t in tasks], nodes, -1)
            for t in tasks:
                self.ssn.placed.pop(t.key, None)
        self.ops = []
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
            tasks = [t for t, _ in tail]
            nodes = [n for _, n in tail]
            self.ssn.state.apply([self.ssn.snap.shapes[t.shape] for t in tasks], nodes, -1)
            for t in tasks:
                self.ssn.placed.pop(t.key, None)
            del self.ops[mark:]
