"""What a storm does to a chaos run: the faults of the API server, the network and the
administrators, drawn from the seed (:class:`Faults`).

Faults come in storms, 6-12 s long, with calm stretches of 10-16 s between them, as incidents
come in bursts (:class:`~.settings.Settings`). In a storm:

* process crashes, immediately or at the k-th API call of the process, before or after the call
  lands (its answer lost), or as the scheduler's n-th bind lands (a gang half-bound); a fresh
  instance starts after a pause, knowing nothing (:meth:`.world.World.crash`);
* bind-failure windows (409/429/500), errors on any call (409 Conflict but on deletes, 410 Gone,
  429, 500),
  etcd compactions, dropped watches, slow API windows (requests, answers and watch events later
  still);
* racks cordoned for maintenance for 3-10 s (most often the rack of a gang that is partly bound,
  whose rest must wait for its rack and not go to another).

Node deaths, storm or calm (a machine dies when it dies), 1-3 per run at times drawn in the
chaos period's first 30 s, each under a running gang (first choice one whose rack, or the
cluster, has room to replace the pods there; then one hard-bound to a rack): the node's kubelet
goes silent, and what kube-controller-manager's node lifecycle controller then writes is written
at once (its node-monitor grace is not modelled): ``Ready`` Unknown and the
``node.kubernetes.io/unreachable`` NoSchedule and NoExecute taints; or (30 %) the Node object is
deleted with its machine. Either way a pod deleted there stays Terminating (nobody finishes it)
until it is deleted with grace 0, and no pod bound there starts. The first death of a run is for
good; of the later ones, 30 % of the machines come back after 3-15 s (a reboot: Ready,
untainted, or the Node created anew; the kubelet then finishes the deletions that waited), the
rest stay dead for the run. The controller's node-failure handling replaces the pods per each
Job's policy; the gangs hit are checked by ``recovered`` and ``escaped`` (:mod:`.invariants`).

Storm or calm, until the quiet period at the end: stray bind failures (any bind may fail, 25 %:
gangs are left half-bound at any moment), a failed bind's rack sometimes cordoned with it (the
node went into maintenance under it); and every request, answer and watch event takes up to
``rtt``, 0.2 s, in any case (watch events arrive in order, each that long after it was sent).

A scheduler that loses track of a gang in a storm must show it in the calm that follows, before
a later crash wipes its memory.
"""

from __future__ import annotations

import asyncio
import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyperplace.runtime.api import NODES, ApiError, meta
from hyperplace.runtime.fakeapi import Access, Severed

if TYPE_CHECKING:
    from .world import World, _Process

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


@dataclass
class _Death:
    """A node death of the plan: when (plan time), how, whether and when the machine comes
    back, and which candidate node it picks (a fraction)."""

    at: float
    deleted: bool
    back_after: float
    pick: float
    comes_back: bool
    done: bool = False


_REASONS = {409: "Conflict", 410: "Expired", 429: "TooManyRequests", 500: "InternalError"}


