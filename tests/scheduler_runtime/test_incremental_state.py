"""The scheduler keeps its cluster state from watch events, and every cycle of these tests
also rebuilds it from scratch and stops on a difference (--verify-state, on in the suite)."""

from __future__ import annotations

from hyperplace.runtime.api import NODES, PODS
from tests.scheduler.builders import node

from .helpers import NS, ClusterApi, cycles_pass, eventually, node_of, running, seed_gang, seed_racks


async def test_finished_pods_free_their_room_for_the_next_gang_without_a_rebuild() -> None:
    api = ClusterApi()
    seed_racks(api, racks=1, per_rack=4, cpu=4)
    first = seed_gang(api, "a", 8, cpu=2)
    async with running(api, verify_state=True) as (sched, task):
        await eventually(lambda: all(node_of(api, k) for k in first), what="gang a bound")
        second = seed_gang(api, "b", 4, cpu=2)
        await cycles_pass(sched, 2)
        assert not any(node_of(api, k) for k in second), "the rack is full"
        for key in first[:4]:
            await api.patch(
                PODS, key.split("/", 1)[1], {"status": {"phase": "Succeeded"}}, NS, subresource="status"
            )
        await eventually(lambda: all(node_of(api, k) for k in second), what="gang b bound into freed room")
        # A node joins and a pod goes: the state follows, and a quiet cycle changes nothing.
        await api.create(NODES, node("n0-9", cpu=4))
        await api.delete(PODS, first[5].split("/", 1)[1], NS)
        await cycles_pass(sched, 3)
        view = sched.state.snapshot()
        assert sched.state.snapshot() is view, "no event, no new view"
        assert "n0-9" in view.node_names and first[5] not in {
            t.key for j in view.jobs.values() for t in j.tasks
        }
        assert not task.done(), "the verifying cycles found no drift"
    assert api.violations == []


async def test_after_a_relist_the_state_goes_on_from_events() -> None:
    api = ClusterApi()
    seed_racks(api)
    first = seed_gang(api, "z", 8)
    async with running(api, verify_state=True) as (sched, task):
        await eventually(lambda: all(node_of(api, k) for k in first), what="gang z bound")
        relists = sched.pods.relists
        api.compact()  # every watch ends with 410 Gone: informers relist and diff their stores
        await eventually(lambda: sched.pods.relists > relists, what="pods relisted")
        second = seed_gang(api, "a", 8)
        await eventually(lambda: all(node_of(api, k) for k in second), what="gang a bound after the relist")
        assert not task.done()
    assert api.violations == []
