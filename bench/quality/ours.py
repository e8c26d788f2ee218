"""Adapter: our scheduler through its public contract (docs/CONTRACTS.md).

Each decision builds wire-format objects (:mod:`.wire`), feeds the scheduler's incremental
``ClusterState`` the events a watch would deliver (pods and PodGroups of the jobs that arrived,
started or finished since the last call) and takes its snapshot (or, with ``incremental=False``,
calls ``build_snapshot``), runs ``run_session`` and reads ``SessionResult.bindings``
back into a placement. Node and
HyperNode objects are built once per topology; pods of running jobs once per start, so a
cycle only pays for what a real scheduler's informer cache would also hold.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .model import ClusterState, IntArray, JobSpec, Topology
from .schedulers import Scheduler
from .wire import EPOCH, NAMESPACE, background_pods, hypernodes, node_dicts, pod_dicts, pod_name, podgroup


def contract() -> tuple[Any, Any, Any]:
    """``(build_snapshot, run_session, DEFAULT_CONFIG)`` as docs/CONTRACTS.md names them.

    Raises ImportError when the scheduler core is not importable; the harness then reports
    our scheduler as unavailable instead of failing the other parts.
    """
    from scheduler_plugin.cache.rebuild import build_snapshot
    from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG
    from scheduler_plugin.cycle import run_session

    return build_snapshot, run_session, DEFAULT_CONFIG


# The bin-pack arguments of our default that Volcano's defaults lack: with them both bin-pack
# scores count GPUs (Volcano's weigh only CPU and memory).
GPU_BINPACK_ARGS = {
    "binpack": {"binpack.resources": "nvidia.com/gpu"},
    "network-topology-aware": {"hypernode.binpack.resources": "nvidia.com/gpu"},
}


def cpu_memory_binpack_config() -> Any:
    """Our default configuration with Volcano's default bin-pack arguments (CPU and memory
    only): the configuration our default replaced, kept as a column to show what GPU packing
    buys."""
    import yaml

    from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT, load_scheduler_config

    doc = yaml.safe_load(DEFAULT_CONFIG_TEXT)
    found = set()
    for tier in doc["tiers"]:
        for plugin in tier["plugins"]:
            if (
                plugin["name"] in GPU_BINPACK_ARGS
                and plugin.get("arguments") == GPU_BINPACK_ARGS[plugin["name"]]
            ):
                del plugin["arguments"]
                found.add(plugin["name"])
    if found != set(GPU_BINPACK_ARGS):
        raise ValueError(
            f"default configuration lacks the GPU bin-pack arguments of {set(GPU_BINPACK_ARGS) - found}"
        )
    return load_scheduler_config(yaml.safe_dump(doc), source="<cpu-memory-binpack>")


def default_reservation_wait() -> float:
    """The scheduler's default ``reservationWait``, in seconds (for the report's text)."""
    from scheduler_plugin.placement.head_of_queue import DEFAULT_WAIT

    return DEFAULT_WAIT


def reservation_wait_config(wait: str) -> Any:
    """Our default configuration with the ``allocate`` action's ``reservationWait`` set to
    ``wait`` (the default holds room after two hours; ``10m`` was the default before)."""
    import yaml

    from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT, load_scheduler_config

    doc = yaml.safe_load(DEFAULT_CONFIG_TEXT)
    entries = doc.setdefault("configurations", [])
    allocate = next((c for c in entries if c.get("name") == "allocate"), None)
    if allocate is None:
        allocate = {"name": "allocate"}
        entries.append(allocate)
    allocate.setdefault("arguments", {})["reservationWait"] = wait
    return load_scheduler_config(yaml.safe_dump(doc), source=f"<reservationWait {wait}>")


@functools.cache
def _default_queue(queue_cls: Any, learns: bool = False) -> Any:
    """The one queue of the trace; ``learns``: it opts in to learned run times."""
    from scheduler_plugin.model.runtime_history import ANNOTATION, HISTORY

    meta: dict[str, Any] = {"name": "default"}
    if learns:
        meta["annotations"] = {ANNOTATION: HISTORY}
    return queue_cls.model_validate({"metadata": meta, "spec": {"weight": 1}})


@dataclass
class CycleTiming:
    """CPU seconds of the last decision: snapshot build and session."""

    build_s: float = 0.0
    session_s: float = 0.0


@dataclass
class _Running:
    job: JobSpec
    placement: IntArray
    pods: list[dict[str, Any]]
    group: Any


@dataclass
class HyperplaceScheduler(Scheduler):
    """``place``/``place_batch`` via one ``run_session`` per call."""

    seed: int = 0
    config: Any = None
    name: str = "hyperplace"
    timing: CycleTiming = field(default_factory=CycleTiming)
    anomalies: list[str] = field(default_factory=list)
    _static: dict[int, tuple[Topology, list[dict[str, Any]], list[Any]]] = field(default_factory=dict)
    _running: dict[str, _Running] = field(default_factory=dict)
    _created: dict[str, float] = field(default_factory=dict)
    _pending: dict[JobSpec, tuple[list[dict[str, Any]], Any]] = field(default_factory=dict)
    # The scheduler's incremental cluster state, fed with the same objects every call (what
    # changed is what the watch would deliver); False: rebuild the snapshot every call.
    incremental: bool = True
    _state: Any = None
    _fed: dict[str, tuple[list[dict[str, Any]], Any]] = field(default_factory=dict)
    _fed_bg: list[dict[str, Any]] = field(default_factory=list)
    _fed_nodes: list[dict[str, Any]] | None = None
    # The scheduler's own head-of-queue reservations (scheduler_plugin.reservation): the trace
    # simulation gives it a clock and the holds are carried between cycles.
    reserves: bool = True
    _now: float | None = None
    _reservations: dict[str, Any] = field(default_factory=dict)
    # What the holds did over the run: cycles with a held domain, those whose gang had an
    # estimated start (the pods it waits for all have time limits), jobs backfilled into it.
    holds: dict[str, int] = field(default_factory=lambda: {"held": 0, "estimated": 0, "backfilled": 0})
    # The queue opts in to learned run times (``hyperplace.io/runtime-estimate: history``): the
    # scheduler learns from the gangs it sees end which domain a hold should take.
    learns_runtimes: bool = False
    _history: Any = None
    # Jobs that ended since the last decision: their PodGroups stay one more cycle without pods,
    # as a finished job's PodGroup stays in a cluster (how the scheduler sees a gang end).
    _ended: dict[str, Any] = field(default_factory=dict)

    # ---- simulation hooks ------------------------------------------------------------

    def set_created(self, job: JobSpec, when: float) -> None:
        """Creation time of a job's objects (queue order inside the session)."""
        self._created[job.name] = when

    def on_start(self, state: ClusterState, job: JobSpec, placement: IntArray) -> None:
        created = self._created.get(job.name, 0.0)
        self._running[job.name] = _Running(
            job,
            placement,
            pod_dicts(job, created, placement, state.topo, started=self._now),
            podgroup(job, created, running=True),
        )

    def on_finish(self, job: JobSpec) -> None:
        run = self._running.pop(job.name, None)
        if run is not None:
            self._ended[job.name] = run.group

    def set_now(self, when: float) -> None:
        self._now = when

    @staticmethod
    def _all_pods(
        held: dict[str, tuple[list[dict[str, Any]], Any]], bg: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        return [p for pods, _ in held.values() for p in pods] + bg

    def _feed(
        self,
        nodes: list[dict[str, Any]],
        hns: list[Any],
        held: dict[str, tuple[list[dict[str, Any]], Any]],
        bg: list[dict[str, Any]],
        queue: Any,
    ) -> None:
        """Bring the scheduler's state to ``held`` with the events a watch would deliver:
        only jobs that started, finished, arrived or left send pod and PodGroup events (a
        job's objects are built once per phase, so an unchanged job is the same objects)."""
        from hyperplace.kube.objects import namespaced_key
        from scheduler_plugin.cache.cluster_state import ClusterState as SchedulerState

        st = self._state
        if st is None:
            st = self._state = SchedulerState()
            st.replace_all(nodes, self._all_pods(held, bg), hns, [g for _, g in held.values()], [queue], [])
            self._fed = dict(held)
            self._fed_bg = bg
            self._fed_nodes = nodes
            return
        if nodes is not self._fed_nodes:  # the same list every call while the topology stands
            st.replace_nodes(nodes)
            st.replace_hypernodes(hns)
            self._fed_nodes = nodes
        for name in [n for n in self._fed if n not in held]:
            pods, group = self._fed.pop(name)
            for p in pods:
                st.remove_pod(namespaced_key(p))
            st.remove_podgroup(group.key)

        def swap(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
            keep = {namespaced_key(p) for p in new}
            for p in old:
                if namespaced_key(p) not in keep:
                    st.remove_pod(namespaced_key(p))
            for p in new:
                st.set_pod(p)

        for name, objs in held.items():
            old = self._fed.get(name)
            if old is not None and old[0] is objs[0] and old[1] is objs[1]:
                continue
            swap(old[0] if old is not None else [], objs[0])
            st.set_podgroup(objs[1])
            self._fed[name] = objs
        if bg != self._fed_bg:  # background usage: a relist of the group-less pods
            swap(self._fed_bg, bg)
            self._fed_bg = bg
        st.replace_queues([queue])

    def _pending_objects(self, job: JobSpec) -> tuple[list[dict[str, Any]], Any]:
        """Pending pods and PodGroup of a job, built once while it waits (as an informer
        cache would hold them); dropped when the job starts."""
        objs = self._pending.get(job)
        if objs is None:
            created = self._created.get(job.name, 0.0)
            objs = (pod_dicts(job, created), podgroup(job, created))
            self._pending[job] = objs
        return objs

    def decision_cpu(self) -> float:
        """The scheduler's work in the last decision: the watch events into its cache, the
        snapshot and the session (:attr:`timing`); building the pods and PodGroups of the
        simulated cluster and reading the bindings back are the harness's."""
        return self.timing.build_s + self.timing.session_s

    def _write_phase(self, job: JobSpec, outcome: Any) -> None:
        """What the runtime writes back: a waiting job's PodGroup phase as the session left it
        (Inqueue once enqueue admitted it). The next cycle sees that object, as it would see
        the PodGroup's status in the informer cache; without it every cycle would ask enqueue
        again and an admitted gang could fall back to Pending."""
        objs = self._pending.get(job)
        phase = getattr(outcome, "pg_phase", None)
        if objs is None or phase not in ("Pending", "Inqueue"):
            return
        st = objs[1].status
        if ((st.phase if st is not None else None) or "Pending") == phase:
            return
        created = self._created.get(job.name, 0.0)
        self._pending[job] = (objs[0], podgroup(job, created, phase=phase))

    # ---- decisions ---------------------------------------------------------------------

    def place(self, state: ClusterState, job: JobSpec) -> IntArray | None:
        return self.place_batch(state.copy(), [job]).get(job.name)

    def _static_objects(self, state: ClusterState) -> tuple[list[dict[str, Any]], list[Any]]:
        key = id(state.topo)
        cached = self._static.get(key)
        if cached is None or cached[0] is not state.topo:
            cached = (state.topo, node_dicts(state.topo, state.alloc), hypernodes(state.topo))
            self._static = {key: cached}
        return cached[1], cached[2]

    def place_batch(self, state: ClusterState, jobs: Sequence[JobSpec]) -> dict[str, IntArray]:
        from hyperplace.api import Queue

        build_snapshot, run_session, default_config = contract()
        topo = state.topo
        nodes, hns = self._static_objects(state)
        # What the cluster holds, job by job: running jobs' pods (built once at their start),
        # waiting jobs' pods (built once while they wait), and usage not explained by running
        # jobs we know of as per-node background pods.
        background = state.used.copy()
        held: dict[str, tuple[list[dict[str, Any]], Any]] = {}
        for name, run in self._running.items():
            np.subtract.at(background, run.placement, run.job.req)
            held[name] = (run.pods, run.group)
        for name, group in self._ended.items():
            held[name] = ([], group)
        self._ended = {}
        waiting = set(jobs)
        self._pending = {job: objs for job, objs in self._pending.items() if job in waiting}
        for job in jobs:
            held[job.name] = self._pending_objects(job)
        bg = background_pods(topo, background)
        queue = _default_queue(Queue, self.learns_runtimes)
        if self._history is None and self.reserves:
            from scheduler_plugin.model.runtime_history import RuntimeHistory

            self._history = RuntimeHistory()

        def rebuild() -> Any:
            return build_snapshot(
                nodes=nodes,
                pods=self._all_pods(held, bg),
                hypernodes=hns,
                podgroups=[g for _, g in held.values()],
                queues=[queue],
                priority_classes=[],
            )

        t0 = time.process_time()
        if self.incremental:
            self._feed(nodes, hns, held, bg, queue)
            snap = self._state.snapshot()
        else:
            snap = rebuild()
        build_s = time.process_time() - t0
        if self.incremental and os.environ.get("HYPERPLACE_VERIFY_STATE") == "1":
            from scheduler_plugin.cycle.carried import verify_state

            verify_state(self._state, snap, rebuild())  # the harness's check, in neither timing
        t1 = time.process_time()
        result = run_session(
            snap,
            config=self.config or default_config,
            now=None if self._now is None else EPOCH.timestamp() + self._now,
            reservations=self._reservations,
            history=self._history,
        )
        self._reservations = dict(result.reservations)
        for r in self._reservations.values():
            self.holds["held"] += 1
            self.holds["estimated"] += r.estimated_start is not None
            self.holds["backfilled"] += len(r.backfilled)
        t2 = time.process_time()
        self.timing = CycleTiming(build_s, t2 - t1)

        index = {name: i for i, name in enumerate(topo.node_names)}
        out: dict[str, IntArray] = {}
        for job in jobs:
            self._write_phase(job, result.jobs.get(f"{NAMESPACE}/{job.name}"))
            bound = [result.bindings.get(f"{NAMESPACE}/{pod_name(job, i)}") for i in range(job.n_pods)]
            if all(b is not None for b in bound):
                placement = np.asarray([index[str(b)] for b in bound], dtype=np.int64)
                state.apply(job.req, placement)
                out[job.name] = placement
                self._pending.pop(job, None)
            elif any(b is not None for b in bound):
                # A gang must be all-or-nothing; record it and treat the job as not placed.
                n = sum(b is not None for b in bound)
                self.anomalies.append(f"{job.name}: {n} of {job.n_pods} pods bound (partial gang)")
        return out
