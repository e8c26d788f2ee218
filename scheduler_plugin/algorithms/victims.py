"""Topology-aware victim planning for the ``preempt`` and ``reclaim`` actions (pure: no I/O,
no session: it reads the snapshot and the session's allocation state).

Volcano's legacy preempt walks nodes one preemptor pod at a time and skips jobs with a network
topology; its gang actions look at a few domains and evict whole bundles. Here a pending gang
(the preemptor) is placed domain first:

1. *Victim units.* The pods the session's plugins allow (the action asks
   ``Session.preemptable`` / ``Session.reclaimable``) are grouped per victim job into units:
   single "spare" pods, which the
   job can lose while keeping its minMember (and each partition its size, each task its
   minTaskMember), and the whole gang (every running pod), which breaks it. A victim gang is
   never left below its minimum: either enough of its pods stay, or all of them go. PodGroups
   annotated ``volcano.sh/preemptable: "false"`` and pods of critical priority are never
   victims, whatever the plugins say.
2. *Feasibility with every victim gone.* For each tier of the preemptor's gradient (lowest
   first; the same gradients allocate uses), per-shape fit counts with all allowed victims
   removed, plus the partition capacities allocate checks, prune the domains that cannot host
   the gang's minimum even then.
3. *Fewest victims per domain.* Units are ranked by disruption (spare pods before whole gangs,
   then victim priority, then running time lost). In each feasible domain a binary search
   finds the shortest prefix of that ranking after which the gang fits, then units are dropped
   again, most disruptive first, while it still fits, so only what is needed goes.
4. *The domain with the least disruption* of the lowest tier wins: fewest gangs broken, lowest
   victim priority, least running time lost, fewest pods. The action then places the gang
   exactly on the state without its victims (``actions/preempt.py``).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from hyperplace.kube.times import parse_rfc3339

from ..model.jobs import JobInfo, SubJobInfo, TaskInfo, is_critical
from ..model.memo import MemoKey
from ..model.snapshot import ClusterSnapshot
from .fit_counts import AllocState

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

# Domains of one tier examined in detail (after the all-victims count check) and exact
# placements tried; both bound the work on huge trees, the counts make misses rare.
MAX_DOMAINS_PER_TIER = 16
# Units re-checked for removal after the binary search (most disruptive first), in the
# PRUNED_DOMAINS domains whose estimate is best.
MAX_PRUNE_TRIALS = 32
PRUNED_DOMAINS = 3


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


# ---------------------------------------------------------------------------------- units
@dataclass
class JobVictims:
    """What the eviction actions need of one job's running pods, computed once per JobInfo (a
    JobInfo never changes; the incremental state keeps it while the job does not change)."""

    tasks: list[TaskInfo]  # running on a known node, not critical, in victim order
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
    vt = [t for t in job.tasks if t.running and t.node >= 0 and not is_critical(t)]
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


def build_units(snap: ClusterSnapshot, allowed: list[TaskInfo], gone: set[str]) -> VictimUnits:
    """Group allowed victims per job into spare-pod and whole-gang units, ranked by disruption
    (gangs broken, priority, running seconds lost, pods; then job and victim order). ``gone``:
    pods already leaving (victims chosen earlier)."""
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
        blocks.append((jkey, len(tasks), len(block), spare, whole))
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
    order = np.lexsort((up, np.array(u_job, dtype=np.int64), u_n, u_lost, u_prio, broken))
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


# ---------------------------------------------------------------------------------- fit
class GangGroup(Protocol):
    """What planning needs of one group of the gang's pods (the actions' ``Group``)."""

    subjob: SubJobInfo

    def demand(self) -> dict[int, int]:
        """Pods per shape."""
        ...


@dataclass
class Demand:
    """What the preemptor's gang minimum needs: pods per shape and partition classes."""

    total: dict[int, int]
    classes: dict[tuple[int, int, int], int]  # (shape, tier limit, partition size) -> partitions

    @classmethod
    def of(cls, groups: Iterable[GangGroup]) -> Demand:
        """Per-shape totals of the gang's groups, and hard-limited single-shape partitions."""
        total: dict[int, int] = {}
        classes: dict[tuple[int, int, int], int] = {}
        for g in groups:
            d = g.demand()
            for sid, k in d.items():
                total[sid] = total.get(sid, 0) + k
            topo = g.subjob.topology
            if topo is not None and topo.mode == "hard" and topo.limit is not None and len(d) == 1:
                sid, k = next(iter(d.items()))
                key = (sid, topo.limit, k)
                classes[key] = classes.get(key, 0) + 1
        return cls(total, classes)


