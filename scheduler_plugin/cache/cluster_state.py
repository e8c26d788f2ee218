"""The scheduler's cluster state, kept current from watch events; a cycle takes a snapshot of it.

:meth:`ClusterSnapshot.build` indexes every node and every pod each time it is called. This
module keeps the same information up to date as events arrive and hands out
:class:`~scheduler_plugin.snapshot.ClusterSnapshot` objects that are equal to what ``build``
would return for the same objects (``--verify-state`` and a property test check it):

* **Per node**: parsed static facts, an allocatable row, a used row (bound pods plus
  assumed ones, whatever the caller feeds in) and host ports. A pod event changes one
  row. Nodes added or removed are merged into the order (by name, as in ``build``) by the
  next snapshot, once however many arrived: the other rows move, only the new rows are
  made, and jobs keep their tasks (running ones get their moved node indices in a copy).
  Only a resource never seen before re-lays everything out.
* **Per HyperNode**: membership lives in a :class:`~hyperplace.kube.members.MemberIndex`
  (only changed nodes and HyperNodes are re-resolved); the tree is rebuilt only when the
  index's generation or the node set moved.
* **Per job**: tasks, SubJobs and orphans are rebuilt only for jobs one of whose pods or
  whose PodGroup changed; the others keep their ``JobInfo`` (sessions never mutate it).
  Pod shapes keep stable ids for as long as the layout holds.

**Consistent, immutable views.** :meth:`ClusterState.snapshot` costs time in proportion
to what changed since the previous one. The arrays and lists it hands out are shared with
the state until the next change, which copies before it writes (copy-on-write), so a
session running in a worker thread never sees a half-applied event and a snapshot never
changes after it was taken. Per-HyperNode aggregates and per-shape fit counts are derived
from the snapshot by the session's :class:`~scheduler_plugin.state.AllocState`, which
copies ``used`` and takes the capacity of every decision it makes, so two decisions of one
cycle never share room.

A relist (after 410 Gone, a watch gap or a restart) feeds whole listings through the
``replace_*`` methods: the state is diffed against them once and then goes on incrementally.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.api.constants import (
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER_NAME,
    GROUP_NAME_ANNOTATION,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
)
from hyperplace.api.hypernode import HyperNode
from hyperplace.api.podgroup import PodGroup, Queue
from hyperplace.kube.members import MemberIndex
from hyperplace.kube.objects import TERMINAL_PHASES, object_key
from hyperplace.kube.requests import ResourceError, pod_requests
from hyperplace.runtime.gcpause import no_cyclic_gc

from ..model.hypernode_tree import HyperNodeTree
from ..model.jobs import JobInfo, SubJobInfo, TaskInfo, build_job, order_keys, rank_key
from ..model.node_filters import (
    NodeStatic,
    PodConstraints,
    compile_pod_constraints,
    node_static_from_dict,
    pod_host_ports,
)
from ..model.snapshot import ClusterSnapshot, HostPort, Shape

I64 = npt.NDArray[np.int64]
BASE_RESOURCES = ("cpu", "memory", "pods")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


_META_READ = ("name", "namespace", "uid", "labels", "annotations", "creationTimestamp")


def _same_for_scheduling(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when ``new`` differs from ``old`` only where the state does not look (the state
    reads the spec, the phase and a few metadata fields). An object changed in place (the
    same dict) cannot be compared and counts as changed."""
    if old is new or old.get("spec") != new.get("spec"):
        return False
    if (old.get("status") or {}).get("phase") != (new.get("status") or {}).get("phase"):
        return False
    mo, mn = old.get("metadata") or {}, new.get("metadata") or {}
    return all(mo.get(k) == mn.get(k) for k in _META_READ)


def _detached(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy that in-place changes of the original's top-level sections do not reach."""
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in obj.items()}


@dataclass
class _Node:
    static: NodeStatic
    alloc: dict[str, int]  # milli, what the matrices hold (``pods`` defaulted to 110)
    plain: bool  # ready, schedulable, no NoSchedule/NoExecute taint


