"""Our scheduler's verdict on one pod, from the same objects kube-scheduler saw.

The nodes, the pods already bound (``spec.nodeName``) and the pod asked about, with
``schedulerName: hyperplace``, go through the snapshot the scheduler builds from listings
(:func:`scheduler_plugin.cache.rebuild.build_snapshot`); a node is feasible when the session's
fit count of the pod's shape is positive there (:meth:`AllocState.compute_counts`: the static
filters' mask, the room by requests, the stateful filters' caps). Our scores of the feasible
nodes (:func:`our_scores`) come from the same snapshot (:func:`our_session`). A pod our scheduler refuses
outright (``PodRecord.refusal``: scheduling gates, or a constraint no filter of ours judges yet,
``scheduler_plugin/filters/unsupported.py``) is a verdict of its own, *refused*: such a pod is
reported, never placed."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.storage import StorageListing
from scheduler_plugin.filters import node_affinity, node_unschedulable, taint_toleration
from scheduler_plugin.filters.node_ports import REASON_HOST_PORTS, host_ports_conflict
from scheduler_plugin.filters.node_resources_fit import insufficient_resources
from scheduler_plugin.framework.alloc_state import AllocState
from scheduler_plugin.model.snapshot import ClusterSnapshot, Shape
from scheduler_plugin.placement.shortfall import Shortfall

from .kube_scheduler import SCORE_PLUGINS

OUR_SCHEDULER = "hyperplace"


@dataclass(frozen=True)
class OurVerdict:
    """Our verdict on one pod: the feasible nodes; when there are none, the
    ``0/N nodes are available: ...`` text our scheduler would report; when the pod is refused
    outright, why (and no nodes). ``reasons`` says why each infeasible node was refused."""

    nodes: frozenset[str]
    message: str | None = None
    refused: str | None = None
    reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The same filters asked in kube-scheduler's order (below), per infeasible node.
    kube_order: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The DynamicResources filter's reasons on every node it refuses, whatever the other
    # filters say there (kube-scheduler fails the whole pod on an allocator error of one node).
    dra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def as_ours(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as our scheduler would get it: the same object, addressed to us, not bound."""
    out = copy.deepcopy(dict(pod))
    spec = out.setdefault("spec", {})
    spec["schedulerName"] = OUR_SCHEDULER
    spec.pop("nodeName", None)
    return out


@dataclass(frozen=True)
class OurSession:
    """What our scheduler starts a session with for one pod: the snapshot built from the
    listings, the pod's key, the pod as we get it, and its shape, or why it is refused."""

    snap: ClusterSnapshot
    key: str
    pod: dict[str, Any]
    shape: Shape | None
    refused: str | None


def our_session(
    nodes: Sequence[Mapping[str, Any]],
    bound: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any],
    others: Sequence[Mapping[str, Any]] = (),
) -> OurSession:
    """The snapshot our scheduler builds with ``bound`` (pods with ``spec.nodeName``) running on
    ``nodes``, ``others`` (Namespaces, claims, volumes, classes, CSI objects, DRA objects) in the cluster and
    ``pod`` pending, addressed to us. Pass the objects as the apiserver stored them: admission
    adds tolerations, defaults fields and drops what a feature gate disables."""
    mine = as_ours(pod)
    meta = mine.get("metadata") or {}
    key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"

    def of(kind: str) -> list[dict[str, Any]]:
        return [dict(o) for o in others if o.get("kind") == kind]

    storage = StorageListing(
        claims=of("PersistentVolumeClaim"),
        volumes=of("PersistentVolume"),
        classes=of("StorageClass"),
        csinodes=of("CSINode"),
        drivers=of("CSIDriver"),
        capacities=of("CSIStorageCapacity"),
        device_classes=of("DeviceClass"),
        resource_slices=of("ResourceSlice"),
        resource_claims=of("ResourceClaim"),
        claim_templates=of("ResourceClaimTemplate"),
        device_taint_rules=of("DeviceTaintRule"),
    )
    snap = build_snapshot(
        [dict(n) for n in nodes],
        [*(dict(p) for p in bound), mine],
        scheduler_names=(OUR_SCHEDULER,),
        namespaces=of("Namespace"),
        storage=storage,
    )
    if key in snap.orphan_pods:
        return OurSession(snap, key, mine, None, snap.orphan_pods[key])
    shapes = {t.shape for job in snap.jobs.values() for t in job.tasks if t.key == key}
    assert len(shapes) == 1, f"{key}: expected one task of ours, found shapes {shapes}"
    return OurSession(snap, key, mine, snap.shapes[shapes.pop()], None)


