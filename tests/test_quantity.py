"""Quantity parsing: the integer fast path and the string cache give the exact Fraction results."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from hyperplace.kube import milli_value, parse_quantity
from hyperplace.kube import quantity as q


def exact_milli(text: str) -> int:
    """The regex + Fraction route, bypassing the fast path and the caches."""
    return math.ceil(q._parse_text.__wrapped__(text) * 1000)


SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "e3", "E-2"]
NUMBERS = ["0", "1", "8", "007", "64", "110", "1.5", "0.1", ".5", "2.", "+3", "-1", "123456789012"]


@pytest.mark.parametrize(("num", "suffix"), list(itertools.product(NUMBERS, SUFFIXES)))
def test_milli_value_of_a_string_equals_the_exact_fraction_route(num: str, suffix: str) -> None:
    text = num + suffix
    assert milli_value(text) == exact_milli(text)
    assert milli_value(text) == milli_value(text)  # cached: same answer again


def test_integers_and_floats_keep_their_exact_values() -> None:
    assert milli_value(8) == 8000
    assert milli_value(0) == 0
    assert milli_value(-2) == -2000
    assert milli_value(2**70) == 2**70 * 1000
    assert milli_value(0.1) == 100
    assert milli_value(1e-4) == 1  # rounded up like Quantity.MilliValue()
    assert parse_quantity("1.5Gi") == Fraction(3, 2) * 2**30
    assert parse_quantity(" 16Gi ") == 16 * 2**30


def test_fractional_milli_values_round_up() -> None:
    assert milli_value("1n") == 1
    assert milli_value("1500u") == 2
    assert milli_value("0.5m") == 1


@pytest.mark.parametrize("bad", ["", "abc", "1Gb", "1..2", "Gi", "1 Gi", "1e99", True])
def test_invalid_quantities_still_raise(bad: object) -> None:
    with pytest.raises(q.QuantityError):
        milli_value(bad)  # type: ignore[arg-type]
    with pytest.raises(q.QuantityError):
        milli_value(bad)  # type: ignore[arg-type]  # errors are not cached as values
