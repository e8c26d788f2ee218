"""The scheduler process preempts on an API server: the victims get ``DisruptionTarget``, are
evicted through ``pods/eviction`` with their UID as a precondition, Events say who took their
place, and the preemptor is bound in its rack once they are gone."""

from __future__ import annotations

from pathlib import Path

from hyperplace.runtime.api import PODGROUPS, PODS, PRIORITY_CLASSES
from scheduler_plugin.runtime.config_source import ConfigSource
from tests.preemption.helpers import PRIORITY_CLASSES as CLASSES
from tests.scheduler.builders import job_pods, podgroup
from tests.scheduler_runtime.helpers import (
    ClusterApi,
    events_for,
    eventually,
    node_of,
    rack_of,
    running,
    seed_racks,
)

CONF = """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: network-topology-aware
"""


def seed_gang(api: ClusterApi, name: str, nodes: list[str | None], priority: str) -> list[str]:
    api.seed(
        PODGROUPS,
        podgroup(
            name, len(nodes), topology={"mode": "hard", "highestTierAllowed": 1}, priority_class=priority
        ).to_dict(),
    )
    keys = []
    for p, n in zip(job_pods(name, len(nodes), cpu=4), nodes, strict=True):
        p["spec"]["priorityClassName"] = priority
        if n is not None:
            p["spec"]["nodeName"] = n
            p["status"]["phase"] = "Running"
        api.seed(PODS, p)
        keys.append(f"default/{p['metadata']['name']}")
    return keys


async def test_victims_are_evicted_through_the_eviction_api_then_the_preemptor_binds(tmp_path: Path) -> None:
    api = ClusterApi()
    seed_racks(api)  # rack0: n0-0..3, rack1: n1-0..3, 4 cpu each
    for pc in CLASSES:
        api.seed(PRIORITY_CLASSES, pc)
    # rack0 holds two 2-pod gangs, rack1 one 4-pod gang: the preemptor breaks one gang in rack1.
    seed_gang(api, "a1", ["n0-0", "n0-1"], "low")
    seed_gang(api, "a2", ["n0-2", "n0-3"], "low")
    victims = seed_gang(api, "b1", ["n1-0", "n1-1", "n1-2", "n1-3"], "low")
    preemptor = seed_gang(api, "urgent", [None] * 4, "high")
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    async with running(api, ConfigSource(path=str(conf))) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in preemptor), what="preemptor bound")
    assert sorted(p["metadata"]["name"] for p in api.evicted) == sorted(k.split("/")[1] for k in victims)
    for p in api.evicted:
        (cond,) = [c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert cond["reason"] == "PreemptionByScheduler"
        assert "default/urgent" in cond["message"]
    # Condition first, then the eviction, each victim once, with its UID as the precondition.
    calls = [c for c in api.calls if c[0] in ("patch/status", "create/eviction") and c[2].startswith("b1-")]
    first_eviction = next(i for i, c in enumerate(calls) if c[0] == "create/eviction")
    assert all(c[0] == "patch/status" for c in calls[:first_eviction])
    assert len([c for c in calls if c[0] == "create/eviction"]) == 4
    assert {rack_of(node_of(api, k)) for k in preemptor} == {"rack1"}
    # Each preemptor pod showed its nominated node, as kube-scheduler's do, and was bound there.
    for k in preemptor:
        p = api.peek(PODS, k)
        assert p is not None and p["status"]["nominatedNodeName"] == node_of(api, k)
    assert api.violations == []
    assert events_for(api, "b1-t0-0", "Preempted")
    assert events_for(api, "urgent", "Preempting")
    assert sched.evictor.evicted and not sched.evictor.refused


async def test_a_nomination_that_outlives_its_timeout_is_dropped_and_its_pods_told() -> None:
    # A PodDisruptionBudget (or a stuck kubelet) can keep a victim forever: the nomination then
    # expires, the room is no longer held, and the preemptor pods' nominatedNodeName is cleared.
    from scheduler_plugin.framework.evictions import Nomination
    from scheduler_plugin.runtime.events import EventRecorder
    from scheduler_plugin.runtime.evictor import Evictor

    api = ClusterApi()
    seed_racks(api)
    (key,) = seed_gang(api, "urgent", [None], "high")
    clock = [0.0]
    ev = Evictor(api, EventRecorder(api, "test", "test"), "test", timeout=10.0, clock=lambda: clock[0])
    nom = Nomination("default/urgent", {key: "n1-0"}, ("default/victim-0",))
    ev.after_session([], {"default/urgent": nom}, lambda k: api.peek(PODS, k), lambda _k: None)
    await ev.drain(5)
    got = api.peek(PODS, key)
    assert got is not None and got["status"]["nominatedNodeName"] == "n1-0"
    clock[0] = 5.0
    assert ev.held() == {"default/urgent": nom}
    # The next session still returns it: the deadline is kept, not renewed.
    ev.after_session([], {"default/urgent": nom}, lambda k: api.peek(PODS, k), lambda _k: None)
    clock[0] = 10.5
    assert ev.held() == {}
    await ev.drain(5)
    got = api.peek(PODS, key)
    assert got is not None and "nominatedNodeName" not in got["status"]
