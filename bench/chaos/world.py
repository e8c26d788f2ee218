"""The world of one chaos run: the cluster in the in-memory API server, the control-plane
processes on their severable connections, the kubelet, and (for now) the faults and the invariants
(:class:`World`; see :mod:`.campaign` for what a run does)."""

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
    ApiError,
    Obj,
    meta,
)
from hyperplace.runtime.fakeapi import Access, Connection, FakeApi, Severed
from scheduler_plugin.runtime.scheduler import Scheduler, SchedulerOptions

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
        world._inflight.setdefault(job, {})[key] = str((obj.get("target") or {}).get("name", ""))
        world._bind_activity[job] = world.now
        try:
            return await super().create(res, obj, namespace, subresource=subresource)
        finally:
            world._inflight.get(job, {}).pop(key, None)
            world._bind_activity[job] = world.now


class World:
    """The cluster, the processes, the faults and the invariants of one run."""

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
        # Fault windows (virtual times they end at) and their strength.
        self.error_until = self.bind_fail_until = self.slow_until = 0.0
        # Any bind may fail, storm or calm (a webhook timing out, a race with a kubelet): gangs
        # are left half-bound at any moment, also where the rack is nearly full.
        self.stray_bind_failure = settings.stray_bind_failure
        self.error_rate = self.bind_fail_rate = self.latency = self.watch_lag = 0.0
        self.bind_concurrency = self.rng.choice((1, 2, 4, 64))
        # Storms: (start, end) virtual seconds, drawn up front so the plan is the seed's alone.
        self.storms: list[tuple[float, float]] = []
        self.plan_time = 0.0  # the steps drawn so far (virtual time runs a little later)
        t = self.rng.uniform(0.0, 2.0)
        while t < settings.chaos_seconds:
            end = min(t + self.rng.uniform(*settings.storm_seconds), settings.chaos_seconds)
            self.storms.append((t, end))
            t = end + self.rng.uniform(*settings.calm_seconds)
        # The idle clocks (Settings.idle_window): when the last thing that could keep a
        # working scheduler from finishing a gang happened, and binds in flight per job.
        self._noisy_until = 0.0
        self._bind_activity: dict[str, float] = {}  # job -> last bind sent or answered
        self._inflight: dict[str, dict[tuple[int, str], str]] = {}  # job -> {(proc, pod): node}
        self._idle_since: dict[str, float] = {}
        self.cordoned: dict[str, float] = {}  # node -> virtual time it is uncordoned

    @property
    def now(self) -> float:
        return self.loop.time()

    def wall(self) -> str:
        """The virtual clock as a wall time: the fake API stamps objects with it and the
        scheduler reads it, so waits (reservations, relaxations) run on virtual time."""
        return rfc3339(CLOCK_ORIGIN + timedelta(seconds=self.loop.time()))

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
        proc.conn.before = lambda a, p=proc: self._before(p, a)
        proc.conn.after = lambda a, p=proc: self._after(p, a)
        proc.conn.watch_delay = self._watch_delay
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
            self._noise(0.0)
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
            self._noise(0.0)
            for binds in self._inflight.values():  # their answers will never come
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

    # -- fault hooks -----------------------------------------------------------------------------

    def _count_call(self, proc: _Process, landed: bool) -> None:
        if proc.crash_at is None or proc.crash_after_landing != landed:
            return
        proc.calls += 1
        if proc.calls >= proc.crash_at:
            self.events["crash-at-call"] += 1
            self.crash(proc)
            raise Severed("crashed at this call")

    async def _before(self, proc: _Process, a: Access) -> None:
        self._count_call(proc, landed=False)
        now, rng = self.now, self.hook_rng
        slow = self.latency if now < self.slow_until else 0.0
        await asyncio.sleep(rng.uniform(0.0, self.settings.rtt + slow))
        binding = a.verb == "create" and a.subresource == "binding"
        in_window = now < self.bind_fail_until
        if binding and rng.random() < (self.bind_fail_rate if in_window else self.stray_bind_failure):
            code = rng.choice((409, 429, 500))
            self.events[f"bind-{code}"] += 1
            self.events["bind-failure-stray"] += not in_window
            if a.name and rng.random() < self.settings.cordon_on_bind_failure:
                # The node went into maintenance under the bind: its rack is cordoned.
                await self._cordon(0.0, rng.uniform(3, 10), self.job_of_pod(a.name))
            raise ApiError(code, _REASONS[code], "injected bind failure")
        if now < self.error_until and rng.random() < self.error_rate:
            codes = {"list": (410, 429, 500), "watch": (410, 429, 500), "get": (429, 500)}.get(
                a.verb, (409, 429, 500)
            )
            code = rng.choice(codes)
            self.events[f"{a.verb}-{code}"] += 1
            raise ApiError(code, _REASONS[code], "injected")

    async def _after(self, proc: _Process, a: Access) -> None:
        self._count_call(proc, landed=True)
        if proc.crash_at_bind is not None and a.verb == "create" and a.subresource == "binding":
            proc.crash_at_bind -= 1
            if proc.crash_at_bind <= 0:
                # Killed with a gang half-bound: the next scheduler must finish it where it runs.
                self.events["crash-mid-gang"] += 1
                self.crash(proc)
                raise Severed("crashed as a bind landed")
        slow = self.latency if self.now < self.slow_until else 0.0
        await asyncio.sleep(self.hook_rng.uniform(0.0, self.settings.rtt + slow))

    def _watch_delay(self) -> float:
        lag = self.watch_lag if self.now < self.slow_until else 0.0
        return self.hook_rng.uniform(0.0, self.settings.rtt + lag)

    # -- one chaos step --------------------------------------------------------------------------

    def stormy(self) -> bool:
        """Inside a storm (see Settings.storm_seconds), by the plan's clock (the sum of the
        steps drawn), so which steps are stormy is the seed's alone, not the run's timing."""
        return any(a <= self.plan_time < b for a, b in self.storms)

    def _noise(self, lasting: float) -> None:
        """Something that may keep a working scheduler from finishing a gang for ``lasting``
        seconds from now: the idle clocks start again after it."""
        self._noisy_until = max(self._noisy_until, self.now + lasting)

    async def chaos_step(self) -> None:
        rng, now = self.rng, self.now
        if rng.random() < self.settings.arrival:
            await self.submit_job()
        # Every draw is made in a calm too (and whether or not a process is up), so the plan
        # does not depend on timing; only a storm lets a fault strike.
        storm = self.stormy()
        for kind, p_crash in (("scheduler", 0.035), ("controller", 0.03)):
            roll, at, after = rng.random(), rng.randint(1, 40), rng.random() < 0.5
            proc = self.procs[kind]
            if proc is None or not storm:
                continue
            if roll < p_crash:
                self.crash(proc)
            elif roll < 2 * p_crash and proc.crash_at is None:
                proc.crash_at, proc.crash_after_landing = at, after
            elif kind == "scheduler" and roll < 3 * p_crash and proc.crash_at_bind is None:
                proc.crash_at_bind = 1 + at % 4
        rolls = [rng.random() for _ in range(5)]
        spans = [rng.uniform(1, 5), rng.uniform(0.1, 0.5), rng.uniform(1, 5), rng.uniform(0.2, 0.8)]
        slow = (rng.uniform(2, 8), rng.uniform(0.2, 2.0), rng.uniform(0.2, 2.0))
        cordon_roll, cordon_span, cordon_pick = rng.random(), rng.uniform(3, 10), rng.random()
        await self._uncordon_due()
        if not storm:
            return
        if cordon_roll < self.settings.cordon:
            await self._cordon(cordon_pick, cordon_span)
        # The idle clocks wait out each fault's after-effects: an informer whose relist failed
        # backs off (0.8 s doubling, so a few seconds after a window of at most 5 s), a queue
        # of binds behind a slow window drains.
        if rolls[0] < 0.045:
            self.server.compact()
            self.events["compaction"] += 1
            self._noise(5.0)
        if rolls[1] < 0.045:
            self.server.disconnect_watchers()
            self.events["dropped-watches"] += 1
            self._noise(5.0)
        if rolls[2] < 0.045:
            self.error_until, self.error_rate = now + spans[0], spans[1]
            self.events["error-window"] += 1
            self._noise(spans[0] + 6.0)
        if rolls[3] < 0.2:
            self.bind_fail_until, self.bind_fail_rate = now + spans[2], spans[3]
            self.events["bind-failure-window"] += 1
            self._noise(spans[2] + 1.0)
        if rolls[4] < 0.1:
            self.slow_until = now + slow[0]
            self.latency, self.watch_lag = slow[1], slow[2]
            self.events["slow-window"] += 1
            self._noise(slow[0] + 3.0)

    async def _cordon(self, pick: float, span: float, job: str | None = None) -> None:
        """An administrator cordons a rack (``spec.unschedulable`` on its nodes) for ``span``
        seconds, as for switch maintenance: ``job``'s rack, else most often the rack of a gang
        that is partly bound (a bind failed or the scheduler crashed), whose rest must then
        wait for its rack rather than go to another (hard tier 1). Bound pods keep running."""
        by_job = self.pods_by_job()

        def bound_nodes(name: str) -> list[str]:  # one entry per bound pod
            return [p["spec"]["nodeName"] for p in by_job.get(name, []) if p["spec"].get("nodeName")]

        def racks_holding(nodes: set[str]) -> list[str]:
            return sorted(r for r, members in self.racks.items() if nodes & set(members))

        if job is not None:  # its bind failed: the rack it was going to, or already holds
            pool = racks_holding(set(self._inflight.get(job, {}).values()) | set(bound_nodes(job)))
        else:
            partly = [
                set(nodes)
                for name, j in self.jobs.items()
                if j.tier == 1 and 0 < len(nodes := bound_nodes(name)) < j.replicas
            ]
            pool = sorted({r for nodes in partly for r in racks_holding(nodes)}) or sorted(self.racks)
        pool = [r for r in pool if not set(self.racks[r]) <= set(self.cordoned)]
        if not pool:
            return
        rack = pool[int(pick * len(pool)) % len(pool)]
        for node in self.racks[rack]:
            if node not in self.cordoned:
                await self.server.patch(NODES, node, {"spec": {"unschedulable": True}})
            self.cordoned[node] = max(self.cordoned.get(node, 0.0), self.now + span)
        self.events["cordon"] += 1

    async def _uncordon_due(self, *, all_: bool = False) -> None:
        for node, until in sorted(self.cordoned.items()):
            if all_ or self.now >= until:
                await self.server.patch(NODES, node, {"spec": {"unschedulable": False}})
                del self.cordoned[node]
                self._noise(1.0)  # the room is back: a working scheduler takes it next cycle

    async def calm(self) -> None:
        await self._uncordon_due(all_=True)
        self.stray_bind_failure = 0.0
        self.error_until = self.bind_fail_until = self.slow_until = 0.0
        for proc in self.procs.values():
            if proc is not None:
                proc.crash_at = proc.crash_at_bind = None

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
            self._noise(0.0)
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
        if not waiting or self._inflight.get(job.name):
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
        for binds in self._inflight.values():
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


_REASONS = {409: "Conflict", 410: "Expired", 429: "TooManyRequests", 500: "InternalError"}


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
