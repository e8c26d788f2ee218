"""What a chaos run checks, in the words of what a user would see (:class:`Invariants`).

They are checked against the API server's truth after every step of a run, and at the end,
after a quiet period without faults (:meth:`Invariants.check_final`):

``overcommit``  no node has more requested than allocatable (pods bound, not finished);
``partial``     no gang stays partly bound (0 < bound < minMember) longer than a window while
                the room for the rest is free (where its hard topology allows). A gang whose
                room went to a higher-priority job after a failed bind or a crash waits, as
                in Volcano: nothing reserves the rest of a half-bound gang. That is counted
                (``partial-gang-waits-for-room``), not a violation;
``lost``        every Job created still exists, with its PodGroup and all its pods; a
                PodGroup once seen never disappears;
``double-bind`` no pod is bound twice, or moves to another node;
``topology``    the bound pods of a hard-topology gang share one HyperNode within its tier
                (not counting a pod on a dead node: lost, it is no longer where the gang runs);
``unexplained`` every job is placed, or says why not (PodGroup Unschedulable condition or
                PodScheduled=False on its pods);
``starved``     no job waits, all pending, while a rack (or the cluster, for tier 2) has the
                room for it;
``stuck``       no admitted gang, partly bound or all pending, waits beside the room for the
                rest (less the room binds in flight are about to take) while nothing happens
                to it for ``idle_window`` (6 s): no bind of its pods sent or answered, the
                same scheduler up all along, no fault window open or just closed (each
                fault's after-effects are waited out: informer back-off, a bind queue behind
                a slow window). A working scheduler retries such a gang every cycle (1 s);
``recovered``   every gang hit by a node death (a pod of it bound to the node as it died, or
                bound there after) runs whole again: every pod Running on a live node, none
                being deleted. Its clock starts at its *release*, the death plus the
                controller's ``--node-not-ready-grace`` (2 s), the pods' termination grace
                (3 s) and ``--force-delete-unreachable-after`` (2 s): before then the lost
                pod cannot be replaced under any policy (its name is held by the pod stuck
                Terminating on the dead node). From then on it runs while the gang's allowed
                domain has room for the pods it misses (the rack its remainder runs in, for
                hard tier 1; any rack when none runs, after a ``RestartJob``; the cluster for
                tier 2 or no topology; dead and cordoned nodes have none), and stops while it
                has not. ``recover_window`` is 30 s: what the controller needs to replace the
                pods (a crash and restart within 3 s, an informer relist after a compaction or
                an error window, a pass retried with back-off) plus what ``partial`` grants a
                scheduler for the bind back-off of a gang under bind failures (30 s); a
                working controller and scheduler stayed far below it (bench/README.md). At
                the end, after the quiet period, every gang still hit whose domain has room
                is a violation. A Job that stopped for good (Failed past ``maxRetry``,
                Aborted, Terminated) or finished is no longer followed;
``escaped``     no replacement pod of a damaged hard tier-1 gang is bound outside the rack
                its remainder (its other pods on live nodes, not being deleted) runs in, as
                the binding lands. After a ``RestartJob`` no pod of the gang is left: the new
                gang is free to go to any rack, as long as it is whole in one (``topology``);
``exited``      no process stops on its own (``--verify-state`` finding a drift stops the
                scheduler); it is restarted, as the kubelet would. A failure of the run,
                never a catch of a mutation (see :data:`.outcome.USER_VISIBLE`);
``spinning``    the scheduler does not run cycle after cycle without pause (a livelock);
``hang``        a run ends within its wall-clock budget.

``exited`` is noticed by the world, which restarts the process (:meth:`.world.World.crash`);
the rest by :class:`Invariants`.
"""

from __future__ import annotations

import time

from hyperplace.api.constants import GROUP_NAME_ANNOTATION, JOB_NAME_KEY
from hyperplace.kube import milli_value
from hyperplace.runtime.api import JOBS, PODGROUPS, Obj, meta
from scheduler_plugin.runtime.scheduler import Scheduler

from .world import NODE_CPU, NS, POD_CPU, World, _Job, pod_phase, terminating

TERMINAL = ("Succeeded", "Failed")
# Job phases after which the Job runs no more pods (maxRetry reached, aborted, terminated).
JOB_STOPPED = ("Failed", "Aborted", "Terminated", "Completed")


