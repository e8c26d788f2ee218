"""A cycle with nothing to decide reuses the last session's result, and only then.

kube-scheduler does nothing while its queue is empty; our scheduler runs a session every
period, so a steady cluster would pay a whole session per second for the same answer.
``run_session_reusing`` hands back the last result when the view is the same object (no event
since), the configuration is the same, no pod is left to place and the last session changed
nothing. Anything else runs a session: a clock-driven step (a reservation threshold passing)
must still happen with the view unchanged.
"""

from __future__ import annotations

from hyperplace.api.times import parse_rfc3339
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG, DEFAULT_CONFIG_TEXT, load_scheduler_config
from scheduler_plugin.cycle import LastSession, run_session_reusing
from scheduler_plugin.model.snapshot import ClusterSnapshot
from tests.reservation.test_head_of_queue import cluster, running, world
from tests.scheduler.builders import TEN_MINUTE_HOLDS, podgroup


def steady() -> ClusterSnapshot:
    nodes, tree = cluster()
    pods = [running(f"r{i}", f"n{i:02d}") for i in range(4)]
    return build_snapshot(
        nodes=nodes, pods=pods, hypernodes=tree, podgroups=[podgroup(f"r{i}", 1) for i in range(4)]
    )


def test_a_settled_cluster_with_no_event_reuses_the_last_answer() -> None:
    snap, last = steady(), LastSession()
    first = run_session_reusing(last, snap, DEFAULT_CONFIG, now=parse_rfc3339("2026-01-01T00:00:00Z"))
    again = run_session_reusing(last, snap, DEFAULT_CONFIG, now=parse_rfc3339("2026-01-01T01:00:00Z"))
    assert again is first
    assert {k: o.phase for k, o in first.jobs.items()} == {f"default/r{i}": "Running" for i in range(4)}


def test_a_new_view_or_another_configuration_runs_a_session() -> None:
    snap, last = steady(), LastSession()
    first = run_session_reusing(last, snap, DEFAULT_CONFIG)
    view = steady()
    second = run_session_reusing(last, view, DEFAULT_CONFIG)  # an event: a new view
    assert second is not first
    reloaded = load_scheduler_config(DEFAULT_CONFIG_TEXT, source="<reloaded>")  # the file changed
    assert run_session_reusing(last, view, reloaded) is not second


def test_a_waiting_gang_still_gets_its_reservation_when_nothing_else_happens() -> None:
    """The same view twice: the second session must run, because the big gang's waiting crossed
    the reservation threshold (ten minutes in this cluster) in between."""
    nodes, tree = cluster()
    pods, pgs = world(stream=0)
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs)
    last = LastSession()
    early = run_session_reusing(last, snap, TEN_MINUTE_HOLDS, now=parse_rfc3339("2026-01-01T00:05:00Z"))
    assert not early.reservations and not early.bindings
    late = run_session_reusing(last, snap, TEN_MINUTE_HOLDS, now=parse_rfc3339("2026-01-01T00:11:00Z"))
    assert late is not early
    assert "default/big" in late.reservations
