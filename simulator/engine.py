"""The in-process simulator: admission, controllers, one scheduler session per cycle.

One **cycle** does what a real control plane does between two scheduler sessions:

1. (first cycle only: objects arrive) every input object goes through admission,
   mutating webhooks, then schema/CEL, then validating webhooks; refused objects are
   reported with the webhook's messages and left out (:mod:`simulator.admission`);
2. the controllers reconcile to a fixed point: label discovery of HyperNodes (when a
   ConfigMap enables it), HyperNode status, and Job -> PodGroup + pods (pods the Job
   controller creates pass the pod webhooks too, as they would through the API server);
   one adapter per controller (:mod:`simulator.controllers`);
3. one scheduler session runs on a snapshot of the cluster; its bindings are applied
   (the pod gets ``spec.nodeName`` and phase Running), so they count in the next cycle,
   and the PodGroups get the status the scheduler reports (:mod:`simulator.scheduling`).

:class:`Simulation` only conducts: the state the parts share is one
:class:`~simulator.cluster.Cluster`. The other components are imported lazily: each lives
behind the seams described in ``docs/CONTRACTS.md``, and the simulator is only the glue that
feeds them wire objects.

Time is simulated (:mod:`simulator.clock`), so two runs on the same input give the same output.
"""

from __future__ import annotations

from hyperplace.api import HyperNode

from .cluster import Cluster, Progress
from .controllers import CONTROLLERS
from .loader import Inputs
from .result import SimResult
from .scheduling import Scheduler

DEFAULT_MAX_CYCLES = 10
MAX_CONTROLLER_ROUNDS = 25


class Simulation:
    """Holds the cluster state between cycles; :meth:`run` drives it."""

    def __init__(
        self,
        inputs: Inputs,
        *,
        scheduler_conf: str | None = None,
        scheduler_conf_source: str = "--scheduler-config",
        seed: int = 0,
        progress: Progress | None = None,
        verify_state: bool | None = None,
        elapsed: float = 0.0,
        now: str | None = None,
    ) -> None:
        """``elapsed``: seconds added to the simulated clock the scheduler sees, to preview
        time-bounded topology relaxations as they will stand that much later.
        ``verify_state``: rebuild the scheduler's snapshot from scratch every cycle and fail
        on a difference (default: the ``HYPERPLACE_VERIFY_STATE=1`` environment variable).
        ``now``: the time (RFC 3339) the scheduler's clock reads in cycle 1, advancing with the
        simulated clock (10 minutes a cycle). Jobs wait from their PodGroup's creationTimestamp
        (inputs without one are stamped from 2025-01-01T00:00:00Z on), and a head-of-queue gang
        that waited past its threshold gets a domain held. Without it, reservations are off
        (every multi-cycle run would otherwise reserve after its first cycle)."""
        self.cluster = Cluster(inputs, seed=seed, progress=progress, now=now, elapsed=elapsed)
        self.scheduler = Scheduler(
            self.cluster,
            conf_text=scheduler_conf,
            conf_source=scheduler_conf_source,
            verify_state=verify_state,
        )
        self.controllers = [make(self.cluster) for make in CONTROLLERS]

    def reconcile(self) -> bool:
        """Controllers, round after round, until none of them changes anything.

        Returns whether anything changed.
        """
        clock = self.cluster.clock
        self.cluster.progress.start(f"cycle {clock.cycle}: controllers", None)
        any_change = False
        for clock.round in range(MAX_CONTROLLER_ROUNDS):
            changed = False
            for controller in self.controllers:
                changed = controller.reconcile() or changed
            self.cluster.progress.advance()
            if not changed:
                return any_change
            any_change = True
        self.cluster.warn_once(f"controllers did not settle within {MAX_CONTROLLER_ROUNDS} rounds")
        return any_change

    def run(self, cycles: int | None = None) -> SimResult:
        """Run ``cycles`` cycles, or until a cycle changes nothing (at most 10)."""
        clock = self.cluster.clock
        self.cluster.apply_inputs()
        limit = cycles if cycles is not None else DEFAULT_MAX_CYCLES
        ran = 0
        for c in range(1, limit + 1):
            clock.cycle, clock.round = c, 0
            changed = self.reconcile()
            if c == 1 or self.scheduler.can_change_anything():
                changed = self.scheduler.run_session() or changed
            ran = c
            if cycles is None and not changed:
                break
        # A last controller pass so Job status reflects the final bindings.
        clock.cycle, clock.round = ran + 1, 0
        self.reconcile()
        return self.result(ran)

    def result(self, cycles: int) -> SimResult:
        """The SimResult after ``cycles`` cycles."""
        cluster, scheduler = self.cluster, self.scheduler
        objects = cluster.objects
        updated = [k for k in cluster.input_order if k in objects and objects[k] != cluster.original.get(k)]
        spec_model = cluster.admission.caches.spec_model
        return SimResult(
            objects=objects,
            bindings=scheduler.bindings,
            bound_in_cycle=scheduler.bound_in_cycle,
            evictions=cluster.evictions,
            rejected=cluster.admission.rejected,
            warnings=cluster.warnings,
            created=[k for k in cluster.created if k in objects],
            updated=updated,
            outcomes=scheduler.outcomes,
            unschedulable={
                k: v for k, v in scheduler.unschedulable.items() if ("Pod", *k.split("/", 1)) in objects
            },
            cycles=cycles,
            scheduler_ran=scheduler.ran,
            notes=list(getattr(scheduler.session, "notes", None) or []),
            preemptions=list(scheduler.preemptions),
            preemption_reasons=dict(scheduler.preemption_reasons),
            snapshot=scheduler.snapshot,
            session=scheduler.session,
            config=scheduler.config,
            clock=scheduler.clock,
            hypernodes=[
                m for o in cluster.of_kind("HyperNode") if (m := spec_model(o, HyperNode)) is not None
            ],
        )


def simulate(
    inputs: Inputs,
    *,
    cycles: int | None = None,
    seed: int = 0,
    scheduler_conf: str | None = None,
    scheduler_conf_source: str = "--scheduler-config",
    progress: Progress | None = None,
    elapsed: float = 0.0,
    now: str | None = None,
) -> SimResult:
    """Run a simulation of ``inputs`` (see the module docstring)."""
    sim = Simulation(
        inputs,
        scheduler_conf=scheduler_conf,
        scheduler_conf_source=scheduler_conf_source,
        seed=seed,
        progress=progress,
        elapsed=elapsed,
        now=now,
    )
    return sim.run(cycles)


__all__ = ["DEFAULT_MAX_CYCLES", "Simulation", "simulate"]
