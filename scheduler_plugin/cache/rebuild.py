"""A snapshot built from whole listings, from scratch.

What the simulator, the benchmarks and ``--full-rebuild`` use, and what ``--verify-state``
compares the incremental :class:`~.cluster_state.ClusterState` with: every node and every pod
is indexed anew on each call, in the same order and with the same rules (objects are read
through :mod:`.records`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.api.constants import DEFAULT_SCHEDULER_NAME
from hyperplace.api.hypernode import HyperNode
from hyperplace.api.podgroup import PodGroup, Queue
from hyperplace.api.spares import spare_marks
from hyperplace.api.workload import upstream_topology_keys
from hyperplace.kube.members import MemberIndex
from hyperplace.runtime.gcpause import no_cyclic_gc

from ..filters.dra import DraObjects
from ..model.hypernode_tree import HyperNodeTree
from ..model.jobs import JobInfo, TaskInfo, build_job
from ..model.snapshot import ClusterSnapshot, Shape
from .compute_domains import clique_keys, with_clique
from .node_table import NodeTable
from .pod_classes import TermKeys, bound_class, group_bound, label_class
from .records import (
    PodRecord,
    Priorities,
    bind_task,
    job_task_verdict,
    name_of,
    namespace_labels,
    parse_node,
    parse_pod,
    with_default_queue,
)
from .storage import StorageListing, build_storage_view

I64 = npt.NDArray[np.int64]


def build_snapshot(
    nodes: Sequence[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    hypernodes: Sequence[HyperNode] = (),
    podgroups: Sequence[PodGroup] = (),
    queues: Sequence[Queue] = (),
    priority_classes: Sequence[dict[str, Any]] = (),
    scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
    members: MemberIndex | None = None,
    pdbs: Sequence[dict[str, Any]] = (),
    quotas: Sequence[dict[str, Any]] = (),
    namespaces: Sequence[dict[str, Any]] = (),
    storage: StorageListing | None = None,
) -> ClusterSnapshot:
    """Index nodes, account running pods, group pending pods into jobs and resolve the tree.

    ``members`` is a long-lived member index to bring up to date with these nodes and
    HyperNodes and resolve from (only what changed since its last use is re-resolved).
    ``storage``: the claims, volumes, classes and CSI objects the volume filters read, and the
    objects of dynamic resource allocation.
    """
    t0 = time.perf_counter()
    owned = tuple(scheduler_names)
    pods = list(pods)
    with no_cyclic_gc():  # a record per node and per pod, a task per job pod: no cycles
        node_recs = {name_of(n): parse_node(n) for n in nodes}
        recs = [parse_pod(p, owned) for p in pods]
    # The incremental state's own layout rule: nodes by name, a column per resource.
    table = NodeTable()
    table.lay_out(node_recs, (r for rec in recs if not rec.terminal for r in rec.requests or ()))
    names, statics = table.names, table.statics
    node_labels = {st.name: dict(st.labels) for st in statics}
    if members is not None:
        members.sync_nodes(node_labels)
        members.sync_hypernodes(hypernodes)
    storage_view, dra_view = build_storage_view(storage, pods)
    label_keys = tuple(sorted(set(upstream_topology_keys(podgroups)) | set(clique_keys(dra_view))))
    tree = HyperNodeTree.build(hypernodes, names, node_labels, members, label_keys)
    keys = TermKeys()
    for rec in recs:
        keys.add(rec.terms, +1)
    jobs = _Jobs(table, Priorities(priority_classes), {pg.key: pg for pg in podgroups}, keys)
    with no_cyclic_gc():
        for rec in recs:
            jobs.add(rec)
        built = jobs.build(tree, dra_view)
    snap = ClusterSnapshot(
        node_names=names,
        node_static=statics,
        resources=table.resources,
        allocatable=table.alloc,
        used=jobs.used,
        node_ports=jobs.node_ports,
        tree=tree,
        jobs=built,
        queues=with_default_queue(queues),
        spare_marks={h.name: m for h in hypernodes if (m := spare_marks(h.metadata.annotations))},
        shapes=jobs.shapes,
        scheduler_names=owned,
        orphan_pods=jobs.orphans,
        standalone=sorted(jobs.standalone_pgs),
        missing_node_pods=jobs.missing_node,
        plain_mask=table.plain,
        pdbs=tuple(pdbs),
        quotas=tuple(quotas),
        pod_classes=group_bound(
            (bound_class(r.obj, r.terms, keys), table.nidx[r.node])
            for r in recs
            if keys.active and r.node and not r.terminal and r.node in table.nidx
        ),
        namespace_labels=namespace_labels(namespaces),
        term_keys=keys.keys() if keys.active else frozenset(),
        storage=storage_view,
        dra=dra_view,
    )
    snap.build_seconds = time.perf_counter() - t0
    return snap


class _Jobs:
    """The pods of one listing, sorted into node usage, jobs, shapes and orphans."""

    def __init__(
        self, table: NodeTable, prios: Priorities, podgroups: dict[str, PodGroup], keys: TermKeys
    ) -> None:
        self.keys = keys
        self.nidx = table.nidx
        self.vec = table.vec
        self.prios = prios
        self.pg_map = podgroups
        self.used = table.used
        self.node_ports = table.ports
        self.shapes: list[Shape] = []
        self.shape_idx: dict[Any, int] = {}
        self.tasks: dict[str, list[TaskInfo]] = {k: [] for k in podgroups}
        self.orphans: dict[str, str] = {}
        self.standalone_pgs: dict[str, PodGroup] = {}
        self.missing_node: dict[str, str] = {}

    def add(self, rec: PodRecord) -> None:
        """Account a pod on its node and, when it belongs to a job, add its task."""
        if rec.terminal:
            return
        if rec.requests is None:
            if not rec.node and rec.owned:
                self.orphans[rec.key] = rec.bad or "invalid resource requests"
            return
        ni = self.nidx.get(rec.node) if rec.node else None
        vec = self.vec(rec.requests)
        if ni is not None:
            self.used[ni] += vec
            self.node_ports[ni] |= rec.ports
        if rec.job is None:
            return  # a bound pod of no job (most of a busy cluster) only uses room
        if rec.group is None and (rec.node or rec.owned):
            # Volcano gives a group-less pod its own one-member PodGroup.
            self.standalone_pgs[rec.job] = rec.standalone_podgroup()
            self.tasks.setdefault(rec.job, [])
        joins, why = job_task_verdict(rec, self.pg_map.get(rec.job))
        if not joins:
            if why is not None:
                self.orphans[rec.key] = why
            return
        f = rec.task_fields()
        sig = (f.sig, label_class(rec.ns, f.labels, self.keys))
        sid = self.shape_idx.get(sig)
        if sid is None:
            sid = self.shape_idx[sig] = len(self.shapes)
            self.shapes.append(Shape(sid, vec, rec.cons))
            vec = vec.copy()  # the shape's vector is not shared with a task
        task = rec.task(sid, vec, self.prios.of(f.priority_class, f.priority))
        if rec.node and bind_task(task, rec.node, ni):
            self.missing_node[rec.key] = rec.node
        self.tasks[rec.job].append(task)

    def build(self, tree: HyperNodeTree, dra: DraObjects) -> dict[str, JobInfo]:
        """Every job of the listing (PodGroups, and one per group-less pending pod of ours)."""
        jobs: dict[str, JobInfo] = {}
        for gkey, pg in {**self.pg_map, **self.standalone_pgs}.items():
            prio = self.prios.of_podgroup(pg)
            tasks = self.tasks.get(gkey, [])
            pg = with_clique(pg, (self.shapes[t.shape].constraints.claims for t in tasks), dra)
            jobs[gkey] = build_job(pg, tasks, prio, tree.tier_names, tree.top_tier)
        return jobs
