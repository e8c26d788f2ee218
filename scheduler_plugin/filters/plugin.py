"""The contract every filter keeps, as kube-scheduler's filter plugins do.

A *static* filter judges a node from the pod's compiled constraints and the node alone (kube-
scheduler's Filter with no cycle state): its verdict is the same all cycle, so the snapshot caches
it per constraint signature as a node mask. A *stateful* filter's verdict depends on the pods
placed on a node so far in the cycle (kube-scheduler's PreFilter state plus Reserve and
Unreserve): the session's allocation state keeps one state per such filter, asks it to cap the
per-shape fit counts, and tells it of every tentative placement and every undo.

A stateful filter is *local* when a placement changes its verdict on the placement's node only
(NodePorts): the session then keeps the counts of every shape current by recounting the touched
nodes. A non-local filter (InterPodAffinity, PodTopologySpread: a pod placed in a zone changes
the verdict on every node of the zone, or of every zone) makes the counts of the shapes it
applies to volatile: the session recounts them whenever a placement happened since."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from .nodes import NodeStatic

if TYPE_CHECKING:  # pod_terms and volumes read this module's protocols and error type
    from .dra import DraObjects, PodClaims
    from .pod_terms import BoundPods, PodClass, PodTerms, TopologyIndex
    from .volumes import PodVolumes, Storage

HostPort = tuple[str, str, int]  # (protocol, hostIP, hostPort)
Toleration = tuple[str, str, str, str]  # canonical (key, operator, value, effect)
I64 = npt.NDArray[np.int64]
MAX_NODE_SCORE = 100  # kube-scheduler's framework.MaxNodeScore


class CompiledPod(Protocol):
    """What the filters compiled of a pod once (PreFilter), as they read it back."""

    @property
    def host_ports(self) -> frozenset[HostPort]: ...

    @property
    def node_selector(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def required_terms(self) -> tuple[Mapping[str, Any], ...] | None: ...

    @property
    def tolerations(self) -> tuple[Toleration, ...]: ...

    @property
    def namespace(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def terms(self) -> PodTerms: ...

    @property
    def volumes(self) -> PodVolumes: ...

    @property
    def claims(self) -> PodClaims: ...


class CycleInput(Protocol):
    """What a stateful filter reads of the cycle's snapshot to start its state."""

    @property
    def node_ports(self) -> Sequence[set[HostPort]]: ...

    @property
    def node_static(self) -> Sequence[NodeStatic]: ...

    @property
    def pending(self) -> Sequence[CompiledPod]:
        """The compiled pods of the shapes pending pods of the cycle have."""
        ...

    @property
    def term_keys(self) -> frozenset[str]:
        """The pod label keys some inter-pod or spread term of the cluster's pods reads."""
        ...

    @property
    def pod_classes(self) -> Sequence[tuple[PodClass, I64]]:
        """The pods bound to nodes, by class, with the node index of each pod (empty when no
        pod of the cluster carries an inter-pod affinity or spread term)."""
        ...

    def bound_pods(self) -> BoundPods:
        """:attr:`pod_classes` as arrays."""
        ...

    @property
    def topology(self) -> TopologyIndex:
        """The nodes' topology domains per key."""
        ...

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]: ...

    @property
    def storage(self) -> Storage: ...

    @property
    def dra(self) -> DraObjects: ...

    @property
    def shapes(self) -> Sequence[Any]: ...  # each with ``.constraints`` (a CompiledPod)

    @property
    def jobs(self) -> Mapping[str, Any]: ...  # each with ``.pending`` tasks (``.shape``: a shape id)


class StaticFilter(Protocol):
    """A filter whose verdict on a node does not change within a cycle."""

    name: str  # kube-scheduler's plugin name

    def filter(self, pod: CompiledPod, node: NodeStatic) -> str | None:
        """None if ``node`` passes, else kube-scheduler's reason."""
        ...


S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)


