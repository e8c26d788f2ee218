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
elastic part, fit the real capability) and reclaim victims (a queue above its deserved share
gives up tasks until it is back within it).

Resources use Volcano's units and rules (``api.Resource``): cpu in millicores, memory in bytes,
other scalar resources in thousandths, with a tolerance of 0.1 in comparisons, and with a missing
scalar dimension read as zero or as infinity depending on the comparison. Those rules decide edge
cases (a queue whose capability names no GPUs has no GPU limit), so they are kept exactly.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hyperplace.kube import milli_value

MIN_RESOURCE = 0.1
# Counted by every pod; Volcano never compares it.
IGNORED_SCALARS = frozenset({"pods"})
INFINITE = math.inf


class Missing(enum.Enum):
    """How a scalar dimension absent from one side of a comparison is read (Volcano's
    ``DimensionDefaultValue``)."""

    ZERO = 0
    INFINITY = -1


@dataclass
class Res:
    """Volcano's ``api.Resource``: cpu (milli), memory (bytes), scalars (milli).

    ``scalars is None`` and ``scalars == {}`` differ in a few of Volcano's operations, so the
    distinction is kept.
    """

    cpu: float = 0.0
    memory: float = 0.0
    scalars: dict[str, float] | None = None

    @classmethod
    def from_list(cls, rl: Mapping[str, str | int | float] | None) -> Res:
        """A ResourceList (``{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 8}``) as Volcano reads it."""
        r = cls()
        for name, q in (rl or {}).items():
            milli = milli_value(q)
            if name == "cpu":
                r.cpu += milli
            elif name == "memory":
                r.memory += math.ceil(milli / 1000)
            elif name == "pods":
                r.add_scalar(name, math.ceil(milli / 1000))
            elif name.startswith("count/"):
                continue
            else:
                r.add_scalar(name, milli)
        return r

    @classmethod
    def from_milli(cls, milli: Mapping[str, int]) -> Res:
        """From the scheduler's own form (every resource in milli-units, memory included)."""
        r = cls()
        for name, v in milli.items():
            if name == "cpu":
                r.cpu += v
            elif name == "memory":
                r.memory += v / 1000
            elif name == "pods":
                r.add_scalar(name, v / 1000)
            else:
                r.add_scalar(name, v)
        return r

    def clone(self) -> Res:
        return Res(self.cpu, self.memory, None if self.scalars is None else dict(self.scalars))

    def get(self, name: str) -> float:
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        return (self.scalars or {}).get(name, 0.0)

    def add_scalar(self, name: str, v: float) -> None:
        if self.scalars is None:
            self.scalars = {}
        self.scalars[name] = self.scalars.get(name, 0.0) + v

    def names(self) -> list[str]:
        """Dimensions holding at least the tolerance (``ResourceNames``)."""
        out = [n for n, v in (("cpu", self.cpu), ("memory", self.memory)) if v >= MIN_RESOURCE]
        out += [n for n, v in (self.scalars or {}).items() if v >= MIN_RESOURCE]
        return out

    def is_empty(self) -> bool:
        if not (self.cpu < MIN_RESOURCE and self.memory < MIN_RESOURCE):
            return False
        return all(v < MIN_RESOURCE for n, v in (self.scalars or {}).items() if n not in IGNORED_SCALARS)

    def add(self, o: Res) -> Res:
        self.cpu += o.cpu
        self.memory += o.memory
        for n, v in (o.scalars or {}).items():
            self.add_scalar(n, v)
        return self

    def sub(self, o: Res) -> Res:
        """Subtract without Volcano's assertion (callers check sufficiency where it matters)."""
        self.cpu -= o.cpu
        self.memory -= o.memory
        if self.scalars is not None:
            for n, v in (o.scalars or {}).items():
                self.scalars[n] = self.scalars.get(n, 0.0) - v
        return self

    def multi(self, ratio: float) -> Res:
        self.cpu *= ratio
        self.memory *= ratio
        if self.scalars is not None:
            self.scalars = {n: v * ratio for n, v in self.scalars.items()}
        return self

    def less_equal(self, o: Res, missing: Missing) -> bool:
        """Every dimension of self <= o, within the tolerance (``LessEqual``)."""

        def le(a: float, b: float) -> bool:
            return a < b or abs(a - b) < MIN_RESOURCE

        if not le(self.cpu, o.cpu) or not le(self.memory, o.memory):
            return False
        mine = self.scalars or {}
        theirs = o.scalars or {}
        if missing is Missing.INFINITY and any(n not in mine for n in theirs):
            return False
        for n, v in mine.items():
            if n not in theirs:
                if missing is Missing.INFINITY:
                    continue
                if not le(v, 0.0):
                    return False
            elif not le(v, theirs[n]):
                return False
        return True

    def less_equal_on(self, o: Res | None, req: Res) -> tuple[bool, list[str]]:
        """self <= o on the dimensions ``req`` asks for (``LessEqualWithDimensionAndResourcesName``);
        the second item names the short dimensions."""
        if o is None:
            return False, self.names()
        short: list[str] = []
        if req.cpu > 0 and self.cpu > o.cpu:
            short.append("cpu")
        if req.memory > 0 and self.memory > o.memory:
            short.append("memory")
        if self.scalars is None:
            return not short, short
        for n, q in (req.scalars or {}).items():
            if n in IGNORED_SCALARS:
                continue
            if q > 0 and self.scalars.get(n, 0.0) > (o.scalars or {}).get(n, 0.0):
                short.append(n)
        return not short, short

    def min_dimension(self, o: Res, missing: Missing) -> Res:
        """Lower each dimension of self to o's (``MinDimensionResource``); in place."""
        self.cpu = min(self.cpu, o.cpu)
        self.memory = min(self.memory, o.memory)
        if self.scalars is None:
            return self
        if o.scalars is None:
            if missing is Missing.ZERO:
                self.scalars = dict.fromkeys(self.scalars, 0.0)
            return self
        for n, v in list(self.scalars.items()):
            if n in o.scalars:
                self.scalars[n] = min(v, o.scalars[n])
            elif missing is Missing.ZERO:
                self.scalars[n] = 0.0
        return self

    def diff(self, o: Res, missing: Missing) -> tuple[Res, Res]:
        """(increase, decrease) from o to self, per dimension (``Diff``)."""
        left, right = self.clone(), o.clone()
        ls, rs = left.scalars or {}, right.scalars or {}
        default = float(missing.value)
        for n in list(ls):
            rs.setdefault(n, default)
        for n in list(rs):
            ls.setdefault(n, default)
        inc, dec = Res(scalars={}), Res(scalars={})
        if left.cpu > right.cpu:
            inc.cpu = left.cpu - right.cpu
        else:
            dec.cpu = right.cpu - left.cpu
        if left.memory > right.memory:
            inc.memory = left.memory - right.memory
        else:
            dec.memory = right.memory - left.memory
        assert inc.scalars is not None and dec.scalars is not None
        for n, lv in ls.items():
            rv = rs.get(n, 0.0)
            if lv == float(Missing.INFINITY.value):
                inc.scalars[n] = lv
            elif rv == float(Missing.INFINITY.value):
                dec.scalars[n] = rv
            elif lv > rv:
                inc.scalars[n] = lv - rv
            else:
                dec.scalars[n] = rv - lv
        return inc, dec

    def equal(self, o: Res) -> bool:
        """Exact equality, as ``equality.Semantic.DeepEqual`` compares two resources."""
        return self.cpu == o.cpu and self.memory == o.memory and self.scalars == o.scalars

    def __str__(self) -> str:
        def f(v: float) -> str:
            return "inf" if v == INFINITE else f"{v:.2f}"

        parts = [f"cpu {f(self.cpu)}", f"memory {f(self.memory)}"]
        parts += [f"{n} {f(v)}" for n, v in sorted((self.scalars or {}).items())]
        return ", ".join(parts)


