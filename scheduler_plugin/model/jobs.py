"""Jobs (PodGroups), SubJobs and tasks (pods): Volcano's JobInfo / SubJobInfo rules.

* A pod goes to the first ``subGroupPolicy`` entry whose match values are a non-empty list;
  otherwise to the default SubJob (ID = GID = job ID, MinAvailable = minMember when the PodGroup
  has no subGroupPolicy, else 1, network topology copied from the job).
* SubJob ID ``<jobID>/<policy>-<v1>-<v2>``; joined values longer than 128 characters are
  replaced by the safe-encoded FNV-32a hash, as in Volcano.
* Readiness counts running/bound pods, pods allocated in this session and pending best-effort pods.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.api.podgroup import NetworkTopologySpec, PodGroup, SubGroupPolicySpec
from hyperplace.api.times import parse_go_duration
from hyperplace.api.workload import UPSTREAM_TOPOLOGY_KEY, upstream_disruption_all, upstream_preempt_never
from hyperplace.kube import SelectorError, label_selector_matches

from .memo import Memo

MAX_SUBJOB_VALUE_LEN = 128
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
# kube's scheduling.SystemCriticalPriority: PriorityClasses at or above it are system-critical.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
PREEMPTABLE_KEY = "volcano.sh/preemptable"
COOLDOWN_KEY = "volcano.sh/cooldown-time"
# Go's strconv.ParseBool: exactly these spellings, nothing else (" false", "yes" are invalid).
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
# k8s.io/apimachinery/pkg/util/rand.SafeEncodeString alphabet (no vowels, no confusable digits).
_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def fnv32a(text: str) -> int:
    """32-bit FNV-1a of the UTF-8 bytes."""
    h = 0x811C9DC5
    for b in text.encode():
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def safe_encode(text: str) -> str:
    """apimachinery ``rand.SafeEncodeString``: map every byte into a vowel-free alphabet."""
    return "".join(_SAFE_ALPHANUMS[b % len(_SAFE_ALPHANUMS)] for b in text.encode())


def subjob_suffix(values: list[str]) -> str:
    """The ``<v1>-<v2>`` part of a SubJob ID, hashed when longer than 128 characters."""
    joined = "-".join(values)
    if len(joined) > MAX_SUBJOB_VALUE_LEN:
        return safe_encode(str(fnv32a(joined)))
    return joined


def match_values(policy: SubGroupPolicySpec, labels: Mapping[str, str]) -> list[str] | None:
    """Volcano's per-policy match: None = no match; [] = matched without keys (-> default SubJob)."""
    if policy.label_selector is not None:
        try:
            if not label_selector_matches(policy.label_selector, labels):
                return None
        except SelectorError:
            return None
    out: list[str] = []
    for key in policy.match_label_keys or []:
        v = labels.get(key, "")
        if not v:
            return None
        out.append(v)
    return out


@dataclass(frozen=True)
class TopologyConstraint:
    """A normalised network-topology requirement.

    ``limit`` is the highest tier allowed after Volcano's adjustments (name translation, soft ->
    hard bounded by the cluster or the job); None means "no tier search" (root only).
    """

    mode: str  # "hard", "soft" or "" (neither)
    limit: int | None
    tier_name: str | None = None
    problem: str | None = None  # e.g. unknown tier name: the job waits with this reason
    declared_soft: bool = False


