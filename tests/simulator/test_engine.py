"""Engine details the CLI does not show directly: progress reports, cycles, simulated time."""

from __future__ import annotations

from pathlib import Path

from simulator.engine import Simulation, simulate
from simulator.loader import load_paths

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Recorder:
    def __init__(self) -> None:
        self.phases: list[tuple[str, int | None]] = []
        self.advanced = 0

    def start(self, description: str, total: int | None) -> None:
        self.phases.append((description, total))

    def advance(self, n: int = 1) -> None:
        self.advanced += n


def test_progress_is_reported_per_phase():
    inputs = load_paths([EXAMPLES / "volcano-e2e"])
    rec = Recorder()
    result = simulate(inputs, progress=rec)
    assert rec.phases[0] == ("admission", len(inputs.objects))
    assert ("cycle 1: controllers", None) in rec.phases
    assert any(d.startswith("cycle 1: scheduling") for d, _ in rec.phases)
    assert rec.advanced >= len(inputs.objects)
    assert result.cycles >= 1


def test_bound_pods_stay_bound_and_time_is_simulated():
    inputs = load_paths([EXAMPLES / "volcano-e2e"])
    sim = Simulation(inputs)
    result = sim.run(cycles=3)
    assert result.cycles == 3
    # Everything that could be bound was bound in the first cycle; later cycles keep it.
    assert set(result.bound_in_cycle.values()) == {1}
    # No wall-clock time leaks into the output: every timestamp comes from the simulated clock.
    stamps: list[str] = []

    def collect(v: object) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("lastTransitionTime", "creationTimestamp") and isinstance(x, str):
                    stamps.append(x)
                else:
                    collect(x)
        elif isinstance(v, list):
            for x in v:
                collect(x)

    collect(list(result.objects.values()))
    assert stamps and all(s.startswith(("2025-01-01T", "2025-01-02T")) for s in stamps)


def test_default_run_stops_when_a_cycle_changes_nothing():
    result = simulate(load_paths([EXAMPLES / "volcano-e2e"]))
    assert 2 <= result.cycles < 10
