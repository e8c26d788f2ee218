"""Immutable per-cycle view of the cluster: nodes as arrays, jobs, queues and the HyperNode tree.

Build with :meth:`ClusterSnapshot.build`. Nothing here is mutated by a session: the session
copies the ``used`` matrix into its own working state.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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

from .hypernode_tree import HyperNodeTree
from .jobs import JobInfo, TaskInfo, build_job
from .memo import Memo
from .node_filters import (
    NodeStatic,
    PodConstraints,
    compile_pod_constraints,
    node_static_from_dict,
    pod_host_ports,
    static_feasibility_mask,
)

HostPort = tuple[str, str, int]


@dataclass
class Shape:
    """A distinct pod shape: requests + static-constraint signature (+ host ports)."""

    id: int
    requests: npt.NDArray[np.int64]
    constraints: PodConstraints
    _mask: npt.NDArray[np.bool_] | None = None


@dataclass
class ClusterSnapshot:
    """Everything one scheduling cycle reads. Build with :meth:`build`."""

    node_names: list[str]
    node_static: list[NodeStatic]
    resources: list[str]  # resource names, column order of the matrices
    allocatable: npt.NDArray[np.int64]  # (N, R) milli
    used: npt.NDArray[np.int64]  # (N, R) milli, pods bound and not terminal
    node_ports: list[set[HostPort]]
    tree: HyperNodeTree
    jobs: dict[str, JobInfo]
    queues: dict[str, Queue]
    shapes: list[Shape]
    scheduler_names: tuple[str, ...]
    orphan_pods: dict[str, str] = field(default_factory=dict)  # pending pods we cannot place, with reason
    standalone: list[str] = field(default_factory=list)  # job keys synthesised for group-less pods
    # Gang pods bound to a node with no Node object: counted as running (as Volcano does), not placed.
    missing_node_pods: dict[str, str] = field(default_factory=dict)  # pod key -> node name
    build_seconds: float = 0.0
    plain_mask: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    _sig_masks: dict[Any, npt.NDArray[np.bool_]] = field(default_factory=dict)
    # What sessions derive from this snapshot alone, computed by the first and reused.
    memo: Memo = field(default_factory=Memo)

    @property
    def num_nodes(self) -> int:
        """Number of nodes (N)."""
        return len(self.node_names)

    def res_index(self, name: str) -> int | None:
        """Column of a resource in the matrices, or None."""
        try:
            return self.resources.index(name)
        except ValueError:
            return None

    def static_mask(self, shape: Shape) -> npt.NDArray[np.bool_]:
        """Per-node static feasibility of a shape, cached per constraint signature."""
        if shape._mask is None:
            c = shape.constraints
            sig = c.signature
            m = self._sig_masks.get(sig)
            if m is None:
                if not c.node_selector and c.required_terms is None and not c.tolerations:
                    # No selector, affinity or tolerations: node_reason reduces to "ready, schedulable
                    # and no NoSchedule/NoExecute taint", precomputed per node at build time.
                    m = self.plain_mask
                else:
                    m = np.asarray(static_feasibility_mask(c, self.node_static), dtype=bool)
                self._sig_masks[sig] = m
            shape._mask = m
        return shape._mask

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls,
        nodes: Sequence[dict[str, Any]],
        pods: Iterable[dict[str, Any]],
        hypernodes: Sequence[HyperNode] = (),
        podgroups: Sequence[PodGroup] = (),
        queues: Sequence[Queue] = (),
        priority_classes: Sequence[dict[str, Any]] = (),
        scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER_NAME,),
        members: MemberIndex | None = None,
    ) -> ClusterSnapshot:
        """Index nodes, account running pods, group pending pods into jobs and resolve the tree.

        ``members`` is a long-lived member index to bring up to date with these nodes and
        HyperNodes and resolve from (only what changed since its last use is re-resolved).
        """
        t0 = time.perf_counter()
        nodes = sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name", "")))
        names = [str((n.get("metadata") or {}).get("name", "")) for n in nodes]
        nidx = {n: i for i, n in enumerate(names)}
        statics = [node_static_from_dict(n) for n in nodes]
        alloc_maps: list[dict[str, int]] = []
        res_set: dict[str, None] = {"cpu": None, "memory": None, "pods": None}
        for n, st in zip(nodes, statics, strict=True):
            # NodeStatic already parsed (and validated) status.allocatable; it falls back to
            # capacity when allocatable is absent, the matrices do not.
            m: dict[str, int] = dict(st.allocatable) if (n.get("status") or {}).get("allocatable") else {}
            for r in m:
                res_set.setdefault(r, None)
            # A Node object always reports allocatable pods; test fixtures often omit it, and a
            # missing value would make every node refuse every pod, so default to kubelet's 110.
            m.setdefault("pods", 110_000)
            alloc_maps.append(m)
        pods = list(pods)
        pod_reqs: list[dict[str, int] | None] = []
        bad_pods: dict[str, str] = {}
        for p in pods:
            try:
                rq: dict[str, int] | None = pod_requests(p)
            except ResourceError as exc:
                rq = None
                bad_pods[object_key(p)] = str(exc)
            pod_reqs.append(rq)
            for r in rq or ():
                res_set.setdefault(r, None)
        resources = list(res_set)
        ridx = {r: i for i, r in enumerate(resources)}
        n_nodes, n_res = len(nodes), len(resources)
        alloc = np.zeros((n_nodes, n_res), dtype=np.int64)
        for i, m in enumerate(alloc_maps):
            for r, v in m.items():
                alloc[i, ridx[r]] = v
        used = np.zeros((n_nodes, n_res), dtype=np.int64)
        node_ports: list[set[HostPort]] = [set() for _ in nodes]
        owned = tuple(scheduler_names)

        def vec(rq: dict[str, int]) -> npt.NDArray[np.int64]:
            v = np.zeros(n_res, dtype=np.int64)
            for r, q in rq.items():
                v[ridx[r]] = q
            return v

        pcs = {str((pc.get("metadata") or {}).get("name", "")): pc for pc in priority_classes}
        default_prio = 0
        for pc in priority_classes:
            if pc.get("globalDefault"):
                default_prio = int(pc.get("value", 0))

        def prio_of(name: str | None, explicit: Any = None) -> int:
            if explicit is not None:
                return int(explicit)
            if name and name in pcs:
                return int(pcs[name].get("value", 0))
            return default_prio

        # The same {name: str labels} node_labels_of would build, already made per node above.
        node_label_map = {st.name: dict(st.labels) for st in statics}
        if members is not None:
            members.sync_nodes(node_label_map)
            members.sync_hypernodes(hypernodes)
        tree = HyperNodeTree.build(hypernodes, names, node_label_map, members)

        shapes: list[Shape] = []
        shape_idx: dict[Any, int] = {}
        pg_map = {pg.key: pg for pg in podgroups}
        job_tasks: dict[str, list[TaskInfo]] = {k: [] for k in pg_map}
        orphans: dict[str, str] = {}
        standalone_pgs: dict[str, PodGroup] = {}
        missing_node: dict[str, str] = {}
        for p, rq in zip(pods, pod_reqs, strict=True):
            meta = p.get("metadata") or {}
            spec = p.get("spec") or {}
            status = p.get("status") or {}
            ns = str(meta.get("namespace") or "default")
            pname = str(meta.get("name", ""))
            key = f"{ns}/{pname}"
            phase = status.get("phase", "Pending")
            node_name = spec.get("nodeName")
            if phase in TERMINAL_PHASES:
                continue
            if rq is None:
                if not node_name and spec.get("schedulerName", DEFAULT_SCHEDULER_NAME) in owned:
                    orphans[key] = bad_pods.get(key, "invalid resource requests")
                continue
            annotations = meta.get("annotations") or {}
            group = annotations.get(GROUP_NAME_ANNOTATION)
            if node_name and group is None:
                # A bound pod of no job (most of a busy cluster) only uses room: its host ports
                # are all we need, not its full constraints.
                ni = nidx.get(node_name)
                if ni is not None:
                    used[ni] += vec(rq)
                    hp = pod_host_ports(p)
                    if hp:
                        node_ports[ni] |= hp
                continue
            cons = compile_pod_constraints(p)
            if node_name:
                ni = nidx.get(node_name)
                if ni is not None:
                    used[ni] += vec(rq)
                    node_ports[ni] |= set(cons.host_ports)
            elif spec.get("schedulerName", DEFAULT_SCHEDULER_NAME) not in owned:
                continue  # another scheduler's pod
            labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
            if group is None:
                # Volcano gives a group-less pod its own one-member PodGroup.
                gkey = f"{ns}/podgroup-{pname}"
                standalone_pgs[gkey] = PodGroup.model_validate(
                    {
                        "metadata": {
                            "name": f"podgroup-{pname}",
                            "namespace": ns,
                            "creationTimestamp": meta.get("creationTimestamp"),
                        },
                        "spec": {"minMember": 1, "priorityClassName": spec.get("priorityClassName")},
                    }
                )
                job_tasks.setdefault(gkey, [])
            else:
                gkey = f"{ns}/{group}"
                if gkey not in pg_map:
                    if not node_name:
                        orphans[key] = f"PodGroup {gkey} not found"
                    continue
            if not node_name and cons.gated:
                orphans[key] = "pod has scheduling gates"
                continue
            if not node_name and cons.unsupported:
                # Placing such a pod could violate a constraint we do not evaluate: refuse loudly.
                orphans[key] = "unsupported constraints: " + ", ".join(cons.unsupported)
                continue
            sig = (tuple(sorted(rq.items())), cons.signature, tuple(sorted(cons.host_ports)))
            sid = shape_idx.get(sig)
            if sid is None:
                sid = len(shapes)
                shape_idx[sig] = sid
                shapes.append(Shape(sid, vec(rq), cons))
            role = str(annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or "")
            idx_raw = labels.get(TASK_INDEX_KEY) or annotations.get(TASK_INDEX_KEY)
            try:
                tindex: int | None = int(idx_raw) if idx_raw is not None else None
            except ValueError:
                tindex = None
            best_effort = all(v == 0 for r, v in rq.items() if r != "pods")
            task = TaskInfo(
                key=key,
                name=pname,
                namespace=ns,
                uid=str(meta.get("uid") or key),
                role=role,
                index=tindex,
                labels=labels,
                requests=vec(rq),
                shape=sid,
                priority=prio_of(spec.get("priorityClassName"), spec.get("priority")),
                creation=str(meta.get("creationTimestamp") or ""),
                best_effort=best_effort,
                priority_class=spec.get("priorityClassName"),
                preempt_never=spec.get("preemptionPolicy") == "Never",
            )
            if node_name:
                ni = nidx.get(node_name)
                if ni is None:
                    # Node object deleted under a running pod: Volcano still counts the pod for its
                    # gang (its status, not its node, makes it ready); no room or topology to add.
                    missing_node[key] = str(node_name)
                    ni = -1
                task.node = ni
                task.running = True
            job_tasks[gkey].append(task)

        queue_map = {q.name: q for q in queues}
        if DEFAULT_QUEUE not in queue_map:
            queue_map[DEFAULT_QUEUE] = Queue.model_validate({"metadata": {"name": DEFAULT_QUEUE}})
        jobs: dict[str, JobInfo] = {}
        all_pgs = {**pg_map, **standalone_pgs}
        for gkey, pg in all_pgs.items():
            prio = prio_of(pg.spec.priority_class_name)
            jobs[gkey] = build_job(pg, job_tasks.get(gkey, []), prio, tree.tier_names, tree.top_tier)
        snap = cls(
            node_names=names,
            node_static=statics,
            resources=resources,
            allocatable=alloc,
            used=used,
            node_ports=node_ports,
            tree=tree,
            jobs=jobs,
            queues=queue_map,
            shapes=shapes,
            scheduler_names=owned,
            orphan_pods=orphans,
            standalone=sorted(standalone_pgs),
            missing_node_pods=missing_node,
        )
        snap.plain_mask = np.array(
            [
                ns.ready
                and not ns.unschedulable
                and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in ns.taints)
                for ns in statics
            ],
            dtype=bool,
        )
        snap.build_seconds = time.perf_counter() - t0
        return snap