@dataclass
class TaskInfo:
    """One pod of a job."""

    key: str  # ns/name
    name: str
    namespace: str
    uid: str
    role: str
    index: int | None
    labels: dict[str, str]
    requests: npt.NDArray[np.int64]  # (R,) milli-units
    shape: int  # index into the snapshot's shapes
    priority: int
    creation: str
    best_effort: bool
    node: int = -1  # bound node index, or -1 while pending
    running: bool = False
    subjob: str = ""
    job: str = ""
    order_key: tuple[Any, ...] = ()  # Volcano's default task order, computed once
    prio_order_key: tuple[Any, ...] = ()  # the same behind the priority plugin's key
    rank: tuple[Any, ...] = ()  # placement rank order (see rank_key)
    priority_class: str | None = None  # spec.priorityClassName (critical pods are never victims)
    preempt_never: bool = False  # spec.preemptionPolicy Never: this pod never preempts or reclaims
    # volcano.sh/preemptable on the pod (annotation, else label); None: the pod does not say, its
    # PodGroup's mark (JobInfo.preemptable) decides.
    preemptable: bool | None = None
    bad_mark: str | None = None  # why the pod's volcano.sh/preemptable could not be read
    # volcano.sh/cooldown-time on the pod (label, else annotation), seconds; None: unset. And
    # since when the pod runs (its PodScheduled condition, else its start time), epoch seconds.
    cooldown: float | None = None
    scheduled_at: float | None = None
    bad_cooldown: str | None = None
    # spec.activeDeadlineSeconds: the kubelet ends the pod this long after its start, so a
    # running pod's end is bounded (None: no limit, the pod may run for ever).
    deadline: float | None = None
    started_at: float | None = None  # status.startTime, epoch seconds: the limit counts from it
    # hyperplace.io/replaces-node: the node its lost predecessor ran on (a placement preference).
    replaces_node: str | None = None
    # Bound and being deleted (deletionTimestamp): Volcano's Releasing. It holds its room until it
    # is gone, but no longer counts for its gang (a pod stuck Terminating on a dead node is no
    # member to start the rest beside).
    releasing: bool = False

    @property
    def name_ordinal(self) -> int | None:
        """Volcano's default task order: numeric last dash part when the name has >= 3 parts."""
        parts = self.name.split("-")
        if len(parts) >= 3 and parts[-1].isdigit():
            return int(parts[-1])
        return None


@dataclass
class SubJobInfo:
    """A SubJob: the pods of one partition (or the job's default group)."""

    id: str
    gid: str
    policy: str | None
    min_available: int
    match_index: int
    topology: TopologyConstraint | None
    tasks: list[TaskInfo] = field(default_factory=list)
    allocated_hypernode: int = -1

    @property
    def is_default(self) -> bool:
        """True for the job's default SubJob (pods matching no policy)."""
        return self.policy is None


@dataclass
class JobInfo:
    """A PodGroup with its pods and SubJobs."""

    key: str
    podgroup: PodGroup
    queue: str
    priority: int
    creation: str
    min_member: int
    min_task_member: dict[str, int]
    topology: TopologyConstraint | None
    has_policies: bool
    subjobs: dict[str, SubJobInfo] = field(default_factory=dict)
    # A Kubernetes PodGroup's disruptionMode all: evicted whole or not at all; its
    # preemptionPolicy Never: the gang never evicts others.
    whole_disruption: bool = False
    preempt_never: bool = False
    min_subjobs: dict[str, int] = field(default_factory=dict)
    allocated_hypernode: int = -1
    problems: list[str] = field(default_factory=list)  # reasons the job cannot be considered
    # Placed anyway, but worth telling the user (an unknown highestTierName: Volcano's session
    # skips the translation with a warning, and the job is then not tier-limited).
    warnings: list[str] = field(default_factory=list)
    # volcano.sh/preemptable on the PodGroup (annotation, else label); None: unset.
    preemptable: bool | None = None
    # volcano.sh/cooldown-time on the PodGroup (label, else annotation), seconds; None: unset.
    cooldown: float | None = None
    # Annotations and labels the scheduler read and could not use (logged as Volcano logs them,
    # kept visible on the PodGroup).
    bad_marks: list[str] = field(default_factory=list)
    # Results sessions derive from this job alone (and the tree / configuration they name),
    # kept for the next session that sees the same JobInfo. Not part of equality.
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)

    @property
    def enforced_min_task_member(self) -> dict[str, int]:
        """minTaskMember as Volcano enforces it.

        Volcano's CheckTaskValid/CheckTaskReady skip the per-task minimums when the job's
        minMember is below their sum: the user asked for fewer pods than the tasks' minimums
        add up to, so only the job total counts. This is what lets the network-topology user
        guide's first Job (minAvailable 4, task minAvailable defaulted to replicas 8) start 4 pods.
        """
        if self.min_member < sum(self.min_task_member.values()):
            return {}
        return self.min_task_member

    # A JobInfo is complete once build_job returns and never changes afterwards (sessions keep
    # their own state), so what every session derives from its tasks is computed once here and
    # reused by every session that sees the same JobInfo (the incremental state keeps it).
    @functools.cached_property
    def tasks(self) -> list[TaskInfo]:
        """Every pod of the job, SubJob by SubJob (do not mutate)."""
        return [t for sj in self.subjobs.values() for t in sj.tasks]

    @functools.cached_property
    def pending(self) -> list[TaskInfo]:
        """Tasks not bound to a node, in :attr:`tasks` order."""
        return [t for t in self.tasks if not t.running]

    @functools.cached_property
    def role_counts(self) -> dict[str, int]:
        """Pods per task role."""
        out: dict[str, int] = {}
        for t in self.tasks:
            out[t.role] = out.get(t.role, 0) + 1
        return out

    @functools.cached_property
    def base_ready(self) -> tuple[int, dict[str, int], dict[str, int]]:
        """Tasks ready before any session decides anything (running or best-effort):
        (job total, per SubJob id with every SubJob present, per role with every role present)."""
        per_sj = {sid: 0 for sid in self.subjobs}
        per_role = dict.fromkeys(self.role_counts, 0)
        total = 0
        for t in self.tasks:
            if (t.running and not t.releasing) or t.best_effort:
                total += 1
                per_sj[t.subjob] += 1
                per_role[t.role] += 1
        return total, per_sj, per_role

    @functools.cached_property
    def with_topology(self) -> bool:
        """The job or one of its SubJobs has a network topology."""
        return self.topology is not None or any(sj.topology is not None for sj in self.subjobs.values())

    @property
    def with_hard_topology(self) -> bool:
        """Volcano's ``ContainsHardTopology``: hard mode with a tier limit somewhere."""

        def hard(t: TopologyConstraint | None) -> bool:
            return t is not None and t.mode == "hard" and t.limit is not None

        return hard(self.topology) or any(hard(sj.topology) for sj in self.subjobs.values())


