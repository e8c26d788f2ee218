"""Hierarchical DRF (``drf`` with ``enableHierarchy: true``), as Volcano's drf plugin has it.

Queues name their place in a tree with two annotations: ``volcano.sh/hierarchy`` (a path such
as ``root/eng/prod``) and ``volcano.sh/hierarchy-weights`` (one weight per level, ``1/2/8``).
Jobs are the leaves, under their queue's path. Every inner node's allocation is its children's
allocations *rescaled* to the smallest dominant share among its demanding children (a child
that got all it asked for, or that needs a resource nobody can have any more, is *saturated*
and is not rescaled), so a team that uses one resource heavily does not look larger than a
team using another resource lightly. Queues are then ordered top-down: at the first level where
their paths differ in standing, an unsaturated node before a saturated one, then the smaller
``share / weight``. Reclaim may take a task when, with the reclaimer's task added and that task
removed, the reclaimer's queue still comes first.

Pure bookkeeping over :class:`~scheduler_plugin.model.resources.Res`; the drf plugin feeds it the
jobs' allocations and asks it for queue order and reclaim verdicts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..model.resources import Res, share

HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"


@dataclass
class HNode:
    """A node of the hierarchy: a level of a queue path, or a job (a leaf, ``children`` None)."""

    name: str
    weight: float = 1.0
    children: dict[str, HNode] | None = field(default_factory=dict)
    allocated: Res = field(default_factory=Res)
    request: Res = field(default_factory=Res)  # a job's total request (leaves only)
    share: float = 0.0
    saturated: bool = False


def parse_path(hierarchy: str, weights: str) -> list[tuple[str, float]]:
    """The levels below the root of a queue's path with their weights (a weight below 1, missing
    or not a number counts as 1, as Volcano reads it)."""
    names = hierarchy.split("/")
    ws = weights.split("/")
    out: list[tuple[str, float]] = []
    for i in range(1, len(names)):
        try:
            w = float(ws[i]) if i < len(ws) else 1.0
        except ValueError:
            w = 1.0
        out.append((names[i], w if w >= 1 else 1.0))
    return out


def dominant_share(allocated: Res, total: Res) -> float:
    """The largest share of ``allocated`` over the cluster's resources."""
    return max((share(allocated.get(n), total.get(n)) for n in total.names()), default=0.0)


def _saturated(allocated: Res, request: Res, demanding: set[str]) -> bool:
    # Volcano's resourceSaturated: the job has all it asked of some resource, or asks for a
    # resource the cluster has handed out entirely.
    for n in allocated.names():
        a, r = allocated.get(n), request.get(n)
        if a != 0 and r != 0 and a >= r:
            return True
        if n not in demanding and r != 0:
            return True
    return False


@dataclass(frozen=True, eq=False)
class QueueRank:
    """A queue's standing per level of its path: (saturated, share / weight). Compared as
    Volcano's compareQueues: level by level over the shorter path, an unsaturated node first,
    then the smaller share/weight; equal on every shared level is equal (a queue is never
    ahead of its own parent's queue)."""

    levels: tuple[tuple[bool, float], ...]

    def compare(self, other: QueueRank) -> int:
        """-1, 0 or 1."""
        for (lsat, lv), (rsat, rv) in zip(self.levels, other.levels, strict=False):
            if lsat != rsat:
                return 1 if lsat else -1
            if lv != rv:
                return -1 if lv < rv else 1
        return 0

    def __lt__(self, other: object) -> bool:
        return isinstance(other, QueueRank) and self.compare(other) < 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueueRank) and self.compare(other) == 0

    __hash__ = None  # type: ignore[assignment]


