"""Times and durations as Kubernetes and Go write them: metav1.Time (RFC 3339, seconds, UTC)
and Go's ``time.ParseDuration`` strings (``1h30m``, ``500ms``).

Wire formats, so they sit with the API models at the bottom of ``hyperplace``: the grammar of
our own annotations (``relax.py``) reads Go durations, and everything above reads times."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def rfc3339(when: float | datetime | None = None) -> str:
    """``when`` (epoch seconds or a datetime; now when None) in metav1.Time's wire format,
    ``2026-11-26T07:38:13Z``."""
    if when is None:
        when = datetime.now(UTC)
    elif not isinstance(when, datetime):
        when = datetime.fromtimestamp(when, UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(when: datetime | None = None) -> str:
    """``when`` (now when None) in metav1.MicroTime's wire format (Lease renew times)."""
    return (when or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str | None) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (a time without a zone is UTC); None when
    ``text`` is empty or malformed."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration (``"10m"``, ``"1h30m"``, ``"1.5h"``, ``"-2s"``, ``"0"``), as
    ``time.ParseDuration`` reads it; ValueError naming the text when it is malformed."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    if s[:1] in ("+", "-"):
        s = s[1:]
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"invalid duration {text!r}")
    return sign * total