class Faults:
    """The faults of one run: the storms it plans, the windows they open (the virtual times
    they end at, and their strength), and the hooks every API call of a process goes through."""

    def __init__(self, world: World) -> None:
        settings = world.settings
        self.world, self.settings = world, settings
        self.rng, self.hook_rng = world.rng, world.hook_rng  # the world's: one plan per seed
        # Fault windows (virtual times they end at) and their strength.
        self.error_until = self.bind_fail_until = self.slow_until = 0.0
        # Any bind may fail, storm or calm (a webhook timing out, a race with a kubelet): gangs
        # are left half-bound at any moment, also where the rack is nearly full.
        self.stray_bind_failure = settings.stray_bind_failure
        self.error_rate = self.bind_fail_rate = self.latency = self.watch_lag = 0.0
        # Storms: (start, end) virtual seconds, drawn up front so the plan is the seed's alone.
        self.storms: list[tuple[float, float]] = []
        self.plan_time = 0.0  # the steps drawn so far (virtual time runs a little later)
        t = self.rng.uniform(0.0, 2.0)
        while t < settings.chaos_seconds:
            end = min(t + self.rng.uniform(*settings.storm_seconds), settings.chaos_seconds)
            self.storms.append((t, end))
            t = end + self.rng.uniform(*settings.calm_seconds)
        # Node deaths, in the chaos period's first 30 s: the gangs they hit have the rest of the
        # run, and the quiet period, to run whole again. The first is for good (every run has
        # a gang whose pods must be replaced); a later one's machine may come back.
        self.deaths = sorted(
            (
                _Death(
                    at=self.rng.uniform(3.0, max(3.0, settings.chaos_seconds - 15.0)),
                    deleted=self.rng.random() < settings.node_deleted,
                    back_after=self.rng.uniform(*settings.node_return_after),
                    pick=self.rng.random(),
                    comes_back=self.rng.random() < settings.node_returns,
                )
                for _ in range(self.rng.choice(settings.node_deaths))
            ),
            key=lambda d: d.at,
        )
        if self.deaths:
            self.deaths[0].comes_back = False

    # -- the hooks of every API call -------------------------------------------------------------

    def _count_call(self, proc: _Process, landed: bool) -> None:
        if proc.crash_at is None or proc.crash_after_landing != landed:
            return
        proc.calls += 1
        if proc.calls >= proc.crash_at:
            self.world.events["crash-at-call"] += 1
            self.world.crash(proc)
            raise Severed("crashed at this call")

    async def before(self, proc: _Process, a: Access) -> None:
        """Before a call of ``proc`` reaches the server: its way there (up to ``rtt``, more in a
        slow window), a crash at this call, an injected bind failure or API error."""
        self._count_call(proc, landed=False)
        now, rng = self.world.now, self.hook_rng
        slow = self.latency if now < self.slow_until else 0.0
        await asyncio.sleep(rng.uniform(0.0, self.settings.rtt + slow))
        binding = a.verb == "create" and a.subresource == "binding"
        in_window = now < self.bind_fail_until
        if binding and rng.random() < (self.bind_fail_rate if in_window else self.stray_bind_failure):
            code = rng.choice((409, 429, 500))
            self.world.events[f"bind-{code}"] += 1
            self.world.events["bind-failure-stray"] += not in_window
            if a.name and rng.random() < self.settings.cordon_on_bind_failure:
                # The node went into maintenance under the bind: its rack is cordoned.
                await self._cordon(0.0, rng.uniform(3, 10), self.world.job_of_pod(a.name))
            raise ApiError(code, _REASONS[code], "injected bind failure")
        if now < self.error_until and rng.random() < self.error_rate:
            # No 409 for a delete: the apiserver answers a delete so only when its uid
            # precondition fails, and the controller rightly takes that for "the name now holds
            # a newer pod" (a force-delete of a pod stuck on a dead node is then not retried).
            codes = {
                "list": (410, 429, 500),
                "watch": (410, 429, 500),
                "get": (429, 500),
                "delete": (429, 500),
            }.get(a.verb, (409, 429, 500))
            code = rng.choice(codes)
            self.world.events[f"{a.verb}-{code}"] += 1
            raise ApiError(code, _REASONS[code], "injected")

    async def after(self, proc: _Process, a: Access) -> None:
        """After a call of ``proc`` landed: a crash as it lands (its answer lost), then the
        answer's way back."""
        self._count_call(proc, landed=True)
        if proc.crash_at_bind is not None and a.verb == "create" and a.subresource == "binding":
            proc.crash_at_bind -= 1
            if proc.crash_at_bind <= 0:
                # Killed with a gang half-bound: the next scheduler must finish it where it runs.
                self.world.events["crash-mid-gang"] += 1
                self.world.crash(proc)
                raise Severed("crashed as a bind landed")
        slow = self.latency if self.world.now < self.slow_until else 0.0
        await asyncio.sleep(self.hook_rng.uniform(0.0, self.settings.rtt + slow))

    def watch_delay(self) -> float:
        """How late a watch event arrives (up to ``rtt``, more in a slow window)."""
        lag = self.watch_lag if self.world.now < self.slow_until else 0.0
        return self.hook_rng.uniform(0.0, self.settings.rtt + lag)

    # -- one step of the plan ------------------------------------------------------------------

    def stormy(self) -> bool:
        """Inside a storm (see Settings.storm_seconds), by the plan's clock (the sum of the
        steps drawn), so which steps are stormy is the seed's alone, not the run's timing."""
        return any(a <= self.plan_time < b for a, b in self.storms)

    async def step(self) -> None:
        """One step of the plan: in a storm, processes may crash and fault windows open;
        racks whose cordon is over are uncordoned, storm or calm."""
        world = self.world
        rng, now = self.rng, world.now
        # Every draw is made in a calm too (and whether or not a process is up), so the plan
        # does not depend on timing; only a storm lets a fault strike.
        storm = self.stormy()
        for kind, p_crash in (("scheduler", 0.035), ("controller", 0.03)):
            roll, at, after = rng.random(), rng.randint(1, 40), rng.random() < 0.5
            proc = world.procs[kind]
            if proc is None or not storm:
                continue
            if roll < p_crash:
                world.crash(proc)
            elif roll < 2 * p_crash and proc.crash_at is None:
                proc.crash_at, proc.crash_after_landing = at, after
            elif kind == "scheduler" and roll < 3 * p_crash and proc.crash_at_bind is None:
                proc.crash_at_bind = 1 + at % 4
        rolls = [rng.random() for _ in range(5)]
        spans = [rng.uniform(1, 5), rng.uniform(0.1, 0.5), rng.uniform(1, 5), rng.uniform(0.2, 0.8)]
        slow = (rng.uniform(2, 8), rng.uniform(0.2, 2.0), rng.uniform(0.2, 2.0))
        cordon_roll, cordon_span, cordon_pick = rng.random(), rng.uniform(3, 10), rng.random()
        await self._uncordon_due()
        await self.nodes_back()
        await self._deaths_due()
        if not storm:
            return
        if cordon_roll < self.settings.cordon:
            await self._cordon(cordon_pick, cordon_span)
        # The idle clocks wait out each fault's after-effects: an informer whose relist failed
        # backs off (0.8 s doubling, so a few seconds after a window of at most 5 s), a queue
        # of binds behind a slow window drains.
        if rolls[0] < 0.045:
            world.server.compact()
            world.events["compaction"] += 1
            world.noise(5.0)
        if rolls[1] < 0.045:
            world.server.disconnect_watchers()
            world.events["dropped-watches"] += 1
            world.noise(5.0)
        if rolls[2] < 0.045:
            self.error_until, self.error_rate = now + spans[0], spans[1]
            world.events["error-window"] += 1
            world.noise(spans[0] + 6.0)
        if rolls[3] < 0.2:
            self.bind_fail_until, self.bind_fail_rate = now + spans[2], spans[3]
            world.events["bind-failure-window"] += 1
            world.noise(spans[2] + 1.0)
        if rolls[4] < 0.1:
            self.slow_until = now + slow[0]
            self.latency, self.watch_lag = slow[1], slow[2]
            world.events["slow-window"] += 1
            world.noise(slow[0] + 3.0)

    async def _cordon(self, pick: float, span: float, job: str | None = None) -> None:
        """An administrator cordons a rack (``spec.unschedulable`` on its nodes) for ``span``
        seconds, as for switch maintenance: ``job``'s rack, else most often the rack of a gang
        that is partly bound (a bind failed or the scheduler crashed), whose rest must then
        wait for its rack rather than go to another (hard tier 1). Bound pods keep running."""
        world = self.world
        by_job = world.pods_by_job()

        def bound_nodes(name: str) -> list[str]:  # one entry per bound pod
            return [p["spec"]["nodeName"] for p in by_job.get(name, []) if p["spec"].get("nodeName")]

        def racks_holding(nodes: set[str]) -> list[str]:
            return sorted(r for r, members in world.racks.items() if nodes & set(members))

        if job is not None:  # its bind failed: the rack it was going to, or already holds
            pool = racks_holding(set(world.inflight.get(job, {}).values()) | set(bound_nodes(job)))
        else:
            partly = [
                set(nodes)
                for name, j in world.jobs.items()
                if j.tier == 1 and 0 < len(nodes := bound_nodes(name)) < j.replicas
            ]
            pool = sorted({r for nodes in partly for r in racks_holding(nodes)}) or sorted(world.racks)
        pool = [r for r in pool if not set(world.racks[r]) <= set(world.cordoned)]
        if not pool:
            return
        rack = pool[int(pick * len(pool)) % len(pool)]
        for node in world.racks[rack]:
            if node not in world.cordoned and node not in world.deleted_nodes:
                await world.server.patch(NODES, node, {"spec": {"unschedulable": True}})
            world.cordoned[node] = max(world.cordoned.get(node, 0.0), world.now + span)
        world.events["cordon"] += 1

    async def _uncordon_due(self, *, all_: bool = False) -> None:
        world = self.world
        for node, until in sorted(world.cordoned.items()):
            if all_ or world.now >= until:
                if node not in world.deleted_nodes:
                    await world.server.patch(NODES, node, {"spec": {"unschedulable": False}})
                del world.cordoned[node]
                world.noise(1.0)  # the room is back: a working scheduler takes it next cycle

    # -- node deaths ---------------------------------------------------------------------------

    async def _deaths_due(self) -> None:
        """The deaths whose time has come, each once a running gang gives it a node."""
        for death in self.deaths:
            if death.done or self.plan_time < death.at:
                continue
            node = self._doomed(death.pick)
            if node is None:
                return  # no gang runs: later
            death.done = True
            await self._kill(node, death)

    def _doomed(self, pick: float) -> str | None:
        """A live node under a gang that runs whole: first choice, one whose domain (its rack
        for hard tier 1, else the cluster) has room elsewhere for the gang's pods on that
        node, so that a working controller and scheduler must replace them; then one
        hard-bound to a rack; then any."""
        from .world import NODE_CPU, POD_CPU

        world = self.world
        by_job = world.pods_by_job()
        used: dict[str, int] = {}
        for pods in by_job.values():
            for p in pods:
                node = p["spec"].get("nodeName")
                if node and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    used[node] = used.get(node, 0) + 1
        free = {
            n: 0 if n in world.cordoned or n in world.dead else NODE_CPU // POD_CPU - used.get(n, 0)
            for members in world.racks.values()
            for n in members
        }
        ranked: dict[tuple[bool, bool], set[str]] = {}
        for name, job in world.jobs.items():
            pods = by_job.get(name, [])
            if job.finished or not world.whole(job, pods):
                continue
            for node in {str(p["spec"]["nodeName"]) for p in pods}:
                rack = world.rack_of(node)
                domain = world.racks.get(rack or "", []) if job.tier == 1 else list(free)
                lost = sum(p["spec"]["nodeName"] == node for p in pods)
                room = sum(free[n] for n in domain if n != node) >= lost
                ranked.setdefault((room, job.tier == 1), set()).add(node)
        for key in ((True, True), (True, False), (False, True), (False, False)):
            pool = sorted(ranked.get(key, ()))
            if pool:
                return pool[int(pick * len(pool)) % len(pool)]
        return None

    async def _kill(self, node: str, death: _Death) -> None:
        """The machine under ``node`` dies (see the module docstring)."""
        world = self.world
        server = world.server
        world.dead[node] = world.now + death.back_after if death.comes_back else math.inf
        server.unreachable_nodes.add(node)
        if death.deleted:
            world.deleted_nodes[node] = copy.deepcopy(server.peek(NODES, node) or {})
            await server.delete(NODES, node)
            world.events["node-deleted"] += 1
        else:
            now = world.wall()
            unknown = {
                "type": "Ready",
                "status": "Unknown",
                "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            await server.patch(NODES, node, {"status": {"conditions": [unknown]}}, subresource="status")
            taints = [
                {
                    "key": UNREACHABLE_TAINT,
                    "effect": effect,
                    **({"timeAdded": now} if effect == "NoExecute" else {}),
                }
                for effect in ("NoSchedule", "NoExecute")
            ]
            await server.patch(NODES, node, {"spec": {"taints": taints}})
            world.events["node-not-ready"] += 1
        for job, pods in world.pods_by_job().items():
            if any(
                p["spec"].get("nodeName") == node
                and not meta(p).get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                for p in pods
            ):
                world.hit(job, node)
        # Until its pods are replaced, they count towards the queue's share while the node's
        # room no longer counts in the cluster's (proportion): gangs arriving meanwhile may
        # wait for that, as in Volcano. The idle clocks wait it out.
        s = self.settings
        world.noise(s.not_ready_grace + s.termination_grace + s.force_delete_after + 2.0)
        world.events["node-death"] += 1

    async def nodes_back(self) -> None:
        """The dead machines whose time has come are back: Ready and untainted, or their Node
        created anew (still cordoned if its rack is); the kubelet finishes what waited."""
        world = self.world
        for node, when in sorted(world.dead.items()):
            if world.now < when:
                continue
            world.server.unreachable_nodes.discard(node)
            old = world.deleted_nodes.pop(node, None)
            if old is not None:
                fresh = {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": node, "labels": meta(old).get("labels") or {}},
                    "spec": {"unschedulable": True} if node in world.cordoned else {},
                    "status": {
                        **(old.get("status") or {}),
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                }
                await world.server.create(NODES, fresh)
            else:
                ready = {"type": "Ready", "status": "True", "lastTransitionTime": world.wall()}
                await world.server.patch(
                    NODES, node, {"status": {"conditions": [ready]}}, subresource="status"
                )
                await world.server.patch(NODES, node, {"spec": {"taints": None}})
            del world.dead[node]
            world.events["node-back"] += 1
            world.noise(1.0)  # the room is back: a working scheduler takes it next cycle

    async def calm(self) -> None:
        """The quiet period begins: every rack uncordoned, no fault window, no stray bind
        failure, no crash pending."""
        await self._uncordon_due(all_=True)
        self.stray_bind_failure = 0.0
        self.error_until = self.bind_fail_until = self.slow_until = 0.0
        for proc in self.world.procs.values():
            if proc is not None:
                proc.crash_at = proc.crash_at_bind = None
