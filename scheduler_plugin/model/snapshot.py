"""Immutable per-cycle view of the cluster: nodes as arrays, jobs, queues and the HyperNode tree.

The cache makes snapshots (``cache/cluster_state.py`` from events, ``cache/rebuild.py`` from
listings). Nothing here is mutated by a session: the session copies the ``used`` matrix into
its own working state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.api.podgroup import Queue

from ..filters.dra import DraObjects
from ..filters.nodes import NodeStatic
from ..filters.plugin import HostPort
from ..filters.pod_constraints import PodConstraints, static_feasibility_mask
from ..filters.pod_terms import BoundPods, ClassIndex, PodClass, TopologyIndex
from ..filters.volumes import Storage
from .hypernode_tree import HyperNodeTree
from .jobs import JobInfo
from .memo import Memo, MemoKey

# The bound pods' class ids and lookups, shared by the snapshots of one cache (node-free).
CLASS_INDEX: MemoKey[ClassIndex] = MemoKey("pod class index", node_free=True)

I64 = npt.NDArray[np.int64]

# Pods a node holds of a shape that requests nothing (never a limit in practice: every pod
# requests a "pods" slot).
UNBOUNDED = 1 << 20


def pods_fitting(free: I64, req: I64) -> I64:
    """How many pods requesting ``req`` each row of ``free`` (the same resource columns) holds:
    the fewest over the resources the pod requests, never below zero. The one rule for fit
    counts; callers apply a shape's node mask and host ports themselves."""
    pos = np.flatnonzero(req > 0)
    if not len(pos):
        return np.full(free.shape[0], UNBOUNDED, dtype=np.int64)
    # Column by column: on 20k nodes a fancy-indexed (N, k) copy costs five times as much.
    c = (free[:, pos[0]] // req[pos[0]]).astype(np.int64)
    for p in pos[1:]:
        np.minimum(c, free[:, p] // req[p], out=c)
    return np.maximum(c, 0, out=c)


def pods_fitting_many(free: I64, reqs: I64) -> I64:
    """:func:`pods_fitting` for several shapes at once: ``out[s, n]`` pods requesting
    ``reqs[s]`` row ``n`` of ``free`` holds (for the few nodes a placement touches, where one
    array operation over the shapes beats one call per shape)."""
    pos = reqs > 0
    q = free[None, :, :] // np.where(pos, reqs, 1)[:, None, :]
    out: I64 = np.where(pos[:, None, :], q, UNBOUNDED).min(axis=2)
    return np.maximum(out, 0, out=out)


@dataclass
class Shape:
    """A distinct pod shape: requests + static-constraint signature (+ host ports)."""

    id: int
    requests: npt.NDArray[np.int64]
    constraints: PodConstraints
    _mask: npt.NDArray[np.bool_] | None = None


@dataclass
class ClusterSnapshot:
    """Everything one scheduling cycle reads."""

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
    # PodDisruptionBudgets and ResourceQuotas as listed (the pdb and resourcequota plugins).
    pdbs: tuple[dict[str, Any], ...] = ()
    # HyperNode name -> its hot-spare annotations (hyperplace/api/spares.py), those that have any.
    spare_marks: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    quotas: tuple[dict[str, Any], ...] = ()
    # Bound pods by class with their node indices, for InterPodAffinity and PodTopologySpread
    # (empty while no pod has a term), and the namespaces' labels (namespaceSelector).
    pod_classes: list[tuple[PodClass, I64]] = field(default_factory=list)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    # The pod label keys some term of the cluster's pods reads (what the pod classes keep).
    term_keys: frozenset[str] = frozenset()
    _derived: dict[Any, object] = field(default_factory=dict)
    # What depends on the nodes' facts only (shared across snapshots while no node changed).
    _node_derived: dict[Any, object] = field(default_factory=dict)
    # Claims, volumes, classes and CSI objects, and the claims bound pods use (the volume filters).
    storage: Storage = field(default_factory=Storage)
    # DeviceClasses, ResourceSlices, ResourceClaims and their templates (DynamicResources).
    dra: DraObjects = field(default_factory=DraObjects)
    build_seconds: float = 0.0
    plain_mask: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    _sig_masks: dict[Any, npt.NDArray[np.bool_]] = field(default_factory=dict)
    # What sessions derive from this snapshot alone, computed by the first and reused.
    memo: Memo = field(default_factory=Memo)
    # What sessions derive from all the jobs, carried to the next snapshot of the same cache and
    # patched for the jobs that changed (a rebuilt snapshot starts empty).
    carry: Memo = field(default_factory=Memo)

    def bound_pods(self) -> BoundPods:
        """The bound pods as arrays (:class:`BoundPods`), made once per snapshot."""
        got = self._derived.get("bound pods")
        if got is None:
            index = self.carry.get(CLASS_INDEX)
            if index is None or len(index.classes) > 2 * len(self.pod_classes) + 1024:
                index = self.carry.put(CLASS_INDEX, ClassIndex())  # new, or mostly classes gone
            got = self._derived["bound pods"] = BoundPods(self.pod_classes, index)
        assert isinstance(got, BoundPods)
        return got

    @property
    def topology(self) -> TopologyIndex:
        """The nodes' topology domains per key, made once per snapshot."""
        got = self._node_derived.get("topology")
        if got is None:
            got = self._node_derived["topology"] = TopologyIndex(self.node_static)
        assert isinstance(got, TopologyIndex)
        return got

    @property
    def prefer_no_schedule(self) -> I64:
        """The indices of the nodes with a PreferNoSchedule taint (TaintToleration's score
        reads only those), found once while no node changed."""
        got = self._node_derived.get("prefer no schedule")
        if got is None:
            got = self._node_derived["prefer no schedule"] = np.array(
                [
                    i
                    for i, n in enumerate(self.node_static)
                    if any(t.get("effect") == "PreferNoSchedule" for t in n.taints)
                ],
                dtype=np.int64,
            )
        assert isinstance(got, np.ndarray)
        return got

    @property
    def pending_shapes(self) -> list[int]:
        """The ids of the shapes some pending pod has, in order, listed once per snapshot."""
        got = self._derived.get("pending shapes")
        if got is None:
            got = self._derived["pending shapes"] = sorted(
                {t.shape for j in self.jobs.values() for t in j.pending}
            )
        assert isinstance(got, list)
        return got

    @property
    def pending(self) -> list[PodConstraints]:
        """The compiled pods of the shapes some pending pod has (what the stateful filters start
        their state for), listed once per snapshot. Running pods have shapes too (a class each
        while some pod has a term); a filter judges them only as victims, with a state that
        pending pods called for."""
        got = self._derived.get("pending")
        if got is None:
            got = self._derived["pending"] = [self.shapes[s].constraints for s in self.pending_shapes]
        assert isinstance(got, list)
        return got

    @property
    def num_nodes(self) -> int:
        """Number of nodes (N)."""
        return len(self.node_names)

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
