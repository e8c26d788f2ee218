"""Volcano's queue story end to end in one scheduler: two teams share a cluster by weight 1:1.
Team A fills it while team B is idle; when B submits, reclaim gives B its half back, whole
gangs at a time and never taking A below its own half."""

from __future__ import annotations

from hyperplace.api import Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import run_session
from tests.preemption.helpers import PRIORITY_CLASSES, pending_gang, racks, running_gang

RECLAIM_CONF = load_scheduler_config(
    """
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: network-topology-aware
  - name: binpack
"""
)


def team(name: str, weight: int = 1) -> Queue:
    return Queue.model_validate({"metadata": {"name": name}, "spec": {"weight": weight, "reclaimable": True}})


def build(groups, nodes, hns):
    return build_snapshot(
        nodes=nodes,
        pods=[p for _, ps in groups for p in ps],
        hypernodes=hns,
        podgroups=[pg for pg, _ in groups],
        queues=[team("team-a"), team("team-b")],
        priority_classes=PRIORITY_CLASSES,
    )


def test_an_idle_teams_half_comes_back_by_reclaim_one_whole_gang_at_a_time():
    nodes, hns = racks(n_racks=2, per_rack=4, cpu=4)
    # Team A took the whole cluster while B was idle: one 4-pod gang per rack.
    a1 = running_gang("a1", [f"r0n{i}" for i in range(4)], priority="low", queue="team-a")
    a2 = running_gang(
        "a2", [f"r1n{i}" for i in range(4)], priority="low", queue="team-a", created="2026-01-02T00:00:00Z"
    )
    # Team B submits a rack-sized gang at the same priority: only its queue share can make room.
    b1 = pending_gang("b1", 4, tier=1, priority="low", queue="team-b")

    first = run_session(build([a1, a2, b1], nodes, hns), RECLAIM_CONF)
    victims = {e.victim_job for e in first.evictions}
    assert len(victims) == 1 and victims <= {"default/a1", "default/a2"}
    # The victim gang goes whole (minMember 4: leaving part of it would only break it) ...
    assert len(first.evictions) == 4
    assert all(e.action == "reclaim" for e in first.evictions)
    # ... and its rack is nominated to B's gang.
    nomination = first.nominations["default/b1"]
    victim_nodes = {e.node for e in first.evictions}
    assert set(nomination.pods.values()) == victim_nodes

    # Once the victims are gone, B's gang binds in that rack: each team holds its half.
    kept = a2 if victims == {"default/a1"} else a1
    second = run_session(build([kept, b1], nodes, hns), RECLAIM_CONF, nominations=first.nominations)
    bound = {k: v for k, v in second.bindings.items() if k.startswith("default/b1")}
    assert set(bound.values()) == victim_nodes
    assert second.jobs["default/b1"].phase == "Running"


def test_a_team_at_its_share_gives_nothing_more_back():
    nodes, hns = racks(n_racks=2, per_rack=4, cpu=4)
    # Each team holds one rack: both are exactly at their deserved half.
    a1 = running_gang("a1", [f"r0n{i}" for i in range(4)], priority="low", queue="team-a")
    b1 = running_gang("b1", [f"r1n{i}" for i in range(4)], priority="low", queue="team-b")
    # B wants more; A is not above its share, so reclaim takes nothing.
    b2 = pending_gang("b2", 4, tier=1, priority="low", queue="team-b")
    result = run_session(build([a1, b1, b2], nodes, hns), RECLAIM_CONF)
    assert result.evictions == []
    assert result.jobs["default/b2"].phase == "Pending"