def pods_per_shape(tasks: Iterable[TaskInfo]) -> dict[int, int]:
    """How many of ``tasks`` have each pod shape (by shape id), in first-seen order."""
    out: dict[int, int] = {}
    for t in tasks:
        out[t.shape] = out.get(t.shape, 0) + 1
    return out


def written_phase(job: JobInfo) -> str:
    """The phase the job's PodGroup carries, "" read as Pending (Volcano's ``IsPending``)."""
    st = job.podgroup.status
    return (st.phase if st is not None else None) or "Pending"


def task_order_key(t: TaskInfo) -> tuple[Any, ...]:
    """Volcano's default TaskOrder: the pod-name ordinal, then creation time, then uid."""
    ordinal = t.name_ordinal
    return (ordinal is None, ordinal or 0, t.creation, t.uid, t.name)


def order_keys(t: TaskInfo) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``(priority order, default order)`` of a task: the ones it carries (a task made from
    the cluster state's per-pod template has them already, they depend on the pod alone),
    else computed."""
    if t.order_key:
        return t.prio_order_key, t.order_key
    order = task_order_key(t)
    return (-t.priority, *order), order


def rank_key(t: TaskInfo) -> tuple[Any, ...]:
    """Placement rank order: task index first (consecutive ranks -> consecutive nodes)."""
    return (t.role, t.index if t.index is not None else 1 << 30, t.name)


def normalise_topology(
    spec: NetworkTopologySpec | None,
    tier_names: Mapping[str, int],
    top_tier: int,
    bound: int | None,
) -> TopologyConstraint | None:
    """Volcano's ``adjustNetworkTopologySpec``: name -> tier, soft -> hard bounded by ``bound``."""
    if spec is None:
        return None
    limit = spec.highest_tier_allowed
    problem = None
    if limit is None and spec.highest_tier_name:
        limit = tier_names.get(spec.highest_tier_name)
        if limit is None:
            known = ", ".join(f"{n}={t}" for n, t in sorted(tier_names.items())) or "none"
            problem = (
                f"unknown highestTierName {spec.highest_tier_name!r} (known tier names: {known}); "
                "placed without a tier limit"
            )
    if spec.mode == "soft":
        return TopologyConstraint("hard", bound if bound is not None else top_tier, declared_soft=True)
    if spec.mode == "hard":
        return TopologyConstraint("hard", limit, spec.highest_tier_name, problem)
    return TopologyConstraint(spec.mode, limit, spec.highest_tier_name, problem)


def build_job(
    pg: PodGroup,
    tasks: list[TaskInfo],
    priority: int,
    tier_names: Mapping[str, int],
    top_tier: int,
) -> JobInfo:
    """Group a PodGroup's tasks into SubJobs with Volcano's exact rules."""
    key = pg.key
    spec = pg.spec
    topo = normalise_topology(spec.network_topology, tier_names, top_tier, None)
    job_bound = topo.limit if topo is not None and topo.mode == "hard" else None
    policies = list(spec.sub_group_policy or [])
    job = JobInfo(
        key=key,
        podgroup=pg,
        queue=spec.queue or "default",
        priority=priority,
        creation=pg.metadata.creation_timestamp or "",
        min_member=spec.min_member,
        min_task_member=dict(spec.min_task_member or {}),
        topology=topo,
        has_policies=bool(policies),
        whole_disruption=upstream_disruption_all(pg),
        preempt_never=upstream_preempt_never(pg),
    )
    meta = pg.metadata
    job.preemptable, bad = preemptable_mark(meta.annotations, meta.labels)
    if bad:
        job.bad_marks.append(f"PodGroup {key}: {bad}")
    job.cooldown, bad = cooldown_mark(meta.annotations, meta.labels)
    if bad:
        job.bad_marks.append(f"PodGroup {key}: {bad}")
    for p in policies:
        job.min_subjobs[f"{key}/{p.name}"] = p.min_sub_groups or 0
    upstream_key = (meta.annotations or {}).get(UPSTREAM_TOPOLOGY_KEY)
    if upstream_key is not None and (topo is None or topo.limit is None):
        # Kubernetes' PodGroup topology is required: no tier of its domains, no placement.
        job.problems.append(
            f"topology key {upstream_key!r}: no HyperNode tier has exactly its label domains "
            "(one HyperNode per value of the key); the gang waits"
        )
    elif topo is not None and topo.problem:
        job.warnings.append(topo.problem)
    job.bad_marks.extend(t.bad_mark for t in tasks if t.bad_mark)
    job.bad_marks.extend(t.bad_cooldown for t in tasks if t.bad_cooldown)
    keyed = [(*order_keys(t), t) for t in tasks]
    keyed.sort(key=lambda x: x[0])  # stable, on the key alone: the order of ``sorted`` by it
    for prio_order, order, t in keyed:
        chosen: tuple[SubGroupPolicySpec, list[str]] | None = None
        for p in policies:
            vals = match_values(p, t.labels)
            if vals:
                chosen = (p, vals)
                break
        if chosen is None:
            sid = key
            if sid not in job.subjobs:
                job.subjobs[sid] = SubJobInfo(
                    id=sid,
                    gid=key,
                    policy=None,
                    min_available=spec.min_member if not policies else 1,
                    match_index=0,
                    topology=topo,
                )
        else:
            p, vals = chosen
            sid = f"{key}/{p.name}-{subjob_suffix(vals)}"
            if sid not in job.subjobs:
                sub_topo = normalise_topology(
                    p.network_topology, tier_names, top_tier, job_bound if job_bound is not None else top_tier
                )
                if sub_topo is not None and sub_topo.problem:
                    warning = f"subGroupPolicy {p.name}: {sub_topo.problem}"
                    if warning not in job.warnings:
                        job.warnings.append(warning)
                try:
                    mi = int(vals[0])
                except ValueError:
                    mi = 0
                job.subjobs[sid] = SubJobInfo(
                    id=sid,
                    gid=f"{key}/{p.name}",
                    policy=p.name,
                    min_available=p.sub_group_size if p.sub_group_size is not None else 1,
                    match_index=mi,
                    topology=sub_topo,
                )
        t.subjob = sid
        t.job = key
        t.order_key = order
        t.prio_order_key = prio_order
        if not t.rank:
            t.rank = rank_key(t)
        job.subjobs[sid].tasks.append(t)
    return job


def is_critical(t: TaskInfo) -> bool:
    """A pod of system-critical priority (by class name or by value): never a victim."""
    return t.priority_class in CRITICAL_PRIORITY_CLASSES or t.priority >= SYSTEM_CRITICAL_PRIORITY


def go_bool(value: str) -> bool | None:
    """Go's ``strconv.ParseBool``; None for anything it refuses."""
    if value in GO_TRUE:
        return True
    if value in GO_FALSE:
        return False
    return None


def preemptable_mark(
    annotations: Mapping[str, str] | None, labels: Mapping[str, str] | None
) -> tuple[bool | None, str | None]:
    """``volcano.sh/preemptable`` where Volcano reads it (``GetPodPreemptable``,
    ``extractPreemptable``): the annotation first, else the label. Returns (value, problem):
    None when neither is set; an invalid value reads as False (not preemptable), as Volcano
    reads it, with the problem named so it can be logged and shown."""
    for where, src in (("annotation", annotations), ("label", labels)):
        raw = (src or {}).get(PREEMPTABLE_KEY)
        if raw is None:
            continue
        got = go_bool(str(raw))
        if got is None:
            return False, (
                f"{where} {PREEMPTABLE_KEY}={raw!r} is not a boolean Go's ParseBool reads "
                "(1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False): read as false, not preemptable"
            )
        return got, None
    return None, None


def cooldown_mark(
    annotations: Mapping[str, str] | None, labels: Mapping[str, str] | None
) -> tuple[float | None, str | None]:
    """``volcano.sh/cooldown-time`` where Volcano's cdp plugin reads it: the label first, else
    the annotation, a Go duration. Returns (seconds, problem): an invalid value protects
    nothing (cdp logs it and ignores it), with the problem named."""
    for where, src in (("label", labels), ("annotation", annotations)):
        raw = (src or {}).get(COOLDOWN_KEY)
        if raw is None:
            continue
        try:
            return parse_go_duration(str(raw)), None
        except ValueError:
            return (
                None,
                f"{where} {COOLDOWN_KEY}={raw!r} is not a Go duration (such as 10m or 1h30m): ignored",
            )
    return None, None


def cooldown_until(t: TaskInfo, job: JobInfo) -> float | None:
    """Until when ``t`` is in its cooldown (its own ``volcano.sh/cooldown-time``, else its
    PodGroup's, counted from when it started running), or None."""
    cooldown = t.cooldown if t.cooldown is not None else job.cooldown
    if cooldown is None or t.scheduled_at is None:
        return None
    return t.scheduled_at + cooldown


def task_preemptable(t: TaskInfo, job: JobInfo) -> bool:
    """May ``t`` be evicted at all: its own ``volcano.sh/preemptable`` mark, else its PodGroup's,
    else yes."""
    if t.preemptable is not None:
        return t.preemptable
    return job.preemptable is not False


_JOB_FIELDS = tuple(f.name for f in fields(JobInfo))
_SUBJOB_FIELDS = tuple(f.name for f in fields(SubJobInfo))


def remap_nodes(info: JobInfo, perm: list[int], first: int) -> JobInfo:
    """``info`` with its running tasks naming their nodes by new indices (``perm``: old index
    -> new; indices below ``first`` did not move). ``info`` itself when no task moved; else a
    copy, the original (possibly in a snapshot a session still reads) left as it is. Pending
    tasks, which name no node, are shared."""
    new_tasks: dict[str, list[TaskInfo]] = {}
    new = object.__new__
    for sid, sj in info.subjobs.items():
        tasks: list[TaskInfo] | None = None
        for i, t in enumerate(sj.tasks):
            n = t.node
            if n >= first and t.running:
                if tasks is None:
                    tasks = sj.tasks[:i]
                t2 = new(TaskInfo)
                t2.__dict__.update(t.__dict__)
                t2.node = perm[n]
                tasks.append(t2)
            elif tasks is not None:
                tasks.append(t)
        if tasks is not None:
            new_tasks[sid] = tasks
    if not new_tasks:
        return info
    d = info.__dict__
    job = JobInfo(**{k: d[k] for k in _JOB_FIELDS if k not in ("subjobs", "memo")})
    # What sessions memoised that names no node (sums over requests, counts) stays true.
    job.memo = info.memo.node_free()
    for sid, sj in info.subjobs.items():
        got = new_tasks.get(sid)
        if got is None:
            job.subjobs[sid] = sj
        else:
            sd = sj.__dict__
            copy_ = SubJobInfo(**{k: sd[k] for k in _SUBJOB_FIELDS if k != "tasks"})
            copy_.tasks = got
            job.subjobs[sid] = copy_
    return job
