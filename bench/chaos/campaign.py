"""A seeded chaos campaign: the real Job controller and scheduler against a faulty API server.

One run (one seed) builds a small cluster of racks in the in-memory API server
(:mod:`hyperplace.runtime.fakeapi`) and starts the two control-plane processes exactly as their
entry points do (:class:`controller.manager.ControllerManager.run`,
:class:`scheduler_plugin.runtime.scheduler.Scheduler.run`), each on its own severable
:class:`~hyperplace.runtime.fakeapi.Connection`. The seed then drives a few minutes of cluster
time (on a virtual clock, :mod:`.vloop`) of:

* always: Volcano Jobs arriving mid-run on 4-6 racks of 3-4 nodes, a kubelet that starts bound
  pods, jobs that finish (:mod:`.world`);
* faults (:mod:`.faults`): in storms, process crashes, bind-failure and API-error windows,
  compactions, dropped watches, slow API windows and cordoned racks; storm or calm, stray bind
  failures, a slow network and node deaths under running gangs.

After every step, and at the end after a quiet period without faults, the invariants
(:mod:`.invariants`) are checked against the API server's truth: what a user would see.

The processes are driven only through their public run() entry points, so the campaign does
not depend on how the scheduler builds its snapshot or runs its cycle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator

from .invariants import Invariants
from .outcome import USER_VISIBLE, Outcome
from .settings import Settings
from .vloop import run_virtual
from .world import World


async def _campaign(seed: int, settings: Settings) -> Outcome:
    world = World(seed, settings)
    checks = Invariants(world)
    world.build_cluster()
    world.start("controller")
    world.start("scheduler")
    rng = world.rng
    stop = settings.stop_at_first

    def over() -> bool:
        if any(v.invariant == "hang" for v in world.violations):
            return True
        return stop and any(v.invariant in USER_VISIBLE for v in world.violations)

    # Counted in plan time (the steps drawn), not in virtual time: how long each step's API calls
    # take depends on the run, and the number of steps, hence of arrivals, must be the seed's.
    while world.faults.plan_time < settings.chaos_seconds and not over():
        step = rng.uniform(0.05, 1.0)
        world.faults.plan_time += step
        await asyncio.sleep(step)
        await world.kubelet(finish=True)
        if rng.random() < settings.arrival:
            await world.submit_job()
        await world.faults.step()
        checks.check()
    await world.faults.calm()
    end = settings.chaos_seconds + settings.quiet_seconds
    while world.now < end and not over():
        await asyncio.sleep(0.5)
        await world.faults.nodes_back()
        await world.kubelet(finish=world.now < end - settings.freeze_seconds)
        checks.check()
    placed = explained = 0
    if not over():
        placed, explained = checks.check_final()
    await world.stop_all()
    return Outcome(
        seed,
        world.violations,
        len(world.jobs),
        placed,
        explained,
        world.events,
        world.now,
        0.0,
        checks.longest_partial,
        checks.longest_idle,
        checks.longest_unrecovered,
        checks.recoveries,
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # The components log every retry and crash; a campaign has thousands.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        root.setLevel(level)


def run_seed(seed: int, settings: Settings | None = None) -> Outcome:
    """One run of the campaign (its own virtual-time event loop)."""
    t0 = time.perf_counter()
    with _quiet():
        out = run_virtual(_campaign(seed, settings or Settings()))
    out.wall_seconds = time.perf_counter() - t0
    return out


def run_seeds(
    seeds: range | list[int],
    settings: Settings | None = None,
    mutation: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
) -> list[Outcome]:
    """Run ``seeds`` one after another, optionally under a mutation (a broken variant)."""
    with mutation() if mutation is not None else contextlib.nullcontext():
        return [run_seed(s, settings) for s in seeds]


def _run_one(job: tuple[int, Settings, str | None]) -> Outcome:
    seed, settings, mutation = job
    if mutation is None:
        return run_seed(seed, settings)
    from .mutations import MUTATIONS

    with MUTATIONS[mutation]():
        return run_seed(seed, settings)


def run_parallel(
    seeds: Iterable[int], settings: Settings | None = None, mutation: str | None = None, workers: int = 2
) -> list[Outcome]:
    """Run ``seeds`` in ``workers`` processes (each seed on its own virtual clock), optionally
    under a named mutation from :mod:`.mutations`; outcomes in seed order."""
    jobs = [(s, settings or Settings(), mutation) for s in seeds]
    if workers <= 1:
        return [_run_one(j) for j in jobs]
    ctx = multiprocessing.get_context("spawn")  # a clean interpreter: no inherited event loop
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        return list(pool.map(_run_one, jobs, chunksize=4))


__all__ = ["run_parallel", "run_seed", "run_seeds"]