class FitCounter:
    """Per-shape fit counts on the session state with some pods' requests given back."""

    def __init__(self, snap: ClusterSnapshot, state: AllocState, demand: Demand) -> None:
        self.snap = snap
        self.tree = snap.tree
        self.state = state
        self.demand = demand
        self._bottom_up = np.argsort(-self.tree.depth, kind="stable").tolist()

    def counts(self, sid: int, nodes: I64 | None, freed: I64) -> I64:
        """Pods of shape ``sid`` each of ``nodes`` (all when None) could take with ``freed`` back."""
        shape = self.snap.shapes[sid]
        req = shape.requests
        pos = np.flatnonzero(req > 0)
        st = self.state
        if nodes is None:
            free = st.alloc[:, pos] - st.used[:, pos] + freed[:, pos]
            mask = self.snap.static_mask(shape)
        else:
            free = st.alloc[nodes][:, pos] - st.used[nodes][:, pos] + freed[:, pos]
            mask = self.snap.static_mask(shape)[nodes]
        # Every pod requests a "pods" slot, so ``pos`` is never empty in practice.
        c = (free // req[pos]).min(axis=1) if len(pos) else np.full(free.shape[0], 1 << 20, dtype=np.int64)
        c = np.where(mask, np.maximum(c, 0), 0).astype(np.int64)
        if shape.constraints.host_ports:
            c = np.minimum(c, 1)  # one per node; conflicts are left to the exact placement
        return c

    def _pcap(self, per_node: I64, limit: int, size: int, within: list[int] | None) -> I64:
        tree = self.tree
        dom = tree.domain_sums(per_node)
        out = np.where(tree.tiers <= limit, dom // max(size, 1), 0).astype(np.int64)
        order = self._bottom_up if within is None else within[::-1]
        for h in order:
            if tree.tiers[h] > limit and tree.children[h]:
                out[h] = int(out[tree.children[h]].sum())
        return out

    def feasible_all(self, ids: I64, freed_all: I64) -> npt.NDArray[np.bool_]:
        """Which of ``ids`` could host the gang if every allowed victim left (counts)."""
        ok = np.ones(len(ids), dtype=bool)
        per_shape: dict[int, I64] = {}
        for sid, k in self.demand.total.items():
            per_shape[sid] = self.counts(sid, None, freed_all)
            ok &= self.tree.domain_sums(per_shape[sid])[ids] >= k
        for (sid, limit, k), n in self.demand.classes.items():
            ok &= self._pcap(per_shape[sid], limit, k, None)[ids] >= n
        return ok

    def fits_in(self, d: int, nodes: I64, freed: I64) -> bool:
        """Does the gang fit in domain ``d`` (its ``nodes``) with ``freed`` given back (counts)."""
        per_shape: dict[int, I64] = {}
        for sid, k in self.demand.total.items():
            c = self.counts(sid, nodes, freed)
            if int(c.sum()) < k:
                return False
            per_shape[sid] = c
        tree = self.tree
        for (sid, limit, k), n in self.demand.classes.items():
            c = per_shape[sid]
            if tree.tiers[d] <= limit:
                if int(c.sum()) // max(k, 1) < n:
                    return False
                continue
            full = np.zeros(self.snap.num_nodes, dtype=np.int64)
            full[nodes] = c
            if self._pcap(full, limit, k, tree.subtree(d))[d] < n:
                return False
        return True


# ---------------------------------------------------------------------------------- plan
@dataclass
class Plan:
    """The victims that make room for a gang in one domain, and what that costs."""

    domain: int
    tier: int
    victims: list[TaskInfo]
    broken: list[str]  # victim jobs evicted whole
    cost: tuple[int, int, float, int]  # gangs broken, highest victim priority, seconds lost, pods
    considered: int = 0  # domains of the tier examined

    def describe(self, names: list[str]) -> str:
        """One line: where, how many victims, and why this domain."""
        jobs = len({t.job for t in self.victims})
        return (
            f"tier {self.tier}: {names[self.domain]} fits the gang after evicting {len(self.victims)} pods of "
            f"{jobs} job(s), {len(self.broken)} gang(s) broken, highest victim priority {self.cost[1]} "
            f"(least disruption of {self.considered} domain(s) that could fit at this tier)"
        )


@dataclass
class Outcome:
    """The result of planning for one gang: a plan, or why there is none."""

    plans: list[Plan] = field(default_factory=list)  # best first, lowest tier only
    why: str = ""


def _domain_plan(
    fc: FitCounter, units: VictimUnits, d: int, tier: int, pod_local: I64, n_nodes_d: int, prune: bool = True
) -> Plan | None:
    """Fewest-disruption victims inside domain ``d`` (None when even all of them do not do).

    ``prune=False`` stops after the binary search (the shortest fitting prefix of the ranking):
    a cheap estimate used to pick the domains worth pruning.
    """
    nodes = fc.tree.node_sets[d]
    r_dim = units.req.shape[1]
    pd = np.flatnonzero(pod_local >= 0)
    sr, wr = units.spare_rank[pd], units.whole_rank[pd]
    ranks = np.unique(np.concatenate([sr[sr >= 0], wr[wr >= 0]]))
    loc = pod_local[pd]
    req = units.req[pd]

    def freed_for(mask: npt.NDArray[np.bool_]) -> I64:
        out = np.zeros((n_nodes_d, r_dim), dtype=np.int64)
        if mask.any():
            np.add.at(out, loc[mask], req[mask])
        return out

    def fits_set(chosen: I64) -> bool:
        m = np.isin(sr, chosen) | np.isin(wr, chosen)
        return fc.fits_in(d, nodes, freed_for(m))

    if fc.fits_in(d, nodes, np.zeros((n_nodes_d, r_dim), dtype=np.int64)):
        return Plan(d, tier, [], [], (0, -(1 << 62), 0.0, 0))
    if not len(ranks):
        return None
    n_units = len(units.broken)

    def search(perm: I64) -> list[int] | None:
        """The shortest prefix of ``perm`` (unit ranks) after which the gang fits."""
        pos = np.full(n_units + 1, n_units, dtype=np.int64)  # index -1 (no unit) -> never
        pos[perm] = np.arange(len(perm))
        psr, pwr = pos[sr], pos[wr]

        def fits_j(j: int) -> bool:
            return fc.fits_in(d, nodes, freed_for((psr <= j) | (pwr <= j)))

        if not fits_j(len(perm) - 1):
            return None
        lo, hi = 0, len(perm) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if fits_j(mid):
                hi = mid
            else:
                lo = mid + 1
        got = [int(r) for r in perm[: lo + 1]]
        # A gang that goes whole makes its spare units redundant.
        whole_jobs = {units.job[r] for r in got if units.broken[r]}
        return [r for r in got if units.broken[r] or units.job[r] not in whole_jobs]

    def cost(chosen: list[int]) -> tuple[int, int, float, int]:
        broken = {units.job[r] for r in chosen if units.broken[r]}
        prio = max((units.prio[r] for r in chosen), default=0)
        return (
            len(broken),
            prio,
            float(sum(units.lost[r] for r in chosen)),
            sum(units.size[r] for r in chosen),
        )

    # Two orders: disruption rank (cheapest units first), and spare pods first then whole gangs
    # with the most pods in this domain first (fewest gangs for the room they free).
    found = search(ranks)
    if found is None:
        return None
    whole_mask = np.array([units.broken[r] for r in ranks.tolist()], dtype=bool)
    if whole_mask.any():
        in_d = np.bincount(wr[wr >= 0], minlength=n_units)
        w = ranks[whole_mask]
        alt = np.concatenate([ranks[~whole_mask], w[np.lexsort((w, -in_d[w]))]])
        other = search(alt)
        if other is not None and cost(other) < cost(found):
            found = other
    chosen = sorted(found)
    # Drop units again, most disruptive first, while the gang still fits.
    # A class whose tier limit the domain meets is implied by the per-shape totals.
    if not prune:
        pass
    elif any(limit < fc.tree.tiers[d] for (_, limit, _) in fc.demand.classes):
        for r in sorted(chosen, reverse=True)[:MAX_PRUNE_TRIALS]:
            rest = np.array([x for x in chosen if x != r], dtype=np.int64)
            if fits_set(rest):
                chosen = rest.tolist()
    else:
        chosen = _prune_local(fc, nodes, chosen, sr, wr, loc, req, freed_for)
    broken = sorted({units.job[r] for r in chosen if units.broken[r]})
    victims: list[TaskInfo] = []
    if prune:
        mask = units.members(np.array(chosen, dtype=np.int64))
        victims = [units.tasks[i] for i in np.flatnonzero(mask).tolist()]
    return Plan(d, tier, victims, broken, cost(chosen))  # no pod is in two chosen units


def _prune_local(
    fc: FitCounter,
    nodes: I64,
    chosen: list[int],
    sr: I64,
    wr: I64,
    loc: I64,
    req: I64,
    freed_for: Callable[[npt.NDArray[np.bool_]], I64],
) -> list[int]:
    """Drop chosen units, most disruptive first, while the counts still fit the gang.

    Without partition classes a fit is "per shape, the domain's count sum >= demand", so taking
    one unit back changes the counts of its own nodes only: each trial costs the unit's size,
    not the domain's.
    """
    arr = np.array(chosen, dtype=np.int64)
    in_sr, in_wr = np.isin(sr, arr), np.isin(wr, arr)
    mask = in_sr | in_wr
    freed = freed_for(mask)
    owner = np.where(in_wr, wr, np.where(in_sr, sr, -1))  # each pod in one chosen unit at most
    pods_of: dict[int, list[int]] = {}
    for i in np.flatnonzero(mask).tolist():
        pods_of.setdefault(int(owner[i]), []).append(i)
    total = fc.demand.total
    counts = {sid: fc.counts(sid, nodes, freed) for sid in total}
    sums = {sid: int(c.sum()) for sid, c in counts.items()}
    keep = set(chosen)
    for r in sorted(chosen, reverse=True)[: MAX_PRUNE_TRIALS * 2]:
        idx = pods_of.get(r)
        if not idx:
            keep.discard(r)
            continue
        ln = loc[idx]
        touched = np.unique(ln)
        back = freed[touched].copy()
        pos = np.searchsorted(touched, ln)
        np.subtract.at(back, pos, req[idx])
        new = {sid: fc.counts(sid, nodes[touched], back) for sid in total}
        if all(
            sums[sid] - int(counts[sid][touched].sum()) + int(new[sid].sum()) >= k for sid, k in total.items()
        ):
            keep.discard(r)
            freed[touched] = back
            for sid in total:
                sums[sid] += int(new[sid].sum()) - int(counts[sid][touched].sum())
                counts[sid][touched] = new[sid]
    return [r for r in chosen if r in keep]


def plan_victims(
    snap: ClusterSnapshot,
    state: AllocState,
    demand: Demand,
    levels: list[list[int]],
    allowed: list[TaskInfo],
    gone: set[str],
) -> Outcome:
    """Domains (best first, of the lowest tier where any fits) and victims for a gang asking
    ``demand``: ``levels`` are the tiers of candidate HyperNodes (its gradient), ``allowed`` the
    pods the plugins let it evict and ``gone`` the pods already leaving."""
    tree = snap.tree
    if not allowed:
        return Outcome(why="no running pod may be evicted for it")
    units = build_units(snap, allowed, gone)
    fc = FitCounter(snap, state, demand)
    n = snap.num_nodes
    freed_all = np.zeros((n, units.req.shape[1]), dtype=np.int64)
    np.add.at(freed_all, units.node, units.req)
    n_pods = sum(demand.total.values())
    local = np.full(n, -1, dtype=np.int64)  # node -> index inside the domain being examined
    for level in levels:
        ids = np.asarray(level, dtype=np.int64)
        if not len(ids):
            continue
        ok = fc.feasible_all(ids, freed_all)
        cands = ids[ok]
        if not len(cands):
            continue
        # Most room already free first: those need the fewest victims.
        sid0 = max(demand.total, key=lambda s: demand.total[s])
        now = state.dom_counts(snap.shapes[sid0])[cands]
        cands = cands[np.lexsort((cands, -now))][:MAX_DOMAINS_PER_TIER]

        def plan_in(d: int, prune: bool) -> Plan | None:
            nodes = tree.node_sets[d]
            local[nodes] = np.arange(len(nodes))
            try:
                return _domain_plan(fc, units, d, int(tree.tiers[d]), local[units.node], len(nodes), prune)
            finally:
                local[nodes] = -1

        # Every domain gets the cheap estimate; the best few are pruned to their fewest victims.
        rough = [pl for d in cands.tolist() if (pl := plan_in(d, False)) is not None]
        rough.sort(key=lambda p: (p.cost, tree.names[p.domain]))
        plans = [pl for p in rough[:PRUNED_DOMAINS] if (pl := plan_in(p.domain, True)) is not None]
        if plans:
            plans.sort(key=lambda p: (p.cost, tree.names[p.domain]))
            for p in plans:
                p.considered = len(rough)
            return Outcome(plans=plans)
    return Outcome(
        why=f"the gang's {n_pods} pods do not fit in any allowed domain even if all {len(allowed)} "
        "evictable pods left"
    )
