"""Kubernetes resource quantities ("500m", "8Gi", "1e3", 4) as exact values.

kubernetes-asyncio has no quantity helper; this follows apimachinery's
``resource.Quantity`` grammar (decimal SI, binary SI and decimal exponent suffixes).
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)


# Fast path: a plain non-negative integer with an integral suffix ("8", "64", "16Gi", "500m",
# "110k"), which is what Node allocatable and almost every pod request look like. Its milli
# value is an integer product, equal to the exact Fraction route below.
_INTEGRAL = re.compile(r"([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE])?")
_MILLI_FACTOR: dict[str | None, int] = {
    None: 1000,
    "m": 1,
    **{s: 1000 * f for s, f in _BINARY.items()},
    **{s: 1000 * int(f) for s, f in _DECIMAL.items() if f >= 1 and s},
}
# Clusters repeat a handful of quantity strings across thousands of nodes and pods, so exact
# results for strings are cached (a bounded LRU: the values are immutable).
_CACHE_SIZE = 4096


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: int | float | str) -> Fraction:
    """Exact value of a quantity. Raises QuantityError with the offending text."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or string, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity {value!r} is not finite")
        return Fraction(Decimal(repr(value)))
    return _parse_text(str(value))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _parse_text(value: str) -> Fraction:
    text = value.strip()
    m = _QUANTITY.match(text)
    if not m:
        raise QuantityError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}"
        )
    try:
        num = Fraction(Decimal(m.group("num")))
    except InvalidOperation as exc:  # pragma: no cover - the regex already guards this
        raise QuantityError(f"invalid quantity {value!r}") from exc
    suffix = m.group("suffix") or ""
    if suffix in _BINARY:
        return num * _BINARY[suffix]
    if suffix in _DECIMAL:
        return num * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > 30:
        raise QuantityError(f"quantity {value!r} exponent out of range")
    return num * Fraction(10) ** exponent


def milli_value(value: int | float | str) -> int:
    """The quantity in thousandths, rounded up like ``Quantity.MilliValue()``.

    The scheduler keeps every resource (cpu, memory, GPUs, ...) as integer milli-units.
    """
    if type(value) is int:
        return value * 1000
    if isinstance(value, str):
        return _milli_of_text(value)
    return math.ceil(parse_quantity(value) * 1000)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _milli_of_text(value: str) -> int:
    m = _INTEGRAL.fullmatch(value)
    if m is not None:
        return int(m.group(1)) * _MILLI_FACTOR[m.group(2)]
    return math.ceil(_parse_text(value) * 1000)


def format_milli(resource: str, milli: int) -> str:
    """A human form of a milli-valued resource: ``cpu`` as cores, ``memory`` in Gi/Mi."""
    if resource == "memory" or resource.startswith("ephemeral-storage") or resource.startswith("hugepages-"):
        b = milli // 1000
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if (b >= size and b % (size // 1024 if size > 1024 else 1) == 0) or b >= size:
                v = b / size
                return f"{v:g}{unit}" if v == int(v) else f"{v:.1f}{unit}"
        return str(b)
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"
