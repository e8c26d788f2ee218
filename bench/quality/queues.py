"""Shared-cluster trace: two queues, two priorities, preemption and reclaim (``--parts queues``).

Team ``a`` floods an empty cluster with low-priority gangs; team ``b`` (same weight) starts
submitting later, so its half has to come back by ``reclaim``; from mid-run both teams also
submit high-priority gangs, which take room from their own team's low-priority work by
``preempt``. Gangs are whole 8-GPU nodes (1-8 pods); the multi-pod ones are bound to one leaf
(hard tier 1), as training jobs are.

Both schedulers see the same arrivals, on the same array model (:mod:`.model`), in ticks:

* **ours**: the real scheduler (``run_session`` with ``enqueue, allocate, preempt, reclaim,
  backfill``, Volcano's default tiers plus ``drf``/``proportion``), driven with wire objects as
  ``ours.py`` does: Queues and PriorityClasses, the PodGroup phase the scheduler wrote last
  cycle, the clock, and the nominations and reservations it returned;
* **volcano-legacy**: our reading of Volcano's code on the same array model. ``enqueue``
  admits a job when its GPUs fit ``1.2 x total - used - Inqueue`` (overcommit's default
  factor); ``allocate`` (:class:`~.schedulers.VolcanoScheduler`) walks Inqueue jobs by
  priority, skipping a queue at its deserved share while the other waits; then the legacy
  ``preempt`` and ``reclaim`` work one preemptor pod at a time, node by node, evicting
  victims lowest priority first until the pod fits, and commit a job's evictions only if all
  its pods found room. Victims follow ``Session.Preemptable``/``Reclaimable`` under the
  default tiers: gang's tier-1 veto protects every job running at its minMember (all of them
  here), which empties tier 1, so tier 2 decides: ``drf`` for preempt (the preemptor's share
  with the pod <= the victim job's share without it, priority not consulted) and
  ``proportion`` for reclaim (pods of the queue still above its deserved share). Jobs with a
  network topology skip preempt (anchors.md B.1, #4374) but not reclaim, which has no
  HyperNode logic: a hard gang's pods are freed wherever victims are, and the gang is placed
  only once a leaf has room.

  Simplifications: for each pod the node chosen is the one that needs the fewest victims
  (Volcano takes the first node in score order whose victims suffice: never fewer victims);
  deserved shares are the two-queue water-filling on GPUs; proportion's capability,
  guarantee and the queue's own enqueue checks are left out (no queue has a capability
  here); tier 1's quirks when priority and gang both return tasks are not modelled (gang
  never does here); a pipelined preemptor is placed by the next cycle's allocate, where it
  is first in line if it has the higher priority; pods are whole nodes.

Evicting any pod of a gang stops the whole job (it restarts from scratch once placed again),
so a preemption's cost is its victim pods plus the pods of broken gangs. Reported: per queue
the time-averaged GPU share against deserved (while both teams have work), per preemption
and reclaim the victim pods and broken gangs, and queueing delay by priority.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from .model import GPU, ClusterState, IntArray, JobSpec, NetTopology, Task
from .schedulers import VolcanoScheduler
from .wire import EPOCH, NAMESPACE, hypernodes, node_dicts, pod_dicts, podgroup

QUEUES = ("team-a", "team-b")
PRIORITY = {"high": 1000, "low": 0}
NODE_REQ = (120_000, 900 * 1024, 8)  # one pod per 8-GPU node


@dataclass
class QJob:
    """One job of the trace and what happened to it."""

    spec: JobSpec
    queue: str
    priority: str
    arrival: float
    duration: float
    start: float | None = None  # current run
    first_start: float | None = None
    placement: IntArray | None = None
    done: float | None = None
    restarts: int = 0

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class Disruption:
    """One preemptor's evictions in one cycle."""

    action: str  # "preempt" | "reclaim"
    victim_pods: int
    broken_gangs: int  # victim jobs that lost some but not all of their pods
    stopped_pods: int  # every pod of every victim job (all stop: a gang cannot run short)
    preemptor_priority: str = "high"
    preemptor_pods: int = 1  # pods of the job the room was made for


