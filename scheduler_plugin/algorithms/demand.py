"""What a unit of pods asks of a domain: pods per shape, and its partition classes.

One rule for the domain search (allocate), victim planning (preempt, reclaim) and the text of
what a domain lacks: a group is *atomic* when all its pods go together (a gang minimum, a
partition) and *loose* when as many as fit may go; a single-shape atomic group whose own hard
tier limit is set forms a *partition class* ``(shape, tier limit, size)``, whose partitions must
each fit inside one domain of that tier or lower.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ..model.jobs import SubJobInfo

# (shape, tier limit, partition size)
PartitionClass = tuple[int, int, int]


class UnitGroup(Protocol):
    """What the algorithms need of one group of a unit (the actions' ``Group``)."""

    subjob: SubJobInfo
    atomic: bool

    def demand(self) -> dict[int, int]:
        """Pods per shape."""
        ...


def partition_class(group: UnitGroup) -> PartitionClass | None:
    """The partition class of ``group`` (see the module docstring), or None."""
    topo = group.subjob.topology
    if not group.atomic or topo is None or topo.mode != "hard" or topo.limit is None:
        return None
    d = group.demand()
    if len(d) != 1:
        return None
    sid, k = next(iter(d.items()))
    return (sid, topo.limit, k)


@dataclass
class Demand:
    """Pods per shape of the atomic groups and of the loose ones, and partition classes."""

    total: dict[int, int]
    classes: dict[PartitionClass, int]  # -> partitions of that class
    loose: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, groups: Iterable[UnitGroup]) -> Demand:
        """The demand of ``groups`` (see the module docstring)."""
        out = cls({}, {}, {})
        for g in groups:
            into = out.total if g.atomic else out.loose
            for sid, k in g.demand().items():
                into[sid] = into.get(sid, 0) + k
            key = partition_class(g)
            if key is not None:
                out.classes[key] = out.classes.get(key, 0) + 1
        return out
