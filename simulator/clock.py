"""Simulated time: the clock a simulation's components read, and wall-clock times frozen.

Components that stamp times get ``now`` from a clock that advances per cycle and controller
round, and any wall-clock timestamp they produce anyway is replaced by the simulated one, so
two runs on the same input give the same output.
"""

from __future__ import annotations

from typing import Any

from hyperplace.api.times import parse_rfc3339

from .loader import SIM_EPOCH, sim_time
from .result import SimulationError

# Keys whose values are timestamps; see the module docstring.
TIME_KEYS = frozenset(
    {"lastTransitionTime", "creationTimestamp", "lastUpdateTime", "lastProbeTime", "lastHeartbeatTime"}
)

# The simulated clock: cycle c, controller round r happen at BASE + c*CYCLE + r seconds.
CLOCK_BASE = 86_400
CLOCK_CYCLE = 600


class SimClock:
    """The simulated time of cycle :attr:`cycle`, controller round :attr:`round` (the conductor
    moves both), and every simulated time handed out so far."""

    def __init__(self, *, now: str | None = None, elapsed: float = 0.0) -> None:
        """``now``: the time (RFC 3339) the scheduler's clock reads in cycle 1 (None: the
        scheduler runs without a clock); ``elapsed``: seconds added to the scheduler's clock."""
        self.cycle = 0
        self.round = 0
        self.elapsed = elapsed
        self.known_times: set[str] = set()
        self._shift: float | None = None  # None: the scheduler runs without a clock
        if now is not None:
            t = parse_rfc3339(now)
            if t is None:
                raise SimulationError(f"--now: not an RFC 3339 time: {now!r}")
            self._shift = t - (SIM_EPOCH.timestamp() + CLOCK_BASE + CLOCK_CYCLE)

    @property
    def now(self) -> str:
        """The simulated now, RFC 3339 (remembered as a simulated time)."""
        t = sim_time(CLOCK_BASE + self.cycle * CLOCK_CYCLE + self.round)
        self.known_times.add(t)
        return t

    @property
    def given(self) -> bool:
        """Whether the scheduler has a clock (``--now``): reservations need one."""
        return self._shift is not None

    def scheduler_clock(self) -> float:
        """The session's time in epoch seconds: the simulated now, shifted by ``--now`` and
        ``elapsed``."""
        shift = (self._shift or 0.0) + self.elapsed
        return SIM_EPOCH.timestamp() + CLOCK_BASE + self.cycle * CLOCK_CYCLE + self.round + shift

    def freeze_times(self, value: Any) -> Any:
        """Replace wall-clock timestamps another component produced by the simulated now."""
        if isinstance(value, dict):
            for k, v in value.items():
                if k in TIME_KEYS and isinstance(v, str) and v not in self.known_times:
                    value[k] = self.now
                else:
                    self.freeze_times(v)
        elif isinstance(value, list):
            for v in value:
                self.freeze_times(v)
        return value

    def collect_times(self, value: Any) -> None:
        """Remember the timestamps of an input object as simulated times (kept as given)."""
        if isinstance(value, dict):
            for k, v in value.items():
                if k in TIME_KEYS and isinstance(v, str):
                    self.known_times.add(v)
                else:
                    self.collect_times(v)
        elif isinstance(value, list):
            for v in value:
                self.collect_times(v)


def strip_times(value: Any) -> Any:
    """``value`` without its timestamps, to compare two states for what matters."""
    if isinstance(value, dict):
        return {k: strip_times(v) for k, v in value.items() if k not in TIME_KEYS}
    if isinstance(value, list):
        return [strip_times(v) for v in value]
    return value
