"""Queue shares as Volcano's ``proportion`` plugin computes them: pure, no I/O.

A queue's *deserved* share is found by water-filling: every round, the capacity not yet handed
out is split among the queues still hungry in proportion to their weights; a queue's share is
then capped by its real capability (its ``capability``, and never more than the cluster less the
other queues' guarantees), by what it requests (allocated plus pending), and raised to its
``guarantee``. A queue stops taking part once it has all it requests or its share stops growing.
The leftover of capped queues goes round again until nothing is left or nothing changes.

From the deserved shares follow the plugin's verdicts: queue order (priority, then the dominant
share ``allocated / deserved``), *overused* (``deserved <= allocated``), *allocatable* (a task may
be placed while its queue stays within deserved, on the dimensions the task asks for),
*enqueueable* (a PodGroup's minResources plus what the queue holds and has admitted, less its
elastic part, fit the real capability).

Resources are :class:`~scheduler_plugin.model.resources.Res`, with Volcano's units and rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..model.resources import INFINITE, Missing, Res, exceeded_part, res_max, share


@dataclass
class QueueDemand:
    """What the proportion plugin knows of one queue at session open."""

    name: str
    weight: int = 1
    priority: int = 0
    state: str = "Open"
    capability: Res | None = None
    guarantee: Res | None = None
    allocated: Res = field(default_factory=Res)  # tasks in an allocated status
    request: Res = field(default_factory=Res)  # allocated + pending tasks
    inqueue: Res = field(default_factory=Res)  # admitted (Inqueue) jobs' minResources not yet allocated
    elastic: Res = field(default_factory=Res)  # allocated beyond jobs' minimums


@dataclass
class QueueShare:
    """A queue's attributes after the proportion computation (Volcano's ``queueAttr``)."""

    name: str
    weight: int
    priority: int
    state: str
    deserved: Res
    allocated: Res
    request: Res
    inqueue: Res
    elastic: Res
    capability: Res | None
    real_capability: Res
    guarantee: Res
    share: float = 0.0

    def update_share(self) -> None:
        self.share = max(
            (share(self.allocated.get(n), self.deserved.get(n)) for n in self.deserved.names()), default=0.0
        )


def compute_shares(
    total: Res, queues: Iterable[QueueDemand], total_guarantee: Res | None = None
) -> dict[str, QueueShare]:
    """Deserved shares of the queues that have jobs, by Volcano's water-filling (``proportion``).

    ``total`` is the cluster's allocatable resource. Only queues given here take part (Volcano
    considers the queues of the session's jobs); the guarantees of every queue of the cluster
    (``total_guarantee``; by default those of ``queues``) are set aside first.
    """
    queues = list(queues)
    if total_guarantee is None:
        total_guarantee = Res()
        for q in queues:
            if q.guarantee is not None:
                total_guarantee.add(q.guarantee)
    attrs: dict[str, QueueShare] = {}
    for q in queues:
        capability: Res | None = None
        if q.capability is not None:
            capability = q.capability.clone()
            # An unset cpu or memory limit means none.
            if capability.cpu <= 0:
                capability.cpu = INFINITE
            if capability.memory <= 0:
                capability.memory = INFINITE
        guarantee = q.guarantee.clone() if q.guarantee is not None else Res()
        real = exceeded_part(total, total_guarantee).add(guarantee)
        if capability is not None:
            real.min_dimension(capability, Missing.INFINITY)
        attrs[q.name] = QueueShare(
            name=q.name,
            weight=q.weight,
            priority=q.priority,
            state=q.state,
            deserved=Res(),
            allocated=q.allocated.clone(),
            request=q.request.clone(),
            inqueue=q.inqueue.clone(),
            elastic=q.elastic.clone(),
            capability=capability,
            real_capability=real,
            guarantee=guarantee,
        )

    remaining = total.clone()
    meet: set[str] = set()
    while True:
        total_weight = sum(a.weight for a in attrs.values() if a.name not in meet)
        if total_weight == 0:
            break
        old_remaining = remaining.clone()
        increased, decreased = Res(), Res()
        for a in attrs.values():
            if a.name in meet:
                continue
            old = a.deserved.clone()
            a.deserved.add(remaining.clone().multi(a.weight / total_weight))
            a.deserved.min_dimension(a.real_capability, Missing.INFINITY)
            a.deserved.min_dimension(a.request, Missing.ZERO)
            a.deserved = res_max(a.deserved, a.guarantee)
            a.update_share()
            if a.request.less_equal(a.deserved, Missing.ZERO) or a.deserved.equal(old):
                meet.add(a.name)
            inc, dec = a.deserved.diff(old, Missing.ZERO)
            increased.add(inc)
            decreased.add(dec)
        remaining = exceeded_part(remaining.clone().add(decreased), increased)
        if remaining.is_empty() or remaining.equal(old_remaining):
            break
    return attrs


def queue_order_key(a: QueueShare) -> tuple[int, float]:
    """Higher priority first, then the smaller dominant share."""
    return (-a.priority, a.share)


def overused(a: QueueShare) -> bool:
    """A queue at or above its deserved share takes nothing more in this session."""
    return a.deserved.less_equal(a.allocated, Missing.ZERO)


def allocatable(a: QueueShare, request: Res) -> tuple[bool, list[str]]:
    """May tasks asking ``request`` in total be placed in queue ``a``? (Open, and within deserved
    on the dimensions they ask for.) The second item names what is short."""
    if a.state != "Open":
        return False, [f"queue {a.name} is {a.state}"]
    future = a.allocated.clone().add(request)
    ok, short = future.less_equal_on(a.deserved, request)
    return ok, short


def enqueueable(a: QueueShare, min_resources: Res | None) -> tuple[bool, str]:
    """May a PodGroup with these minResources move to Inqueue in queue ``a``? The text is the
    reason when it may not (Volcano's "queue resource quota insufficient" wording)."""
    if a.state != "Open":
        return False, f"queue {a.name} is {a.state}, not Open"
    if min_resources is None:
        return True, ""
    want = min_resources.clone().add(a.allocated).add(a.inqueue).sub(a.elastic)
    ok, short = want.less_equal_on(a.real_capability, min_resources)
    if ok:
        return True, ""
    return False, "queue resource quota insufficient: insufficient " + ", ".join(short)