@dataclass
class QueueRun:
    scheduler: str
    jobs: list[QJob]
    disruptions: list[Disruption]
    share: dict[str, float]  # time-averaged GPU share while both teams have work
    deserved: dict[str, float]
    contended_s: float
    cpu_s: float
    # (held GPUs, deserved GPUs) per queue at every contended tick, over total GPUs
    timeline: list[dict[str, tuple[float, float]]] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)


def queue_trace(seed: int, state: ClusterState, jobs: int, horizon: float) -> list[QJob]:
    """Team a from t=0, team b from 30 % of the horizon, high priority from 50 %."""
    rng = np.random.default_rng(seed)
    nodes = state.topo.n_nodes
    out: list[QJob] = []
    for i in range(jobs):
        team = "team-a" if i % 2 == 0 else "team-b"
        lo = 0.0 if team == "team-a" else 0.3 * horizon
        t = float(rng.uniform(lo, horizon))
        high = t > 0.5 * horizon and rng.random() < 0.25
        pods = int(rng.choice((1, 1, 2, 4, 8)))
        pods = min(pods, max(1, nodes // 8))
        topo = NetTopology("hard", 1) if pods > 1 else None
        spec = JobSpec(f"q{i:04d}", (Task("worker", NODE_REQ, pods),), topo)
        dur = float(rng.lognormal(np.log(3600.0), 0.6))
        out.append(QJob(spec, team, "high" if high else "low", t, dur))
    out.sort(key=lambda j: j.arrival)
    return out


# -- our scheduler --------------------------------------------------------------------------


def _config() -> Any:
    from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT, load_scheduler_config

    doc = yaml.safe_load(DEFAULT_CONFIG_TEXT)
    doc["actions"] = "enqueue, allocate, preempt, reclaim, backfill"
    return load_scheduler_config(yaml.safe_dump(doc), source="<queues trace>")


def _queue_objects() -> tuple[list[Any], list[dict[str, Any]]]:
    from hyperplace.api import Queue

    queues = [
        Queue.model_validate({"metadata": {"name": q}, "spec": {"weight": 1, "reclaimable": True}})
        for q in QUEUES
    ]
    pcs = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in PRIORITY.items()
    ]
    return queues, pcs


def _objects(job: QJob, state: ClusterState, phase: str | None) -> tuple[list[dict[str, Any]], Any]:
    from hyperplace.api import PodGroup

    running = job.start is not None
    created = job.arrival
    pods = pod_dicts(job.spec, created, job.placement if running else None, state.topo if running else None)
    for p in pods:
        p["metadata"]["uid"] = f"{job.name}-r{job.restarts}-{p['metadata']['name']}"
        p["metadata"]["labels"]["volcano.sh/queue-name"] = job.queue
        p["spec"]["priorityClassName"] = job.priority
        p["spec"]["priority"] = PRIORITY[job.priority]
    pg = podgroup(job.spec, created, running=running).to_dict()
    pg["spec"]["queue"] = job.queue
    pg["spec"]["priorityClassName"] = job.priority
    if not running and phase:
        pg["status"] = {"phase": phase}  # what the scheduler wrote last cycle
    return pods, PodGroup.model_validate(pg)


class OursDriver:
    """Drives ``run_session`` with the cluster as an informer cache would hold it."""

    name = "hyperplace"

    def __init__(self, state: ClusterState) -> None:
        self.config = _config()
        self.nodes = node_dicts(state.topo, state.alloc)
        self.hns = hypernodes(state.topo)
        self.queues, self.pcs = _queue_objects()
        self.phase: dict[str, str] = {}
        self.nominations: dict[str, Any] = {}
        self.reservations: dict[str, Any] = {}
        self.index = {n: i for i, n in enumerate(state.topo.node_names)}
        self.state: Any = None  # the scheduler's incremental ClusterState, as ours.py drives it
        self.anomalies: list[str] = []

    def cycle(
        self, state: ClusterState, now: float, running: list[QJob], pending: list[QJob]
    ) -> tuple[dict[str, IntArray], dict[str, list[tuple[str, str]]]]:
        """Placements of pending jobs, and evictions per preemptor ``(action, victim job)``."""
        from scheduler_plugin.cache.cluster_state import ClusterState as SchedulerState
        from scheduler_plugin.cache.rebuild import build_snapshot
        from scheduler_plugin.cycle import run_session

        pods: list[dict[str, Any]] = []
        groups = []
        for job in running + pending:
            p, g = _objects(job, state, self.phase.get(job.name))
            pods += p
            groups.append(g)
        if self.state is None:
            self.state = SchedulerState()
        self.state.replace_all(self.nodes, pods, self.hns, groups, self.queues, self.pcs)
        snap = self.state.snapshot()
        if os.environ.get("HYPERPLACE_VERIFY_STATE") == "1":
            from scheduler_plugin.cycle.carried import verify_state

            rebuilt = build_snapshot(
                nodes=self.nodes,
                pods=pods,
                hypernodes=self.hns,
                podgroups=groups,
                queues=self.queues,
                priority_classes=self.pcs,
            )
            verify_state(self.state, snap, rebuilt)
        result = run_session(
            snap,
            self.config,
            nominations=self.nominations,
            now=EPOCH.timestamp() + now,
            reservations=self.reservations,
        )
        self.nominations = dict(result.nominations)
        self.reservations = dict(result.reservations)
        for key, outcome in result.jobs.items():
            if outcome.pg_phase:
                self.phase[key.split("/", 1)[1]] = outcome.pg_phase
        placed: dict[str, IntArray] = {}
        for job in pending:
            bound = [result.bindings.get(f"{NAMESPACE}/{p['metadata']['name']}") for p in pod_dicts(job.spec)]
            if all(b is not None for b in bound):
                placed[job.name] = np.asarray([self.index[str(b)] for b in bound], dtype=np.int64)
            elif any(b is not None for b in bound):
                n = sum(b is not None for b in bound)
                self.anomalies.append(
                    f"t={now:.0f}: {job.name} {n} of {job.spec.n_pods} pods bound (partial gang)"
                )
        evictions: dict[str, list[tuple[str, str]]] = {}
        for ev in result.evictions:
            evictions.setdefault(ev.preemptor.split("/", 1)[1], []).append(
                (ev.action, ev.victim_job.split("/", 1)[1])
            )
        return placed, evictions


# -- the Volcano baseline -------------------------------------------------------------------


def deserved_gpus(total: float, demand: dict[str, float]) -> dict[str, float]:
    """Two-queue water-filling of equal weights on GPUs (proportion's deserved)."""
    out = dict.fromkeys(demand, 0.0)
    left, active = total, [q for q in demand if demand[q] > 0]
    while active and left > 1e-9:
        each = left / len(active)
        done = [q for q in active if demand[q] - out[q] <= each]
        if not done:
            for q in active:
                out[q] += each
            break
        for q in done:
            left -= demand[q] - out[q]
            out[q] = demand[q]
        active = [q for q in active if q not in done]
    return out


OVERCOMMIT = 1.2  # Volcano's overcommit plugin default (overcommit-factor)


class VolcanoDriver:
    """Volcano's enqueue (overcommit) and allocate, then its legacy ``preempt`` and ``reclaim``.

    Victims follow Volcano's tier chain (``Session.Preemptable``/``Reclaimable``) under the
    default tiers ``[priority, gang, conformance]``, ``[drf, predicates, proportion, ...]``:
    tier 1 intersects priority (lower job priority) with gang, whose veto holds every task of
    a job running at its minMember; every gang here runs at exactly minMember, so tier 1 is
    always empty and tier 2 decides: ``drf`` for preempt (the preemptor's dominant share
    after the pod <= the victim job's share without it, whatever its priority) and
    ``proportion`` for reclaim (tasks of queues still above their deserved share).
    """

    name = "volcano-legacy"

    def __init__(self, state: ClusterState, seed: int) -> None:
        self.alloc = VolcanoScheduler(seed=seed)
        self.inqueue: set[str] = set()

    def cycle(
        self, state: ClusterState, now: float, running: list[QJob], pending: list[QJob]
    ) -> tuple[dict[str, IntArray], dict[str, list[tuple[str, str]]]]:
        total = float(state.alloc[:, GPU].sum())
        held = {q: 0.0 for q in QUEUES}
        demand = {q: 0.0 for q in QUEUES}
        for j in running:
            held[j.queue] += _gpus(j)
            demand[j.queue] += _gpus(j)
            self.inqueue.discard(j.name)  # an evicted job is recreated Pending, admitted again
        for j in pending:
            demand[j.queue] += _gpus(j)
        deserved = deserved_gpus(total, demand)
        order = sorted(pending, key=lambda j: (-PRIORITY[j.priority], j.arrival))
        # enqueue: minResources must fit total * factor - used - already Inqueue.
        budget = OVERCOMMIT * total - sum(held.values())
        budget -= sum(_gpus(j) for j in pending if j.name in self.inqueue)
        for job in order:
            if job.name not in self.inqueue and _gpus(job) <= budget + 1e-9:
                self.inqueue.add(job.name)
                budget -= _gpus(job)
        placed: dict[str, IntArray] = {}
        work = state.copy()
        # allocate: Inqueue jobs in order, a queue at its deserved share skipped while the other waits.
        for job in order:
            if job.name not in self.inqueue:
                continue
            if held[job.queue] + _gpus(job) > deserved[job.queue] + 1e-9 and any(
                o.queue != job.queue for o in pending if o.name not in placed and o.name in self.inqueue
            ):
                continue
            where = self.alloc.place(work, job.spec)
            if where is not None:
                work.apply(job.spec.req, where)
                placed[job.name] = where
                held[job.queue] += _gpus(job)
        starving = [j for j in order if j.name in self.inqueue and j.name not in placed]
        evict = _Evictor(work, running, held, deserved, total)
        evictions: dict[str, list[tuple[str, str]]] = {}
        for job in starving:  # preempt: within the queue; jobs with a network topology skip it (#4374)
            if job.spec.topology is None:
                evs = evict.for_job(job, "preempt")
                if evs:
                    evictions[job.name] = evs
        for job in starving:  # reclaim: across queues, topology ignored (it has no HyperNode logic)
            if job.name not in evictions and held[job.queue] < deserved[job.queue] - 1e-9:
                evs = evict.for_job(job, "reclaim")
                if evs:
                    evictions[job.name] = evs
        # The preemptor is pipelined where it evicted; the next cycle's allocate places it.
        return placed, evictions


def _gpus(job: QJob) -> float:
    return float(job.spec.req[:, GPU].sum())


class _Evictor:
    """Volcano's per-task, node-by-node victim search on one cycle's working state."""

    def __init__(
        self,
        work: ClusterState,
        running: list[QJob],
        held: dict[str, float],
        deserved: dict[str, float],
        total: float,
    ) -> None:
        self.work, self.held, self.deserved, self.total = work, held, deserved, total
        self.on_node: dict[int, list[QJob]] = {}
        for j in running:
            assert j.placement is not None
            for n in j.placement.tolist():
                self.on_node.setdefault(n, []).append(j)
        self.evicted: dict[str, set[int]] = {}  # victim job -> nodes its evicted pods were on
        self.pod_gpus = {j.name: float(j.spec.req[0, GPU]) for j in running}

    def _left(self, j: QJob) -> float:
        """GPUs the victim job still holds (drf's job allocation, updated on every evict)."""
        return _gpus(j) - self.pod_gpus[j.name] * len(self.evicted.get(j.name, ()))

    def victims(self, job: QJob, action: str, node: int, mine: float) -> list[QJob]:
        """Tier 2's victims on ``node`` for one pod of ``job``, lowest priority first."""
        cands = [j for j in self.on_node.get(node, []) if node not in self.evicted.get(j.name, set())]
        out: list[QJob] = []
        if action == "preempt":
            ls = (mine + float(job.spec.req[0, GPU])) / self.total
            for v in cands:
                if v.queue == job.queue and v.name != job.name:
                    rs = (self._left(v) - self.pod_gpus[v.name]) / self.total
                    if ls <= rs + 1e-6:  # drf: ls < rs or |ls - rs| <= shareDelta
                        out.append(v)
        else:
            alloc = dict(self.held)
            for v in cands:
                if v.queue != job.queue and alloc[v.queue] > self.deserved[v.queue] + 1e-9:
                    alloc[v.queue] -= self.pod_gpus[v.name]
                    out.append(v)
        return sorted(out, key=lambda v: (PRIORITY[v.priority], -(v.start or 0.0)))

    def for_job(self, job: QJob, action: str) -> list[tuple[str, str]]:
        """Evictions that pipeline every pod of ``job`` (committed only if all of them fit)."""
        undo: list[tuple[QJob, int]] = []
        mine = 0.0
        for pod in range(job.spec.n_pods):
            req = job.spec.req[pod]
            if action == "reclaim" and self.held[job.queue] + req[GPU] > self.deserved[job.queue] + 1e-9:
                break  # proportion's Preemptive: the queue would pass its deserved share
            best: tuple[int, int, list[QJob]] | None = None
            for node in self.on_node:
                free = self.work.alloc[node] - self.work.used[node]
                chosen: list[QJob] = []
                for v in self.victims(job, action, node, mine):
                    if (free >= req).all():
                        break
                    free = free + v.spec.req[0]
                    chosen.append(v)
                if chosen and (free >= req).all() and (best is None or len(chosen) < best[0]):
                    best = (len(chosen), node, chosen)
            if best is None:
                break
            _n, node, chosen = best
            for v in chosen:
                self.evicted.setdefault(v.name, set()).add(node)
                self.work.used[node] -= v.spec.req[0]
                self.held[v.queue] -= self.pod_gpus[v.name]
                undo.append((v, node))
            self.work.used[node] += req  # pipelined
            self.held[job.queue] += float(req[GPU])
            mine += float(req[GPU])
            undo.append((job, node))
        else:
            return [(action, v.name) for v, _node in undo if v is not job]
        for v, node in reversed(undo):  # not every pod pipelined: the statement is discarded
            if v is job:
                self.work.used[node] -= job.spec.req[0]
                self.held[job.queue] -= float(job.spec.req[0, GPU])
            else:
                self.evicted[v.name].discard(node)
                self.work.used[node] += v.spec.req[0]
                self.held[v.queue] += self.pod_gpus[v.name]
        return []


# -- the simulation ---------------------------------------------------------------------------


def simulate_queues(driver: Any, state0: ClusterState, trace: list[QJob], tick: float = 60.0) -> QueueRun:
    """Run the trace; evicted jobs lose their run and wait again."""
    jobs = [QJob(j.spec, j.queue, j.priority, j.arrival, j.duration) for j in trace]
    by_name = {j.name: j for j in jobs}
    state = state0.copy()
    total = float(state.alloc[:, GPU].sum())
    t, nxt = 0.0, 0
    pending: list[QJob] = []
    running: list[QJob] = []
    disruptions: list[Disruption] = []
    share_area = {q: 0.0 for q in QUEUES}
    deserved_area = {q: 0.0 for q in QUEUES}
    contended = 0.0
    cpu = 0.0
    timeline: list[dict[str, tuple[float, float]]] = []
    end = max(j.arrival for j in jobs) * 3.0
    while t <= end:
        for j in [r for r in running if r.start is not None and r.start + r.duration <= t]:
            assert j.placement is not None
            state.apply(j.spec.req, j.placement, sign=-1)
            j.done, j.start, j.placement = t, None, None
            running.remove(j)
        while nxt < len(jobs) and jobs[nxt].arrival <= t:
            pending.append(jobs[nxt])
            nxt += 1
        if pending:
            c0 = time.process_time()
            placed, evictions = driver.cycle(state, t, running, pending)
            cpu += time.process_time() - c0
            victims_done: set[str] = set()
            for pre, evs in evictions.items():
                victim_jobs = {v for _, v in evs}
                pods = len(evs)
                broken = sum(1 for v in victim_jobs if evs and _pods_of(by_name[v]) > _count(evs, v))
                stopped = sum(_pods_of(by_name[v]) for v in victim_jobs if v not in victims_done)
                disruptions.append(
                    Disruption(
                        evs[0][0], pods, broken, stopped, by_name[pre].priority, by_name[pre].spec.n_pods
                    )
                )
                for v in victim_jobs - victims_done:
                    victims_done.add(v)
                    vj = by_name[v]
                    if vj.start is None or vj.placement is None:
                        continue
                    state.apply(vj.spec.req, vj.placement, sign=-1)
                    vj.start, vj.placement = None, None
                    vj.restarts += 1
                    running.remove(vj)
                    pending.append(vj)
            for name, where in placed.items():
                j = by_name[name]
                if j.start is not None or name in victims_done:
                    continue
                if (state.used[where] + j.spec.req > state.alloc[where]).any():
                    continue  # a stale decision (room taken by an eviction's undo); retried next tick
                state.apply(j.spec.req, where)
                j.start, j.placement = t, where
                j.first_start = j.first_start if j.first_start is not None else t
                running.append(j)
            pending = [j for j in pending if j.start is None]
        demand = {q: 0.0 for q in QUEUES}
        held = {q: 0.0 for q in QUEUES}
        for j in running:
            held[j.queue] += float(j.spec.req[:, GPU].sum())
            demand[j.queue] += float(j.spec.req[:, GPU].sum())
        for j in pending:
            demand[j.queue] += float(j.spec.req[:, GPU].sum())
        if all(demand[q] > 0 for q in QUEUES):
            des = deserved_gpus(total, demand)
            for q in QUEUES:
                share_area[q] += tick * held[q] / total
                deserved_area[q] += tick * des[q] / total
            contended += tick
            timeline.append({q: (held[q] / total, des[q] / total) for q in QUEUES})
        if nxt >= len(jobs) and not pending and not running:
            break
        t += tick
    window = max(contended, 1e-9)
    return QueueRun(
        driver.name,
        jobs,
        disruptions,
        {q: share_area[q] / window for q in QUEUES},
        {q: deserved_area[q] / window for q in QUEUES},
        contended,
        cpu,
        anomalies=list(getattr(driver, "anomalies", [])),
        timeline=timeline,
    )


def _pods_of(job: QJob) -> int:
    return job.spec.n_pods


def _count(evs: list[tuple[str, str]], victim: str) -> int:
    return sum(1 for _, v in evs if v == victim)


def summarize_queues(run: QueueRun) -> dict[str, float]:
    """Numbers of one run (keys named after the table's rows)."""

    def pct(a: list[float], q: float) -> float:
        return float(np.percentile(a, q)) if a else float("nan")

    out: dict[str, float] = {}
    for q in QUEUES:
        out[f"share_{q}"] = run.share[q]
        out[f"deserved_{q}"] = run.deserved[q]
        # Share over time: the contended window in quarters (the timeline's ticks are equal).
        for k, part in enumerate(np.array_split(np.arange(len(run.timeline)), 4), start=1):
            ticks = [run.timeline[i][q] for i in part.tolist()]
            out[f"share_{q}_q{k}"] = float(np.mean([h for h, _ in ticks])) if ticks else float("nan")
            out[f"deserved_{q}_q{k}"] = float(np.mean([d for _, d in ticks])) if ticks else float("nan")
    for action in ("preempt", "reclaim"):
        ds = [d for d in run.disruptions if d.action == action]
        out[f"{action}_count"] = float(len(ds))
        out[f"{action}_by_low"] = float(sum(1 for d in ds if d.preemptor_priority == "low"))
        out[f"{action}_victims_mean"] = float(np.mean([d.victim_pods for d in ds])) if ds else float("nan")
        out[f"{action}_victims_p95"] = pct([d.victim_pods for d in ds], 95)
        out[f"{action}_broken_mean"] = float(np.mean([d.broken_gangs for d in ds])) if ds else float("nan")
        out[f"{action}_broken_p95"] = pct([d.broken_gangs for d in ds], 95)
        out[f"{action}_broken_total"] = float(sum(d.broken_gangs for d in ds))
        out[f"{action}_stopped_mean"] = float(np.mean([d.stopped_pods for d in ds])) if ds else float("nan")
        # Normalised by the preemptor's size: a gang preemptor needs room for all its pods.
        out[f"{action}_stopped_per_pod"] = (
            float(np.mean([d.stopped_pods / d.preemptor_pods for d in ds])) if ds else float("nan")
        )
    for prio in PRIORITY:
        waits = [
            (j.first_start - j.arrival) for j in run.jobs if j.priority == prio and j.first_start is not None
        ]
        out[f"wait_{prio}_p50_s"] = pct(waits, 50)
        out[f"wait_{prio}_p95_s"] = pct(waits, 95)
        out[f"unstarted_{prio}"] = float(
            sum(1 for j in run.jobs if j.priority == prio and j.first_start is None)
        )
    out["restarts"] = float(sum(j.restarts for j in run.jobs))
    out["stopped_total"] = float(sum(d.stopped_pods for d in run.disruptions))
    out["anomalies"] = float(len(run.anomalies))
    out["cpu_s"] = run.cpu_s
    return out


ROWS = (
    ("share of team-a (deserved)", "share_team-a", "deserved_team-a", "pct"),
    ("share of team-b (deserved)", "share_team-b", "deserved_team-b", "pct"),
    *(
        (f"share of {q} (deserved) in quarter {k}", f"share_{q}_q{k}", f"deserved_{q}_q{k}", "pct")
        for q in QUEUES
        for k in range(1, 5)
    ),
    ("preemptions / of them by a low-priority job", "preempt_count", "preempt_by_low", "n"),
    ("victim pods per preemption, mean / p95", "preempt_victims_mean", "preempt_victims_p95", "f"),
    ("broken gangs per preemption, mean / p95", "preempt_broken_mean", "preempt_broken_p95", "f"),
    ("broken gangs by preemption, total", "preempt_broken_total", None, "n"),
    ("pods stopped per preemption, mean", "preempt_stopped_mean", None, "f"),
    ("pods stopped per preemptor pod, mean", "preempt_stopped_per_pod", None, "f"),
    ("reclaims", "reclaim_count", None, "n"),
    ("victim pods per reclaim, mean / p95", "reclaim_victims_mean", "reclaim_victims_p95", "f"),
    ("broken gangs per reclaim, mean / p95", "reclaim_broken_mean", "reclaim_broken_p95", "f"),
    ("broken gangs by reclaim, total", "reclaim_broken_total", None, "n"),
    ("pods stopped per reclaim, mean", "reclaim_stopped_mean", None, "f"),
    ("pods stopped per reclaimer pod, mean", "reclaim_stopped_per_pod", None, "f"),
    ("pods stopped by preempt and reclaim, total", "stopped_total", None, "n"),
    ("jobs restarted after eviction", "restarts", None, "n"),
    ("queueing delay p50 / p95, high priority", "wait_high_p50_s", "wait_high_p95_s", "s"),
    ("queueing delay p50 / p95, low priority", "wait_low_p50_s", "wait_low_p95_s", "s"),
    ("never started, high / low", "unstarted_high", "unstarted_low", "n"),
    ("partial gangs bound (must be 0)", "anomalies", None, "n"),
)


def _fmt(v: float, kind: str) -> str:
    if v != v:  # NaN
        return "-"
    if kind == "pct":
        return f"{100 * v:.1f} %"
    if kind == "n":
        return f"{v:.0f}"
    if kind == "s":
        return f"{v / 60:.1f} min" if v >= 60 else f"{v:.0f} s"
    return f"{v:.2f}"


def queue_table(summaries: dict[str, dict[str, float]]) -> str:
    """Markdown: one row per measure, one column per scheduler."""
    names = list(summaries)
    lines = ["| measure | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, a, b, kind in ROWS:
        cells = []
        for n in names:
            s = summaries[n]
            cell = _fmt(s[a], kind)
            if b is not None:
                sep = " (" if kind == "pct" else " / "
                cell += sep + _fmt(s[b], kind) + (")" if kind == "pct" else "")
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_queue_part(seed: int, quick: bool) -> tuple[str, dict[str, dict[str, float]]]:
    """Both schedulers on the seed's trace; the markdown table and the numbers."""
    from .generators import clos_cluster

    state = clos_cluster(8, 4, 2) if quick else clos_cluster(16, 8, 2)
    jobs, horizon = (160, 6 * 3600.0) if quick else (600, 12 * 3600.0)
    trace = queue_trace(seed, state, jobs, horizon)
    summaries: dict[str, dict[str, float]] = {}
    for driver in (OursDriver(state), VolcanoDriver(state, seed)):
        run = simulate_queues(driver, state, trace)
        summaries[driver.name] = summarize_queues(run)
    return queue_table(summaries), summaries


__all__ = [
    "Disruption",
    "OursDriver",
    "QJob",
    "QueueRun",
    "VolcanoDriver",
    "deserved_gpus",
    "queue_table",
    "queue_trace",
    "run_queue_part",
    "simulate_queues",
    "summarize_queues",
]