def our_verdict(
    nodes: Sequence[Mapping[str, Any]],
    bound: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any],
    others: Sequence[Mapping[str, Any]] = (),
) -> OurVerdict:
    """Which of ``nodes`` our scheduler finds feasible for ``pod`` (the cluster as in
    :func:`our_session`)."""
    session = our_session(nodes, bound, pod, others)
    if session.shape is None:
        return OurVerdict(frozenset(), refused=session.refused)
    snap, shape, mine = session.snap, session.shape, session.pod
    state = AllocState(snap)
    counts = state.compute_counts(shape)
    feasible = frozenset(snap.node_names[i] for i in np.flatnonzero(counts > 0).tolist())
    message = None if feasible else Shortfall(snap, state).predicate_text(shape.id)
    # Why each other node was refused, in the order our filters ask: the static filters, then
    # room by requests, then host ports (what Shortfall.predicate_text words).
    res = snap.resources
    req = {res[i]: int(v) for i, v in enumerate(shape.requests.tolist()) if v > 0}
    cons = shape.constraints
    only = prefilter_node_names(mine)
    reasons: dict[str, tuple[str, ...]] = {}
    kube_order: dict[str, tuple[str, ...]] = {}
    refused_first = Shortfall(snap, state).pre_filtered(shape.id)
    if not feasible and refused_first is not None:
        # A PreFilter refused the pod: kube-scheduler says it once, for no node in particular.
        return OurVerdict(feasible, message, None, {"": (refused_first,)}, {"": (refused_first,)})
    stateful = [(f, fst) for f, fst in state.filters if f.applies(fst, cons) and f.name != "NodePorts"]
    dra: dict[str, tuple[str, ...]] = {}
    for f, fst in stateful:
        if f.name == "DynamicResources":
            every = f.reasons(fst, cons, np.arange(len(snap.node_names), dtype=np.int64))
            dra = {snap.node_names[i]: r for i, r in enumerate(every) if r}
    for i, name in enumerate(snap.node_names):
        if name in feasible:
            continue
        node = snap.node_static[i]
        free = {r: int(snap.allocatable[i, j] - state.used[i, j]) for j, r in enumerate(res)}
        short = tuple(insufficient_resources(req, free))
        ports = (REASON_HOST_PORTS,) if host_ports_conflict(cons.host_ports, snap.node_ports[i]) else ()
        static = cons.node_reason(node)
        # The other stateful filters, in kube-scheduler's order (after NodeResourcesFit).
        later: tuple[str, ...] = ()
        for f, fst in stateful:
            later = f.reasons(fst, cons, np.array([i], dtype=np.int64))[0]
            if later:
                break
        reasons[name] = (static,) if static else short or ports or later or ("refused by a stateful filter",)
        if only is not None and name not in only:
            kube_order[name] = (REASON_PREFILTER_NODE_AFFINITY,)
            continue
        in_order = (f.filter(cons, node) for f in KUBE_ORDER)
        first = next((r for r in in_order if r is not None), None)
        kube_order[name] = (first,) if first else ports or short or later or reasons[name]
    return OurVerdict(feasible, message, None, reasons, kube_order, dra)


@dataclass(frozen=True)
class OurScores:
    """Our normalized scores (0-100) of the feasible nodes for one pod, per scoring plugin that
    had something to score (as kube-scheduler's oracle-scorer profile weighs them: 1 each)."""

    by_plugin: Mapping[str, Mapping[str, float]]
    nodes: frozenset[str]

    @property
    def total(self) -> dict[str, float]:
        """Per node, the sum of the plugins' scores (what kube-scheduler picks the best of)."""
        return {n: sum(s[n] for s in self.by_plugin.values()) for n in sorted(self.nodes)}

    @property
    def best(self) -> frozenset[str]:
        """The nodes with the highest total: kube-scheduler picks one of them at random."""
        total = self.total
        top = max(total.values(), default=0.0)
        return frozenset(n for n, v in total.items() if v == top)

    @property
    def uniform(self) -> bool:
        """Whether every node scores the same total (then any choice is as good)."""
        return len(set(self.total.values())) <= 1


def our_scores(
    nodes: Sequence[Mapping[str, Any]],
    bound: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any],
    feasible: Iterable[str],
    others: Sequence[Mapping[str, Any]] = (),
) -> OurScores:
    """Our InterPodAffinity and PodTopologySpread scores of the ``feasible`` nodes for ``pod``
    (the cluster as in :func:`our_session`), normalized over those nodes as kube-scheduler
    normalizes over the nodes its filters passed."""
    session = our_session(nodes, bound, pod, others)
    assert session.shape is not None, f"{session.key}: refused by ours ({session.refused})"
    snap = session.snap
    names = sorted(feasible)
    index = {n: i for i, n in enumerate(snap.node_names)}
    idx = np.asarray([index[n] for n in names], dtype=np.int64)
    state = AllocState(snap)
    state.score_with(set(SCORE_PLUGINS))
    got = state.scores(session.shape, idx)
    by_plugin = {p: dict(zip(names, v.tolist(), strict=True)) for p, v in got.items()}
    return OurScores(by_plugin, frozenset(names))


# kube-scheduler's static filters, in its order (it has no NodeReady: a node that is not ready
# is kept off by its taint).
KUBE_ORDER = (node_unschedulable.FILTER, taint_toleration.FILTER, node_affinity.FILTER)
# What kube-scheduler says of the nodes its NodeAffinity PreFilter left out (matchFields).
REASON_PREFILTER_NODE_AFFINITY = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def prefilter_node_names(pod: Mapping[str, Any]) -> frozenset[str] | None:
    """The nodes kube-scheduler's NodeAffinity PreFilter narrows a pod to (every required term
    names nodes with ``matchFields metadata.name In``), or None when it does not narrow. The
    other nodes are not filtered at all and are reported as not satisfying NodeAffinity."""
    required = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    names: set[str] = set()
    for term in required.get("nodeSelectorTerms") or []:
        term_names: set[str] | None = None
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In":
                values = set(f.get("values") or [])
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return frozenset(names) if required.get("nodeSelectorTerms") else None
