"""kube-scheduler's VolumeRestrictions filter, for claims: a ``ReadWriteOncePod`` claim another
pod already uses keeps the pod off every node.

PreFilter reads each ``persistentVolumeClaim`` volume's claim (a missing one refuses the pod:
``persistentvolumeclaim "x" not found``) and counts the pods bound to a node that use the pod's
``ReadWriteOncePod`` claims; placements of the cycle add to that count (Reserve), so two pods of
one such claim are never placed together. Conflicts between inline cloud disks (GCE PD, EBS,
RBD, iSCSI volumes written into the pod) are not judged here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .plugin import I64, CompiledPod, CycleInput, LocalFilter
from .volume_binding import pending_claim_uses
from .volumes import READ_WRITE_ONCE_POD, Storage

REASON_RWOP_CONFLICT = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"


@dataclass
class RestrictionsState:
    """Pods using each claim: the bound ones, plus the cycle's placements."""

    storage: Storage
    n_nodes: int
    pending: dict[str, int]  # pods waiting to be placed, per claim
    _rwop: dict[Any, tuple[str | None, tuple[str, ...]]] = field(default_factory=dict)
    _users: dict[str, int] | None = None

    @property
    def users(self) -> dict[str, int]:
        """Pods using each claim, counted from the bound pods when first asked (only a
        ReadWriteOncePod claim is ever asked about: most cycles never count them)."""
        if self._users is None:
            self._users = dict(self.storage.users)
        return self._users

    def rwop(self, pod: CompiledPod) -> tuple[str | None, tuple[str, ...]]:
        """(PreFilter refusal, the pod's ReadWriteOncePod claims), once per pod signature."""
        pv = pod.volumes
        sig = pv.signature
        got = self._rwop.get(sig)
        if got is None:
            if pv.bad is not None:
                got = (pv.bad, ())
            else:
                claims: list[str] = []
                why = None
                for c in pv.claims:
                    if c.ephemeral:
                        continue  # kube-scheduler reads persistentVolumeClaim volumes only here
                    claim = self.storage.claims.get(pv.key(c))
                    if claim is None:
                        why = f'persistentvolumeclaim "{c.name}" not found'
                        break
                    if READ_WRITE_ONCE_POD in claim.access_modes:
                        claims.append(claim.key)
                got = (why, tuple(claims) if why is None else ())
            self._rwop[sig] = got
        return got


class VolumeRestrictions(LocalFilter):
    """kube-scheduler's VolumeRestrictions (ReadWriteOncePod); see the module docstring."""

    name = "VolumeRestrictions"

    def applies(self, state: Any, pod: CompiledPod) -> bool:
        """Pods with a ``persistentVolumeClaim`` volume."""
        return pod.volumes.has_pvc

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """No bound known without the claims (:meth:`cap_counts` holds a ReadWriteOncePod
        claim's pods to one per node)."""
        return None

    def cycle_state(self, snapshot: CycleInput) -> RestrictionsState:
        """The bound pods' use of every claim (persistentVolumeClaim volumes)."""
        return RestrictionsState(snapshot.storage, len(snapshot.node_static), pending_claim_uses(snapshot))

    def pre_filter(self, state: RestrictionsState, pod: CompiledPod) -> str | None:
        """A ``persistentVolumeClaim`` whose claim does not exist."""
        return state.rwop(pod)[0]

    def node_reasons(self, state: RestrictionsState, pod: CompiledPod, node: int) -> tuple[str, ...]:
        """The ReadWriteOncePod conflict (the same on every node)."""
        why, claims = state.rwop(pod)
        if why is not None:
            return (why,)
        return (REASON_RWOP_CONFLICT,) if any(state.users.get(k, 0) for k in claims) else ()

    def cap_counts(self, state: RestrictionsState, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """None anywhere when a claim is refused or a ReadWriteOncePod claim is in use; at most
        one pod per node otherwise (the next one would find it in use)."""
        why, claims = state.rwop(pod)
        if why is None and not claims:
            return  # no ReadWriteOncePod claim: nothing to say
        if why is not None or any(state.users.get(k, 0) for k in claims):
            counts[:] = 0
        else:
            counts[counts > 1] = 1

    def reserve_one(self, state: RestrictionsState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The pod now uses its claims; a ReadWriteOncePod claim is then in use on every node."""
        return self._use(state, pod, 1)

    def unreserve_one(self, state: RestrictionsState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The pod no longer uses its claims."""
        return self._use(state, pod, -1)

    def _use(self, state: RestrictionsState, pod: CompiledPod, sign: int) -> Sequence[int] | None:
        flipped = False
        # Only a ReadWriteOncePod claim's use is ever asked about: the others are not counted.
        for k in state.rwop(pod)[1]:
            before = state.users.get(k, 0)
            after = max(before + sign, 0)
            state.users[k] = after
            if (before == 0) != (after == 0) and state.pending.get(k, 0) > 1:
                flipped = True
        # A ReadWriteOncePod claim coming into use (or out of it) changes every node for the
        # other pods that wait with it.
        return range(state.n_nodes) if flipped else None


FILTER = VolumeRestrictions()
