"""On a live cluster, a gang that waited too long gets its rack held: the PodGroup says which
HyperNode and since when, small jobs keep running outside it, and the gang starts once its
rack drains (the condition then goes away)."""

from __future__ import annotations

from hyperplace.runtime.api import PODGROUPS, PODS
from tests.scheduler.builders import pod as make_pod
from tests.scheduler.builders import podgroup

from .helpers import (
    NS,
    ClusterApi,
    condition,
    cycles_pass,
    events_for,
    eventually,
    node_of,
    rack_of,
    running,
    seed_gang,
    seed_racks,
)


def seed_small(api: ClusterApi, name: str, node_name: str | None = None) -> str:
    """A one-pod job of a whole 4-CPU node (running on ``node_name`` when given)."""
    api.seed(PODGROUPS, podgroup(name, 1, created="2026-01-01T00:05:00Z").to_dict())
    api.seed(PODS, make_pod(f"{name}-t0-0", name, cpu=4, index=0, node_name=node_name))
    return f"{NS}/{name}-t0-0"


async def test_a_long_waiting_gang_holds_its_rack_and_starts_when_it_drains() -> None:
    api = ClusterApi()
    seed_racks(api)  # rack0 = n0-0..n0-3, rack1 = n1-0..n1-3, 4 CPUs each
    busy = seed_small(api, "old0", "n0-0")
    seed_small(api, "old1", "n1-0")
    seed_small(api, "old2", "n1-1")
    # The gang (created 2026-01-01, long past the 10-minute threshold) needs a whole rack.
    gang = seed_gang(api, "big", 4, cpu=4, tier=1)
    small = [seed_small(api, f"s{i}") for i in range(3)]
    async with running(api) as (sched, _):
        await eventually(
            lambda: condition(api.peek(PODGROUPS, f"{NS}/big") or {}, "HyperNodeReserved"), what="reservation"
        )
        cond = condition(api.peek(PODGROUPS, f"{NS}/big") or {}, "HyperNodeReserved")
        assert cond is not None and "HyperNode rack0 is held" in cond["message"]
        assert sched.reservations[f"{NS}/big"].hypernode == "rack0"
        await eventually(
            lambda: sum(1 for k in small if node_of(api, k)) == 2, what="small jobs outside rack0"
        )
        await cycles_pass(sched, 3)
        # rack1 took two small jobs; none went to the held rack0, the third waits.
        assert sorted(rack_of(node_of(api, k)) for k in small if node_of(api, k)) == ["rack1", "rack1"]
        await sched.events.flush()
        assert events_for(api, "big", "HyperNodeReserved")
        # The job holding rack0's last node finishes: the gang starts there, the hold ends.
        await api.delete(PODS, busy.split("/")[1], NS)
        await eventually(lambda: all(node_of(api, k) for k in gang), what="gang bound")
        assert {rack_of(node_of(api, k)) for k in gang} == {"rack0"}
        await eventually(
            lambda: condition(api.peek(PODGROUPS, f"{NS}/big") or {}, "HyperNodeReserved") is None,
            what="reservation condition removed",
        )
        # (s2, left waiting since long ago, may now hold a domain of its own.)
        assert f"{NS}/big" not in sched.reservations
    assert not api.violations
