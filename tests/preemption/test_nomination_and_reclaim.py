"""The room freed for a preemptor is its own until it binds (Volcano's nomination), and reclaim
takes room back across queues with the same domain-first victim choice."""

from __future__ import annotations

from typing import Any

from hyperplace.api import Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import run_session
from scheduler_plugin.framework.extension_points import OVERUSED, RECLAIMABLE
from scheduler_plugin.plugins import REGISTRY
from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, racks, running_gang


def snapshot(groups, nodes, hns, queues=()):
    return build_snapshot(
        nodes=nodes,
        pods=[p for _, ps in groups for p in ps],
        hypernodes=hns,
        podgroups=[pg for pg, _ in groups],
        queues=list(queues),
        priority_classes=PRIORITY_CLASSES,
    )


def test_the_freed_room_is_kept_for_the_preemptor_across_cycles_and_bound_once_victims_are_gone():
    nodes, hns = racks()
    a1 = running_gang("a1", ["r0n0", "r0n1", "r0n2", "r0n3"])
    b1 = running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"], created="2026-01-02T00:00:00Z")
    urgent = pending_gang("urgent", 4)
    first = run_session(snapshot([a1, b1, urgent], nodes, hns), PREEMPT_CONF)
    assert {e.victim_job for e in first.evictions} == {"default/b1"}
    nominated = sorted(first.nominations["default/urgent"].pods.values())

    # Cycle 2: two victims are gone, two still terminate, and a low-priority job arrives wanting
    # two nodes. It must not take the half-freed room, nor is the preemptor bound yet.
    other = pending_gang("filler", 2, tier=None, priority="low")
    b1_left = (b1[0], b1[1][:2])
    second = run_session(
        snapshot([a1, b1_left, urgent, other], nodes, hns), PREEMPT_CONF, nominations=first.nominations
    )
    assert second.bindings == {}
    assert second.evictions == []  # nothing is evicted twice
    assert "default/urgent" in second.nominations

    # Cycle 3: the victims are gone. The preemptor binds on exactly the nominated nodes.
    third = run_session(
        snapshot([a1, urgent, other], nodes, hns), PREEMPT_CONF, nominations=second.nominations
    )
    bound = {k: v for k, v in third.bindings.items() if k.startswith("default/urgent")}
    assert sorted(bound.values()) == nominated
    assert third.nominations == {}
    assert third.jobs["default/urgent"].phase == "Running"
    assert third.jobs["default/urgent"].allocated_hypernode == "rack1"


def test_a_nomination_lapses_when_its_pods_are_gone():
    nodes, hns = racks()
    a1 = running_gang("a1", ["r0n0", "r0n1", "r0n2", "r0n3"])
    b1 = running_gang("b1", ["r1n0", "r1n1", "r1n2", "r1n3"])
    urgent = pending_gang("urgent", 4)
    first = run_session(snapshot([a1, b1, urgent], nodes, hns), PREEMPT_CONF)
    assert first.nominations
    # The preemptor was deleted: the room is free for others again.
    filler = pending_gang("filler", 2, tier=None, priority="low")
    later = run_session(snapshot([a1, filler], nodes, hns), PREEMPT_CONF, nominations=first.nominations)
    assert later.nominations == {}
    assert len(later.bindings) == 2


# ---------------------------------------------------------------------------------- reclaim
class ShareStub:
    """A test-local queue plugin (the proportion plugin lives elsewhere): ``team-a`` is over its
    share, ``team-b`` is not; every pod of an overused queue is reclaimable."""

    def __init__(self, ssn: Any, overused: set[str]) -> None:
        self.ssn = ssn
        self.over = overused

    def reclaimable(self, actor: Any, candidates: list[Any]) -> list[Any]:
        jobs = self.ssn.snap.jobs
        return [t for t in candidates if jobs[t.job].queue in self.over]


def register_stub(overused: set[str]):
    def register(ssn: Any, args: dict[str, Any], opt: Any) -> ShareStub:
        stub = ShareStub(ssn, overused)
        ssn.register(RECLAIMABLE, stub.reclaimable)
        ssn.register(OVERUSED, lambda q: q in stub.over)
        return stub

    return register


RECLAIM_CONF = load_scheduler_config(
    """
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: share-stub
- plugins:
  - name: predicates
  - name: network-topology-aware
"""
)


def queue(name: str, reclaimable: bool | None = None) -> Queue:
    spec: dict[str, Any] = {"weight": 1}
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    return Queue.model_validate({"metadata": {"name": name}, "spec": spec, "status": {"state": "Open"}})


def reclaim_world(team_a_reclaimable: bool | None = None):
    nodes, hns = racks()
    # team-a fills the cluster with two gangs (one per rack); team-b submits a gang of 4.
    a1 = running_gang("a1", ["r0n0", "r0n1", "r0n2", "r0n3"], queue="team-a", priority="high")
    a2 = running_gang("a2", ["r1n0", "r1n1"], queue="team-a", priority="high", created="2026-01-03T00:00:00Z")
    a3 = running_gang("a3", ["r1n2", "r1n3"], queue="team-a", priority="high", created="2026-01-03T00:00:00Z")
    b = pending_gang("b-train", 2, priority="low", queue="team-b")
    queues = [queue("team-a", team_a_reclaimable), queue("team-b")]
    return snapshot([a1, a2, a3, b], nodes, hns, queues)


def test_a_queue_below_its_share_reclaims_from_an_overused_queue(monkeypatch):
    monkeypatch.setitem(REGISTRY, "share-stub", register_stub({"team-a"}))
    res = run_session(reclaim_world(), RECLAIM_CONF)
    # Reclaim ignores priority across queues (the victims are high, the reclaimer low); it breaks
    # one 2-pod gang in rack1 rather than the 4-pod gang of rack0.
    assert len(res.evictions) == 2
    assert {e.action for e in res.evictions} == {"reclaim"}
    assert len({e.victim_job for e in res.evictions}) == 1
    assert res.evictions[0].victim_job in ("default/a2", "default/a3")
    assert res.nominations["default/b-train"].domain == "rack1"


def test_a_queue_that_is_not_reclaimable_keeps_its_pods(monkeypatch):
    monkeypatch.setitem(REGISTRY, "share-stub", register_stub({"team-a"}))
    res = run_session(reclaim_world(team_a_reclaimable=False), RECLAIM_CONF)
    assert res.evictions == []


def test_an_overused_queue_cannot_reclaim(monkeypatch):
    monkeypatch.setitem(REGISTRY, "share-stub", register_stub({"team-a", "team-b"}))
    res = run_session(reclaim_world(), RECLAIM_CONF)
    assert res.evictions == []
    assert "is overused" in res.unschedulable["default/b-train-t0-0"]
