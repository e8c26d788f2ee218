"""The chaos campaign: the real controller and scheduler keep every invariant under 100 seeds
of crashes, API faults, slow windows and node deaths, and the campaign catches deliberately
broken schedulers (and a controller that ignores node failures). The campaign lives in ``bench/chaos``; ``python -m bench.chaos --seeds 1000`` runs it
at scale with mutation scores."""

from __future__ import annotations

import os

import pytest

from bench.chaos.campaign import run_parallel, run_seed
from bench.chaos.invariants import Invariants
from bench.chaos.mutations import MUTATIONS
from bench.chaos.outcome import describe
from bench.chaos.settings import Settings, mutation_settings
from bench.chaos.world import World

WORKERS = min(2, os.cpu_count() or 1)


@pytest.mark.timeout(1800)  # about 3 min on two idle cores; a shared machine is slower
def test_a_hundred_seeds_of_chaos_break_no_invariant() -> None:
    outs = run_parallel(range(100), Settings(), workers=WORKERS)
    assert [describe(o) for o in outs if not o.ok] == []
    # The runs did what they claim: jobs placed, faults and crashes injected.
    assert sum(o.placed for o in outs) > 800
    total = sum((o.events for o in outs), start=outs[0].events.__class__())
    for what in (
        "scheduler-crash",
        "controller-crash",
        "crash-at-call",
        "compaction",
        "dropped-watches",
        "cordon",
        "node-death",
        "gang-hit",
    ):
        assert total[what] > 30, (what, total)
    # Gangs hit by node deaths ran whole again, and machines came back or were deleted.
    assert total["gang-recovered"] > 50 and total["node-back"] > 10 and total["node-deleted"] > 10, total
    assert sum(v for k, v in total.items() if k.startswith("bind-") and k[5:].isdigit()) > 100


# Seeds of twenty (out of seeds 0-19) that must catch each mutation with a violation a user
# would see (``Outcome.caught``: a scheduler stopped by --verify-state is no catch; mutants run
# with it off). Measured when the campaign was tuned: 17-20 of 20 for each (node-failure-ignored,
# added with the node deaths: 19 of 20, 16 by ``recovered``) (runs vary a little:
# the components pace retries by the wall clock); the floor leaves that margin, and a change
# that weakens the campaign fails here. The bench scores fifty or more seeds per mutation (the
# target is 90 %; see bench/README.md for the current scores).
MUTATION_SEEDS = 20
FLOOR = {
    "inflight-binds-not-counted": 15,
    "gang-released-without-unbinding": 15,
    "allocated-hypernode-not-recovered": 15,
    "node-failure-ignored": 15,
}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_broken_scheduler_is_caught(mutation: str) -> None:
    outs = run_parallel(range(MUTATION_SEEDS), mutation_settings(), mutation, workers=WORKERS)
    caught = sum(bool(o.caught) for o in outs)
    assert caught >= FLOOR[mutation], f"{mutation} caught in only {caught}/{MUTATION_SEEDS} seeds"


def test_a_seed_replays_the_same_plan() -> None:
    """The cluster, the arrivals and the fault windows are the seed's alone. (Outcomes may
    still differ a little between runs: the components pace Events and retries by the wall
    clock, which the virtual loop does not control.)"""
    plan = ("job", "error-window", "bind-failure-window", "slow-window", "compaction", "dropped-watches")
    a, b = run_seed(3), run_seed(3)
    assert [a.events[k] for k in plan] == [b.events[k] for k in plan]
    assert a.jobs == b.jobs > 0


def test_the_invariants_see_an_overcommitted_node_and_a_lost_job() -> None:
    """The checks themselves can fail: break the cluster by hand and look."""
    import asyncio

    from bench.chaos.vloop import run_virtual
    from hyperplace.runtime.api import JOBS, PODS

    async def scenario() -> list[str]:
        world = World(0, Settings())
        world.build_cluster()
        await world.submit_job()
        node = next(iter(world.racks.values()))[0]
        for i in range(3):  # 3 x 2 cpu on a 4-cpu node
            world.server.seed(
                PODS,
                {
                    "metadata": {"name": f"p{i}", "namespace": "chaos"},
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                    },
                },
            )
        await world.server.delete(JOBS, "job0", "chaos")
        Invariants(world).check()
        await asyncio.sleep(0)
        return sorted({v.invariant for v in world.violations})

    assert run_virtual(scenario()) == ["lost", "overcommit"]


