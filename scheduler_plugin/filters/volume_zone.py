"""kube-scheduler's VolumeZone filter: a bound claim's PersistentVolume labelled with a zone or a
region keeps the pod on nodes of that zone or region.

PreFilter reads each ``persistentVolumeClaim`` volume: a bound claim's volume must exist
(``persistentvolume "x" not found``); an unbound claim of a ``WaitForFirstConsumer`` class has
no zone yet. Filter: a node with none of the topology labels passes; otherwise every labelled
volume's zone (or region) set must hold the node's value (the beta label keys read as the GA
ones). A volume's labels do not change in a cycle, so the verdict is a node mask per set of
zones, made once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .nodes import NodeStatic
from .plugin import I64, CompiledPod, CycleInput, LocalFilter
from .volumes import WAIT_FOR_FIRST_CONSUMER, Storage

REASON_ZONE_CONFLICT = "node(s) had no available volume zone"
ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
REGION_BETA = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (ZONE_BETA, REGION_BETA, ZONE, REGION)
_GA = {ZONE_BETA: ZONE, REGION_BETA: REGION}
# A volume in several zones lists them in one label value, joined by this.
MULTI_ZONE_DELIMITER = "__"

Topology = tuple[tuple[str, frozenset[str]], ...]


def volume_topology(labels: dict[str, str] | Any) -> Topology:
    """``getPVTopologies``: (label key, zone set) for each topology label of a volume; a value
    with an empty part is ignored, as kube-scheduler ignores it."""
    out = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            parts = [p.strip() for p in str(labels[key]).split(MULTI_ZONE_DELIMITER)]
            if any(not p for p in parts):
                continue
            out.append((key, frozenset(parts)))
    return tuple(out)


def node_in_zones(labels: dict[str, str] | Any, topology: Topology) -> bool:
    """The VolumeZone Filter on one node's labels."""
    if not any(k in labels for k in TOPOLOGY_LABELS):
        return True
    for key, zones in topology:
        v = labels.get(key)
        if v is None:
            v = labels.get(_GA.get(key, key))
        if v is None or v not in zones:
            return False
    return True


@dataclass
class ZoneState:
    """Per pod signature, the PreFilter verdict and the volumes' zones; per zone set, a mask."""

    storage: Storage
    nodes: Sequence[NodeStatic]
    _pods: dict[Any, tuple[str | None, Topology]] = field(default_factory=dict)
    _masks: dict[Topology, npt.NDArray[np.bool_]] = field(default_factory=dict)

    def pod(self, pod: CompiledPod) -> tuple[str | None, Topology]:
        """(PreFilter refusal, the zones of the pod's bound volumes)."""
        pv = pod.volumes
        sig = pv.signature
        got = self._pods.get(sig)
        if got is None:
            got = self._pods[sig] = self._read(pod)
        return got

    def _read(self, pod: CompiledPod) -> tuple[str | None, Topology]:
        pv = pod.volumes
        if pv.bad is not None:
            return pv.bad, ()
        topo: list[tuple[str, frozenset[str]]] = []
        for c in pv.claims:
            if c.ephemeral:
                continue  # kube-scheduler reads persistentVolumeClaim volumes only here
            claim = self.storage.claims.get(pv.key(c))
            if claim is None:
                return f'persistentvolumeclaim "{c.name}" not found', ()
            if not claim.volume_name:
                if not claim.class_name:
                    return "PersistentVolumeClaim had no pv name and storageClass name", ()
                cls = self.storage.classes.get(claim.class_name)
                if cls is None:
                    return f'storageclass.storage.k8s.io "{claim.class_name}" not found', ()
                if cls.binding_mode == WAIT_FOR_FIRST_CONSUMER:
                    continue
                return "PersistentVolume had no name", ()
            v = self.storage.volumes.get(claim.volume_name)
            if v is None:
                return f'persistentvolume "{claim.volume_name}" not found', ()
            topo.extend(volume_topology(v.labels))
        return None, tuple(topo)

    def mask(self, topology: Topology) -> npt.NDArray[np.bool_]:
        """The nodes in every one of the zone sets."""
        got = self._masks.get(topology)
        if got is None:
            got = np.fromiter(
                (node_in_zones(n.labels, topology) for n in self.nodes), dtype=bool, count=len(self.nodes)
            )
            self._masks[topology] = got
        return got


class VolumeZone(LocalFilter):
    """kube-scheduler's VolumeZone; see the module docstring."""

    name = "VolumeZone"
    # Evicting pods frees no volume a claim of this filter could take: the victim search asks it.
    victims_change_nothing = True

    def applies(self, state: Any, pod: CompiledPod) -> bool:
        """Pods with a ``persistentVolumeClaim`` volume."""
        return pod.volumes.has_pvc

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """No bound of its own."""
        return None

    def cycle_state(self, snapshot: CycleInput) -> ZoneState:
        """The storage the snapshot holds."""
        return ZoneState(snapshot.storage, snapshot.node_static)

    def pre_filter(self, state: ZoneState, pod: CompiledPod) -> str | None:
        """A bound claim whose volume is missing (or a claim that cannot be read)."""
        return state.pod(pod)[0]

    def node_reasons(self, state: ZoneState, pod: CompiledPod, node: int) -> tuple[str, ...]:
        """The zone conflict on ``node``."""
        why, topo = state.pod(pod)
        if why is not None:
            return (why,)
        return () if not topo or state.mask(topo)[node] else (REASON_ZONE_CONFLICT,)

    def cap_counts(self, state: ZoneState, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """Zero outside the volumes' zones."""
        why, topo = state.pod(pod)
        if why is not None:
            counts[:] = 0
        elif topo:
            counts[~state.mask(topo)[np.asarray(nodes, dtype=np.int64)]] = 0

    def reserve_one(self, state: ZoneState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """Nothing changes: a volume's zone is read from the snapshot."""
        return None

    def unreserve_one(self, state: ZoneState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """Nothing changes."""
        return None


FILTER = VolumeZone()
