"""Victim units: the running pods the eviction actions may take, grouped per job into units
that never leave a victim gang below its minimum, and ranked by disruption (pure).

A unit is either one *spare* pod, which its job can lose while keeping its minMember (and each
partition its size, each task its minTaskMember), or the *whole gang* (every running pod),
which breaks it. Units are ranked: spare pods before whole gangs, then the victim job's priority,
then the pod's, then size (fewest pods stopped), then running time lost.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from hyperplace.api.times import parse_rfc3339

from ..model.jobs import JobInfo, TaskInfo, is_critical, task_preemptable
from ..model.memo import MemoKey
from ..model.snapshot import ClusterSnapshot

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


_SECONDS: dict[str, float] = {}  # creation timestamp -> epoch seconds (few distinct values)


def _seconds(stamps: list[str]) -> F64:
    """Creation timestamps as epoch seconds, NaN when unknown, through a bounded memo: the
    pods of a gang share a timestamp or a few."""
    missing = [x for x in set(stamps) if x not in _SECONDS]
    if missing:
        if len(_SECONDS) > 100_000:
            _SECONDS.clear()
        for x in missing:
            t = parse_rfc3339(x)
            _SECONDS[x] = math.nan if t is None else t
    return np.array([_SECONDS[x] for x in stamps], dtype=np.float64)


@dataclass
class JobVictims:
    """What the eviction actions need of one job's running pods, computed once per JobInfo (a
    JobInfo never changes; the incremental state keeps it while the job does not change)."""

    tasks: list[TaskInfo]  # running on a known node, not critical, preemptable, in victim order
    node: I64
    shape: I64
    req: I64  # (n, R)
    secs: F64  # creation, epoch seconds (NaN unknown)
    prio: I64
    running: int  # running pods, node known or not (what the gang counts)
    simple: bool  # no partition or task minimum: minMember alone bounds the spare pods


VICTIMS: MemoKey[JobVictims] = MemoKey("victims")
# Running pods of a job (depends on its tasks' states only, not on node indices).
RUNNING: MemoKey[int] = MemoKey("running pods", node_free=True)


def job_victims(job: JobInfo, r_dim: int) -> JobVictims:
    """The cached :class:`JobVictims` of ``job``."""
    got = job.memo.get(VICTIMS)
    if got is not None:
        return got
    # Pods protected by volcano.sh/preemptable (theirs or their PodGroup's) and critical pods
    # are never victims; they still count as running, so their gang never goes whole.
    vt = [
        t for t in job.tasks if t.running and t.node >= 0 and not is_critical(t) and task_preemptable(t, job)
    ]
    # Victim order: lowest priority first, then the youngest (least running time lost), then the
    # job's task order. A gang's pods usually share both, and then the task order is kept as is.
    if len({t.priority for t in vt}) > 1 or len({t.creation for t in vt}) > 1:
        vt.sort(key=lambda t: t.creation, reverse=True)
        vt.sort(key=lambda t: t.priority)
    got = JobVictims(
        tasks=vt,
        node=np.fromiter((t.node for t in vt), dtype=np.int64, count=len(vt)),
        shape=np.fromiter((t.shape for t in vt), dtype=np.int64, count=len(vt)),
        req=np.stack([t.requests for t in vt]) if vt else np.zeros((0, r_dim), dtype=np.int64),
        secs=_seconds([t.creation for t in vt]),
        prio=np.fromiter((t.priority for t in vt), dtype=np.int64, count=len(vt)),
        running=sum(1 for t in job.tasks if t.running),
        simple=not job.enforced_min_task_member and all(sj.is_default for sj in job.subjobs.values()),
    )
    return job.memo.put(VICTIMS, got)


def running_count(job: JobInfo, gone: set[str]) -> int:
    """Running pods of ``job`` not already leaving (victims chosen earlier)."""
    if gone:
        return sum(1 for t in job.tasks if t.running and t.key not in gone)
    return job.memo.get_or_put(RUNNING, lambda: sum(1 for t in job.tasks if t.running))


_JOB = operator.attrgetter("job")


def group_by_job(tasks: list[TaskInfo]) -> dict[str, list[TaskInfo]]:
    """Tasks per job key, in order; cheap when each job's tasks are contiguous (as the
    candidates are), correct when they are not."""
    out: dict[str, list[TaskInfo]] = {}
    for jkey, grp in itertools.groupby(tasks, key=_JOB):
        got = out.get(jkey)
        if got is None:
            out[jkey] = list(grp)
        else:
            got.extend(grp)
    return out


@dataclass
class VictimUnits:
    """Allowed victim pods and the units (spare pods, whole gangs) they form, ranked."""

    tasks: list[TaskInfo]
    node: I64  # (P,) node of each pod
    shape: I64
    req: I64  # (P, R)
    spare_rank: I64  # (P,) rank of the pod's spare unit, -1 if it is not spare
    whole_rank: I64  # (P,) rank of its gang's whole unit, -1 if the gang cannot go whole
    broken: list[bool]  # per rank: the unit breaks its gang
    prio: list[int]  # per rank
    lost: list[float]  # per rank: running seconds lost
    job: list[str]  # per rank
    size: list[int] = field(default_factory=list)  # per rank: pods

    def members(self, ranks: I64) -> npt.NDArray[np.bool_]:
        """Pods evicted when the units ``ranks`` go."""
        return np.isin(self.spare_rank, ranks) | np.isin(self.whole_rank, ranks)


def _general_block(job: JobInfo, cand: list[TaskInfo], gone: set[str]) -> tuple[list[TaskInfo], int, bool]:
    """Victim-ordered candidates of a job with partitions or task minimums, spare pods first:
    (pods, how many are spare, can the whole gang go)."""
    running = [t for t in job.tasks if t.running and t.key not in gone]
    order = sorted(cand, key=lambda t: t.key)
    order.sort(key=lambda t: t.creation, reverse=True)
    order.sort(key=lambda t: t.priority)
    n_job = len(running)
    n_sj = Counter(t.subjob for t in running)
    n_role = Counter(t.role for t in running)
    role_min = job.enforced_min_task_member
    spares: list[TaskInfo] = []
    rest: list[TaskInfo] = []
    for t in order:
        sj = job.subjobs[t.subjob]
        sj_min = 0 if sj.is_default else sj.min_available
        if (
            n_job - 1 >= job.min_member
            and n_sj[t.subjob] - 1 >= sj_min
            and n_role[t.role] - 1 >= role_min.get(t.role, 0)
        ):
            spares.append(t)
            n_job -= 1
            n_sj[t.subjob] -= 1
            n_role[t.role] -= 1
        else:
            rest.append(t)
    cand_keys = {t.key for t in cand}
    whole = len(spares) < len(running) and all(t.key in cand_keys for t in running)
    return spares + rest, len(spares), whole


def build_units(
    snap: ClusterSnapshot,
    allowed: list[TaskInfo],
    gone: set[str],
    whole_gangs: bool = True,
    job_rank: Mapping[str, int] | None = None,
) -> VictimUnits:
    """Group allowed victims per job into spare-pod and whole-gang units, ranked by disruption
    (gangs broken, the job's priority, the pods' priority, pods, running seconds lost; then the
    job last in name order, then victim order). ``gone``:
    pods already leaving (victims chosen earlier); ``whole_gangs`` False: no unit breaks a gang
    (spare pods only, as Volcano's gang actions with ``allowWholeBundle: false``). ``job_rank``:
    per job key, a rank taken before the priorities (lower first; reclaim ranks victims by
    their queue)."""
    r_dim = len(snap.resources)
    by_job = group_by_job(allowed)
    tasks: list[TaskInfo] = []
    parts: list[tuple[I64, I64, I64, F64, I64]] = []
    blocks: list[tuple[str, int, int, int, bool]] = []  # (job, start, size, spare, whole)
    for jkey in sorted(by_job):
        job = snap.jobs[jkey]
        cand = by_job[jkey]
        jv = job_victims(job, r_dim)
        untouched = not gone or not any(t.key in gone for t in jv.tasks)
        if jv.simple and untouched and len(cand) == len(jv.tasks):
            block = jv.tasks
            spare = max(min(jv.running - job.min_member, len(block)), 0)
            whole = spare < jv.running and len(block) == jv.running
            parts.append((jv.node, jv.shape, jv.req, jv.secs, jv.prio))
        else:
            block, spare, whole = _general_block(job, cand, gone)
            parts.append(
                (
                    np.array([t.node for t in block], dtype=np.int64),
                    np.array([t.shape for t in block], dtype=np.int64),
                    np.stack([t.requests for t in block]),
                    _seconds([t.creation for t in block]),
                    np.array([t.priority for t in block], dtype=np.int64),
                )
            )
        if job.whole_disruption:
            spare = 0  # disruptionMode all: no pod of the group goes alone
        blocks.append((jkey, len(tasks), len(block), spare, whole and whole_gangs))
        tasks.extend(block)
    p = len(tasks)
    if p:
        node = np.concatenate([x[0] for x in parts])
        shape = np.concatenate([x[1] for x in parts])
        req = np.concatenate([x[2] for x in parts])
        secs = np.concatenate([x[3] for x in parts])
        prio = np.concatenate([x[4] for x in parts])
    else:
        node = shape = prio = np.zeros(0, dtype=np.int64)
        req = np.zeros((0, r_dim), dtype=np.int64)
        secs = np.zeros(0)
    known = ~np.isnan(secs)
    ref = float(secs[known].max()) if known.any() else 0.0
    lost = np.where(known, ref - secs, 0.0)
    # Units: every spare pod alone, then each gang that can go whole.
    u_pod: list[int] = []  # first pod of the unit
    u_job: list[int] = []
    u_whole: list[int] = []  # block index of a whole unit, -1 for a spare pod
    for bi, (_, start, _size, spare, whole) in enumerate(blocks):
        u_pod.extend(range(start, start + spare))
        u_job.extend([bi] * spare)
        u_whole.extend([-1] * spare)
        if whole:
            u_pod.append(start)
            u_job.append(bi)
            u_whole.append(bi)
    up = np.array(u_pod, dtype=np.int64)
    uw = np.array(u_whole, dtype=np.int64)
    broken = (uw >= 0).astype(np.int64)
    b_start = np.array([b[1] for b in blocks], dtype=np.int64)
    b_size = np.array([b[2] for b in blocks], dtype=np.int64)
    u_prio = prio[up] if len(up) else np.zeros(0, dtype=np.int64)
    u_lost = lost[up] if len(up) else np.zeros(0)
    u_n = np.ones(len(up), dtype=np.int64)
    if broken.any():
        wi = np.flatnonzero(broken)
        bw = uw[wi]
        for i, b in zip(wi.tolist(), bw.tolist(), strict=True):
            sl = slice(int(b_start[b]), int(b_start[b] + b_size[b]))
            u_prio[i] = int(prio[sl].max())
            u_lost[i] = float(lost[sl].sum())
            u_n[i] = int(b_size[b])
    # Between jobs their PodGroups' priority ranks first, as Volcano's victim queue orders
    # victims of different jobs by job order (a pod's own priority only within its job).
    j_prio = np.array([snap.jobs[b[0]].priority for b in blocks], dtype=np.int64)
    u_jprio = j_prio[np.array(u_job, dtype=np.int64)] if len(up) else np.zeros(0, dtype=np.int64)
    # Last tie: the job the scheduler would place last goes first (Volcano's victim queue is
    # the job order reversed, whose last key is the job's name).
    j_rank = np.array([(job_rank or {}).get(b[0], 0) for b in blocks], dtype=np.int64)
    u_jrank = j_rank[np.array(u_job, dtype=np.int64)] if len(up) else np.zeros(0, dtype=np.int64)
    order = np.lexsort((up, -np.array(u_job, dtype=np.int64), u_lost, u_n, u_prio, u_jprio, u_jrank, broken))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    spare_rank = np.full(p, -1, dtype=np.int64)
    whole_rank = np.full(p, -1, dtype=np.int64)
    spare_units = np.flatnonzero(broken == 0)
    spare_rank[up[spare_units]] = rank[spare_units]
    for i in np.flatnonzero(broken).tolist():
        b = int(uw[i])
        whole_rank[int(b_start[b]) : int(b_start[b] + b_size[b])] = rank[i]
    jkeys = [b[0] for b in blocks]
    return VictimUnits(
        tasks=tasks,
        node=node,
        shape=shape,
        req=req,
        spare_rank=spare_rank,
        whole_rank=whole_rank,
        broken=broken[order].astype(bool).tolist(),
        prio=u_prio[order].tolist(),
        lost=u_lost[order].tolist(),
        job=[jkeys[u_job[i]] for i in order.tolist()],
        size=u_n[order].tolist(),
    )
