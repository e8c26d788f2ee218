"""Times and durations read and written as Kubernetes and Go do."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hyperplace.api.times import micro_time, parse_go_duration, parse_rfc3339, rfc3339


def test_rfc3339_round_trips_at_second_precision() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00Z"
    assert parse_rfc3339("2026-01-01T00:01:30Z") == parse_rfc3339("2026-01-01T00:00:00Z") + 90  # type: ignore[operator]
    when = datetime(2026, 11, 26, 7, 38, 13, 500_000, tzinfo=UTC)
    assert rfc3339(when) == "2026-11-26T07:38:13Z"
    assert parse_rfc3339(rfc3339(when.timestamp())) == 1795678693.0
    assert micro_time(when) == "2026-11-26T07:38:13.500000Z"


def test_unreadable_or_missing_times_are_none() -> None:
    assert parse_rfc3339(None) is None and parse_rfc3339("") is None
    assert parse_rfc3339("yesterday") is None
    assert parse_rfc3339("2026-01-01T02:00:00+02:00") == parse_rfc3339("2026-01-01T00:00:00Z")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10m", 600), ("1h30m", 5400), ("1.5h", 5400), ("250ms", 0.25), ("0", 0), ("-2s", -2), ("1µs", 1e-6)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "ten minutes", "1h 30m", "m", "1d"])
def test_malformed_go_durations_are_refused_naming_the_text(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)
