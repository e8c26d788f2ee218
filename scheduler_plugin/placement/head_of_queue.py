"""Reservation for the head of the queue: a large gang that waits too long gets a domain held.

Without it, a 64-GPU gang waits forever behind a stream of 8-GPU jobs: every time a node frees
up, a small job takes it. When the highest-priority pending gang (queue order, then job order,
as allocate sorts them) has waited longer than a threshold and still cannot be placed, the
session picks the domain where it would fit soonest - a HyperNode at the job's allowed tier
(the whole cluster for a job without topology) where its pods fit earliest as the running pods
end (their time limits; learned run times, ``model/runtime_history.py``, for the queues that opt
in), then with the smallest shortfall of the per-shape fit counts, then the least running work in
it - and holds it: other jobs may still place pods there,
but only in room the gang will not need once the domain drains.

How the hold works: the gang's pods are charged to the held domain as phantom pods (on the
nodes that are emptiest, as if their running pods had finished), for the rest of the allocate
action. A pod of another job fits a held node only next to its running pods *and* the gang's
phantom share, so it never delays the gang. The gang itself is tried without its phantom; once
placed (or deleted) its reservation ends.

Settings: the ``allocate`` action's arguments in ``volcano-scheduler.conf``
(``reservationWait``: a duration, default ``2h``, ``0``/``off`` disables; ``maxReservations``:
how many gangs may hold a domain at once, default 1), and per queue the annotation
``hyperplace.io/reservation-wait`` (a duration, or ``off``). A job's waiting starts at its
PodGroup's creation time; the session needs ``now`` (``run_session(now=...)``), without which
nothing is reserved. A gang that ran and stopped being whole (a node failed under it) waits
since then, not since its creation (:mod:`..model.gang_damage`), and the only domain held for it
is the one its remainder runs in (its replacements may go nowhere else); the nodes its remainder
takes are not counted as room that drains.

Time limits (EASY backfill): a pod's ``activeDeadlineSeconds`` bounds when it ends
(``model/time_limits.py``). When every pod on the nodes a gang's phantom pods are charged to has
a limit, the hold knows the gang's estimated start (said in its condition), the nodes that free
up soonest are charged first, and a job whose own pods all have limits ending before that start
may use the held room: it is gone before the gang needs it, so the gang is never delayed. A job
or pod without a limit never enters held room (today's behaviour for pods without limits).

State across cycles: the result's ``reservations`` go back into the next ``run_session`` (as
nominations do); after a restart the PodGroup's ``HyperNodeReserved`` condition gives the held
HyperNode and since when, and a gang without either simply gets a domain chosen again.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from hyperplace.api.times import parse_go_duration, rfc3339

from ..config.scheduler_conf import SchedulerConfig
from ..framework.session import Session
from ..model.gang_damage import stopped_whole_at, waiting_since
from ..model.jobs import JobInfo, TaskInfo, pods_per_shape
from ..model.reservation import Reservation, from_condition
from ..model.snapshot import pods_fitting
from ..model.time_limits import fits_before, job_limit
from .drain_forecast import DrainForecast, room_at

QUEUE_ANNOTATION = "hyperplace.io/reservation-wait"
ARG_WAIT = "reservationWait"
ARG_MAX = "maxReservations"
# Two hours, measured on the trace simulation (bench/quality/README.md): a hold idles the room it
# drains, and with run times mostly unknown that costs the stream more than it saves the gang
# until the gang has waited about this long (2 h beat 10 min on the wait rows, on held-out seeds too).
DEFAULT_WAIT = 7200.0
DEFAULT_MAX = 1
# Why a hold took its domain, when learned run times took part in the choice.
LEARNED_CHOICE = "of the domains it fits, the one expected to free soonest (learned run times)"


def parse_wait(text: object, field: str) -> float | None:
    """Seconds from ``10m``, ``1h30m`` (a Go duration) or ``90`` (seconds); None for
    ``off``/``0``. A bad value is an error naming ``field``."""
    s = str(text).strip().lower()
    if s in ("off", "false", "none", "0", ""):
        return None
    try:
        v = float(s)
    except ValueError:
        try:
            v = parse_go_duration(s)
        except ValueError:
            raise ValueError(f"{field}: invalid duration {text!r} (use e.g. 10m, 1h30m, 90 or off)") from None
    if v < 0:
        raise ValueError(f"{field}: must not be negative, got {text!r}")
    return v or None


@dataclass(frozen=True)
class ReservationSettings:
    """The ``allocate`` action's reservation arguments."""

    wait: float | None  # default wait threshold in seconds; None: nothing is reserved
    most: int  # gangs that may hold a domain at once
    warnings: tuple[str, ...] = ()  # what was refused (its default kept), for the session notes


