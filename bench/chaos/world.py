"""The world of one chaos run: the cluster in the in-memory API server, the control-plane
processes on their severable connections, and the kubelet (:class:`World`; what a run does:
:mod:`.campaign`).

The cluster is drawn per seed: 4-6 racks of 3-4 nodes, each node room for two pods, under one
spine. Volcano Jobs arrive mid-run: gangs of 2-10 pods, half of them small, most hard-bound to
one rack, some to the whole cluster, some too big to ever fit; some of high priority, which go
first. Each Job has a lifecycle policy for ``PodEvicted`` (``RestartJob``, ``RestartTask``,
``RestartPod``, or none: the lost pod is recreated), ``maxRetry`` 5, the default 300 s
tolerations of ``not-ready`` and ``unreachable`` that admission gives every pod, and a short
termination grace. A kubelet starts bound pods (not on a dead node), finishes the deletions of
pods on a node that came back, and a job finishes (all its pods at once) once all its pods have
run on live nodes for its duration without a break. A process that crashes, or stops on its
own, starts afresh after a pause, knowing nothing; its faults, node deaths among them, are
:mod:`.faults`.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.manager import ControllerManager, ManagerConfig
from hyperplace.api.constants import JOB_NAME_KEY
from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import (
    HYPERNODES,
    JOBS,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    Obj,
    meta,
)
from hyperplace.runtime.fakeapi import Connection, FakeApi
from scheduler_plugin.runtime.scheduler import Scheduler, SchedulerOptions

from .faults import Faults
from .outcome import Violation
from .settings import Settings

NS = "chaos"
NODE_CPU = 4
POD_CPU = 2

# Virtual time 0 as a wall time (the fake API's default clock).
CLOCK_ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)


class ChaosServer(FakeApi):
    """The fake API server, keeping a log of every binding that took effect."""

    def __init__(self) -> None:
        super().__init__()
        self.bind_log: list[tuple[str, str]] = []  # (pod uid, node)
        self.on_bind: Callable[[Obj], None] | None = None  # told of each binding as it lands

    def _bind(self, binding: Any, namespace: str | None) -> Obj:
        out = super()._bind(binding, namespace)
        name = str(meta(binding).get("name"))
        pod = self.peek(PODS, f"{namespace}/{name}")
        assert pod is not None
        self.bind_log.append((str(meta(pod).get("uid")), str(pod["spec"]["nodeName"])))
        if self.on_bind is not None:
            self.on_bind(pod)
        return out


@dataclass
class _Process:
    """One incarnation of a control-plane process."""

    kind: str  # "scheduler" | "controller"
    conn: Connection
    task: asyncio.Task[None] | None = None
    calls: int = 0
    crash_at: int | None = None  # crash at this API call of the incarnation
    crash_after_landing: bool = False
    crash_at_bind: int | None = None  # crash as the n-th bind of the incarnation lands


@dataclass
class _Job:
    name: str
    replicas: int
    tier: int | None  # hard highestTierAllowed, None: no topology
    duration: float
    running_since: float | None = None
    finished: bool = False
    policy: str = ""  # the action on PodEvicted ("": none)


@dataclass
class Damage:
    """A gang hit by a node death: when first, when its lost pods could first be replaced (the
    controller's grace, the pods' termination grace and the force-delete delay after the last
    death that hit it), the nodes, and how many replacement binds landed where."""

    at: float
    release: float
    nodes: set[str] = field(default_factory=set)


class _TracedConnection(Connection):
    """A process's connection that tells the campaign which binds are in flight (sent, no
    answer yet): the room they are about to take is not free, and their gang is not idle."""

    def __init__(self, server: FakeApi, world: World) -> None:
        super().__init__(server)
        self.world = world

    async def create(
        self,
        res: Any,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        if subresource != "binding" or self.severed:
            return await super().create(res, obj, namespace, subresource=subresource)
        world, name = self.world, str(meta(obj).get("name", ""))
        job = world.job_of_pod(name)
        key = (id(self), name)
        world.inflight.setdefault(job, {})[key] = str((obj.get("target") or {}).get("name", ""))
        world.bind_activity[job] = world.now
        try:
            return await super().create(res, obj, namespace, subresource=subresource)
        finally:
            world.inflight.get(job, {}).pop(key, None)
            world.bind_activity[job] = world.now


class World:
    """The cluster and the processes of one run, what the checks need to know of them (binds in
    flight, the idle clocks, the violations), and its faults (:attr:`faults`)."""

    def __init__(self, seed: int, settings: Settings) -> None:
        self.seed, self.settings = seed, settings
        self.rng = random.Random(seed)  # the plan: cluster, arrivals, fault windows, crashes
        self.hook_rng = random.Random(seed * 1_000_003 + 7)  # per-call decisions inside windows
        self.server = ChaosServer()
        self.loop = asyncio.get_running_loop()
        self.server.clock = self.wall
        self.racks: dict[str, list[str]] = {}
        self.jobs: dict[str, _Job] = {}
        self.procs: dict[str, _Process | None] = {"scheduler": None, "controller": None}
        self.scheduler: Scheduler | None = None
        self.events: Counter[str] = Counter()
        self.violations: list[Violation] = []  # exited here, the rest by the invariants
        self.bind_concurrency = self.rng.choice((1, 2, 4, 64))
        self.faults = Faults(self)  # draws the storms next, from the same plan
        # The idle clocks (Settings.idle_window): when the last thing that could keep a
        # working scheduler from finishing a gang happened, and binds in flight per job.
        self.noisy_until = 0.0
        self.bind_activity: dict[str, float] = {}  # job -> last bind sent or answered
        self.inflight: dict[str, dict[tuple[int, str], str]] = {}  # job -> {(proc, pod): node}
        self.cordoned: dict[str, float] = {}  # node -> virtual time it is uncordoned
        # Node deaths (faults.py): dead node -> virtual time it comes back (inf: not in this
        # run); the Node objects deleted with their machine; the gangs hit, until whole again.
        self.dead: dict[str, float] = {}
        self.deleted_nodes: dict[str, Obj] = {}
        self.damaged: dict[str, Damage] = {}
        self.bind_checks: list[Callable[[Obj], None]] = []  # the invariants' (escaped)
        self.server.on_bind = self._bound

    @property
    def now(self) -> float:
        """Virtual seconds since the run began."""
        return self.loop.time()

    def wall(self) -> str:
        """The virtual clock as a wall time: the fake API stamps objects with it and the
        scheduler reads it, so waits (reservations, relaxations) run on virtual time."""
        return rfc3339(CLOCK_ORIGIN + timedelta(seconds=self.loop.time()))

    def noise(self, lasting: float) -> None:
        """Something that may keep a working scheduler from finishing a gang for ``lasting``
        seconds from now: the idle clocks start again after it."""
        self.noisy_until = max(self.noisy_until, self.now + lasting)

    def violate(self, invariant: str, detail: str) -> None:
        """Record ``invariant`` broken now (what a user would see: :mod:`.invariants`)."""
        self.violations.append(Violation(self.now, invariant, detail))

    # -- the cluster -------------------------------------------------------------------------

    def build_cluster(self) -> None:
        """The nodes, drawn per seed, their racks and spine (HyperNodes), the priority classes
        and the default queue."""
        n_racks = self.rng.choice(self.settings.racks)
        per_rack = self.rng.choice(self.settings.rack_nodes)
        for r in range(n_racks):
            names = [f"n{r}-{i}" for i in range(per_rack)]
            for n in names:
                alloc = {"cpu": str(NODE_CPU), "memory": "64Gi", "pods": "110"}
                self.server.seed(
                    NODES,
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
                        "spec": {},
                        "status": {
                            "allocatable": alloc,
                            "capacity": alloc,
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    },
                )
            self.racks[f"rack{r}"] = names
            self.server.seed(HYPERNODES, hypernode_obj(f"rack{r}", 1, "Node", names))
        self.server.seed(HYPERNODES, hypernode_obj("spine", 2, "HyperNode", list(self.racks)))
        for name, value in (("high", 1000), ("low", 0)):
            self.server.seed(
                PRIORITY_CLASSES,
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                },
            )
        self.server.seed(
            QUEUES,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "default"},
                "spec": {"weight": 1},
            },
        )

    @property
    def rack_slots(self) -> int:
        """Pods of the campaign's size one rack holds."""
        return len(next(iter(self.racks.values()))) * (NODE_CPU // POD_CPU)

    async def submit_job(self) -> None:
        """A user creates a Volcano Job (a gang: minAvailable = replicas)."""
        i = len(self.jobs)
        name = f"job{i}"
        roll = self.rng.random()
        tier: int | None = 1 if roll < 0.7 else (2 if roll < 0.9 else None)
        # Half of them small (2-3 pods), so racks fill to every level: a gang's remainder
        # then often has a fuller rack than its own to go to, if the scheduler forgets where
        # the gang runs.
        small = self.rng.random() < 0.5
        replicas = (
            self.rng.randint(2, 3)
            if small
            else self.rng.randint(2, self.rack_slots + (2 if tier == 1 else 0))
        )
        # What to do when a pod is lost with its node (PodEvicted), as training Jobs say it.
        policy = self.rng.choice(("RestartJob", "RestartJob", "RestartTask", "RestartPod", ""))
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "queue": "default",
            # A high-priority job arriving while a gang's binds are in flight goes first.
            "priorityClassName": "high" if self.rng.random() < 0.4 else "low",
            "minAvailable": replicas,
            "maxRetry": 5,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "terminationGracePeriodSeconds": self.settings.termination_grace,
                            # What the DefaultTolerationSeconds admission plugin adds to every pod.
                            "tolerations": [
                                {
                                    "key": f"node.kubernetes.io/{key}",
                                    "operator": "Exists",
                                    "effect": "NoExecute",
                                    "tolerationSeconds": 300,
                                }
                                for key in ("not-ready", "unreachable")
                            ],
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": str(POD_CPU), "memory": "1Gi"}},
                                }
                            ],
                        }
                    },
                }
            ],
        }
        if tier is not None:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
        if policy == "RestartJob":
            spec["policies"] = [{"event": "PodEvicted", "action": policy}]
        elif policy:
            spec["tasks"][0]["policies"] = [{"event": "PodEvicted", "action": policy}]
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": spec,
        }
        await self.server.create(JOBS, job, NS)
        self.jobs[name] = _Job(name, replicas, tier, self.rng.uniform(*self.settings.duration), policy=policy)
        self.events["job"] += 1

    # -- the kubelet ---------------------------------------------------------------------------

    async def kubelet(self, *, finish: bool) -> None:
        """Start bound pods and finish the deletion of pods whose containers stopped, on live
        nodes (a dead node's kubelet does nothing); finish jobs whose time has come (all their
        pods at once)."""
        for key, pod in list(self.server.objects.get("pods", {}).items()):
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            node = pod["spec"].get("nodeName")
            if not node or node in self.dead:
                continue
            if meta(pod).get("deletionTimestamp"):  # left on a node that has come back
                await self.server.delete(
                    PODS, key.split("/", 1)[1], NS, uid=str(meta(pod).get("uid")), grace_period_seconds=0
                )
            elif phase == "Pending":
                await self.server.patch(
                    PODS, key.split("/", 1)[1], {"status": {"phase": "Running"}}, NS, subresource="status"
                )
        if not finish:
            return
        by_job = self.pods_by_job()
        for job in self.jobs.values():
            if job.finished:
                continue
            pods = by_job.get(job.name, [])
            running = self.whole(job, pods)
            if not running:
                # A job runs its course only while all its pods run: one that lost pods (a node
                # death, an eviction by the repair step) starts over once whole again.
                job.running_since = None
            elif job.running_since is None:
                job.running_since = self.now
            if job.running_since is not None and self.now - job.running_since >= job.duration:
                for p in pods:
                    await self.server.patch(
                        PODS,
                        p["metadata"]["name"],
                        {"status": {"phase": "Succeeded"}},
                        NS,
                        subresource="status",
                    )
                job.finished = True
                self.events["finished"] += 1

    def whole(self, job: _Job, pods: list[Obj]) -> bool:
        """All of ``job``'s pods run, none on a dead node or being deleted."""
        return len(pods) == job.replicas and all(
            pod_phase(p) == "Running" and p["spec"].get("nodeName") not in self.dead and not terminating(p)
            for p in pods
        )

    def rack_of(self, node: str) -> str | None:
        """The rack (tier-1 HyperNode) ``node`` is in."""
        return next((r for r, members in self.racks.items() if node in members), None)

    def hit(self, job: str, node: str) -> None:
        """``job`` lost a pod with ``node``: it is damaged until it runs whole again (the
        ``recovered`` and ``escaped`` invariants), and its run starts over then."""
        s = self.settings
        release = self.now + s.not_ready_grace + s.termination_grace + s.force_delete_after
        d = self.damaged.setdefault(job, Damage(self.now, release))
        d.release = max(d.release, release)
        d.nodes.add(node)
        if job in self.jobs:
            self.jobs[job].running_since = None
        self.events["gang-hit"] += 1

    def _bound(self, pod: Obj) -> None:
        """A binding landed: on a node already dead, the pod is lost at once."""
        node = str(pod["spec"]["nodeName"])
        job = (meta(pod).get("labels") or {}).get(JOB_NAME_KEY)
        if job and node in self.dead:
            self.hit(str(job), node)
        for check in self.bind_checks:
            check(pod)

    def pods_by_job(self) -> dict[str, list[Obj]]:
        """The server's pods by their Job (the controller's ``volcano.sh/job-name`` label)."""
        out: dict[str, list[Obj]] = {}
        for p in self.server.objects.get("pods", {}).values():
            job = (meta(p).get("labels") or {}).get(JOB_NAME_KEY)
            if job:
                out.setdefault(job, []).append(p)
        return out

    def job_of_pod(self, name: str) -> str:
        """The Job of pod ``name`` (its ``volcano.sh/job-name`` label; the name if none)."""
        pod = self.server.peek(PODS, f"{NS}/{name}")
        return str(((meta(pod).get("labels") or {}) if pod else {}).get(JOB_NAME_KEY) or name)

    # -- processes -----------------------------------------------------------------------------

    def start(self, kind: str) -> None:
        """A fresh incarnation: new connection, empty caches."""
        proc = _Process(kind, _TracedConnection(self.server, self))
        proc.conn.before = lambda a, p=proc: self.faults.before(p, a)
        proc.conn.after = lambda a, p=proc: self.faults.after(p, a)
        proc.conn.watch_delay = self.faults.watch_delay
        if kind == "scheduler":
            options = SchedulerOptions(
                schedule_period=1.0,
                bind_concurrency=self.bind_concurrency,
                api_qps=0,  # the client-side limiters read the wall clock
                status_qps=0,
                event_qps=0,
                podgroup_settle=0.0,  # so does the reporter's settle: write each change at once
                identity=f"chaos-{self.events['scheduler-start']}",
            )
            if self.settings.verify_state is not None:
                options.verify_state = self.settings.verify_state
            sched = Scheduler(proc.conn, options, now=self.wall)
            proc.task = asyncio.create_task(sched.run())
            self.scheduler = sched
            self.noise(0.0)
        else:
            config = ManagerConfig(
                workers=2,
                config_namespace="kube-system",
                seed=self.seed,
                not_ready_grace=self.settings.not_ready_grace,
                force_delete_unreachable_after=self.settings.force_delete_after,
            )
            # The controller reads the virtual clock too: its waits (a policy's timeout, a node's
            # grace, a damaged gang's restart) are measured against the objects' timestamps.
            mgr = ControllerManager(proc.conn, config, now=self.wall)
            proc.task = asyncio.create_task(mgr.run())
        self.procs[kind] = proc
        self.events[f"{kind}-start"] += 1
        proc.task.add_done_callback(functools.partial(self._ended, proc))

    def _ended(self, proc: _Process, task: asyncio.Task[None]) -> None:
        """A process that stops on its own (not killed by the campaign) is a failure of the
        run, not a catch: with --verify-state a drifted state stops the scheduler. Restarted
        after a pause, as the kubelet restarts a container."""
        if self.procs.get(proc.kind) is not proc or self._stopped:
            return
        exc = None if task.cancelled() else task.exception()
        self.violate("exited", f"the {proc.kind} stopped on its own: {exc!r}"[:300])
        self.crash(proc)

    def crash(self, proc: _Process) -> None:
        """Kill -9: the process's calls stop reaching the server at once; restart later."""
        if self.procs.get(proc.kind) is not proc or proc.conn.severed:
            return
        proc.conn.sever()
        if proc.kind == "scheduler":
            self.noise(0.0)
            for binds in self.inflight.values():  # their answers will never come
                for k in [k for k in binds if k[0] == id(proc.conn)]:
                    del binds[k]
        if proc.task is not None:
            proc.task.cancel()
        self.procs[proc.kind] = None
        self.events[f"{proc.kind}-crash"] += 1
        self.loop.call_later(self.hook_rng.uniform(0.0, 3.0), self._restart, proc.kind)

    def _restart(self, kind: str) -> None:
        if self.procs.get(kind) is None and not self._stopped:
            self.start(kind)

    _stopped = False

    async def stop_all(self) -> None:
        """The end of the run: every process stopped for good, none restarted."""
        self._stopped = True
        for kind, proc in list(self.procs.items()):
            if proc is not None and proc.task is not None:
                proc.conn.sever()
                proc.task.cancel()
                await asyncio.gather(proc.task, return_exceptions=True)
            self.procs[kind] = None


def hypernode_obj(name: str, tier: int, member_type: str, members: list[str]) -> Obj:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def terminating(pod: Obj) -> bool:
    """Being deleted (``deletionTimestamp`` set)."""
    return bool(meta(pod).get("deletionTimestamp"))


def pod_phase(pod: Obj) -> str:
    """A pod's phase (Pending until it has one)."""
    return str((pod.get("status") or {}).get("phase") or "Pending")