@dataclass
class _Pod:
    """What the state needs of one pod, parsed once per pod version."""

    obj: dict[str, Any]
    key: str
    ns: str
    name: str
    node: str | None
    terminal: bool
    owned: bool
    group: str | None
    requests: dict[str, int] | None
    bad: str | None  # why requests are invalid
    job: str | None  # the job this pod feeds (see _job_of)
    ports: frozenset[HostPort]  # host ports it holds on its node when bound
    _cons: PodConstraints | None = None
    _fields: _TaskFields | None = None
    # Shape id and request vector, valid while the state's layout generation is shape_gen.
    shape_gen: int = -1
    sid: int = -1
    vec: I64 | None = None
    # A pending TaskInfo's fields (a new task is a copy of them), valid for base_gen: the
    # layout and priority generations they were made under.
    base: dict[str, Any] | None = None
    base_gen: tuple[int, int] = (-1, -1)

    @property
    def cons(self) -> PodConstraints:
        if self._cons is None:
            self._cons = compile_pod_constraints(self.obj)
        return self._cons

    def task_fields(self) -> _TaskFields:
        """What a TaskInfo of this pod holds that depends on the pod alone (parsed once)."""
        if self._fields is None:
            meta = self.obj.get("metadata") or {}
            spec = self.obj.get("spec") or {}
            assert self.requests is not None
            cons = self.cons
            labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
            annotations = meta.get("annotations") or {}
            idx_raw = labels.get(TASK_INDEX_KEY) or annotations.get(TASK_INDEX_KEY)
            try:
                tindex: int | None = int(idx_raw) if idx_raw is not None else None
            except ValueError:
                tindex = None
            self._fields = _TaskFields(
                uid=str(meta.get("uid") or self.key),
                role=str(annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or ""),
                index=tindex,
                labels=labels,
                priority_class=spec.get("priorityClassName"),
                preempt_never=spec.get("preemptionPolicy") == "Never",
                priority=spec.get("priority"),
                creation=str(meta.get("creationTimestamp") or ""),
                best_effort=all(v == 0 for r, v in self.requests.items() if r != "pods"),
                sig=(tuple(sorted(self.requests.items())), cons.signature, tuple(sorted(cons.host_ports))),
            )
        return self._fields


@dataclass(frozen=True)
class _TaskFields:
    uid: str
    role: str
    index: int | None
    labels: dict[str, str]
    priority_class: str | None
    preempt_never: bool
    priority: Any
    creation: str
    best_effort: bool
    sig: Any


@dataclass
class _Job:
    info: JobInfo | None
    orphans: dict[str, str]
    standalone: bool


_JOB_FIELDS = tuple(f.name for f in fields(JobInfo))
_SUBJOB_FIELDS = tuple(f.name for f in fields(SubJobInfo))


def _remap_job(info: JobInfo, perm: list[int], first: int) -> JobInfo:
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