def settings(config: SchedulerConfig) -> ReservationSettings:
    """The reservation arguments of the ``allocate`` action. A bad value keeps the default,
    with a warning."""
    args = config.action_arguments("allocate")
    warnings: list[str] = []
    wait: float | None = DEFAULT_WAIT
    if ARG_WAIT in args:
        try:
            wait = parse_wait(args[ARG_WAIT], f"configurations[allocate].arguments.{ARG_WAIT}")
        except ValueError as exc:
            warnings.append(f"{exc}; using {DEFAULT_WAIT:.0f}s")
    most = DEFAULT_MAX
    if ARG_MAX in args:
        try:
            most = int(args[ARG_MAX])
            if most < 0:
                raise ValueError
        except (TypeError, ValueError):
            warnings.append(
                f"configurations[allocate].arguments.{ARG_MAX}: must be a whole number >= 0, "
                f"got {args[ARG_MAX]!r}; using {DEFAULT_MAX}"
            )
            most = DEFAULT_MAX
    return ReservationSettings(wait, most, tuple(warnings))


class Holder:
    """One allocate action's reservations: chosen at the start, phantom pods charged to the held
    domains, lifted while the gang itself is tried, and all removed at the end."""

    def __init__(self, ssn: Session, previous: Mapping[str, Reservation]) -> None:
        self.ssn = ssn
        self.previous = previous
        self.held: dict[str, Reservation] = {}
        self._phantom: dict[str, tuple[list[int], list[int]]] = {}  # job -> (shapes, nodes) charged
        self._start: dict[str, float] = {}  # held gang -> its estimated start (epoch seconds)
        self._backfilled: dict[str, list[tuple[str, str]]] = {}  # held gang -> (job, line)
        self.forecast = DrainForecast(ssn)  # when each node's room frees up
        self._charged_memo: (
            tuple[list[tuple[str, tuple[list[int], list[int]]]], np.ndarray, np.ndarray] | None
        ) = None

    def _estimate(self, job: str) -> None:
        """The held gang's estimated start from the nodes its phantom pods are charged to."""
        self._start.pop(job, None)
        got = self._phantom.get(job)
        res = self.held.get(job)
        if got is None or res is None or self.forecast.bounds() is None:
            return
        start = self.forecast.start_on(got[1])
        if start is not None:
            self._start[job] = start
        text = rfc3339(start) if start is not None else None
        if res.estimated_start != text:
            self.held[job] = Reservation(res.job, res.hypernode, res.since, res.reason, text)

    # ------------------------------------------------------------------ choice
    def _wait_for(self, job: JobInfo, default: float | None) -> float | None:
        queue = self.ssn.snap.queues.get(job.queue)
        ann = (queue.metadata.annotations or {}) if queue is not None else {}
        if QUEUE_ANNOTATION in ann:
            try:
                return parse_wait(ann[QUEUE_ANNOTATION], f"Queue {job.queue} annotation {QUEUE_ANNOTATION}")
            except ValueError as exc:
                self.ssn.note(str(exc))
        return default

    def _threshold(self, job: JobInfo, default: float | None) -> float | None:
        """How long ``job`` waits before a domain is held: the reservation's threshold, or
        its SLA (the ``sla`` plugin) when that is shorter (Volcano pipelines an overdue job)."""
        wait = self._wait_for(job, default)
        own = self.ssn.waiting_time(job)
        if own is None:
            return wait
        return own if wait is None else min(wait, own)

    def start(self, ordered: Sequence[JobInfo], gang_tasks: dict[str, list[TaskInfo]]) -> None:
        """Hold a domain for each of the first pending gangs (at most ``maxReservations``) that
        waited past their threshold. ``ordered``: candidate jobs, highest priority first;
        ``gang_tasks``: their gang minimum's pending pods."""
        ssn = self.ssn
        now = ssn.now
        conf = settings(ssn.config)
        default, most = conf.wait, conf.most
        for w in conf.warnings:
            ssn.note(w)
        if now is None or most == 0 or not ssn.snap.tree.ready:
            return
        for job in ordered[:most]:
            tasks = gang_tasks.get(job.key)
            wait = self._threshold(job, default)
            created = waiting_since(job)
            if not tasks or wait is None or created is None or now - created <= wait:
                continue
            prev = self.previous.get(job.key) or from_condition(job)
            h = self._choose(job, tasks, prev)
            if h is None:
                continue
            name = ssn.snap.tree.names[h]
            since = prev.since if prev is not None and prev.hypernode == name and prev.since else rfc3339(now)
            damaged = " since it stopped being whole" if stopped_whole_at(job) is not None else ""
            why = f"it has waited {_fmt_wait(now - created)}{damaged} (threshold {_fmt_wait(wait)})"
            learned = self.forecast.learned
            if learned or (prev is not None and prev.hypernode == name and LEARNED_CHOICE in prev.reason):
                why += f"; {LEARNED_CHOICE}"  # said for as long as the hold stands
            self.held[job.key] = Reservation(job.key, name, since, why)
            self._charge(job, tasks, h)
            self._estimate(job.key)

    def _candidates(self, job: JobInfo) -> list[int]:
        tree = self.ssn.snap.tree
        topo = job.topology
        if topo is None or topo.mode != "hard" or topo.limit is None:
            return [tree.root]
        tiers = tree.tiers
        allocated = self.ssn.job_hn.get(job.key, -1)
        if allocated >= 0:
            # Pods of the gang run (a remainder, or a gang half-bound): the rest may go only
            # where they are, in the largest domain within the limit that holds them (the
            # domain search's own rule, network_topology_aware's gradient).
            if tiers[allocated] > topo.limit:
                return []
            top = allocated
            while tree.parent[top] != -1 and tiers[tree.parent[top]] <= topo.limit:
                top = int(tree.parent[top])
            return [top]
        # The largest domains the job may use: at its tier limit (or the highest below it).
        return [
            h
            for h in range(len(tree) - 1)
            if tiers[h] <= topo.limit and (tree.parent[h] == -1 or tiers[tree.parent[h]] > topo.limit)
        ]

    def _remainder(self, job: JobInfo) -> np.ndarray:
        """Per node, what the gang's own bound pods take: they stay while it waits (a remainder
        waits for its replacements), so that room never drains for it."""
        snap = self.ssn.snap
        own = np.zeros_like(snap.allocatable)
        for t in job.tasks:
            if t.running and t.node >= 0:
                own[t.node] += t.requests
        return own

    def _drained(self, job: JobInfo, tasks: list[TaskInfo]) -> dict[int, np.ndarray]:
        """Per shape, how many pods each node takes once its running pods are gone (but the
        gang's own)."""
        snap = self.ssn.snap
        out: dict[int, np.ndarray] = {}
        room = (
            snap.allocatable - self._remainder(job) if len(job.pending) < len(job.tasks) else snap.allocatable
        )
        for sid in pods_per_shape(tasks):
            shape = snap.shapes[sid]
            out[sid] = np.where(snap.static_mask(shape), pods_fitting(room, shape.requests), 0)
            cons = shape.constraints
            if any(
                f.applies(st, cons) and f.pre_filter(st, cons) is not None for f, st in self.ssn.state.filters
            ):
                out[sid][:] = 0  # refused whatever runs (a missing claim): no room to hold for it
        return out

    def _choose(self, job: JobInfo, tasks: list[TaskInfo], prev: Reservation | None) -> int | None:
        """The domain where the gang fits soonest: the earliest time its pods fit there as the
        running pods end (by their time limits, and by learned run times where a queue opts in;
        :meth:`.DrainForecast.expected`), then the smallest shortfall of today's fit counts, then least
        work running there, then name. A domain held before is kept while it can ever fit."""
        snap, state = self.ssn.snap, self.ssn.state
        tree = snap.tree
        need = pods_per_shape(tasks)
        taken = {tree.id_of(r.hypernode) for r in self.held.values()}
        drained_node = self._drained(job, tasks)
        drained = {s: tree.domain_sums(c) for s, c in drained_node.items()}
        candidates = [
            h
            for h in self._candidates(job)
            if h not in taken
            and len(tree.node_sets[h])
            and all(int(drained[s][h]) >= n for s, n in need.items())  # fits here once empty
        ]
        if prev is not None:
            kept = tree.id_of(prev.hypernode)
            if kept in candidates:
                return kept
        now = {s: state.dom_counts(snap.shapes[s]) for s in need}
        now_node = {s: state.node_counts(snap.shapes[s]) for s in need}
        free = self.forecast.expected()
        clock = float(self.ssn.now or 0.0)
        best: tuple[tuple[float, float, float, str], int] | None = None
        for h in candidates:
            shortfall = sum(max(n - int(now[s][h]), 0) for s, n in need.items())
            soonest = 0.0
            if free is not None:
                nodes = tree.node_sets[h]
                soonest = max(
                    room_at(free[nodes], now_node[s][nodes], drained_node[s][nodes], n, clock)
                    for s, n in need.items()
                )
            alloc, used = state.hn_alloc[h], state.hn_used[h]
            busy = float(np.max(np.divide(used, alloc, out=np.zeros_like(used), where=alloc > 0)))
            key = (soonest, float(shortfall), busy, tree.names[h])
            if best is None or key < best[0]:
                best = (key, h)
        return None if best is None else best[1]

    # ------------------------------------------------------------------ phantom pods
    def _charge(self, job: JobInfo, tasks: list[TaskInfo], h: int) -> None:
        """Charge the gang's pods to ``h`` as if drained: leaf by leaf, the emptiest leaves
        first, and within a leaf the emptiest nodes first. Held room then covers whole leaves,
        as the gang itself will (its placement minimises leaves), and the other leaves of a held
        spine stay whole for other jobs; spread over the emptiest nodes of every leaf, the hold
        would leave no leaf whole and hold back every job that needs one."""
        state = self.ssn.state
        tree = self.ssn.snap.tree
        nodes = tree.node_sets[h]
        room = state.alloc[nodes].copy()
        busy = state.used[nodes].sum(axis=1)
        if len(job.pending) < len(job.tasks):
            # A remainder stays: its nodes hold only what it leaves, and do not count as busy
            # (its replacements go best beside it).
            own = self._remainder(job)[nodes]
            room -= own
            busy = busy - own.sum(axis=1)
        leaf = tree.leaf_of[nodes]
        # Nodes of no leaf count as a leaf of their own, after the real ones.
        key = np.where(leaf >= 0, leaf, len(tree) + np.arange(len(nodes)))
        _, group = np.unique(key, return_inverse=True)
        leaf_busy = np.bincount(group, weights=busy.astype(np.float64))
        free = self.forecast.bounds()
        if free is None:
            order = np.lexsort((nodes, busy, group, leaf_busy[group]))  # emptiest leaf, then node
        else:
            # With time limits, within a leaf the nodes that free up soonest first (empty ones
            # now), so the gang's estimated start is as early as the limits allow. The leaves
            # stay in the order above: a busy leaf whose pods all declare limits drains by a
            # known time but, limits being over-estimates, usually later than an emptier leaf.
            now = float(self.ssn.now or 0.0)
            node_free = np.where(busy == 0, now, free[nodes])
            order = np.lexsort((nodes, busy, node_free, group, leaf_busy[group]))
        mask = {
            sid: self.ssn.snap.static_mask(self.ssn.snap.shapes[sid])[nodes]
            for sid in {t.shape for t in tasks}
        }
        snap = self.ssn.snap
        shapes, rows = fill_in_order(
            room, order, [t.shape for t in tasks], {sid: snap.shapes[sid].requests for sid in mask}, mask
        )
        where = nodes[np.asarray(rows, dtype=np.int64)].tolist()
        if where:
            state.apply(shapes, where, 1)
            self._phantom[job.key] = (shapes, where)

    def _lift(self, job: str) -> None:
        got = self._phantom.pop(job, None)
        if got is not None:
            self.ssn.state.apply(got[0], got[1], -1)

    def _charge_back(self, saved: Mapping[str, tuple[list[int], list[int]]]) -> None:
        """Charge lifted phantom pods back where they were (the very lists, so :meth:`_charged`
        still knows them)."""
        for job, (shapes, where) in saved.items():
            self.ssn.state.apply(shapes, where, 1)
            self._phantom[job] = (shapes, where)

    def before(self, job: JobInfo) -> bool:
        """Lift the gang's own phantom pods before it is tried; True when it holds a domain."""
        if job.key not in self.held:
            return False
        self._lift(job.key)
        return True

    def after(self, job: JobInfo, placed: bool, tasks: list[TaskInfo]) -> None:
        """A placed gang's reservation ends; otherwise its domain is held again."""
        res = self.held.get(job.key)
        if res is None:
            return
        if placed:
            del self.held[job.key]
            return
        h = self.ssn.snap.tree.id_of(res.hypernode)
        if h is not None:
            self._charge(job, tasks, h)
            self._estimate(job.key)

    @contextmanager
    def backfill(self, job: JobInfo, tasks: list[TaskInfo]) -> Iterator[list[str]]:
        """For the block, lift the phantom pods of every hold whose gang starts only after
        ``tasks`` (all with a time limit) would be gone if started now; yields those gangs.
        The same phantom pods are charged back after, so the held room stays held."""
        now = self.ssn.now
        limit = job_limit(tasks) if tasks and now is not None else None
        opened: list[str] = []
        if limit is not None and now is not None and job.key not in self.held:
            for gang, start in sorted(self._start.items()):
                if gang != job.key and gang in self._phantom and fits_before(now, limit, start):
                    opened.append(gang)
        saved = {g: self._phantom[g] for g in opened}
        for g in opened:
            self._lift(g)
        try:
            yield opened
        finally:
            self._charge_back(saved)

    def backfilled(self, job: JobInfo, opened: list[str], tasks: list[TaskInfo]) -> None:
        """Record ``job`` (just placed with the holds of ``opened`` lifted) as backfilled into
        every held room it took: its pods on nodes charged to that gang."""
        now = self.ssn.now
        limit = job_limit(tasks)
        if now is None or limit is None:
            return
        nodes = {self.ssn.placed.get(t.key, -1) for t in tasks}
        for gang in opened:
            got = self._phantom.get(gang)
            res = self.held.get(gang)
            if got is None or res is None or nodes.isdisjoint(got[1]):
                continue
            line = (
                f"backfilled into HyperNode {res.hypernode}, held for {gang}: its time limit "
                f"(activeDeadlineSeconds {limit:.0f}s) ends by {rfc3339(now + limit)}, before that "
                f"gang's estimated start {res.estimated_start}"
            )
            self._backfilled.setdefault(gang, []).append((job.key, line))

    def _charged(self) -> tuple[np.ndarray, np.ndarray]:
        """The nodes phantom pods are charged to and what they take there (one row each), kept
        while the same phantom pods stand (a failed job per cycle asks again)."""
        # The very charges (held by the memo, so compared by identity, never by a reused id).
        key = sorted(self._phantom.items())
        memo = self._charged_memo
        if (
            memo is None
            or len(memo[0]) != len(key)
            or any(a[0] != b[0] or a[1] is not b[1] for a, b in zip(memo[0], key, strict=True))
        ):
            snap = self.ssn.snap
            charged = np.zeros_like(self.ssn.state.used)
            for shapes, nodes in self._phantom.values():
                reqs = np.stack([snap.shapes[sid].requests for sid in shapes])
                np.add.at(charged, np.asarray(nodes, dtype=np.int64), reqs)
            rows = np.flatnonzero(charged.any(axis=1))
            memo = self._charged_memo = (key, rows, charged[rows])
        return memo[1], memo[2]

    def may_be_kept_out(self, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        """Whether the holds can be what keeps ``job`` out: with every phantom pod lifted, some
        domain the job may use would have room for each of its pod shapes by count. False
        means no placement can succeed even with nothing held, so the dry run of
        :meth:`lifted` (one more placement per failed job and cycle) would only confirm it;
        per-shape counts ignore how shapes and partitions share room, so True is only a maybe."""
        if not self._phantom or not tasks:
            return False
        snap, state = self.ssn.snap, self.ssn.state
        tree = snap.tree
        rows, charged = self._charged()
        need = pods_per_shape(tasks)
        candidates = np.asarray(self._candidates(job), dtype=np.int64)
        room = np.ones(len(candidates), dtype=bool)
        for sid, n in need.items():
            # Counted here, not by AllocState.compute_counts: its host-port check would still
            # see the ports phantom pods hold, and an undercount would skip a dry run wrongly.
            shape = snap.shapes[sid]
            lifted = pods_fitting(state.alloc[rows] - (state.used[rows] - charged), shape.requests)
            now = state.node_counts(shape)
            more = np.zeros(snap.num_nodes, dtype=np.int64)
            more[rows] = np.where(snap.static_mask(shape)[rows], np.maximum(lifted - now[rows], 0), 0)
            room &= (state.dom_counts(shape)[candidates] + tree.domain_sums(more)[candidates]) >= n
        return bool(room.any())

    @contextmanager
    def lifted(self) -> Iterator[None]:
        """Every gang's phantom pods lifted for the block, then charged back where they were
        (a dry run: would a job have been placed with no domain held?)."""
        saved = dict(self._phantom)
        for job in saved:
            self._lift(job)
        try:
            yield
        finally:
            self._charge_back(saved)

    def why(self, job: JobInfo) -> str | None:
        """A line for the explanation of a job that could not be placed while other gangs hold
        domains: which, for whom and since when. Allocate gives it only to a job that the
        holds keep out (a dry run under :meth:`lifted` places it)."""
        others = [r for k, r in sorted(self.held.items()) if k != job.key]
        if not others:
            return None
        held = ", ".join(
            f"{r.hypernode} for {r.job} since {r.since}"
            + (f" (estimated start {r.estimated_start})" if r.estimated_start else "")
            for r in others
        )
        line = f"held for the head of the queue: {held} (only room those gangs will not need is offered)"
        if any(r.estimated_start for r in others):
            # What the user can do about it: declare a limit that ends before that start.
            line += "; a job whose pods all set activeDeadlineSeconds ending before a held gang's start may use its room"
        return line

    def finish(self) -> None:
        """Remove every phantom pod (later actions see the real usage) and publish the holds."""
        for job in list(self._phantom):
            self._lift(job)
        self._keep_backfilled()
        self.ssn.reservations = {
            k: Reservation(
                r.job, r.hypernode, r.since, r.reason, r.estimated_start, tuple(self._backfilled[k])
            )
            if self._backfilled.get(k)
            else r
            for k, r in self.held.items()
        }

    def _keep_backfilled(self) -> None:
        """A job backfilled in an earlier session keeps its line while it still runs in the
        room held for the same gang: what it is told stays the same from cycle to cycle (a
        status written a few seconds later, or coalesced with the next cycle's, still says it)."""
        jobs = self.ssn.snap.jobs
        for gang, prev in sorted(self.previous.items()):
            if gang not in self.held or not prev.backfilled:
                continue
            mine = self._backfilled.setdefault(gang, [])
            have = {j for j, _ in mine}
            for key, line in prev.backfilled:
                job = jobs.get(key)
                if key not in have and job is not None and len(job.pending) < len(job.tasks):
                    mine.append((key, line))


def fill_in_order(
    room: np.ndarray,
    order: np.ndarray,
    pods: Sequence[int],
    requests: Mapping[int, np.ndarray],
    masks: Mapping[int, np.ndarray],
) -> tuple[list[int], list[int]]:
    """Charge ``pods`` (their shape ids, in order) to the rows of ``room`` taken in ``order``: each
    pod goes to the first row, from the one the previous pod went to, that its shape's mask allows
    and that has room for it; a pod that finds none is left out, and so are all after it.
    Returns the shapes and rows charged; ``room`` is reduced by them."""
    shapes: list[int] = []
    rows_out: list[int] = []
    k = 0  # the position in ``order`` the next pod is tried at first
    for sid, run in itertools.groupby(pods):
        # Pods of one shape in a row fill the rows in order, each to what it holds.
        n = sum(1 for _ in run)
        req = requests[sid]
        rows = order[k:]
        sub = room[rows]
        # A row already over on a resource the pod does not request takes nothing either.
        ok = masks[sid][rows] & (sub[:, req <= 0] >= 0).all(axis=1)
        cap = np.where(ok, pods_fitting(sub, req), 0)
        full = np.cumsum(cap)
        last = int(np.searchsorted(full, n))  # where the n-th pod lands
        take = cap.copy()
        if last < len(cap):
            take[last] = n - (int(full[last - 1]) if last else 0)
            take[last + 1 :] = 0
            k += last
        else:
            k = len(order)
        used = np.flatnonzero(take)
        room[rows[used]] -= take[used, None] * req
        shapes += [sid] * int(take.sum())
        rows_out += np.repeat(rows[used], take[used]).tolist()
    return shapes, rows_out


def _fmt_wait(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f}h"
    if s >= 60:
        return f"{s / 60:.0f}m"
    return f"{s:.0f}s"
