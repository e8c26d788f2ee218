"""Volcano's ``api.Resource``: the resource arithmetic every queue rule is written in.

Resources use Volcano's units and rules: cpu in millicores, memory in bytes, other scalar
resources in thousandths, with a tolerance of 0.1 in comparisons, and with a missing scalar
dimension read as zero or as infinity depending on the comparison. Those rules decide edge
cases (a queue whose capability names no GPUs has no GPU limit), so they are kept exactly.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

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
