"""kube-scheduler's NodeVolumeLimits filter (CSI): a node takes no more volumes of a CSI driver
than its CSINode's ``allocatable.count`` for that driver.

A volume is counted once per node however many pods use it: a bound claim by its
PersistentVolume's CSI driver and handle, an unbound one by its class's provisioner (a name of
its own, so two pods of one unbound claim count it once). The volumes already there are those of
the pods bound to the node (assumed ones included); the cycle's placements add theirs
(Reserve). VolumeAttachment objects and in-tree volumes migrated to CSI are not counted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .nodes import NodeStatic
from .plugin import I64, CompiledPod, CycleInput, LocalFilter
from .volumes import Storage

REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"

UniqueVolume = tuple[str, str]  # (driver, volume handle)


def unique_volume(storage: Storage, claim_key: str) -> UniqueVolume | None:
    """``getCSIDriverInfo``: the driver and handle a claim's volume counts as (None: not a CSI
    volume, or nothing to count)."""
    claim = storage.claims.get(claim_key)
    if claim is None:
        return None
    if claim.volume_name:
        v = storage.volumes.get(claim.volume_name)
        if v is not None:
            return v.csi
    if not claim.class_name:
        return None
    cls = storage.classes.get(claim.class_name)
    if cls is None:
        return None
    # Not provisioned yet: a handle of the claim's own, as kube-scheduler makes one.
    return (cls.provisioner, f"unbound-{claim_key}")


@dataclass
class LimitsState:
    """The attach limits of the nodes that publish any, and what each has attached."""

    storage: Storage
    nodes: Sequence[NodeStatic]
    limits: dict[int, dict[str, int]]  # node index -> driver -> count
    _attached: dict[int, dict[UniqueVolume, int]] = field(default_factory=dict)

    def attached(self, n: int) -> dict[UniqueVolume, int]:
        """The volumes on node ``n`` with the number of pods using each (made on first use)."""
        got = self._attached.get(n)
        if got is None:
            got = {}
            for use in self.storage.uses_by_node.get(self.nodes[n].name, {}).values():
                for key, _eph in use.claims:
                    u = unique_volume(self.storage, key)
                    if u is not None:
                        got[u] = got.get(u, 0) + 1
            self._attached[n] = got
        return got

    def new_volumes(self, pod: CompiledPod) -> set[UniqueVolume]:
        """The pod's volumes, as counted."""
        pv = pod.volumes
        out = set()
        for c in pv.claims:
            u = unique_volume(self.storage, pv.key(c))
            if u is not None:
                out.add(u)
        return out

    def exceeds(self, pod: CompiledPod, n: int) -> bool:
        """Some driver of the pod would be over its limit on node ``n``."""
        limits = self.limits.get(n)
        if not limits:
            return False
        new = self.new_volumes(pod)
        if not new:
            return False
        on = self.attached(n)
        want: dict[str, int] = {}
        for u in new:
            if u not in on:
                want[u[0]] = want.get(u[0], 0) + 1
        for driver, k in want.items():
            if driver in limits and sum(1 for u in on if u[0] == driver) + k > limits[driver]:
                return True
        return False


class NodeVolumeLimits(LocalFilter):
    """kube-scheduler's NodeVolumeLimits (CSI); see the module docstring."""

    name = "NodeVolumeLimits"

    def applies(self, state: Any, pod: CompiledPod) -> bool:
        """Pods with a claim."""
        return bool(pod.volumes.claims)

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """No bound of its own: pods sharing volumes add nothing after the first."""
        return None

    def cycle_state(self, snapshot: CycleInput) -> LimitsState:
        """The nodes whose CSINode publishes a limit."""
        csinodes = snapshot.storage.csinodes
        limits: dict[int, dict[str, int]] = {}
        if csinodes:
            for i, nd in enumerate(snapshot.node_static):
                c = csinodes.get(nd.name)
                if c is not None and c.limits:
                    limits[i] = dict(c.limits)
        return LimitsState(snapshot.storage, snapshot.node_static, limits)

    def pre_filter(self, state: LimitsState, pod: CompiledPod) -> str | None:
        """NodeVolumeLimits refuses no pod outright."""
        return None

    def node_reasons(self, state: LimitsState, pod: CompiledPod, node: int) -> tuple[str, ...]:
        """Over a driver's limit on ``node``."""
        return (REASON_MAX_VOLUME_COUNT,) if state.exceeds(pod, node) else ()

    def cap_counts(self, state: LimitsState, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """Zero on the nodes with a limit the pod's volumes would pass."""
        if not state.limits:
            return
        for k, n in enumerate(nodes):
            if counts[k] and n in state.limits and state.exceeds(pod, n):
                counts[k] = 0

    def reserve_one(self, state: LimitsState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The pod's volumes are attached on ``node`` too."""
        self._attach(state, pod, node, 1)
        return None

    def unreserve_one(self, state: LimitsState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The pod's volumes are given back on ``node``."""
        self._attach(state, pod, node, -1)
        return None

    def _attach(self, state: LimitsState, pod: CompiledPod, node: int, sign: int) -> None:
        if node not in state.limits:
            return  # no limit there: nothing to count
        on = state.attached(node)
        for u in state.new_volumes(pod):
            k = on.get(u, 0) + sign
            if k > 0:
                on[u] = k
            else:
                on.pop(u, None)


FILTER = NodeVolumeLimits()
