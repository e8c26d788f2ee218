"""The world of one chaos run: the cluster in the in-memory API server, the control-plane
processes on their severable connections, the kubelet, and (for now) the invariants
(:class:`World`; what a run does: :mod:`.campaign`).

The cluster is drawn per seed: 4-6 racks of 3-4 nodes, each node room for two pods, under one
spine. Volcano Jobs arrive mid-run: gangs of 2-10 pods, half of them small, most hard-bound to
one rack, some to the whole cluster, some too big to ever fit; some of high priority, which go
first. A kubelet starts bound pods, and a job finishes (all its pods at once) its duration after
all its pods run. A process that crashes, or stops on its own, starts afresh after a pause,
knowing nothing; its faults are :mod:`.faults`.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.manager import ControllerManager, ManagerConfig
from hyperplace.api.constants import GROUP_NAME_ANNOTATION, JOB_NAME_KEY
from hyperplace.api.times import rfc3339
from hyperplace.kube import milli_value
from hyperplace.runtime.api import (
    HYPERNODES,
    JOBS,
    NODES,
    PODGROUPS,
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
TERMINAL = ("Succeeded", "Failed")

# Virtual time 0 as a wall time (the fake API's default clock).
CLOCK_ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)


class ChaosServer(FakeApi):
    """The fake API server, keeping a log of every binding that took effect."""

    def __init__(self) -> None:
        super().__init__()
        self.bind_log: list[tuple[str, str]] = []  # (pod uid, node)

    def _bind(self, binding: Any, namespace: str | None) -> Obj:
        out = super()._bind(binding, namespace)
        name = str(meta(binding).get("name"))
        pod = self.peek(PODS, f"{namespace}/{name}")
        assert pod is not None
        self.bind_log.append((str(meta(pod).get("uid")), str(pod["spec"]["nodeName"])))
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
        world._bind_activity[job] = world.now
        try:
            return await super().create(res, obj, namespace, subresource=subresource)
        finally:
            world.inflight.get(job, {}).pop(key, None)
            world._bind_activity[job] = world.now


class World:
    """The cluster, the processes and the invariants of one run; its faults are :attr:`faults`."""

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
        self._cycles: list[tuple[float, int]] = []  # (virtual time, cycles of the incarnation)
        self._wall_start = time.perf_counter()
        self.events: Counter[str] = Counter()
        self.violations: list[Violation] = []
        self._seen_podgroups: set[str] = set()
        self._partial_since: dict[str, float] = {}
        self._node_of_uid: dict[str, str] = {}
        self._binds_checked = 0
        self.longest_partial = 0.0
        self.longest_idle = 0.0  # the longest a waiting gang saw nothing happen (Settings.idle_window)
        self._blocked: set[str] = set()
        self.bind_concurrency = self.rng.choice((1, 2, 4, 64))
        self.faults = Faults(self)  # draws the storms next, from the same plan
        # The idle clocks (Settings.idle_window): when the last thing that could keep a
        # working scheduler from finishing a gang happened, and binds in flight per job.
        self._noisy_until = 0.0
        self._bind_activity: dict[str, float] = {}  # job -> last bind sent or answered
        self.inflight: dict[str, dict[tuple[int, str], str]] = {}  # job -> {(proc, pod): node}
        self._idle_since: dict[str, float] = {}
        self.cordoned: dict[str, float] = {}  # node -> virtual time it is uncordoned

    @property
    def now(self) -> float:
        return self.loop.time()

    def wall(self) -> str:
        """The virtual clock as a wall time: the fake API stamps objects with it and the
        scheduler reads it, so waits (reservations, relaxations) run on virtual time."""
        return rfc3339(CLOCK_ORIGIN + timedelta(seconds=self.loop.time()))

    def noise(self, lasting: float) -> None:
        """Something that may keep a working scheduler from finishing a gang for ``lasting``
        seconds from now: the idle clocks start again after it."""
        self._noisy_until = max(self._noisy_until, self.now + lasting)

    # -- the cluster -------------------------------------------------------------------------

    def build_cluster(self) -> None:
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
            self.server.seed(HYPERNODES, _hypernode(f"rack{r}", 1, "Node", names))
        self.server.seed(HYPERNODES, _hypernode("spine", 2, "HyperNode", list(self.racks)))
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
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "queue": "default",
            # A high-priority job arriving while a gang's binds are in flight goes first.
            "priorityClassName": "high" if self.rng.random() < 0.4 else "low",
            "minAvailable": replicas,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "spec": {
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
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": spec,
        }
        await self.server.create(JOBS, job, NS)
        self.jobs[name] = _Job(name, replicas, tier, self.rng.uniform(*self.settings.duration))
        self.events["job"] += 1

    # -- the kubelet ---------------------------------------------------------------------------

    async def kubelet(self, *, finish: bool) -> None:
        """Start bound pods; finish jobs whose time has come (all their pods at once)."""
        for key, pod in list(self.server.objects.get("pods", {}).items()):
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            if pod["spec"].get("nodeName") and phase == "Pending":
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
            running = len(pods) == job.replicas and all(_phase(p) == "Running" for p in pods)
            if running and job.running_since is None:
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
            self._cycles = []
            self.noise(0.0)
        else:
            mgr = ControllerManager(
                proc.conn, ManagerConfig(workers=2, config_namespace="kube-system", seed=self.seed)
            )
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
        self._violate("exited", f"the {proc.kind} stopped on its own: {exc!r}"[:300])
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
        self._stopped = True
        for kind, proc in list(self.procs.items()):
            if proc is not None and proc.task is not None:
                proc.conn.sever()
                proc.task.cancel()
                await asyncio.gather(proc.task, return_exceptions=True)
            self.procs[kind] = None

    # -- invariants ------------------------------------------------------------------------------

    def _violate(self, invariant: str, detail: str) -> None:
        self.violations.append(Violation(self.now, invariant, detail))

    def check(self) -> None:
        """The invariants that must hold at every moment (partial: within its window)."""
        if self.scheduler is not None:
            self._cycles.append((self.now, self.scheduler.cycles))
            while self._cycles and self._cycles[0][0] < self.now - 5.0:
                self._cycles.pop(0)
            (t0, c0) = self._cycles[0]
            if (
                self.now - t0 >= 2.0
                and (self.scheduler.cycles - c0) / (self.now - t0) > self.settings.max_cycle_rate
            ):
                rate = (self.scheduler.cycles - c0) / (self.now - t0)
                self._violate("spinning", f"{rate:.0f} scheduling cycles per second")
                self._cycles = []
        if time.perf_counter() - self._wall_start > self.settings.wall_budget:
            self._violate("hang", f"the run took over {self.settings.wall_budget:.0f}s of wall time")
        pods = list(self.server.objects.get("pods", {}).values())
        used: dict[str, int] = {}
        for p in pods:
            node = p["spec"].get("nodeName")
            if node and _phase(p) not in TERMINAL:
                used[node] = used.get(node, 0) + _cpu(p)
        for node, milli in used.items():
            if milli > NODE_CPU * 1000:
                self._violate(
                    "overcommit", f"{node}: {milli / 1000:g} cpu requested > {NODE_CPU} allocatable"
                )
        for uid, node in self.server.bind_log[self._binds_checked :]:
            if uid in self._node_of_uid:
                self._violate(
                    "double-bind", f"pod {uid} bound again to {node} (first {self._node_of_uid[uid]})"
                )
            self._node_of_uid[uid] = node
        self._binds_checked = len(self.server.bind_log)
        for p in pods:
            uid, node = str(meta(p).get("uid")), p["spec"].get("nodeName")
            if node and self._node_of_uid.get(uid, node) != node:
                self._violate("double-bind", f"pod {meta(p).get('name')} moved to {node}")
        for name in self.jobs:
            if self.server.peek(JOBS, f"{NS}/{name}") is None:
                self._violate("lost", f"Job {name} is gone")
        pgs = self.server.objects.get("podgroups", {})
        for key in self._seen_podgroups - set(pgs):
            self._violate("lost", f"PodGroup {key} is gone")
        self._seen_podgroups |= set(pgs)
        by_job = self.pods_by_job()
        free: dict[str, int] | None = None
        if self.procs["scheduler"] is None:
            self.noise(0.0)
        free_now = self._free_now()
        for job in self.jobs.values():
            jp = by_job.get(job.name, [])
            bound = [p for p in jp if p["spec"].get("nodeName")]
            self._check_idle(job, jp, bound, free_now)
            partial = bound and not any(_phase(p) in TERMINAL for p in jp) and len(bound) < job.replicas
            if partial:
                free = free if free is not None else self._free_slots()
                missing = job.replicas - len(bound)
                if self._room_for(job, bound, free) < missing:
                    # Its room went to others (a higher-priority job) after a failed bind or a
                    # crash: it waits, as in Volcano, until room frees. Counted, not a
                    # violation: nothing reserves the rest of a half-bound gang.
                    if job.name not in self._blocked:
                        self._blocked.add(job.name)
                        self.events["partial-gang-waits-for-room"] += 1
                    partial = False
            if partial:
                since = self._partial_since.setdefault(job.name, self.now)
                self.longest_partial = max(self.longest_partial, self.now - since)
                if self.now - since > self.settings.partial_window:
                    self._violate(
                        "partial",
                        f"{job.name}: {len(bound)}/{job.replicas} bound for {self.now - since:.1f}s "
                        f"with room for the other {job.replicas - len(bound)}",
                    )
                    self._partial_since[job.name] = self.now  # report once per window
            else:
                self._partial_since.pop(job.name, None)
            if job.tier is not None and bound:
                nodes = {p["spec"]["nodeName"] for p in bound if _phase(p) not in TERMINAL}
                racks = {r for r, members in self.racks.items() if nodes & set(members)}
                if job.tier == 1 and len(racks) > 1:
                    self._violate("topology", f"{job.name} (hard tier 1) spans {sorted(racks)}")

    def _check_idle(self, job: _Job, jp: list[Obj], bound: list[Obj], free: dict[str, int]) -> None:
        """``stuck``: a gang partly bound, or all its pods pending, with room for the rest
        (not counting room that binds in flight are about to take), and nothing happening to
        it for ``idle_window`` (no bind of its pods, the same scheduler up, no fault whose
        after-effects could still delay a working scheduler). What a user sees is the gang
        half-running, or waiting, beside free nodes while the scheduler does nothing for it."""
        waiting = (
            len(jp) == job.replicas
            and len(bound) < job.replicas
            and not any(_phase(p) in TERMINAL for p in jp)
            and self._room_for(job, bound, free) >= job.replicas - len(bound)
            # Not admitted (PodGroup Pending, with the reason on it): the queue's admission
            # holds it, as Volcano's enqueue does, however much room there is.
            and self._podgroup_phase(jp[0]) not in ("", "Pending")
        )
        if not waiting or self.inflight.get(job.name):
            self._idle_since.pop(job.name, None)
            return
        start = self._idle_since.setdefault(job.name, self.now)
        since = max(start, self._noisy_until, self._bind_activity.get(job.name, 0.0))
        self.longest_idle = max(self.longest_idle, self.now - since)
        if self.now - since > self.settings.idle_window:
            self._violate(
                "stuck",
                f"{job.name}: {len(bound)}/{job.replicas} bound, room for the other "
                f"{job.replicas - len(bound)}, and no bind tried for {self.now - since:.1f}s "
                "with the scheduler up and no fault",
            )
            self._idle_since[job.name] = self.now  # report once per window

    def _podgroup_phase(self, pod: Obj) -> str:
        """The phase of ``pod``'s PodGroup ("" when it has none yet)."""
        group = (meta(pod).get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        pg = self.server.peek(PODGROUPS, f"{NS}/{group}") if group else None
        return str(((pg or {}).get("status") or {}).get("phase") or "")

    def _free_now(self) -> dict[str, int]:
        """:meth:`_free_slots` less the room that binds in flight are about to take."""
        free = self._free_slots()
        for binds in self.inflight.values():
            for node in binds.values():
                if node in free:
                    free[node] -= 1
        return free

    def _free_slots(self) -> dict[str, int]:
        """Pods of the campaign's size each node still has room for."""
        used: dict[str, int] = {}
        for p in self.server.objects.get("pods", {}).values():
            node = p["spec"].get("nodeName")
            if node and _phase(p) not in TERMINAL:
                used[node] = used.get(node, 0) + _cpu(p)
        return {
            n: 0 if n in self.cordoned else (NODE_CPU * 1000 - used.get(n, 0)) // (POD_CPU * 1000)
            for members in self.racks.values()
            for n in members
        }

    def _room_for(self, job: _Job, bound: list[Obj], free: dict[str, int]) -> int:
        """Room for the rest of ``job``: in the rack its bound pods hold (hard tier 1; the
        roomiest rack when none is bound), or anywhere (tier 2, no topology)."""
        if job.tier != 1:
            return sum(free.values())
        if not bound:
            return max(sum(free[n] for n in members) for members in self.racks.values())
        nodes = {p["spec"]["nodeName"] for p in bound}
        racks = [m for m in self.racks.values() if nodes & set(m)]
        return sum(free[n] for n in racks[0]) if len(racks) == 1 else 0

    def check_final(self) -> tuple[int, int]:
        """After the quiet period: every job placed or explained, none starved, none lost."""
        placed = explained = 0
        free = self._free_slots()
        by_job = self.pods_by_job()
        for job in self.jobs.values():
            jp = by_job.get(job.name, [])
            if len(jp) != job.replicas:
                self._violate("lost", f"{job.name}: {len(jp)} of {job.replicas} pods exist")
                continue
            pg = next(
                (
                    g
                    for g in self.server.objects.get("podgroups", {}).values()
                    if any(
                        (meta(p).get("annotations") or {}).get(GROUP_NAME_ANNOTATION) == meta(g).get("name")
                        for p in jp
                    )
                ),
                None,
            )
            if pg is None:
                self._violate("lost", f"{job.name} has no PodGroup")
                continue
            bound = [p for p in jp if p["spec"].get("nodeName")]
            if len(bound) == job.replicas:
                placed += 1
                continue
            if _explained(pg, jp):
                explained += 1
            else:
                self._violate(
                    "unexplained", f"{job.name}: {len(bound)}/{job.replicas} bound, no reason given"
                )
            if bound:
                continue  # partly bound at the end: the partial check reports it
            if job.tier == 1:
                room = max(sum(free[n] for n in members) for members in self.racks.values())
            else:
                room = sum(free.values())
            if room >= job.replicas:
                self._violate("starved", f"{job.name} waits for {job.replicas} pods with room for {room}")
        return placed, explained


def _hypernode(name: str, tier: int, member_type: str, members: list[str]) -> Obj:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _cpu(pod: Obj) -> int:
    return sum(
        milli_value((c.get("resources") or {}).get("requests", {}).get("cpu", "0"))
        for c in pod["spec"].get("containers") or []
    )


def _explained(pg: Obj, pods: list[Obj]) -> bool:
    for c in (pg.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Unschedulable" and c.get("status") == "True" and c.get("message"):
            return True
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    return bool(pending) and all(
        any(
            c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message")
            for c in (p.get("status") or {}).get("conditions") or []
        )
        for p in pending
    )