class StatefulFilter(Protocol[S]):
    """A filter whose verdict on a node depends on the pods placed there so far this cycle."""

    name: str  # kube-scheduler's plugin name
    local: bool  # a placement changes the verdict on its own node only

    def cycle_state(self, snapshot: CycleInput) -> S | None:
        """The filter's state at the start of a cycle, from what already runs; None when no
        pod of the cycle needs the filter."""
        ...

    def applies(self, state: S, pod: CompiledPod) -> bool:
        """Whether the filter has anything to say about this pod (kube-scheduler's Skip)."""
        ...

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """The most pods like ``pod`` one node takes whatever else is placed there (None: no
        bound of the filter's own); what the state adds is :meth:`cap_counts`'."""
        ...

    def cap_counts(self, state: S, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """Lower ``counts[k]``, the pods like ``pod`` node ``nodes[k]`` could take by room, to
        what the filter allows there now (in place)."""
        ...

    def reasons(self, state: S, pod: CompiledPod, nodes: I64) -> list[tuple[str, ...]]:
        """kube-scheduler's reasons for each of ``nodes`` refusing one more pod like ``pod``
        now (empty where the filter lets it in)."""
        ...

    def cohorts(self, state: S, pod: CompiledPod) -> list[I64] | None:
        """Groups of nodes one of which must take every pod like ``pod`` while the first is
        still to be placed (the first pod of a group affine to itself decides where the rest
        go); None when the filter sets no such bound."""
        ...

    def batch_keys(self, state: S, pod: CompiledPod) -> list[str] | None:
        """Topology keys such that pods like ``pod`` placed in distinct domains of each key
        (and distinct nodes) do not change one another's verdict, so they may be placed in
        one step; None when only one may be placed at a time (non-local filters)."""
        ...

    def batch_quota(
        self, state: S, pod: CompiledPod, key: str, cand: I64, dom: I64, left: int
    ) -> list[int] | None:
        """Positions in ``cand`` (nodes in order of preference, ``dom`` their domains of
        ``key``, one of :meth:`batch_keys`) that up to ``left`` pods like ``pod`` may take in
        one step, each node one, with a valid order among them; None: one per domain."""
        ...

    def mark(self, state: S) -> int:
        """A token for "now", to ask :meth:`changed` later (non-local filters)."""
        ...

    def changed(self, state: S, pod: CompiledPod, since: int) -> I64 | None:
        """The nodes whose verdict for ``pod`` may have changed after the :meth:`mark` ``since``
        (None: possibly every node). Non-local filters only; the touched nodes themselves the
        session recounts anyway."""
        ...

    def pre_filter(self, state: S, pod: CompiledPod) -> str | None:
        """Why no node can take the pod, in kube-scheduler's words (its PreFilter refused the
        pod: ``0/N nodes are available: <this>.``), or None."""
        ...

    def reserve(self, state: S, pod: CompiledPod, nodes: I64) -> I64 | None:
        """Pods like ``pod`` are placed on ``nodes`` tentatively, one per entry (called for every
        placed pod, whether or not the filter applies to it: it may change the verdict for
        others). Their order does not matter. A local filter returns the other nodes whose
        verdict for some pod changed with them (a volume taken), which the session recounts
        too; None: only ``nodes``."""
        ...

    def unreserve(self, state: S, pod: CompiledPod, nodes: I64) -> I64 | None:
        """The placements :meth:`reserve` recorded are undone (or running pods leave); returns
        as :meth:`reserve` does."""
        ...


class ScoringFilter(Protocol[S_contra]):
    """A stateful filter whose plugin also scores (kube-scheduler's InterPodAffinity and
    PodTopologySpread): Score and NormalizeScore from the same counts, kept current by Reserve."""

    name: str

    def score(self, state: S_contra, pod: CompiledPod, nodes: I64) -> npt.NDArray[np.float64] | None:
        """Normalized scores (0-100) of ``nodes`` for ``pod``; None when the pod has nothing
        this plugin scores."""
        ...

    def soft_keys(self, state: S_contra, pod: CompiledPod) -> list[str]:
        """Topology keys in whose domains a placement of the pod changes the next one's scores
        (terms the pod matches itself); empty when placements do not interact so."""
        ...


class LocalFilter:
    """What a *local* stateful filter does by default (its placements change the verdict on
    their own nodes, or on the nodes :meth:`reserve` names): no node groups, no interaction
    keys, no change log; a subclass judges one node at a time (:meth:`node_reasons`) and records
    one placement at a time (:meth:`reserve_one`)."""

    local = True

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """No bound of its own."""
        return None

    def pre_filter(self, state: Any, pod: CompiledPod) -> str | None:
        """No refusal of the pod as a whole."""
        return None

    def node_reasons(self, state: Any, pod: CompiledPod, node: int) -> tuple[str, ...]:
        """kube-scheduler's reasons for refusing ``node`` now (empty: it passes)."""
        return ()

    def reasons(self, state: Any, pod: CompiledPod, nodes: I64) -> list[tuple[str, ...]]:
        """:meth:`node_reasons` per node."""
        return [self.node_reasons(state, pod, n) for n in nodes.tolist()]

    def cohorts(self, state: Any, pod: CompiledPod) -> list[I64] | None:
        """No group of nodes bounds the pods."""
        return None

    def batch_keys(self, state: Any, pod: CompiledPod) -> list[str] | None:
        """Nothing beyond the nodes themselves."""
        return []

    def batch_quota(
        self, state: Any, pod: CompiledPod, key: str, cand: I64, dom: I64, left: int
    ) -> list[int] | None:
        """Not asked of a local filter."""
        return None

    def mark(self, state: Any) -> int:
        """Local: the session recounts the nodes a placement touches or names."""
        return 0

    def changed(self, state: Any, pod: CompiledPod, since: int) -> I64 | None:
        """Local: not asked."""
        return None

    def reserve_one(self, state: Any, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """One pod like ``pod`` placed on ``node``; the other nodes whose verdict changed."""
        return None

    def unreserve_one(self, state: Any, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """One placement undone; as :meth:`reserve_one`."""
        return None

    def reserve(self, state: Any, pod: CompiledPod, nodes: I64) -> I64 | None:
        """:meth:`reserve_one` for each node; the other nodes they name."""
        return self._each(self.reserve_one, state, pod, nodes)

    def unreserve(self, state: Any, pod: CompiledPod, nodes: I64) -> I64 | None:
        """:meth:`unreserve_one` for each node; the other nodes they name."""
        return self._each(self.unreserve_one, state, pod, nodes)

    @staticmethod
    def _each(step: Any, state: Any, pod: CompiledPod, nodes: I64) -> I64 | None:
        more: list[int] = []
        for n in nodes.tolist():
            got = step(state, pod, n)
            if got:
                more.extend(got)
        return np.asarray(more, dtype=np.int64) if more else None


def pending_uses(snapshot: CycleInput, keys_of: Callable[[CompiledPod], Iterable[str]]) -> dict[str, int]:
    """How many pods waiting to be placed use each of the objects ``keys_of`` names of a pod
    (its volume claims, its ResourceClaims): a claim several of them share binds them together."""
    uses: dict[str, int] = {}
    shapes = snapshot.shapes
    for job in snapshot.jobs.values():
        for t in job.pending:
            for k in keys_of(shapes[t.shape].constraints):
                uses[k] = uses.get(k, 0) + 1
    return uses


def freeze(value: Any) -> Any:
    """A hashable, order-preserving copy of a JSON-like value (maps sorted by key): what a
    signature holds of a term given as wire data."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def default_normalize_score(scores: npt.NDArray[np.int64], reverse: bool) -> npt.NDArray[np.float64]:
    """kube-scheduler's ``DefaultNormalizeScore`` to 0-100 over the nodes scored: each score
    times 100 over the highest (whole numbers), reversed (100 minus it) for a count of bad
    things; with every score 0, all 0 (reversed: all 100)."""
    if not len(scores):
        return np.zeros(0)
    top = int(scores.max())
    if top == 0:
        return np.full(len(scores), float(MAX_NODE_SCORE if reverse else 0))
    out = (MAX_NODE_SCORE * scores) // top
    return (MAX_NODE_SCORE - out if reverse else out).astype(np.float64)


class PredicateError(ValueError):
    """A pod the filters cannot evaluate (a host port that is no port); the message names
    the pod and the field."""