class ClusterState:
    """Nodes, pods, HyperNodes, PodGroups, Queues and PriorityClasses, kept from events.

    Feed it with ``set_*`` / ``remove_*`` (one object) or ``replace_*`` (a whole listing);
    take :meth:`snapshot` once per cycle. Not thread-safe: mutate it from one thread (the
    event loop) and hand snapshots to others.
    """

    def __init__(
        self,
        scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
        *,
        detach: bool = False,
        members: MemberIndex | None = None,
    ) -> None:
        """``members``: a member index to share (it must only ever be fed the same nodes and
        HyperNodes as this state)."""
        self.scheduler_names = tuple(scheduler_names)
        # detach: keep copies of the objects fed in and let ``replace_*`` compare contents, for
        # callers (the simulator) that change their objects in place instead of sending events.
        self.detach = detach
        self._node_objs: dict[str, dict[str, Any]] = {}
        self.members = members if members is not None else MemberIndex()
        self._nodes: dict[str, _Node] = {}
        self._pods: dict[str, _Pod] = {}
        self._podgroups: dict[str, PodGroup] = {}
        self._queues: dict[str, Queue] = {}
        self._pcs: dict[str, dict[str, Any]] = {}
        self._hns: dict[str, HyperNode] = {}
        self._job_pods: dict[str, dict[str, None]] = {}  # job key -> pod keys, in arrival order
        self._jobs: dict[str, _Job] = {}
        self._dirty_jobs: set[str] = set()
        self._bad_orphans: dict[str, str] = {}  # pending pods of ours with invalid requests
        self._by_node: dict[str, dict[str, None]] = {}  # node name -> keys of pods naming it
        # Layout: node order, resource columns, matrices (copy-on-write once shared).
        self._layout_dirty = True
        self._names: list[str] = []
        self._nidx: dict[str, int] = {}
        self._resources: list[str] = list(BASE_RESOURCES)
        self._ridx: dict[str, int] = {r: i for i, r in enumerate(self._resources)}
        self._statics: list[NodeStatic] = []
        self._alloc = np.zeros((0, len(self._resources)), dtype=np.int64)
        self._used = np.zeros((0, len(self._resources)), dtype=np.int64)
        self._plain = np.zeros(0, dtype=bool)
        self._ports: list[set[HostPort]] = []
        self._shared = False  # the arrays/lists above belong to a snapshot too
        # Nodes added / removed since the last layout, laid out by the next snapshot (a merge
        # into the sorted order, no re-accounting of pods on the nodes that stay).
        self._added: set[str] = set()
        self._removed: set[str] = set()
        self._nodeset_gen = 0  # moves when the node order changes (the tree depends on it)
        self._node_gen = 0  # moves when any node's static facts change (masks depend on them)
        self._sig_masks: dict[Any, npt.NDArray[np.bool_]] = {}
        self._sig_masks_gen = -1
        # Shapes: stable ids while the layout holds.
        self._shape_idx: dict[Any, int] = {}
        self._shape_list: list[tuple[I64, PodConstraints]] = []
        # Tree and derived caches.
        self._tree: HyperNodeTree | None = None
        self._tree_key: tuple[int, int] | None = None
        self._layout_gen = 0
        self._prio_key: tuple[Any, ...] = ()
        self._prio_gen = 0  # moves with every change of the PriorityClasses
        self._default_prio = 0
        self._queue_map: dict[str, Queue] | None = None
        self._last: ClusterSnapshot | None = None
        self.changes = 0  # events applied since the last snapshot (for metrics and benches)

    # ================================================================== nodes
    def set_node(self, obj: dict[str, Any]) -> None:
        """A Node added or updated."""
        name = _name(obj)
        # Kept to compare a relist against: a copy when detached (the caller edits in place),
        # else the object itself (a relist of the same objects is then a no-op).
        self._node_objs[name] = _detached(obj) if self.detach else obj
        st = node_static_from_dict(obj)
        alloc: dict[str, int] = dict(st.allocatable) if (obj.get("status") or {}).get("allocatable") else {}
        alloc.setdefault("pods", 110_000)
        plain = bool(
            st.ready
            and not st.unschedulable
            and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in st.taints)
        )
        rec = _Node(st, alloc, plain)
        old = self._nodes.get(name)
        self._nodes[name] = rec
        self.members.set_node(name, st.labels)
        if old is not None and old.static == st and old.alloc == alloc and old.plain == plain:
            return  # a heartbeat: nothing the scheduler reads changed
        self.changes += 1
        if any(r not in self._ridx for r in alloc):
            self._layout_dirty = True  # a resource never seen: new columns, laid out once
            return
        self._node_gen += 1
        if self._layout_dirty:
            return
        if old is None or name in self._added:
            # A new node (or one deleted and back since the last layout): merged into the
            # order by the next snapshot, its row made from scratch there.
            self._added.add(name)
            return
        i = self._nidx[name]
        self._own()
        self._statics[i] = st
        row = np.zeros(len(self._resources), dtype=np.int64)
        for r, v in alloc.items():
            row[self._ridx[r]] = v
        self._alloc[i] = row
        self._plain[i] = plain

    def remove_node(self, name: str) -> None:
        """A Node deleted."""
        self._node_objs.pop(name, None)
        if self._nodes.pop(name, None) is not None:
            self.members.remove_node(name)
            self._added.discard(name)
            if name in self._nidx:
                self._removed.add(name)
            self._node_gen += 1
            self.changes += 1

    def replace_nodes(self, objs: Iterable[dict[str, Any]]) -> None:
        """A relist of Nodes: the state's nodes become exactly ``objs``."""
        fresh = {_name(o): o for o in objs}
        for name in [n for n in self._nodes if n not in fresh]:
            self.remove_node(name)
        for name, obj in fresh.items():
            prev = self._node_objs.get(name)
            if prev is None or (prev != obj if self.detach else prev is not obj):
                self.set_node(obj)

    # ================================================================== pods
    def set_pod(self, obj: dict[str, Any] | None, key: str | None = None) -> None:
        """A pod added or updated (as the scheduler should see it: assumed pods bound). None
        (with ``key``) removes it."""
        if obj is None:
            assert key is not None
            self.remove_pod(key)
            return
        old = self._pods.get(object_key(obj))
        if old is not None and _same_for_scheduling(old.obj, obj):
            # A change the state does not read (conditions, resourceVersion, managedFields):
            # keep the parsed pod and its job as they are.
            old.obj = _detached(obj) if self.detach else obj
            return
        rec = self._parse_pod(obj)
        self._pods[rec.key] = rec
        self.changes += 1
        self._index_node(old, rec)
        if not rec.terminal and any(r not in self._ridx for r in rec.requests or ()):
            self._layout_dirty = True  # a resource never seen: new columns, laid out once
        if rec.job is not None and not self._layout_dirty and rec.requests is not None:
            # Its task's fields are made now, as the watch delivers the pod, not in the next
            # cycle's view (a 5,000-pod gang arrives over many events; the view copies them).
            rec.base, rec.base_gen = self._task_base(rec), (self._layout_gen, self._prio_gen)
        if not (
            old is not None
            and (old.node, old.terminal, old.requests, old.ports)
            == (rec.node, rec.terminal, rec.requests, rec.ports)
        ):  # a status-only update (the common case) holds the same room
            self._account(old, -1)
            self._account(rec, +1)
        self._bad_orphans.pop(rec.key, None)
        if rec.requests is None and not rec.node and not rec.terminal and rec.owned:
            self._bad_orphans[rec.key] = rec.bad or "invalid resource requests"
        self._rejob(old, rec)

    def remove_pod(self, key: str) -> None:
        """A pod deleted."""
        old = self._pods.pop(key, None)
        if old is None:
            return
        self.changes += 1
        self._index_node(old, None)
        self._account(old, -1)
        self._bad_orphans.pop(key, None)
        self._rejob(old, None)

    def replace_pods(self, objs: Iterable[dict[str, Any]]) -> None:
        """A relist of pods: the state's pods become exactly ``objs``."""
        fresh = {object_key(o): o for o in objs}
        for key in [k for k in self._pods if k not in fresh]:
            self.remove_pod(key)
        for key, obj in fresh.items():
            old = self._pods.get(key)
            if old is None or (old.obj != obj if self.detach else old.obj is not obj):
                self.set_pod(obj)

    def _parse_pod(self, obj: dict[str, Any]) -> _Pod:
        if self.detach:
            obj = _detached(obj)
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        ns = str(meta.get("namespace") or "default")
        name = str(meta.get("name", ""))
        key = f"{ns}/{name}"
        node = spec.get("nodeName") or None
        terminal = status.get("phase", "Pending") in TERMINAL_PHASES
        owned = spec.get("schedulerName", DEFAULT_SCHEDULER_NAME) in self.scheduler_names
        group = (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        bad: str | None = None
        try:
            rq: dict[str, int] | None = pod_requests(obj)
        except ResourceError as exc:
            rq, bad = None, str(exc)
        rec = _Pod(obj, key, ns, name, node, terminal, owned, group, rq, bad, None, frozenset())
        if terminal or rq is None:
            return rec
        if group is not None:
            rec.job = f"{ns}/{group}"
        elif not node and owned:
            rec.job = f"{ns}/podgroup-{name}"
        if node:
            rec.ports = pod_host_ports(obj) if group is None else frozenset(rec.cons.host_ports)
        if rec.job is not None:
            rec.task_fields()  # parsed as the event arrives, not in the cycle
        return rec

    def _account(self, rec: _Pod | None, sign: int) -> None:
        """Add (sign=1) or remove a bound pod's requests and host ports on its node."""
        if rec is None or rec.terminal or rec.requests is None or not rec.node:
            return
        if self._layout_dirty:
            return
        i = self._nidx.get(rec.node)
        if i is None:
            return
        self._own()
        for r, v in rec.requests.items():
            self._used[i, self._ridx[r]] += sign * v
        if rec.ports:
            # Sets in a snapshot are never mutated: replace this node's set.
            if sign > 0:
                self._ports[i] = self._ports[i] | set(rec.ports)
            else:
                self._ports[i] = self._ports_on(rec.node)

    def _index_node(self, old: _Pod | None, new: _Pod | None) -> None:
        if old is not None and old.node and (new is None or new.node != old.node):
            keys = self._by_node.get(old.node)
            if keys is not None:
                keys.pop(old.key, None)
                if not keys:
                    del self._by_node[old.node]
        if new is not None and new.node:
            self._by_node.setdefault(new.node, {})[new.key] = None

    def _on_node(self, node: str) -> list[_Pod]:
        """Pods holding room on ``node`` (bound, not terminal, valid requests)."""
        out = []
        for k in self._by_node.get(node, ()):
            p = self._pods[k]
            if not p.terminal and p.requests is not None:
                out.append(p)
        return out

    def _ports_on(self, node: str) -> set[HostPort]:
        out: set[HostPort] = set()
        for p in self._on_node(node):
            out |= p.ports
        return out

    def _rejob(self, old: _Pod | None, new: _Pod | None) -> None:
        for rec, add in ((old, False), (new, True)):
            if rec is None or rec.job is None:
                continue
            pods = self._job_pods.setdefault(rec.job, {})
            if add:
                pods[rec.key] = None
            else:
                pods.pop(rec.key, None)
                if not pods:
                    del self._job_pods[rec.job]
            self._dirty_jobs.add(rec.job)

    # ================================================================== other kinds
    def set_podgroup(self, pg: PodGroup) -> None:
        """A PodGroup added or updated (parsed)."""
        self._podgroups[pg.key] = pg
        self._dirty_jobs.add(pg.key)
        self.changes += 1

    def remove_podgroup(self, key: str) -> None:
        """A PodGroup deleted."""
        if self._podgroups.pop(key, None) is not None:
            self._dirty_jobs.add(key)
            self.changes += 1

    def replace_podgroups(self, pgs: Iterable[PodGroup]) -> None:
        """The PodGroups become exactly ``pgs`` (unchanged models are left alone)."""
        fresh = {pg.key: pg for pg in pgs}
        for key in [k for k in self._podgroups if k not in fresh]:
            self.remove_podgroup(key)
        for key, pg in fresh.items():
            if self._podgroups.get(key) is not pg:
                self.set_podgroup(pg)

    def replace_queues(self, queues: Iterable[Queue]) -> None:
        """The Queues become exactly ``queues``."""
        fresh = {q.name: q for q in queues}
        if fresh.keys() != self._queues.keys() or any(self._queues[k] is not q for k, q in fresh.items()):
            self._queues = fresh
            self._queue_map = None
            self.changes += 1

    def replace_priority_classes(self, pcs: Iterable[dict[str, Any]]) -> None:
        """The PriorityClasses become exactly ``pcs``; a change re-prioritises every job."""
        fresh = {_name(pc): pc for pc in pcs}
        key = tuple(sorted((n, pc.get("value"), bool(pc.get("globalDefault"))) for n, pc in fresh.items()))
        self._pcs = fresh
        self._default_prio = 0
        for pc in fresh.values():  # the last globalDefault wins, as in ClusterSnapshot.build
            if pc.get("globalDefault"):
                self._default_prio = int(pc.get("value", 0))
        if key != self._prio_key:
            self._prio_key = key
            self._prio_gen += 1
            self._dirty_jobs.update(self._all_job_keys())
            self.changes += 1

    def set_hypernode(self, hn: HyperNode) -> None:
        """A HyperNode added or updated (parsed). A status-only update (the controller writes
        member counts) changes nothing a session reads: the previous view stands."""
        self._hns[hn.name] = hn
        if self.members.set_hypernode(hn):
            self.changes += 1

    def remove_hypernode(self, name: str) -> None:
        """A HyperNode deleted."""
        if self._hns.pop(name, None) is not None:
            self.members.remove_hypernode(name)
            self.changes += 1

    def replace_hypernodes(self, hns: Iterable[HyperNode]) -> None:
        """The HyperNodes become exactly ``hns``."""
        fresh = {h.name: h for h in hns}
        for name in [n for n in self._hns if n not in fresh]:
            self.remove_hypernode(name)
        for name, hn in fresh.items():
            if self._hns.get(name) is not hn:
                self.set_hypernode(hn)

    def replace_all(
        self,
        nodes: Iterable[dict[str, Any]],
        pods: Iterable[dict[str, Any]],
        hypernodes: Iterable[HyperNode] = (),
        podgroups: Iterable[PodGroup] = (),
        queues: Iterable[Queue] = (),
        priority_classes: Iterable[dict[str, Any]] = (),
    ) -> None:
        """Bring the whole state to these listings (first sync, or a relist)."""
        self.replace_nodes(nodes)
        self.replace_pods(pods)
        self.replace_hypernodes(hypernodes)
        self.replace_podgroups(podgroups)
        self.replace_queues(queues)
        self.replace_priority_classes(priority_classes)

    # ================================================================== listings
    def pods(self) -> list[dict[str, Any]]:
        """The pods as fed in (for a from-scratch rebuild to compare with)."""
        return [p.obj for p in self._pods.values()]

    def node_objects_count(self) -> int:
        """Number of nodes held."""
        return len(self._nodes)

    # ================================================================== snapshot
    def _all_job_keys(self) -> set[str]:
        return set(self._podgroups) | set(self._job_pods) | set(self._jobs)

    def _own(self) -> None:
        """Copy what a snapshot shares before the first write after it (copy-on-write)."""
        if self._shared:
            self._alloc = self._alloc.copy()
            self._used = self._used.copy()
            self._plain = self._plain.copy()
            self._statics = list(self._statics)
            self._ports = list(self._ports)
            self._shared = False

    def _relayout(self) -> None:
        names = sorted(self._nodes)
        res: dict[str, None] = dict.fromkeys(BASE_RESOURCES)
        for n in names:
            for r in self._nodes[n].alloc:
                res.setdefault(r, None)
        for p in self._pods.values():
            if not p.terminal:
                for rname in p.requests or ():
                    res.setdefault(rname, None)
        self._names = names
        self._nidx = {n: i for i, n in enumerate(names)}
        self._resources = list(res)
        self._ridx = {r: i for i, r in enumerate(self._resources)}
        shape = (len(names), len(self._resources))
        self._statics = [self._nodes[x].static for x in names]
        self._alloc = np.zeros(shape, dtype=np.int64)
        for i, x in enumerate(names):
            for k, v in self._nodes[x].alloc.items():
                self._alloc[i, self._ridx[k]] = v
        self._plain = np.array([self._nodes[x].plain for x in names], dtype=bool)
        self._used = np.zeros(shape, dtype=np.int64)
        self._ports = [set() for _ in names]
        self._shared = False
        self._layout_dirty = False
        self._added = set()
        self._removed = set()
        self._nodeset_gen += 1
        for p in self._pods.values():
            self._account(p, +1)
        # Node indices, resource columns and shapes are baked into tasks: rebuild every job.
        self._shape_idx = {}
        self._shape_list = []
        self._jobs = {}
        self._dirty_jobs = self._all_job_keys()
        self._node_gen += 1
        self._layout_gen += 1

    def _renode(self) -> None:
        """Lay out nodes added and removed since the last layout, in O(N) array work: the
        rows of the nodes that stay move to their new places, only the new nodes' rows are
        made (from the pods naming them), and jobs are rebuilt only where a pod sits on a
        node that came or went; the others get their running tasks' node indices remapped."""
        added, removed = sorted(self._added), self._removed
        self._added, self._removed = set(), set()
        old_names = self._names
        kept = [n for n in old_names if n not in removed] if removed else old_names
        names = list(heapq.merge(kept, added)) if added else list(kept)
        nidx = {n: i for i, n in enumerate(names)}
        old_pos = np.fromiter(
            (i for i, n in enumerate(old_names) if n not in removed), dtype=np.int64, count=len(kept)
        )
        new_pos = np.fromiter((nidx[n] for n in kept), dtype=np.int64, count=len(kept))
        perm = np.full(len(old_names), -1, dtype=np.int64)  # old index -> new index (-1: gone)
        perm[old_pos] = new_pos
        shape = (len(names), len(self._resources))
        alloc = np.zeros(shape, dtype=np.int64)
        used = np.zeros(shape, dtype=np.int64)
        plain = np.zeros(len(names), dtype=bool)
        alloc[new_pos] = self._alloc[old_pos]
        used[new_pos] = self._used[old_pos]
        plain[new_pos] = self._plain[old_pos]
        statics: list[NodeStatic | None] = [None] * len(names)
        ports: list[set[HostPort]] = [set()] * len(names)
        for o, n in zip(old_pos.tolist(), new_pos.tolist(), strict=True):
            statics[n] = self._statics[o]
            ports[n] = self._ports[o]
        touched_jobs: set[str] = set()
        for name in added:
            i = nidx[name]
            rec = self._nodes[name]
            statics[i] = rec.static
            plain[i] = rec.plain
            for r, v in rec.alloc.items():
                alloc[i, self._ridx[r]] = v
            held: set[HostPort] = set()
            for p in self._on_node(name):
                assert p.requests is not None
                for r, v in p.requests.items():
                    used[i, self._ridx[r]] += v
                held |= p.ports
            ports[i] = held
        for name in (*added, *removed):
            for k in self._by_node.get(name, ()):
                jkey = self._pods[k].job
                if jkey is not None:
                    touched_jobs.add(jkey)
        self._names, self._nidx = names, nidx
        self._alloc, self._used, self._plain = alloc, used, plain
        self._statics = statics  # type: ignore[assignment]  # every slot filled above
        self._ports = ports
        self._shared = False
        self._node_gen += 1
        self._nodeset_gen += 1
        # Jobs with a task on a node that came or went are rebuilt; the others keep their
        # tasks, with node indices moved where the merge shifted them.
        self._dirty_jobs |= touched_jobs
        moved = np.nonzero(perm != np.arange(len(perm)))[0]
        first = int(moved[0]) if len(moved) else len(perm)
        if first < len(perm):
            perm_l = perm.tolist()
            with no_cyclic_gc():  # up to one new task per running pod, no cycles
                for gkey, job in self._jobs.items():
                    if gkey in self._dirty_jobs or job.info is None:
                        continue
                    info = _remap_job(job.info, perm_l, first)
                    if info is not job.info:
                        self._jobs[gkey] = _Job(info, job.orphans, job.standalone)
        self._last = None

    def _vec(self, rq: Mapping[str, int]) -> I64:
        v = np.zeros(len(self._resources), dtype=np.int64)
        for r, q in rq.items():
            v[self._ridx[r]] = q
        return v

    def _prio_of(self, name: str | None, explicit: Any = None) -> int:
        if explicit is not None:
            return int(explicit)
        if name and name in self._pcs:
            return int(self._pcs[name].get("value", 0))
        return self._default_prio

    def _build_job(self, gkey: str, tree: HyperNodeTree) -> _Job:
        """Tasks, orphans and the JobInfo of one job, with ``ClusterSnapshot.build``'s rules."""
        pg = self._podgroups.get(gkey)
        orphans: dict[str, str] = {}
        tasks: list[TaskInfo] = []
        standalone_pg: PodGroup | None = None
        gen = (self._layout_gen, self._prio_gen)
        pods = self._pods
        for pkey in self._job_pods.get(gkey, {}):
            rec = pods[pkey]
            assert rec.requests is not None
            if not rec.node and not rec.owned:
                continue  # another scheduler's pod
            if rec.group is None:
                meta = rec.obj.get("metadata") or {}
                spec = rec.obj.get("spec") or {}
                standalone_pg = PodGroup.model_validate(
                    {
                        "metadata": {
                            "name": f"podgroup-{rec.name}",
                            "namespace": rec.ns,
                            "creationTimestamp": meta.get("creationTimestamp"),
                        },
                        "spec": {"minMember": 1, "priorityClassName": spec.get("priorityClassName")},
                    }
                )
            elif pg is None:
                if not rec.node:
                    orphans[pkey] = f"PodGroup {gkey} not found"
                continue
            if not rec.node:
                cons = rec.cons
                if cons.gated:
                    orphans[pkey] = "pod has scheduling gates"
                    continue
                if cons.unsupported:
                    orphans[pkey] = "unsupported constraints: " + ", ".join(cons.unsupported)
                    continue
            if rec.base is None or rec.base_gen != gen:
                rec.base, rec.base_gen = self._task_base(rec), gen
            # Through __init__, not a dict copy: attribute access on the task stays fast (a
            # replaced __dict__ costs the session more than the copy saves).
            task = TaskInfo(**rec.base)
            if rec.node:
                ni = self._nidx.get(rec.node)
                if ni is None:
                    continue  # bound to a node that is gone: nothing to account
                task.node = ni
                task.running = True
            tasks.append(task)
        # A synthesised one-pod group wins over a PodGroup of the same name, as in ``build``.
        job_pg = standalone_pg if standalone_pg is not None else pg
        info = None
        if job_pg is not None:
            prio = self._prio_of(job_pg.spec.priority_class_name)
            info = build_job(job_pg, tasks, prio, tree.tier_names, tree.top_tier)
        return _Job(info, orphans, standalone_pg is not None)

    def _task_base(self, rec: _Pod) -> dict[str, Any]:
        """The fields of a pending TaskInfo of ``rec`` (with its order keys, which depend on
        the pod alone): made once per pod, layout and PriorityClass change, so a job of
        thousands of pods is rebuilt by copying them."""
        f = rec.task_fields()
        assert rec.requests is not None
        if rec.shape_gen != self._layout_gen:
            # Shape ids and request vectors hold while the layout does: once per pod and layout.
            sid = self._shape_idx.get(f.sig)
            if sid is None:
                vec = self._vec(rec.requests)
                sid = len(self._shape_list)
                self._shape_idx[f.sig] = sid
                self._shape_list.append((vec, rec.cons))
            else:
                # Same requests as the shape's (they are part of its signature): one
                # read-only vector for all its tasks.
                vec = self._shape_list[sid][0]
            rec.sid, rec.vec, rec.shape_gen = sid, vec, self._layout_gen
        assert rec.vec is not None
        task = TaskInfo(
            key=rec.key,
            name=rec.name,
            namespace=rec.ns,
            uid=f.uid,
            role=f.role,
            index=f.index,
            labels=f.labels,
            requests=rec.vec,
            shape=rec.sid,
            priority=self._prio_of(f.priority_class, f.priority),
            creation=f.creation,
            best_effort=f.best_effort,
            priority_class=f.priority_class,
            preempt_never=f.preempt_never,
        )
        task.prio_order_key, task.order_key = order_keys(task)
        task.rank = rank_key(task)
        return dict(task.__dict__)

    def snapshot(self) -> ClusterSnapshot:
        """A consistent, immutable view for one cycle, in time proportional to the changes."""
        t0 = time.perf_counter()
        if self._layout_dirty:
            self._relayout()
        elif self._added or self._removed:
            self._renode()
        tree_key = (self.members.generation, self._nodeset_gen)
        if self._tree is None or self._tree_key != tree_key:
            old = self._tree
            labels = self.members.node_labels
            self._tree = HyperNodeTree.build(list(self._hns.values()), self._names, labels, self.members)
            self._tree_key = tree_key
            if old is None or old.tier_names != self._tree.tier_names or old.top_tier != self._tree.top_tier:
                self._dirty_jobs = self._all_job_keys()
        tree = self._tree
        if self._dirty_jobs:
            with no_cyclic_gc():  # one TaskInfo per pod of a rebuilt job, no cycles
                for gkey in self._dirty_jobs:
                    if gkey in self._podgroups or gkey in self._job_pods:
                        self._jobs[gkey] = self._build_job(gkey, tree)
                    else:
                        self._jobs.pop(gkey, None)
            self._dirty_jobs = set()
            self._last = None
        if self._last is not None and self.changes == 0 and self._last.tree is tree:
            return self._last  # nothing happened: the previous view is still exact
        jobs: dict[str, JobInfo] = {}
        orphans: dict[str, str] = dict(self._bad_orphans)
        standalone: list[str] = []
        for gkey, job in self._jobs.items():
            orphans.update(job.orphans)
            if job.info is not None:
                jobs[gkey] = job.info
                if job.standalone:
                    standalone.append(gkey)
        if self._queue_map is None:
            qm = dict(self._queues)
            if DEFAULT_QUEUE not in qm:
                qm[DEFAULT_QUEUE] = Queue.model_validate({"metadata": {"name": DEFAULT_QUEUE}})
            self._queue_map = qm
        if self._sig_masks_gen != self._node_gen:
            self._sig_masks = {}
            self._sig_masks_gen = self._node_gen
        snap = ClusterSnapshot(
            node_names=self._names,
            node_static=self._statics,
            resources=self._resources,
            allocatable=self._alloc,
            used=self._used,
            node_ports=self._ports,
            tree=tree,
            jobs=jobs,
            queues=self._queue_map,
            shapes=[Shape(i, v, c) for i, (v, c) in enumerate(self._shape_list)],
            scheduler_names=self.scheduler_names,
            orphan_pods=orphans,
            standalone=sorted(standalone),
            plain_mask=self._plain,
            # Static masks depend on node facts only: shared while no node changed.
            _sig_masks=self._sig_masks,
        )
        self._shared = True
        self._last = snap
        self.changes = 0
        snap.build_seconds = time.perf_counter() - t0
        return snap


# ---------------------------------------------------------------------------------------------
# Verification: an incremental snapshot against a from-scratch build


def _task_view(t: TaskInfo, snap: ClusterSnapshot) -> tuple[Any, ...]:
    sh = snap.shapes[t.shape]
    req = {r: int(v) for r, v in zip(snap.resources, t.requests.tolist(), strict=True) if v}
    shape_req = {r: int(v) for r, v in zip(snap.resources, sh.requests.tolist(), strict=True) if v}
    return (
        t.key, t.name, t.namespace, t.uid, t.role, t.index, t.labels, req, shape_req,
        sh.constraints.signature, sh.constraints.host_ports, t.priority, t.creation, t.best_effort,
        t.node, t.running, t.subjob, t.job, t.order_key, t.prio_order_key, t.rank, t.priority_class,
        t.preempt_never,
    )  # fmt: skip


def _job_view(j: JobInfo, snap: ClusterSnapshot) -> tuple[Any, ...]:
    subjobs = [
        (
            sj.id,
            sj.gid,
            sj.policy,
            sj.min_available,
            sj.match_index,
            sj.topology,
            sj.allocated_hypernode,
            [_task_view(t, snap) for t in sj.tasks],
        )
        for sj in j.subjobs.values()
    ]
    return (
        j.key, j.podgroup.to_dict(), j.queue, j.priority, j.creation, j.min_member, j.min_task_member,
        j.topology, j.has_policies, j.min_subjobs, j.allocated_hypernode, j.problems, subjobs,
    )  # fmt: skip


def _columns(snap: ClusterSnapshot, m: I64) -> dict[str, list[int]]:
    """Matrix columns by resource name, all-zero ones left out (an unused column is harmless)."""
    return {r: m[:, i].tolist() for i, r in enumerate(snap.resources) if m[:, i].any()}


def snapshot_differences(got: ClusterSnapshot, want: ClusterSnapshot) -> list[str]:
    """What differs between two snapshots of the same cluster, ignoring representation
    (shape ids, resource column order, dict order). Empty when they are equivalent."""
    out: list[str] = []

    def check(what: str, a: Any, b: Any) -> None:
        if a != b:
            text = f"{what}: incremental {a!r} != rebuilt {b!r}"
            out.append(text if len(text) < 600 else text[:600] + "...")

    check("node names", got.node_names, want.node_names)
    if out:
        return out
    check("node statics", got.node_static, want.node_static)
    check("allocatable", _columns(got, got.allocatable), _columns(want, want.allocatable))
    check("used", _columns(got, got.used), _columns(want, want.used))
    check("host ports", got.node_ports, want.node_ports)
    check("plain mask", got.plain_mask.tolist(), want.plain_mask.tolist())
    gt, wt = got.tree, want.tree
    check("tree names", gt.names, wt.names)
    check("tree tiers", gt.tiers.tolist(), wt.tiers.tolist())
    check("tree parents", gt.parent.tolist(), wt.parent.tolist())
    check("tree node sets", [s.tolist() for s in gt.node_sets], [s.tolist() for s in wt.node_sets])
    check("tree tier names", gt.tier_names, wt.tier_names)
    check("tree problems", gt.problems, wt.problems)
    check("job keys", sorted(got.jobs), sorted(want.jobs))
    for k in sorted(set(got.jobs) & set(want.jobs)):
        check(f"job {k}", _job_view(got.jobs[k], got), _job_view(want.jobs[k], want))
    check("orphan pods", got.orphan_pods, want.orphan_pods)
    check("standalone jobs", got.standalone, want.standalone)
    check(
        "queues",
        {k: q.to_dict() for k, q in got.queues.items()},
        {k: q.to_dict() for k, q in want.queues.items()},
    )
    check("scheduler names", got.scheduler_names, want.scheduler_names)
    return out


class StateDriftError(AssertionError):
    """The incremental state disagrees with a rebuild from the same objects (a bug)."""


def verify_snapshot(state: ClusterState, snap: ClusterSnapshot, rebuilt: ClusterSnapshot) -> None:
    """Raise :class:`StateDriftError` naming every difference between ``snap`` (from
    ``state``) and ``rebuilt`` (``ClusterSnapshot.build`` of the same objects)."""
    diffs = snapshot_differences(snap, rebuilt)
    if diffs:
        raise StateDriftError(
            f"incremental scheduler state drifted from a rebuild ({len(diffs)} differences):\n  "
            + "\n  ".join(diffs[:20])
        )
