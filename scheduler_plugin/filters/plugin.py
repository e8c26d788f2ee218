"""The contract every filter keeps, as kube-scheduler's filter plugins do.

A *static* filter judges a node from the pod's compiled constraints and the node alone (kube-
scheduler's Filter with no cycle state): its verdict is the same all cycle, so the snapshot caches
it per constraint signature as a node mask. A *stateful* filter's verdict depends on the pods
placed on a node so far in the cycle (kube-scheduler's PreFilter state plus Reserve and
Unreserve): the session's allocation state keeps one state per such filter, asks it to cap the
per-shape fit counts, and tells it of every tentative placement and every undo."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from .nodes import NodeStatic

if TYPE_CHECKING:  # volumes.py reads node affinity, which reads this module's protocols
    from .volumes import PodVolumes, Storage

HostPort = tuple[str, str, int]  # (protocol, hostIP, hostPort)
Toleration = tuple[str, str, str, str]  # canonical (key, operator, value, effect)
I64 = npt.NDArray[np.int64]


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
    def volumes(self) -> PodVolumes: ...


class CycleInput(Protocol):
    """What a stateful filter reads of the cycle's snapshot to start its state."""

    @property
    def node_ports(self) -> Sequence[set[HostPort]]: ...

    @property
    def node_static(self) -> Sequence[NodeStatic]: ...

    @property
    def storage(self) -> Storage: ...

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


class StatefulFilter(Protocol[S]):
    """A filter whose verdict on a node depends on the pods placed there so far this cycle."""

    name: str  # kube-scheduler's plugin name

    def applies(self, pod: CompiledPod) -> bool:
        """Whether the filter has anything to say about this pod (kube-scheduler's Skip)."""
        ...

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """The most pods like ``pod`` one node takes whatever else is placed there (None: no
        bound of the filter's own); what the state adds is :meth:`cap_counts`'."""
        ...

    def cycle_state(self, snapshot: CycleInput) -> S:
        """The filter's state at the start of a cycle, from what already runs."""
        ...

    def cap_counts(self, state: S, pod: CompiledPod, nodes: Sequence[int], counts: I64) -> None:
        """Lower ``counts[k]``, the pods like ``pod`` node ``nodes[k]`` could take by room, to
        what the filter allows there now (in place)."""
        ...

    def reserve(self, state: S, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """A pod like ``pod`` is placed on ``node`` tentatively. Returns the other nodes whose
        verdict for some pod changed with it (None: only ``node``'s), whose counts the
        allocation state then refreshes too."""
        ...

    def unreserve(self, state: S, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The placement :meth:`reserve` recorded is undone (or a running pod like ``pod``
        leaves ``node``). Returns as :meth:`reserve` does."""
        ...

    def pre_filter(self, state: S, pod: CompiledPod) -> str | None:
        """Why no node can take the pod, in kube-scheduler's words (its PreFilter refused the
        pod: ``0/N nodes are available: <this>.``), or None."""
        ...

    def node_reasons(self, state: S, pod: CompiledPod, node: int) -> tuple[str, ...]:
        """kube-scheduler's reasons for refusing ``node`` now (empty: it passes)."""
        ...


class PredicateError(ValueError):
    """A pod the filters cannot evaluate (a host port that is no port); the message names
    the pod and the field."""