class Hierarchy:
    """The HDRF tree of one session: built from every job at open, updated on each event."""

    def __init__(self, total: Res) -> None:
        self.total = total
        self.total_allocated = Res()
        self.root = HNode("root")
        self.leaf_of: dict[str, HNode] = {}  # job key -> its leaf
        self.paths: dict[str, list[str]] = {}  # queue -> names below the root

    def add_job(
        self, job: str, queue: str, path: list[tuple[str, float]], allocated: Res, request: Res
    ) -> None:
        """Put a job under its queue's path (creating the levels it needs)."""
        node = self.root
        for name, weight in path:
            assert node.children is not None
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = HNode(name, weight)
            node = child
        assert node.children is not None
        leaf = HNode(job, 1.0, None, allocated.clone(), request.clone())
        leaf.share = dominant_share(leaf.allocated, self.total)
        node.children[job] = leaf
        self.leaf_of[job] = leaf
        self.paths[queue] = [name for name, _ in path]
        self.total_allocated.add(allocated)

    def move(self, amounts: Mapping[str, Res], sign: int) -> None:
        """Jobs' allocations changed by ``amounts`` (added for sign > 0); recompute the tree."""
        for job, r in amounts.items():
            leaf = self.leaf_of.get(job)
            if leaf is None:
                continue
            if sign > 0:
                leaf.allocated.add(r)
                self.total_allocated.add(r)
            else:
                leaf.allocated.sub(r)
                self.total_allocated.sub(r)
            leaf.share = dominant_share(leaf.allocated, self.total)
        self.update()

    def update(self) -> None:
        """Recompute saturation, rescaled allocations and shares bottom-up (Volcano's
        ``updateHierarchicalShare`` from the root)."""
        demanding = {n for n in self.total.names() if self.total_allocated.get(n) < self.total.get(n)}
        self._update(self.root, demanding)

    def _update(self, node: HNode, demanding: set[str]) -> None:
        if node.children is None:
            node.saturated = _saturated(node.allocated, node.request, demanding)
            return
        mdr = 1.0
        for child in node.children.values():
            self._update(child, demanding)
            if child.share != 0 and not child.saturated:
                mdr = min(mdr, dominant_share(child.allocated, self.total))
        allocated = Res()
        saturated = True
        for child in node.children.values():
            saturated = saturated and child.saturated
            if child.share == 0:
                continue
            if child.saturated:
                allocated.add(child.allocated)
            else:
                allocated.add(child.allocated.clone().multi(mdr / child.share))
        node.allocated = allocated
        node.share = dominant_share(allocated, self.total)
        node.saturated = saturated

    def queue_key(self, queue: str) -> QueueRank:
        """Sort key of a queue: its standing per level from the root (see :class:`QueueRank`)."""
        node: HNode | None = self.root
        out: list[tuple[bool, float]] = []
        for name in ["", *self.paths.get(queue, [])]:
            if name:
                node = node.children.get(name) if node is not None and node.children is not None else None
            if node is None:
                break  # a queue with no job in the tree: nothing below to compare
            out.append((node.saturated, node.share / node.weight))
        return QueueRank(tuple(out))

    def clone(self) -> Hierarchy:
        """A deep copy (reclaim tries moves on it)."""
        return copy.deepcopy(self)

    def reclaimable(
        self,
        reclaimer: tuple[str, str, Res],
        reclaimees: Iterable[tuple[int, str, str, Res]],
    ) -> list[int]:
        """Indices of the reclaimees (``(index, job, queue, request)``) the reclaimer's queue may
        take: with the reclaimer's task added and the reclaimee's removed, the reclaimer's queue
        still orders first (Volcano's HDRF reclaimFn)."""
        job, queue, req = reclaimer
        tree = self.clone()
        tree.move({job: req}, +1)
        out: list[int] = []
        for i, rjob, rqueue, rreq in reclaimees:
            if rjob not in tree.leaf_of:
                continue
            tree.move({rjob: rreq}, -1)
            if tree.queue_key(queue) < tree.queue_key(rqueue):
                out.append(i)
            tree.move({rjob: rreq}, +1)
        return out


__all__ = [
    "HIERARCHY_ANNOTATION",
    "WEIGHTS_ANNOTATION",
    "HNode",
    "Hierarchy",
    "QueueRank",
    "dominant_share",
    "parse_path",
]