def test_the_stuck_check_sees_a_gang_left_half_bound_beside_free_room() -> None:
    """A gang with one of its two pods bound, its PodGroup admitted, room for the other pod
    on its rack, the scheduler up and nothing happening for longer than the idle window: a
    user sees it stuck. The same gang not admitted by its queue (PodGroup Pending) waits
    for a reason it is told, and is not flagged."""
    import asyncio

    from bench.chaos.vloop import run_virtual
    from bench.chaos.world import _Job, _Process
    from hyperplace.api.constants import GROUP_NAME_ANNOTATION, JOB_NAME_KEY
    from hyperplace.runtime.api import JOBS, PODGROUPS, PODS
    from hyperplace.runtime.fakeapi import Connection

    async def scenario(phase: str) -> list[str]:
        world = World(0, Settings())
        world.build_cluster()
        world.procs["scheduler"] = _Process("scheduler", Connection(world.server))  # up, idle
        world.jobs["job0"] = _Job("job0", replicas=2, tier=1, duration=60.0)
        world.server.seed(JOBS, {"metadata": {"name": "job0", "namespace": "chaos"}, "spec": {}})
        world.server.seed(
            PODGROUPS,
            {
                "metadata": {"name": "pg0", "namespace": "chaos"},
                "spec": {"minMember": 2},
                "status": {"phase": phase},
            },
        )
        node = next(iter(world.racks.values()))[0]
        for i in range(2):
            world.server.seed(
                PODS,
                {
                    "metadata": {
                        "name": f"job0-worker-{i}",
                        "namespace": "chaos",
                        "labels": {JOB_NAME_KEY: "job0"},
                        "annotations": {GROUP_NAME_ANNOTATION: "pg0"},
                    },
                    "spec": {
                        **({"nodeName": node} if i == 0 else {}),
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                    },
                },
            )
        checks = Invariants(world)
        for _ in range(20):  # 10 s, past the 6 s idle window, short of the 30 s partial one
            await asyncio.sleep(0.5)
            checks.check()
        return sorted({v.invariant for v in world.violations})

    assert run_virtual(scenario("Inqueue")) == ["stuck"]
    assert run_virtual(scenario("Pending")) == []


def _gang_on(world: World, job: str, nodes: list[str], tier: int | None = 1) -> None:
    """A running gang of ``job``, one pod on each of ``nodes`` (what the controller and the
    scheduler would have made), known to the world."""
    from bench.chaos.world import _Job
    from hyperplace.api.constants import JOB_NAME_KEY
    from hyperplace.runtime.api import JOBS, PODS

    world.jobs[job] = _Job(job, replicas=len(nodes), tier=tier, duration=60.0, policy="RestartPod")
    world.server.seed(JOBS, {"metadata": {"name": job, "namespace": "chaos"}, "spec": {}})
    for i, node in enumerate(nodes):
        world.server.seed(
            PODS,
            {
                "metadata": {
                    "name": f"{job}-worker-{i}",
                    "namespace": "chaos",
                    "labels": {JOB_NAME_KEY: job},
                },
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                },
                "status": {"phase": "Running"},
            },
        )


def test_the_recovered_check_sees_a_gang_left_on_a_dead_node_beside_free_room() -> None:
    """A node dies under a running tier-1 gang and nobody replaces its pod: the pod stays
    "Running" on the dead node, its rack has room for it elsewhere, and past the release and
    the 30 s window a user sees the job never run whole again. The same gang whose node comes
    back runs whole again: no violation, one recovery."""
    import asyncio

    from bench.chaos.faults import _Death
    from bench.chaos.vloop import run_virtual

    async def scenario(comes_back: bool) -> tuple[list[str], int]:
        world = World(0, Settings())
        world.build_cluster()
        rack = next(iter(world.racks.values()))
        _gang_on(world, "job0", rack[:2])
        checks = Invariants(world)
        death = _Death(at=0.0, deleted=False, back_after=5.0, pick=0.0, comes_back=comes_back)
        await world.faults._kill(rack[0], death)
        for _ in range(100):  # 50 s: past the 7 s release and the 30 s window
            await asyncio.sleep(0.5)
            await world.faults.nodes_back()
            checks.check()
        return sorted({v.invariant for v in world.violations}), len(checks.recoveries)

    assert run_virtual(scenario(comes_back=False)) == (["recovered"], 0)
    assert run_virtual(scenario(comes_back=True)) == ([], 1)


def test_the_escaped_check_sees_a_replacement_bound_outside_its_remainders_rack() -> None:
    """A tier-1 gang lost a pod with its node; the replacement bound in another rack than the
    one its remainder runs in has escaped; bound in the same rack, it has not."""
    import asyncio

    from bench.chaos.faults import _Death
    from bench.chaos.vloop import run_virtual
    from hyperplace.api.constants import JOB_NAME_KEY
    from hyperplace.runtime.api import PODS

    async def scenario(same_rack: bool) -> list[str]:
        world = World(0, Settings())
        world.build_cluster()
        racks = list(world.racks.values())
        _gang_on(world, "job0", racks[0][:2])
        Invariants(world)
        await world.faults._kill(racks[0][0], _Death(0.0, True, 0.0, 0.0, comes_back=False))
        await world.server.delete(PODS, "job0-worker-0", "chaos", grace_period_seconds=0)
        replacement = {
            "metadata": {"name": "job0-worker-0", "namespace": "chaos", "labels": {JOB_NAME_KEY: "job0"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
        }
        await world.server.create(PODS, replacement, "chaos")
        target = racks[0][2] if same_rack else racks[1][0]
        binding = {"metadata": {"name": "job0-worker-0"}, "target": {"kind": "Node", "name": target}}
        await world.server.create(PODS, binding, "chaos", subresource="binding")
        await asyncio.sleep(0)
        return sorted({v.invariant for v in world.violations})

    assert run_virtual(scenario(same_rack=False)) == ["escaped"]
    assert run_virtual(scenario(same_rack=True)) == []