class Invariants:
    """The checks of one run on ``world``, and what they remember between steps."""

    def __init__(self, world: World) -> None:
        self.world, self.settings = world, world.settings
        self._cycles: list[tuple[float, int]] = []  # (virtual time, cycles of the incarnation)
        self._cycles_of: Scheduler | None = None  # that incarnation
        self._wall_start = time.perf_counter()
        self._seen_podgroups: set[str] = set()
        self._partial_since: dict[str, float] = {}
        self._node_of_uid: dict[str, str] = {}
        self._binds_checked = 0
        self.longest_partial = 0.0
        self.longest_idle = 0.0  # the longest a waiting gang saw nothing happen (Settings.idle_window)
        self._blocked: set[str] = set()
        self._idle_since: dict[str, float] = {}
        self._unrecovered_since: dict[str, float] = {}
        self.longest_unrecovered = 0.0  # the longest a hit gang waited with room past its release
        self.recoveries: list[float] = []  # per gang hit and whole again: seconds from the death
        world.bind_checks.append(self._check_escape)

    def check(self) -> None:
        """The invariants that must hold at every moment (partial: within its window)."""
        world = self.world
        if world.scheduler is not None:
            if world.scheduler is not self._cycles_of:  # a fresh incarnation: a count of its own
                self._cycles, self._cycles_of = [], world.scheduler
            self._cycles.append((world.now, world.scheduler.cycles))
            while self._cycles and self._cycles[0][0] < world.now - 5.0:
                self._cycles.pop(0)
            (t0, c0) = self._cycles[0]
            if (
                world.now - t0 >= 2.0
                and (world.scheduler.cycles - c0) / (world.now - t0) > self.settings.max_cycle_rate
            ):
                rate = (world.scheduler.cycles - c0) / (world.now - t0)
                world.violate("spinning", f"{rate:.0f} scheduling cycles per second")
                self._cycles = []
        if time.perf_counter() - self._wall_start > self.settings.wall_budget:
            world.violate("hang", f"the run took over {self.settings.wall_budget:.0f}s of wall time")
        pods = list(world.server.objects.get("pods", {}).values())
        used: dict[str, int] = {}
        for p in pods:
            node = p["spec"].get("nodeName")
            if node and pod_phase(p) not in TERMINAL:
                used[node] = used.get(node, 0) + _cpu(p)
        for node, milli in used.items():
            if milli > NODE_CPU * 1000:
                world.violate(
                    "overcommit", f"{node}: {milli / 1000:g} cpu requested > {NODE_CPU} allocatable"
                )
        for uid, node in world.server.bind_log[self._binds_checked :]:
            if uid in self._node_of_uid:
                world.violate(
                    "double-bind", f"pod {uid} bound again to {node} (first {self._node_of_uid[uid]})"
                )
            self._node_of_uid[uid] = node
        self._binds_checked = len(world.server.bind_log)
        for p in pods:
            uid, node = str(meta(p).get("uid")), p["spec"].get("nodeName")
            if node and self._node_of_uid.get(uid, node) != node:
                world.violate("double-bind", f"pod {meta(p).get('name')} moved to {node}")
        for name in world.jobs:
            if world.server.peek(JOBS, f"{NS}/{name}") is None:
                world.violate("lost", f"Job {name} is gone")
        pgs = world.server.objects.get("podgroups", {})
        for key in self._seen_podgroups - set(pgs):
            world.violate("lost", f"PodGroup {key} is gone")
        self._seen_podgroups |= set(pgs)
        by_job = world.pods_by_job()
        free: dict[str, int] | None = None
        if world.procs["scheduler"] is None:
            world.noise(0.0)
        free_now = self._free_now()
        for job in world.jobs.values():
            jp = by_job.get(job.name, [])
            bound = [p for p in jp if p["spec"].get("nodeName")]
            self._check_idle(job, jp, bound, free_now)
            partial = bound and not any(pod_phase(p) in TERMINAL for p in jp) and len(bound) < job.replicas
            if partial:
                free = free if free is not None else self._free_slots()
                missing = job.replicas - len(bound)
                if self._room_for(job, bound, free) < missing:
                    # Its room went to others (a higher-priority job) after a failed bind or a
                    # crash: it waits, as in Volcano, until room frees. Counted, not a
                    # violation: nothing reserves the rest of a half-bound gang.
                    if job.name not in self._blocked:
                        self._blocked.add(job.name)
                        world.events["partial-gang-waits-for-room"] += 1
                    partial = False
            if partial:
                since = self._partial_since.setdefault(job.name, world.now)
                self.longest_partial = max(self.longest_partial, world.now - since)
                if world.now - since > self.settings.partial_window:
                    world.violate(
                        "partial",
                        f"{job.name}: {len(bound)}/{job.replicas} bound for {world.now - since:.1f}s "
                        f"with room for the other {job.replicas - len(bound)}",
                    )
                    self._partial_since[job.name] = world.now  # report once per window
            else:
                self._partial_since.pop(job.name, None)
            if job.tier is not None and bound:
                # A pod on a dead node is lost, not the gang's placement: its replacement (or,
                # after a restart, the new gang) goes where the gang's pods on live nodes are
                # (``escaped``), or anywhere when none is (its Node may be gone, and its rack
                # with it).
                nodes = {
                    p["spec"]["nodeName"]
                    for p in bound
                    if pod_phase(p) not in TERMINAL and p["spec"]["nodeName"] not in world.dead
                }
                racks = {r for r, members in world.racks.items() if nodes & set(members)}
                if job.tier == 1 and len(racks) > 1:
                    world.violate("topology", f"{job.name} (hard tier 1) spans {sorted(racks)}")
        self._check_recovery(by_job, free if free is not None else self._free_slots(), final=False)

    # -- node deaths -----------------------------------------------------------------------------

    def _remainder(self, pods: list[Obj]) -> list[Obj]:
        """The pods of a gang that still run where they are: bound to a live node, not being
        deleted, not finished."""
        dead = self.world.dead
        return [
            p
            for p in pods
            if p["spec"].get("nodeName")
            and p["spec"]["nodeName"] not in dead
            and not terminating(p)
            and pod_phase(p) not in TERMINAL
        ]

    def _check_recovery(self, by_job: dict[str, list[Obj]], free: dict[str, int], *, final: bool) -> None:
        """``recovered`` (see the module docstring)."""
        world = self.world
        for name, damage in list(world.damaged.items()):
            job, pods = world.jobs.get(name), by_job.get(name, [])
            phase = str(
                ((world.server.peek(JOBS, f"{NS}/{name}") or {}).get("status") or {})
                .get("state", {})
                .get("phase")
                or ""
            )
            if (
                job is None
                or job.finished
                or phase in JOB_STOPPED
                or any(pod_phase(p) in TERMINAL for p in pods)
            ):
                world.events["gang-hit-stopped" if phase in JOB_STOPPED else "gang-hit-finished"] += 1
                del world.damaged[name]
                self._unrecovered_since.pop(name, None)
                continue
            if world.whole(job, pods):
                world.events["gang-recovered"] += 1
                self.recoveries.append(world.now - damage.at)
                del world.damaged[name]
                self._unrecovered_since.pop(name, None)
                continue
            if world.now < damage.release:
                continue
            remainder = self._remainder(pods)
            missing = job.replicas - len(remainder)
            if self._room_for(job, remainder, free) < missing:
                self._unrecovered_since.pop(name, None)
                continue
            since = self._unrecovered_since.setdefault(name, max(world.now, damage.release))
            self.longest_unrecovered = max(self.longest_unrecovered, world.now - since)
            if final or world.now - since > self.settings.recover_window:
                world.violate(
                    "recovered",
                    f"{name} (policy {job.policy or 'none'}, tier {job.tier}) hit by the death of "
                    f"{', '.join(sorted(damage.nodes))} at t={damage.at:.1f}s: {len(remainder)}/{job.replicas} "
                    f"running on live nodes, room for the other {missing} in its domain for "
                    f"{world.now - since:.1f}s" + (" at the end of the run" if final else ""),
                )
                self._unrecovered_since[name] = world.now  # report once per window

    def _check_escape(self, pod: Obj) -> None:
        """``escaped``, as a binding lands (see the module docstring)."""
        world = self.world
        name = (meta(pod).get("labels") or {}).get(JOB_NAME_KEY)
        node = str(pod["spec"].get("nodeName") or "")
        job = world.jobs.get(str(name))
        damage = world.damaged.get(str(name))
        if job is None or damage is None or job.tier != 1 or node in world.dead:
            return
        uid = meta(pod).get("uid")
        others = [
            p for p in self._remainder(world.pods_by_job().get(job.name, [])) if meta(p).get("uid") != uid
        ]
        racks = {world.rack_of(str(p["spec"]["nodeName"])) for p in others}
        rack = world.rack_of(node)
        if len(racks) == 1 and rack not in racks:
            world.violate(
                "escaped",
                f"{job.name} (hard tier 1, policy {job.policy or 'none'}) hit by the death of "
                f"{', '.join(sorted(damage.nodes))}: replacement {meta(pod).get('name')} bound to {node} "
                f"in {rack}, its remainder of {len(others)} runs in {racks.pop()}",
            )

    def _check_idle(self, job: _Job, jp: list[Obj], bound: list[Obj], free: dict[str, int]) -> None:
        """``stuck``: a gang partly bound, or all its pods pending, with room for the rest
        (not counting room that binds in flight are about to take), and nothing happening to
        it for ``idle_window`` (no bind of its pods, the same scheduler up, no fault whose
        after-effects could still delay a working scheduler). What a user sees is the gang
        half-running, or waiting, beside free nodes while the scheduler does nothing for it."""
        world = self.world
        waiting = (
            len(jp) == job.replicas
            and len(bound) < job.replicas
            and not any(pod_phase(p) in TERMINAL for p in jp)
            and self._room_for(job, bound, free) >= job.replicas - len(bound)
            # Not admitted (PodGroup Pending, with the reason on it): the queue's admission
            # holds it, as Volcano's enqueue does, however much room there is.
            and self._podgroup_phase(jp[0]) not in ("", "Pending")
        )
        if not waiting or world.inflight.get(job.name):
            self._idle_since.pop(job.name, None)
            return
        start = self._idle_since.setdefault(job.name, world.now)
        since = max(start, world.noisy_until, world.bind_activity.get(job.name, 0.0))
        self.longest_idle = max(self.longest_idle, world.now - since)
        if world.now - since > self.settings.idle_window:
            world.violate(
                "stuck",
                f"{job.name}: {len(bound)}/{job.replicas} bound, room for the other "
                f"{job.replicas - len(bound)}, and no bind tried for {world.now - since:.1f}s "
                "with the scheduler up and no fault",
            )
            self._idle_since[job.name] = world.now  # report once per window

    def _podgroup_phase(self, pod: Obj) -> str:
        """The phase of ``pod``'s PodGroup ("" when it has none yet)."""
        world = self.world
        group = (meta(pod).get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        pg = world.server.peek(PODGROUPS, f"{NS}/{group}") if group else None
        return str(((pg or {}).get("status") or {}).get("phase") or "")

    def _free_now(self) -> dict[str, int]:
        """:meth:`_free_slots` less the room that binds in flight are about to take."""
        world = self.world
        free = self._free_slots()
        for binds in world.inflight.values():
            for node in binds.values():
                if node in free:
                    free[node] -= 1
        return free

    def _free_slots(self) -> dict[str, int]:
        """Pods of the campaign's size each node still has room for."""
        world = self.world
        used: dict[str, int] = {}
        for p in world.server.objects.get("pods", {}).values():
            node = p["spec"].get("nodeName")
            if node and pod_phase(p) not in TERMINAL:
                used[node] = used.get(node, 0) + _cpu(p)
        return {
            n: 0
            if n in world.cordoned or n in world.dead
            else (NODE_CPU * 1000 - used.get(n, 0)) // (POD_CPU * 1000)
            for members in world.racks.values()
            for n in members
        }

    def _room_for(self, job: _Job, bound: list[Obj], free: dict[str, int]) -> int:
        """Room for the rest of ``job``: in the rack its bound pods hold (hard tier 1; the
        roomiest rack when none is bound), or anywhere (tier 2, no topology)."""
        world = self.world
        if job.tier != 1:
            return sum(free.values())
        if not bound:
            return max(sum(free[n] for n in members) for members in world.racks.values())
        nodes = {p["spec"]["nodeName"] for p in bound}
        racks = [m for m in world.racks.values() if nodes & set(m)]
        return sum(free[n] for n in racks[0]) if len(racks) == 1 else 0

    def check_final(self) -> tuple[int, int]:
        """After the quiet period: every job placed or explained, none starved, none lost."""
        world = self.world
        placed = explained = 0
        free = self._free_slots()
        by_job = world.pods_by_job()
        self._check_recovery(by_job, free, final=True)
        for job in world.jobs.values():
            jp = by_job.get(job.name, [])
            state = ((world.server.peek(JOBS, f"{NS}/{job.name}") or {}).get("status") or {}).get(
                "state"
            ) or {}
            if state.get("phase") in ("Failed", "Aborted", "Terminated"):
                world.events["job-stopped"] += 1
                continue  # stopped for good by its policy (maxRetry reached): no pods to hold to
            if len(jp) != job.replicas:
                world.violate("lost", f"{job.name}: {len(jp)} of {job.replicas} pods exist")
                continue
            pg = next(
                (
                    g
                    for g in world.server.objects.get("podgroups", {}).values()
                    if any(
                        (meta(p).get("annotations") or {}).get(GROUP_NAME_ANNOTATION) == meta(g).get("name")
                        for p in jp
                    )
                ),
                None,
            )
            if pg is None:
                world.violate("lost", f"{job.name} has no PodGroup")
                continue
            bound = [p for p in jp if p["spec"].get("nodeName")]
            if len(bound) == job.replicas:
                placed += 1
                continue
            if _explained(pg, jp):
                explained += 1
            else:
                world.violate(
                    "unexplained", f"{job.name}: {len(bound)}/{job.replicas} bound, no reason given"
                )
            if bound:
                continue  # partly bound at the end: the partial check reports it
            if job.tier == 1:
                room = max(sum(free[n] for n in members) for members in world.racks.values())
            else:
                room = sum(free.values())
            if room >= job.replicas:
                world.violate("starved", f"{job.name} waits for {job.replicas} pods with room for {room}")
        return placed, explained


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
