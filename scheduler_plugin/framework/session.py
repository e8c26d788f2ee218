"""Session: the per-cycle scheduling context, modelled on Volcano's ``framework.Session``.

Plugins register functions (job/subjob/task order, job valid/ready, subjob ready, node order,
hypernode order, hypernode gradient); actions (``allocate``, ``backfill``) orchestrate them.
Allocated HyperNodes of jobs and SubJobs are recovered from running pods at open time
(volcano_impl §1.4), so a scheduler restart loses nothing.
"""

from __future__ import annotations

import operator
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..algorithms.fit_counts import AllocState
from ..config.scheduler_conf import SchedulerConfig
from ..model.explanation import CandidateReport, Explanation
from ..model.jobs import JobInfo, SubJobInfo, TaskInfo, Topology
from ..model.snapshot import ClusterSnapshot
from .evictions import EvictionLedger

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

# Order functions are sort keys: Volcano chains comparators and the first non-equal one wins,
# which is exactly lexicographic order on the tuple of per-plugin keys (and far cheaper).
OrderKey = Callable[[Any], Any]
NodeOrderFn = Callable[[TaskInfo, SubJobInfo, I64], F64]
HyperNodeOrderFn = Callable[[SubJobInfo | None, I64, I64], F64]
# (topology, allocated hypernode or -1, input hypernode) -> tiers of candidates, or an error text.
GradientFn = Callable[[Topology | None, int, int], "list[list[int]] | str"]
# Queue and eviction extension points, as Volcano's session has them. Queues are named by
# their name; the plugin that registers a function keeps its own per-queue attributes.
QueueOrderKey = Callable[[str], Any]
OverusedFn = Callable[[str], bool]
# (queue, task) -> may the task be allocated while its queue stays within its limits.
AllocatableFn = Callable[[str, TaskInfo], bool]
# job -> PERMIT (1), ABSTAIN (0) or REJECT (-1), Volcano's JobEnqueueable vote.
EnqueueableFn = Callable[[JobInfo], int]
# (preemptor or reclaimer task, candidate victims) -> the victims this plugin allows, or None
# to abstain. Volcano intersects the non-abstaining answers within a tier and stops at the
# first tier that gave any answer.
VictimFn = Callable[[TaskInfo, list[TaskInfo]], "list[TaskInfo] | None"]
# (queue, preemptor task) -> may this queue's task take room by preemption (capacity plugin).
PreemptiveFn = Callable[[str, TaskInfo], bool]
PERMIT, ABSTAIN, REJECT = 1, 0, -1
# Volcano's JobEnqueued callbacks (a job moved to Inqueue) and allocate/deallocate event
# handlers: plugins keep their per-queue and per-job sums in step with the session's decisions.
JobEnqueuedFn = Callable[[JobInfo], None]
TaskEventFn = Callable[[list[TaskInfo]], None]


