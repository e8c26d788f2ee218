"""The scheduler's cluster state, kept current from watch events; a cycle takes a snapshot of it.

:func:`~.rebuild.build_snapshot` indexes every node and every pod each time it is called. This
module keeps the same information up to date as events arrive and hands out
:class:`~scheduler_plugin.model.snapshot.ClusterSnapshot` objects that are equal to what a
rebuild would return for the same objects (``--verify-state`` and a property test check it):

* **Per node** (:class:`~.node_table.NodeTable`): parsed static facts, an allocatable row, a
  used row (bound pods plus assumed ones, whatever the caller feeds in) and host ports. A pod
  event changes one row. Nodes added or removed are merged into the order (by name, as a
  rebuild orders them) by the next snapshot, once however many arrived: the other rows move,
  only the new rows are made, and jobs keep their tasks (running ones get their moved node
  indices in a copy). Only a resource never seen before re-lays everything out.
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
from the snapshot by the session's :class:`~scheduler_plugin.framework.alloc_state.AllocState`,
which copies ``used`` and takes the capacity of every decision it makes, so two decisions of
one cycle never share room.

A relist (after 410 Gone, a watch gap or a restart) feeds whole listings through the
``replace_*`` methods: the state is diffed against them once and then goes on incrementally.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.api.constants import (
    DEFAULT_SCHEDULER_NAME,
)
from hyperplace.api.hypernode import HyperNode
from hyperplace.api.podgroup import PodGroup, Queue
from hyperplace.api.spares import spare_marks
from hyperplace.api.workload import upstream_topology_keys
from hyperplace.kube.members import MemberIndex
from hyperplace.kube.objects import namespaced_key
from hyperplace.runtime.gcpause import no_cyclic_gc

from ..filters.dra import DraObjects, compute_domain_templates
from ..filters.pod_constraints import PodConstraints
from ..filters.pod_terms import NO_TERMS, PodClass
from ..model.hypernode_tree import HyperNodeTree
from ..model.jobs import JobInfo, TaskInfo, build_job, remap_nodes
from ..model.memo import Memo
from ..model.snapshot import ClusterSnapshot, HostPort, Shape
from .compute_domains import clique_keys, with_clique
from .node_table import NodeTable
from .pod_classes import BoundClasses, TermKeys, label_class
from .records import (
    NodeRecord,
    PodRecord,
    Priorities,
    bind_task,
    detached,
    job_task_verdict,
    name_of,
    namespace_labels,
    parse_node,
    parse_pod,
    same_for_scheduling,
    with_default_queue,
)
from .storage import StorageListing, StorageState

I64 = npt.NDArray[np.int64]


@dataclass
class _Job:
    info: JobInfo | None
    orphans: dict[str, str]
    standalone: bool
    missing_node: dict[str, str]  # running pods bound to a node with no Node object


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
        self._nodes: dict[str, NodeRecord] = {}
        self._pods: dict[str, PodRecord] = {}
        # Claims, volumes, classes, CSI objects (fed by the caller) and the claims bound pods use.
        self.storage = StorageState(detach=detach)
        self._podgroups: dict[str, PodGroup] = {}
        # Upstream PodGroups' topology keys by job: the tree names a tier after each.
        self._label_keys: dict[str, str] = {}
        # ComputeDomain channel templates and claims, and the DRA view jobs were built with.
        self._compute_domains: frozenset[str] = frozenset()
        self._dra_jobs = DraObjects()
        self._queues: dict[str, Queue] = {}
        self._policies: tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]] = ((), ())
        self._prios = Priorities()
        self._hns: dict[str, HyperNode] = {}
        self._spare_marks: dict[str, dict[str, str]] = {}  # replaced, never changed in place
        self._job_pods: dict[str, dict[str, None]] = {}  # job key -> pod keys, in arrival order
        self._jobs: dict[str, _Job] = {}
        self._dirty_jobs: set[str] = set()
        self._bad_orphans: dict[str, str] = {}  # pending pods of ours with invalid requests
        # Label keys the pods' inter-pod affinity and spread terms read (shape signatures
        # carry a pod's labels under them), and the namespaces' labels (namespaceSelector).
        self._term_keys = TermKeys()
        self._classes = BoundClasses(self._term_keys)
        self._namespaces: dict[str, dict[str, str]] = {}
        self._by_node: dict[str, dict[str, None]] = {}  # node name -> keys of pods naming it
        # Layout: node order, resource columns and rows (copy-on-write once shared).
        self._layout_dirty = True
        self._table = NodeTable()
        # Nodes added / removed since the last layout, laid out by the next snapshot (a merge
        # into the sorted order, no re-accounting of pods on the nodes that stay).
        self._added: set[str] = set()
        self._removed: set[str] = set()
        self._nodeset_gen = 0  # moves when the node order changes (the tree depends on it)
        self._node_gen = 0  # moves when any node's static facts change (masks depend on them)
        self._sig_masks: dict[Any, npt.NDArray[np.bool_]] = {}
        self._node_derived: dict[Any, object] = {}  # the topology index, shared likewise
        # Sums over all jobs carried from snapshot to snapshot (each checks what it was made from).
        self._carry = Memo()
        self._sig_masks_gen = -1
        # Shapes: stable ids while the layout holds.
        self._shape_idx: dict[Any, int] = {}
        # The Shape objects of the last snapshot, for (layout, node facts) generation.
        self._shape_objs_key: tuple[int, int] | None = None
        self._shape_objs: list[Shape] = []
        self._shape_list: list[tuple[I64, PodConstraints]] = []
        # Tree and derived caches.
        self._tree: HyperNodeTree | None = None
        self._tree_key: tuple[int, int, tuple[str, ...]] | None = None
        self._layout_gen = 0
        self._prio_gen = 0  # moves with every change of the PriorityClasses
        self._queue_map: dict[str, Queue] | None = None
        self._last: ClusterSnapshot | None = None
        self.changes = 0  # events applied since the last snapshot (for metrics and benches)

    # ================================================================== nodes
    def set_node(self, obj: dict[str, Any]) -> None:
        """A Node added or updated."""
        name = name_of(obj)
        # Kept to compare a relist against: a copy when detached (the caller edits in place),
        # else the object itself (a relist of the same objects is then a no-op).
        self._node_objs[name] = detached(obj) if self.detach else obj
        rec = parse_node(obj)
        st, alloc, plain = rec.static, rec.alloc, rec.plain
        old = self._nodes.get(name)
        self._nodes[name] = rec
        self.members.set_node(name, st.labels)
        if old is not None and old.static == st and old.alloc == alloc and old.plain == plain:
            return  # a heartbeat: nothing the scheduler reads changed
        self.changes += 1
        if not self._table.knows(alloc):
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
        self._table.set_row(name, rec)

    def remove_node(self, name: str) -> None:
        """A Node deleted."""
        self._node_objs.pop(name, None)
        if self._nodes.pop(name, None) is not None:
            self.members.remove_node(name)
            self._added.discard(name)
            if name in self._table.nidx:
                self._removed.add(name)
            self._node_gen += 1
            self.changes += 1

    def replace_nodes(self, objs: Iterable[dict[str, Any]]) -> None:
        """A relist of Nodes: the state's nodes become exactly ``objs``."""
        fresh = {name_of(o): o for o in objs}
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
        old = self._pods.get(namespaced_key(obj))
        if old is not None and same_for_scheduling(old.obj, obj):
            # A change the state does not read (conditions, resourceVersion, managedFields):
            # keep the parsed pod and its job as they are.
            old.obj = detached(obj) if self.detach else obj
            return
        rec = self._parse_pod(obj)
        self._pods[rec.key] = rec
        self.changes += 1
        self._count_terms(old, rec)
        self.storage.set_pod(rec.key, rec.obj)
        self._index_node(old, rec)
        if not rec.terminal and not self._table.knows(rec.requests or ()):
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
        self._count_terms(old, None)
        self.storage.set_pod(key, None)
        self._index_node(old, None)
        self._account(old, -1)
        self._bad_orphans.pop(key, None)
        self._rejob(old, None)

    def replace_pods(self, objs: Iterable[dict[str, Any]]) -> None:
        """A relist of pods: the state's pods become exactly ``objs``."""
        fresh = {namespaced_key(o): o for o in objs}
        for key in [k for k in self._pods if k not in fresh]:
            self.remove_pod(key)
        for key, obj in fresh.items():
            old = self._pods.get(key)
            if old is None or (old.obj != obj if self.detach else old.obj is not obj):
                self.set_pod(obj)

    def _count_terms(self, old: PodRecord | None, new: PodRecord | None) -> None:
        """Keep the keys the terms read; when they change, shapes are laid out afresh."""
        changed = False
        if old is not None:
            changed |= self._term_keys.add(old.terms, -1)
        if new is not None:
            changed |= self._term_keys.add(new.terms, +1)
        if changed:
            self._layout_dirty = True
        rec = new if new is not None else old
        if rec is not None:
            # A bound, running pod counts for the terms of the pods placed near it.
            live = new is not None and not new.terminal and new.node is not None
            self._classes.track(
                rec.key,
                new.obj if live and new is not None else None,
                new.node if live and new is not None else None,
                new.terms if live and new is not None else NO_TERMS,
            )

    def _parse_pod(self, obj: dict[str, Any]) -> PodRecord:
        rec = parse_pod(detached(obj) if self.detach else obj, self.scheduler_names)
        if rec.job is not None:
            rec.task_fields()  # parsed as the event arrives, not in the cycle
        return rec

    def _account(self, rec: PodRecord | None, sign: int) -> None:
        """Add (sign=1) or remove a bound pod's requests and host ports on its node."""
        if rec is None or rec.terminal or rec.requests is None or not rec.node:
            return
        if not self._layout_dirty:
            self._table.account(rec, sign, self._ports_on)

    def _index_node(self, old: PodRecord | None, new: PodRecord | None) -> None:
        if old is not None and old.node and (new is None or new.node != old.node):
            keys = self._by_node.get(old.node)
            if keys is not None:
                keys.pop(old.key, None)
                if not keys:
                    del self._by_node[old.node]
        if new is not None and new.node:
            self._by_node.setdefault(new.node, {})[new.key] = None

    def _on_node(self, node: str) -> list[PodRecord]:
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

    def _rejob(self, old: PodRecord | None, new: PodRecord | None) -> None:
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
        key = upstream_topology_keys((pg,))
        if key:
            self._label_keys[pg.key] = key[0]
        else:
            self._label_keys.pop(pg.key, None)
        self._dirty_jobs.add(pg.key)
        self.changes += 1

    def remove_podgroup(self, key: str) -> None:
        """A PodGroup deleted."""
        if self._podgroups.pop(key, None) is not None:
            self._label_keys.pop(key, None)
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
        fresh = Priorities(pcs)
        changed = fresh.key() != self._prios.key()
        self._prios = fresh
        if changed:
            self._prio_gen += 1
            self._dirty_jobs.update(self._all_job_keys())
            self.changes += 1

    def set_hypernode(self, hn: HyperNode) -> None:
        """A HyperNode added or updated (parsed). A status-only update (the controller writes
        member counts) changes nothing a session reads: the previous view stands."""
        self._hns[hn.name] = hn
        if self.members.set_hypernode(hn):
            self.changes += 1
        marks = spare_marks(hn.metadata.annotations)
        if marks != self._spare_marks.get(hn.name, {}):
            # A fresh mapping: the snapshots already made keep theirs.
            self._spare_marks = {k: v for k, v in self._spare_marks.items() if k != hn.name}
            if marks:
                self._spare_marks[hn.name] = marks
            self.changes += 1

    def remove_hypernode(self, name: str) -> None:
        """A HyperNode deleted."""
        if self._hns.pop(name, None) is not None:
            self.members.remove_hypernode(name)
            self.changes += 1
            if name in self._spare_marks:
                self._spare_marks = {k: v for k, v in self._spare_marks.items() if k != name}

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
        pdbs: Iterable[dict[str, Any]] = (),
        quotas: Iterable[dict[str, Any]] = (),
        namespaces: Iterable[dict[str, Any]] = (),
        storage: StorageListing | None = None,
    ) -> None:
        """Bring the whole state to these listings (first sync, or a relist)."""
        self.replace_nodes(nodes)
        self.replace_pods(pods)
        self.replace_hypernodes(hypernodes)
        self.replace_podgroups(podgroups)
        self.replace_queues(queues)
        self.replace_priority_classes(priority_classes)
        self.replace_policies(pdbs, quotas)
        self.storage.replace(storage or StorageListing())
        self.replace_namespaces(namespaces)

    def replace_namespaces(self, objs: Iterable[Mapping[str, Any]]) -> None:
        """The Namespaces as listed: their labels are what a term's namespaceSelector reads."""
        fresh = namespace_labels(objs)
        if fresh != self._namespaces:
            self._namespaces = fresh
            self.changes += 1

    def replace_policies(self, pdbs: Iterable[dict[str, Any]], quotas: Iterable[dict[str, Any]]) -> None:
        """The PodDisruptionBudgets and ResourceQuotas become exactly these (the pdb and
        resourcequota plugins read them; a session reads the listing as it was)."""
        fresh = (tuple(pdbs), tuple(quotas))
        if fresh != self._policies:
            self._policies = fresh
            self.changes += 1

    # ================================================================== listings
    def pods(self) -> list[dict[str, Any]]:
        """The pods as fed in (for a from-scratch rebuild to compare with)."""
        return [p.obj for p in self._pods.values()]

    # ================================================================== snapshot
    def _all_job_keys(self) -> set[str]:
        return set(self._podgroups) | set(self._job_pods) | set(self._jobs)

    def _relayout(self) -> None:
        """Lay every node and pod out afresh (first snapshot, or a resource never seen)."""
        self._table.lay_out(
            self._nodes, (r for p in self._pods.values() if not p.terminal for r in p.requests or ())
        )
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
        """Lay out nodes added and removed since the last layout (:meth:`NodeTable.merge`);
        jobs are rebuilt only where a pod sits on a node that came or went, the others get their
        running tasks' node indices remapped."""
        added, removed = sorted(self._added), self._removed
        self._added, self._removed = set(), set()
        perm = self._table.merge(added, removed, self._nodes, self._on_node)
        self._node_gen += 1
        self._nodeset_gen += 1
        for name in (*added, *removed):
            for k in self._by_node.get(name, ()):
                jkey = self._pods[k].job
                if jkey is not None:
                    self._dirty_jobs.add(jkey)
        first = next((i for i, n in enumerate(perm) if n != i), len(perm))
        if first < len(perm):
            with no_cyclic_gc():  # up to one new task per running pod, no cycles
                for gkey, job in self._jobs.items():
                    if gkey in self._dirty_jobs or job.info is None:
                        continue
                    info = remap_nodes(job.info, perm, first)
                    if info is not job.info:
                        self._jobs[gkey] = replace(job, info=info)
        self._last = None

    def _build_job(self, gkey: str, tree: HyperNodeTree) -> _Job:
        """Tasks, orphans and the JobInfo of one job, with the rebuild's rules."""
        pg = self._podgroups.get(gkey)
        orphans: dict[str, str] = {}
        missing: dict[str, str] = {}
        tasks: list[TaskInfo] = []
        standalone_pg: PodGroup | None = None
        gen = (self._layout_gen, self._prio_gen)
        pods = self._pods
        for pkey in self._job_pods.get(gkey, {}):
            rec = pods[pkey]
            assert rec.requests is not None
            if rec.group is None and (rec.node or rec.owned):
                standalone_pg = rec.standalone_podgroup()
            joins, why = job_task_verdict(rec, pg)
            if not joins:
                if why is not None:
                    orphans[pkey] = why
                continue
            if rec.base is None or rec.base_gen != gen:
                rec.base, rec.base_gen = self._task_base(rec), gen
            # Through __init__, not a dict copy: attribute access on the task stays fast (a
            # replaced __dict__ costs the session more than the copy saves).
            task = TaskInfo(**rec.base)
            if rec.node and bind_task(task, rec.node, self._table.nidx.get(rec.node)):
                missing[pkey] = rec.node
            tasks.append(task)
        # A synthesised one-pod group wins over a PodGroup of the same name, as in a rebuild.
        job_pg = standalone_pg if standalone_pg is not None else pg
        info = None
        if job_pg is not None:
            job_pg = with_clique(
                job_pg, (pods[k].cons.claims for k in self._job_pods.get(gkey, {})), self._dra_jobs
            )
            prio = self._prios.of_podgroup(job_pg)
            info = build_job(job_pg, tasks, prio, tree.tier_names, tree.top_tier)
        return _Job(info, orphans, standalone_pg is not None, missing)

    def _task_base(self, rec: PodRecord) -> dict[str, Any]:
        """The fields of a pending TaskInfo of ``rec`` (with its order keys, which depend on
        the pod alone): made once per pod, layout and PriorityClass change, so a job of
        thousands of pods is rebuilt by copying them."""
        f = rec.task_fields()
        assert rec.requests is not None
        if rec.shape_gen != self._layout_gen:
            # Shape ids and request vectors hold while the layout does: once per pod and layout.
            sig = (f.sig, label_class(rec.ns, f.labels, self._term_keys))
            sid = self._shape_idx.get(sig)
            if sid is None:
                vec = self._table.vec(rec.requests)
                sid = len(self._shape_list)
                self._shape_idx[sig] = sid
                self._shape_list.append((vec, rec.cons))
            else:
                # Same requests as the shape's (they are part of its signature): one
                # read-only vector for all its tasks.
                vec = self._shape_list[sid][0]
            rec.sid, rec.vec, rec.shape_gen = sid, vec, self._layout_gen
        assert rec.vec is not None
        task = rec.task(rec.sid, rec.vec, self._prios.of(f.priority_class, f.priority))
        return dict(task.__dict__)

    def _shapes(self) -> list[Shape]:
        """The snapshot's shapes: those of the last snapshot while the layout and the nodes'
        facts hold (a shape caches its static mask), and the shapes new since."""
        key = (self._layout_gen, self._node_gen)
        if self._shape_objs_key != key:
            self._shape_objs_key, self._shape_objs = key, []
        made = self._shape_objs
        for i in range(len(made), len(self._shape_list)):
            v, c = self._shape_list[i]
            made.append(Shape(i, v, c))
        return list(made)

    def _bound_classes(self) -> list[tuple[PodClass, I64]]:
        """The bound pods by class, while some pod has a term (else nobody asks)."""
        return self._classes.arrays(
            self._table.nidx,
            self._nodeset_gen,
            ((p.key, p.obj, p.node, p.terms) for p in self._pods.values() if p.node and not p.terminal),
        )

    def snapshot(self) -> ClusterSnapshot:
        """A consistent, immutable view for one cycle, in time proportional to the changes."""
        t0 = time.perf_counter()
        if self._layout_dirty:
            self._relayout()
        elif self._added or self._removed:
            self._renode()
        dra = self.storage.dra_view()
        cd = compute_domain_templates(dra)
        if cd != self._compute_domains:
            # A ComputeDomain channel template came or went: its jobs' clique rule changes.
            self._compute_domains = cd
            self._dirty_jobs = self._all_job_keys()
        self._dra_jobs = dra
        label_keys = tuple(sorted(set(self._label_keys.values()) | set(clique_keys(dra))))
        tree_key = (self.members.generation, self._nodeset_gen, label_keys)
        if self._tree is None or self._tree_key != tree_key:
            old = self._tree
            labels = self.members.node_labels
            self._tree = HyperNodeTree.build(
                list(self._hns.values()), self._table.names, labels, self.members, label_keys
            )
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
        storage = self.storage.view()
        if (
            self._last is not None
            and self.changes == 0
            and self._last.tree is tree
            and self._last.storage is storage
            and self._last.dra is dra
        ):
            return self._last  # nothing happened: the previous view is still exact
        jobs: dict[str, JobInfo] = {}
        orphans: dict[str, str] = dict(self._bad_orphans)
        missing_node: dict[str, str] = {}
        standalone: list[str] = []
        for gkey, job in self._jobs.items():
            orphans.update(job.orphans)
            missing_node.update(job.missing_node)
            if job.info is not None:
                jobs[gkey] = job.info
                if job.standalone:
                    standalone.append(gkey)
        if self._queue_map is None:
            self._queue_map = with_default_queue(self._queues.values())
        if self._sig_masks_gen != self._node_gen:
            self._sig_masks = {}
            self._node_derived = {}
            self._sig_masks_gen = self._node_gen
        table = self._table
        snap = ClusterSnapshot(
            node_names=table.names,
            node_static=table.statics,
            resources=table.resources,
            allocatable=table.alloc,
            used=table.used,
            node_ports=table.ports,
            tree=tree,
            jobs=jobs,
            queues=self._queue_map,
            shapes=self._shapes(),
            scheduler_names=self.scheduler_names,
            orphan_pods=orphans,
            standalone=sorted(standalone),
            missing_node_pods=missing_node,
            pdbs=self._policies[0],
            spare_marks=self._spare_marks,
            quotas=self._policies[1],
            storage=storage,
            dra=dra,
            plain_mask=table.plain,
            pod_classes=self._bound_classes(),
            namespace_labels=self._namespaces,
            term_keys=self._term_keys.keys() if self._term_keys.active else frozenset(),
            # Static masks depend on node facts only: shared while no node changed.
            _sig_masks=self._sig_masks,
            _node_derived=self._node_derived,
            carry=self._carry,
        )
        table.shared = True
        self._last = snap
        self.changes = 0
        snap.build_seconds = time.perf_counter() - t0
        return snap
