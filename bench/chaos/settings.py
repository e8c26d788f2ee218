"""What a chaos run is given: how long it lasts, how often faults strike, the cluster it draws,
and how patient the invariants are (virtual seconds)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """How long a run lasts and how patient the invariants are (virtual seconds)."""

    chaos_seconds: float = 45.0
    quiet_seconds: float = 30.0  # no faults, no arrivals, no crashes
    freeze_seconds: float = 10.0  # the end of the quiet period: no job finishes either
    partial_window: float = 30.0  # longest a gang may stay partly bound with room for the rest (bind
    # back-off reaches 10 s per gang, and bind-failure windows come back to back)
    rtt: float = 0.2  # every request, answer and watch event takes up to this long (a busy network)
    arrival: float = 0.3  # chance of a new Job per step (a step is 0.05-1 s)
    # Scheduling cycles per virtual second (over 1-5 s). Each cycle costs 20 ms of virtual
    # time (vloop), so a livelock runs 50 a second; event-driven wake-ups stay far below.
    max_cycle_rate: float = 30.0
    # A gang partly bound (or one all pending) with the room for the rest free, and nothing
    # happening to it: no bind of its pods sent or in flight, the scheduler up (the same
    # process all along), no bind-failure or error window open. A working scheduler retries
    # a gang every cycle (1 s) once its binds have failed; this long a stretch of nothing is
    # a gang the scheduler has lost track of (see ``partial`` and ``stuck``).
    idle_window: float = 6.0
    # Faults come in storms (crashes, fault windows, compactions, dropped watches) with calm
    # stretches between them (arrivals, binds and finishes go on): a scheduler that lost track
    # of a gang in a storm must show it in the calm that follows, before a later crash wipes
    # its memory. Lengths drawn per storm and per calm, virtual seconds.
    storm_seconds: tuple[float, float] = (6.0, 12.0)
    # The chance that any bind fails, storm or calm (not in the quiet): an admission webhook or
    # an apiserver that flaps. High, so that gangs are left half-bound often, at every fill level.
    stray_bind_failure: float = 0.25
    calm_seconds: tuple[float, float] = (10.0, 16.0)
    cordon: float = 0.03  # chance per storm step that a rack is cordoned for 3-10 s
    cordon_on_bind_failure: float = 0.3  # chance that a failed bind's rack is cordoned with it
    # The cluster, drawn per seed: racks, and nodes per rack (two pods each). Enough racks
    # that the rest of a half-bound gang usually has another rack to go to when its own is
    # full or cordoned, which only a scheduler that forgot where the gang runs would take.
    racks: tuple[int, ...] = (4, 5, 6)
    rack_nodes: tuple[int, ...] = (3, 4)
    duration: tuple[float, float] = (5.0, 40.0)  # how long a job runs once all its pods run
    # Node deaths (faults.py): how many per run (drawn), each at a time of the chaos period's
    # first part, under a running gang; the chance it is the Node deleted rather than its kubelet
    # gone silent; the chance the machine comes back, and after how long.
    node_deaths: tuple[int, ...] = (1, 2, 2, 3)
    node_deleted: float = 0.3
    node_returns: float = 0.3
    node_return_after: tuple[float, float] = (3.0, 15.0)
    # The controller's --node-not-ready-grace and --force-delete-unreachable-after, and the
    # chaos pods' terminationGracePeriodSeconds: the campaign's compressed time scale (jobs run
    # 5-40 s), not production values (30 s, off, 30 s).
    not_ready_grace: float = 2.0
    force_delete_after: float = 2.0
    termination_grace: int = 3
    # ``recovered``: how long a gang hit by a node death may wait, with the room for its
    # replacements free in its domain, once the node's pods could be replaced (the grace, the
    # pods' termination grace and the force-delete delay after the death). See invariants.py.
    recover_window: float = 30.0
    wall_budget: float = 120.0  # wall-clock seconds a run may take
    stop_at_first: bool = False  # end the run at the first violation (mutation scoring)
    # The scheduler's --verify-state (None: HYPERPLACE_VERIFY_STATE, as the test suite sets
    # it). Mutation scoring turns it off: a broken variant must show in what a user sees, not
    # in the debug cross-check stopping the scheduler.
    verify_state: bool | None = None


def mutation_settings() -> Settings:
    """How a broken variant is scored: stop at the first violation a user would see, with
    --verify-state off (the production setting)."""
    return Settings(stop_at_first=True, verify_state=False)