def exceeded_part(left: Res, right: Res | None) -> Res:
    """What of ``left`` is above ``right``, per dimension (``ExceededPart``)."""
    if right is None:
        return left
    return left.diff(right, Missing.ZERO)[0]


def res_max(a: Res, b: Res) -> Res:
    """The larger of each dimension (``helpers.Max``); negative scalars are dropped."""
    out = Res(max(a.cpu, b.cpu), max(a.memory, b.memory))
    if a.scalars is None and b.scalars is None:
        return out
    out.scalars = {n: v for n, v in (a.scalars or {}).items() if v >= 0}
    for n, v in (b.scalars or {}).items():
        if v >= 0:
            out.scalars[n] = max(v, out.scalars.get(n, 0.0))
    return out


def share(allocated: float, deserved: float) -> float:
    """``helpers.Share``: allocated / deserved, with 0/0 = 0 and x/0 = 1."""
    if deserved == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / deserved


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


def reclaimable(a_of: Mapping[str, QueueShare], reclaimees: Iterable[tuple[str, Res]]) -> list[int]:
    """Indices of the ``(queue, request)`` reclaimees that may be taken: a queue gives up tasks,
    in the order given, while it holds more than its deserved share."""
    allocations: dict[str, Res] = {}
    victims: list[int] = []
    for i, (queue, req) in enumerate(reclaimees):
        a = a_of.get(queue)
        if a is None:
            continue
        allocated = allocations.setdefault(queue, a.allocated.clone())
        if not allocated.less_equal(a.deserved, Missing.ZERO):
            allocated.sub(req)
            victims.append(i)
    return victims