@dataclass
class Session:
    """State and plugin registries of one scheduling cycle."""

    snap: ClusterSnapshot
    config: SchedulerConfig
    seed: int = 0
    state: AllocState = field(init=False)
    rng: random.Random = field(init=False)
    job_order_fns: list[OrderKey] = field(default_factory=list)
    subjob_order_fns: list[OrderKey] = field(default_factory=list)
    task_order_fns: list[OrderKey] = field(default_factory=list)
    job_valid_fns: list[Callable[[JobInfo], str | None]] = field(default_factory=list)
    job_ready_fns: list[Callable[[JobInfo], bool]] = field(default_factory=list)
    subjob_ready_fns: list[Callable[[SubJobInfo], bool]] = field(default_factory=list)
    node_order_fns: list[NodeOrderFn] = field(default_factory=list)
    hypernode_order_fns: list[HyperNodeOrderFn] = field(default_factory=list)
    gradient_fns: list[GradientFn] = field(default_factory=list)
    queue_order_fns: list[QueueOrderKey] = field(default_factory=list)
    overused_fns: list[OverusedFn] = field(default_factory=list)
    allocatable_fns: list[AllocatableFn] = field(default_factory=list)
    job_enqueueable_fns: list[list[EnqueueableFn]] = field(default_factory=list)  # per tier
    # One list per configuration tier, as Volcano's tiered victim selection needs.
    preemptable_fns: list[list[VictimFn]] = field(default_factory=list)
    reclaimable_fns: list[list[VictimFn]] = field(default_factory=list)
    preemptive_fns: list[PreemptiveFn] = field(default_factory=list)
    job_enqueued_fns: list[JobEnqueuedFn] = field(default_factory=list)
    allocate_handlers: list[TaskEventFn] = field(default_factory=list)
    deallocate_handlers: list[TaskEventFn] = field(default_factory=list)
    # Jobs moved Pending -> Inqueue by this session's enqueue action, and why the others were
    # not (the first rejecting plugin's words).
    enqueued: set[str] = field(default_factory=set)
    enqueue_reasons: dict[str, str] = field(default_factory=dict)
    plugins: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Evictions and nominations of the preempt/reclaim actions (see framework/evictions.py).
    ledger: EvictionLedger = field(default_factory=EvictionLedger)
    # Head-of-queue reservations (scheduler_plugin/reservation.py): the session's clock (seconds
    # since the epoch; None: nothing is reserved), the holds carried from the previous session,
    # and the holds this session keeps (job key -> Reservation).
    now: float | None = None
    previous_reservations: dict[str, Any] = field(default_factory=dict)
    reservations: dict[str, Any] = field(default_factory=dict)
    # Outputs / working data.
    placed: dict[str, int] = field(default_factory=dict)  # task key -> node, tentative included
    bindings: dict[str, int] = field(default_factory=dict)  # committed
    job_hn: dict[str, int] = field(default_factory=dict)  # job key -> allocated hypernode id
    subjob_hn: dict[str, int] = field(default_factory=dict)  # subjob id -> allocated hypernode id
    explanations: dict[str, Explanation] = field(default_factory=dict)
    # The domain search's candidates per job, kept only when asked (``explain``): off in the
    # scheduler's own cycles so that deciding costs the same.
    record_candidates: bool = False
    candidates: dict[str, CandidateReport] = field(default_factory=dict)
    task_reasons: dict[str, str] = field(default_factory=dict)
    _subtree_cache: dict[int, dict[int, I64]] = field(default_factory=dict)
    # Ready-task counters (running, allocated this session, pending best-effort), kept in step
    # with ``placed`` so gang checks are O(1) instead of a scan over the job's pods.
    n_ready_sj: dict[str, int] = field(default_factory=dict)
    n_ready_job: dict[str, int] = field(default_factory=dict)
    n_ready_role: dict[tuple[str, str], int] = field(default_factory=dict)
    _sorted_tasks: dict[str, list[TaskInfo]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state = AllocState(self.snap)
        self.rng = random.Random(self.seed)
        # Counters start from what each job precomputed once (O(jobs), not O(pods)), summed
        # once per snapshot; a session starts from copies.
        base = self.snap.memo.get("ready_counters")
        if base is None:
            n_job: dict[str, int] = {}
            n_sj: dict[str, int] = {}
            n_role: dict[tuple[str, str], int] = {}
            for job in self.snap.jobs.values():
                total, per_sj, per_role = job.base_ready
                n_job[job.key] = total
                n_sj.update(per_sj)
                for role, c in per_role.items():
                    n_role[(job.key, role)] = c
            base = self.snap.memo["ready_counters"] = (n_job, n_sj, n_role)
        self.n_ready_job, self.n_ready_sj, self.n_ready_role = (dict(d) for d in base)

    def _count(self, t: TaskInfo, d: int) -> None:
        self.n_ready_sj[t.subjob] += d
        self.n_ready_job[t.job] += d
        self.n_ready_role[(t.job, t.role)] += d

    def mark_placed(self, t: TaskInfo, node: int) -> None:
        """Record a tentative allocation (Statement calls this)."""
        fresh = t.key not in self.placed
        if not self.task_ready(t):
            self._count(t, 1)
        self.placed[t.key] = node
        if fresh and self.allocate_handlers and not t.running:
            self.on_allocate([t])

    def mark_placed_many(self, tasks: list[TaskInfo], nodes: list[int]) -> None:
        """Bulk :meth:`mark_placed` (one pass, counters updated by group)."""
        placed = self.placed
        by_sj: Counter[str] = Counter()
        by_role: Counter[tuple[str, str]] = Counter()
        by_job: Counter[str] = Counter()
        fresh: list[TaskInfo] = []
        for t, n in zip(tasks, nodes, strict=True):
            if not (t.running or t.key in placed):
                fresh.append(t)
                if not t.best_effort:
                    by_sj[t.subjob] += 1
                    by_role[(t.job, t.role)] += 1
                    by_job[t.job] += 1
            placed[t.key] = n
        if fresh and self.allocate_handlers:
            self.on_allocate(fresh)
        for k, v in by_sj.items():
            self.n_ready_sj[k] += v
        for kr, v in by_role.items():
            self.n_ready_role[kr] += v
        for k, v in by_job.items():
            self.n_ready_job[k] += v

    def unmark_placed(self, t: TaskInfo) -> None:
        """Forget a tentative allocation (Statement discard/rollback)."""
        if self.placed.pop(t.key, None) is not None and not t.running:
            if not t.best_effort:
                self._count(t, -1)
            if self.deallocate_handlers:
                self.on_deallocate([t])

    def on_allocate(self, tasks: list[TaskInfo]) -> None:
        """Tell the plugins ``tasks`` were allocated in this session (Volcano's AllocateFunc)."""
        for fn in self.allocate_handlers:
            fn(tasks)

    def on_deallocate(self, tasks: list[TaskInfo]) -> None:
        """Tell the plugins ``tasks`` no longer hold what they held: an allocation undone, or a
        running victim evicted (Volcano's DeallocateFunc)."""
        for fn in self.deallocate_handlers:
            fn(tasks)

    def job_phase(self, job: JobInfo) -> str:
        """The PodGroup phase as this session sees it: Inqueue once enqueued here, else the
        phase the PodGroup carries ("" read as Pending, as Volcano's ``IsPending`` does)."""
        if job.key in self.enqueued:
            return "Inqueue"
        st = job.podgroup.status
        return (st.phase if st is not None else None) or "Pending"

    def job_enqueued(self, job: JobInfo) -> None:
        """Mark ``job`` Inqueue and tell the plugins (Volcano's ``JobEnqueued``)."""
        self.enqueued.add(job.key)
        self.enqueue_reasons.pop(job.key, None)
        for fn in self.job_enqueued_fns:
            fn(job)

    # ------------------------------------------------------------------ open
    @classmethod
    def open(cls, snap: ClusterSnapshot, config: SchedulerConfig, seed: int = 0) -> Session:
        """Build plugins from the configuration tiers and recover allocated HyperNodes."""
        from ..plugins import build_plugins

        ssn = cls(snap=snap, config=config, seed=seed)
        build_plugins(ssn)
        ssn._recover_allocated()
        return ssn

    def _recover_allocated(self) -> None:
        tree = self.snap.tree
        if not tree.ready:
            return
        for job in self.snap.jobs.values():
            if not job.tasks or len(job.pending) == len(job.tasks) or not job.with_topology:
                continue  # nothing running: nothing to recover
            # Depends on the job's running pods and the tree only: once per (JobInfo, tree).
            cached = job.cache.get("recovered")
            if cached is None or cached[0] is not tree:
                per_sub: list[int] = []
                subs: dict[str, int] = {}
                for sj in job.subjobs.values():
                    nodes = [t.node for t in sj.tasks if t.running and t.node >= 0]  # -1: Node gone
                    if not nodes:
                        continue
                    hn = tree.lowest_containing(nodes)
                    if sj.topology is not None and hn >= 0:
                        subs[sj.id] = hn
                    per_sub.append(hn)
                job_hn = tree.lca_many(per_sub) if per_sub and all(h >= 0 for h in per_sub) else None
                cached = job.cache["recovered"] = (tree, subs, job_hn)
            self.subjob_hn.update(cached[1])
            if cached[2] is not None:
                self.job_hn[job.key] = cached[2]

    # ------------------------------------------------------------------ readiness
    def task_ready(self, t: TaskInfo) -> bool:
        """Bound/running, allocated in this session, or pending best-effort (Volcano's ReadyTaskNum)."""
        return t.running or t.key in self.placed or t.best_effort

    def ready_count(self, tasks: list[TaskInfo]) -> int:
        """Ready tasks among ``tasks`` (a scan; the counters below are O(1))."""
        return sum(1 for t in tasks if self.task_ready(t))

    def subjob_ready_count(self, sj: SubJobInfo) -> int:
        """Ready tasks of a SubJob."""
        return self.n_ready_sj[sj.id]

    def job_ready_count(self, job: JobInfo) -> int:
        """Ready tasks of a job."""
        return self.n_ready_job[job.key]

    def role_ready_count(self, job: JobInfo, role: str) -> int:
        """Ready tasks of one task role of a job."""
        return self.n_ready_role.get((job.key, role), 0)

    def pending_tasks(self, sj: SubJobInfo) -> list[TaskInfo]:
        """Not-ready tasks of a SubJob in task order (the order is computed once per session)."""
        tasks = self._sorted_tasks.get(sj.id)
        if tasks is None:
            tasks = sorted(sj.tasks, key=self.task_sort_key())
            self._sorted_tasks[sj.id] = tasks
        return [t for t in tasks if not self.task_ready(t)]

    def job_valid(self, job: JobInfo) -> str | None:
        """The first plugin's reason the job is invalid, or None."""
        for fn in self.job_valid_fns:
            reason = fn(job)
            if reason:
                return reason
        return None

    def job_ready(self, job: JobInfo) -> bool:
        """Every JobReady function agrees (default: every pod ready)."""
        if not self.job_ready_fns:
            return all(self.task_ready(t) for t in job.tasks) if job.tasks else True
        return all(fn(job) for fn in self.job_ready_fns)

    def subjob_ready(self, sj: SubJobInfo) -> bool:
        """Every SubJobReady function agrees (default: MinAvailable reached)."""
        if not self.subjob_ready_fns:
            return self.n_ready_sj[sj.id] >= sj.min_available
        return all(fn(sj) for fn in self.subjob_ready_fns)

    # ------------------------------------------------------------------ ordering
    def job_sort_key(self) -> Callable[[JobInfo], Any]:
        """Plugin keys in tier order, then creation time, then the job key (Volcano: UID)."""
        fns = list(self.job_order_fns)
        return lambda j: (*(f(j) for f in fns), j.creation, j.key)

    def subjob_sort_key(self) -> Callable[[SubJobInfo], Any]:
        """Plugin keys, then MatchIndex, then the SubJob ID (design 000 default order)."""
        fns = list(self.subjob_order_fns)
        return lambda s: (*(f(s) for f in fns), s.match_index, s.id)

    def task_sort_key(self) -> Callable[[TaskInfo], Any]:
        """Plugin keys, then Volcano's default task order (pod-name ordinal, creation, UID)."""
        fns = list(self.task_order_fns)
        if not fns:
            return operator.attrgetter("order_key")
        if len(fns) == 1 and getattr(fns[0], "precomputed", None):
            return operator.attrgetter(fns[0].precomputed)  # type: ignore[attr-defined]
        return lambda t: (*(f(t) for f in fns), *t.order_key)

    def queue_sort_key(self) -> Callable[[str], Any]:
        """Plugin keys in tier order, then the queue name (Volcano: creation time, then UID)."""
        fns = list(self.queue_order_fns)
        return lambda q: (*(f(q) for f in fns), q)

    # ------------------------------------------------------------------ queues
    def overused(self, queue: str) -> bool:
        """Any plugin finds the queue over its share (Volcano's ``Overused``)."""
        return any(fn(queue) for fn in self.overused_fns)

    def allocatable(self, queue: str, task: TaskInfo) -> bool:
        """Every plugin lets the queue take the task (Volcano's ``Allocatable``)."""
        return all(fn(queue, task) for fn in self.allocatable_fns)

    def preemptive(self, queue: str, task: TaskInfo) -> bool:
        """Every plugin lets the queue's task preempt (Volcano's ``Preemptive``)."""
        return all(fn(queue, task) for fn in self.preemptive_fns)

    def job_enqueueable(self, job: JobInfo) -> bool:
        """Volcano's vote: a REJECT refuses; a tier with a PERMIT (and no REJECT) admits without
        asking later tiers; all abstaining admits."""
        for tier in self.job_enqueueable_fns:
            permit = False
            for fn in tier:
                vote = fn(job)
                if vote < 0:
                    return False
                permit = permit or vote > 0
            if permit:
                return True
        return True

    @staticmethod
    def _victims(tiers: list[list[VictimFn]], actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        # Volcano's Preemptable/Reclaimable: within a tier the answers of the plugins that did
        # not abstain are intersected; the first tier with an answer decides.
        for tier in tiers:
            chosen: list[TaskInfo] | None = None
            for fn in tier:
                got = fn(actor, candidates)
                if got is None:
                    continue
                if chosen is None:
                    chosen = list(got)
                elif len(got) < len(candidates):
                    # An answer as long as the candidates allows them all (answers are subsets):
                    # only a shorter one cuts.
                    keep = {t.key for t in got}
                    chosen = [t for t in chosen if t.key in keep]
            if chosen is not None:
                return chosen
        return []

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """The candidates the plugins allow ``preemptor`` to evict."""
        return self._victims(self.preemptable_fns, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """The candidates the plugins allow ``reclaimer``'s queue to take back.

        Unlike preemption, every tier's answer narrows the victims: in Volcano the first tier
        with an answer decides, so with its default tiers gang's verdict (tier 1) hides
        proportion's and capacity's (tier 2), and reclaim can take a queue below its deserved
        share, after which it reclaims back. Here the queue plugins' limits always hold."""
        chosen: list[TaskInfo] | None = None
        for tier in self.reclaimable_fns:
            for fn in tier:
                got = fn(reclaimer, candidates if chosen is None else chosen)
                if got is None:
                    continue  # abstains
                keep = {t.key for t in got}
                chosen = [t for t in (candidates if chosen is None else chosen) if t.key in keep]
                if not chosen:
                    return []
        return chosen or []

    # ------------------------------------------------------------------ scores
    def node_scores(self, task: TaskInfo, sj: SubJobInfo, nodes: I64) -> F64:
        """Sum of the node order functions for a task over ``nodes``."""
        total = np.zeros(len(nodes), dtype=np.float64)
        for fn in self.node_order_fns:
            total += fn(task, sj, nodes)
        return total

    def hypernode_scores(self, sj: SubJobInfo | None, request: I64, candidates: I64) -> F64:
        """Sum of the HyperNode order functions over ``candidates``."""
        total = np.zeros(len(candidates), dtype=np.float64)
        for fn in self.hypernode_order_fns:
            total += fn(sj, request, candidates)
        return total

    def gradient(self, topology: Topology | None, allocated: int, root: int) -> list[list[int]] | str:
        """Tiers of candidate HyperNodes (first registered plugin wins); ``[[root]]`` by default."""
        if self.gradient_fns:
            return self.gradient_fns[0](topology, allocated, root)
        return [[root]]

    def subtree_by_tier(self, h: int) -> dict[int, I64]:
        """HyperNodes under ``h`` (inclusive), grouped by tier, in BFS order (cached)."""
        got = self._subtree_cache.get(h)
        if got is None:
            tree = self.snap.tree
            by: dict[int, list[int]] = {}
            for x in tree.subtree(h):
                by.setdefault(int(tree.tiers[x]), []).append(x)
            got = {t: np.array(v, dtype=np.int64) for t, v in sorted(by.items())}
            self._subtree_cache[h] = got
        return got
