"""kube-scheduler's VolumeBinding filter: a pod's claims must be bound, or bindable, on the node.

* PreFilter (``podHasPVCs``, ``GetPodVolumeClaims``): every claim exists, is not lost nor being
  deleted (an ephemeral one was made for this pod); a claim that is not fully bound and whose
  class is not ``WaitForFirstConsumer`` keeps the pod waiting ("pod has unbound immediate
  PersistentVolumeClaims").
* Filter (``FindPodVolumes``): a bound claim's PersistentVolume must exist and its node affinity
  match the node; an unbound ``WaitForFirstConsumer`` claim needs an available PersistentVolume
  that fits it on the node (class, size, access modes, selector, node affinity; the smallest,
  claims taken smallest first, as ``findMatchingVolumes`` does) or dynamic provisioning there
  (a provisioner, the class's allowed topologies, CSIStorageCapacity where the driver publishes
  it); a claim already annotated with a selected node provisions on that node only.
* Reserve: the chosen volume is taken for the claim (no other claim gets it this cycle) and the
  claim keeps its choice for every later pod that uses it (kube-scheduler's assume cache; here
  a second pod of the same claim follows the first rather than racing it). What was chosen is
  what the binder's PreBind writes (:func:`decisions`): the volume's ``claimRef``, or the
  claim's ``volume.kubernetes.io/selected-node``.

The verdicts of pods with one unbound claim are node masks kept in step with every choice (a
volume taken changes only the nodes its affinity covers, and only when the last such volume of
a pool goes), so a StatefulSet of a thousand claims costs no node-by-node walk per placement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .nodes import NodeStatic
from .plugin import I64, CompiledPod, CycleInput, LocalFilter, pending_uses
from .volumes import (
    NOT_SUPPORTED_PROVISIONER,
    Claim,
    PodVolumes,
    Storage,
    Volume,
    bytes_of,
    volume_fits_claim,
)

REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

Mask = npt.NDArray[np.bool_]


def claim_refusal(pv: PodVolumes, storage: Storage) -> str | None:
    """``podHasPVCs``: the first claim of the pod that makes it unschedulable outright."""
    for c in pv.claims:
        claim = storage.claims.get(pv.key(c))
        if claim is None:
            if c.ephemeral:
                return (
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{c.name}"'
                )
            return f'persistentvolumeclaim "{c.name}" not found'
        if claim.phase == "Lost":
            return f'persistentvolumeclaim "{c.name}" bound to non-existent persistentvolume "{claim.volume_name}"'
        if claim.deleting:
            return f'persistentvolumeclaim "{c.name}" is being deleted'
        if c.ephemeral and claim.controller_uid != pv.uid:
            return (
                f"PVC {claim.namespace}/{claim.name} was not created for pod {pv.namespace}/{pv.pod} "
                "(pod is not owner)"
            )
        if claim.bad is not None:
            return claim.bad
    return None


@dataclass(frozen=True)
class Decision:
    """What PreBind writes for one claim: bind it to ``volume`` (the PersistentVolume's
    ``claimRef``), or provision it on ``node`` (the claim's selected-node annotation)."""

    claim: str  # namespace/name
    volume: str | None = None
    node: str | None = None


@dataclass
class _Pod:
    """A pod's claims as PreFilter sorts them (per pod signature, per cycle)."""

    refusal: str | None
    bound: tuple[Claim, ...] = ()
    delayed: tuple[Claim, ...] = ()


class NodeIndex:
    """Node indices by label value, built per label key on first use."""

    def __init__(self, nodes: Sequence[NodeStatic]) -> None:
        self.nodes = nodes
        self._by_key: dict[str, dict[str, list[int]]] = {}
        self._groups: dict[Any, I64] = {}

    def with_label(self, key: str, value: str) -> list[int]:
        """Nodes whose label ``key`` is ``value``."""
        by = self._by_key.get(key)
        if by is None:
            by = {}
            for i, n in enumerate(self.nodes):
                v = n.labels.get(key)
                if v is not None:
                    by.setdefault(v, []).append(i)
            self._by_key[key] = by
        return by.get(value, [])

    def covered(self, v: Volume) -> I64:
        """The nodes a volume's node affinity admits (sorted indices), shared per affinity."""
        got = self._groups.get(v.affinity_key)
        if got is None:
            got = self._groups[v.affinity_key] = self._compute(v)
        return got

    def _compute(self, v: Volume) -> I64:
        n = len(self.nodes)
        if v.affinity is None:
            return np.arange(n, dtype=np.int64)
        simple = all(
            not t.get("matchFields")
            and t.get("matchExpressions")
            and all(e.get("operator") == "In" and e.get("values") for e in t.get("matchExpressions") or [])
            for t in v.affinity
        )
        if simple:
            # ``key In [values]`` terms (local volumes, zones): looked up, not walked.
            out: set[int] = set()
            for t in v.affinity:
                term: set[int] | None = None
                for e in t.get("matchExpressions") or []:
                    hit = {
                        i
                        for val in e.get("values") or []
                        for i in self.with_label(str(e.get("key")), str(val))
                    }
                    term = hit if term is None else term & hit
                out |= term or set()
            return np.array(sorted(out), dtype=np.int64)
        return np.flatnonzero([v.fits_node(nd.labels) for nd in self.nodes]).astype(np.int64)


@dataclass
class _Pool:
    """The available volumes a kind of claim may take (same class, size, access modes, mode,
    attributes class, selector), grouped by node affinity; ``cover[n]`` counts the groups that
    still have a volume on node ``n``."""

    groups: list[I64]  # node indices per group
    vols: list[list[Volume]]  # per group, smallest first
    avail: list[int]  # volumes not taken, per group
    cover: npt.NDArray[np.int32]
    _by_node: dict[int, list[int]] | None = None

    def groups_on(self, n: int) -> list[int]:
        """The groups whose affinity admits node ``n``."""
        if self._by_node is None:
            by: dict[int, list[int]] = {}
            for gi, nodes in enumerate(self.groups):
                for i in nodes.tolist():
                    by.setdefault(i, []).append(gi)
            self._by_node = by
        return self._by_node.get(n, [])


def _size(c: Claim) -> Any:
    return c.request if c.request is not None else 0


@dataclass
class BindingState:
    """VolumeBinding's cycle state: the storage view, the claims' choices so far, the volumes
    they took, and the pools and masks derived once per cycle."""

    storage: Storage
    nodes: Sequence[NodeStatic]
    uses: Mapping[str, int]  # pending pods per claim: a choice matters to the others
    index: NodeIndex = field(init=False)
    chosen: dict[str, Decision] = field(default_factory=dict)
    holders: dict[str, int] = field(default_factory=dict)  # placed pods per chosen claim
    taken: dict[str, str] = field(default_factory=dict)  # volume -> the claim it went to
    _pods: dict[Any, _Pod] = field(default_factory=dict)
    _pools: dict[Any, _Pool] = field(default_factory=dict)
    _pools_of: dict[str, list[tuple[_Pool, int]]] = field(default_factory=dict)  # volume -> (pool, group)
    _prebound: dict[str, list[Volume]] | None = None
    _provision: dict[Any, Mask] = field(default_factory=dict)
    _bound: dict[str, Mask] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = NodeIndex(self.nodes)

    # ------------------------------------------------------------------ PreFilter
    def pod(self, pod: CompiledPod) -> _Pod:
        """The pod's claims, sorted into bound and delayed (or why it is refused)."""
        pv = pod.volumes
        sig = pv.signature
        got = self._pods.get(sig)
        if got is None:
            got = self._pods[sig] = self._classify(pv)
        return got

    def _classify(self, pv: PodVolumes) -> _Pod:
        if pv.bad is not None:
            return _Pod(pv.bad)
        why = claim_refusal(pv, self.storage)
        if why is not None:
            return _Pod(why)
        bound: list[Claim] = []
        delayed: list[Claim] = []
        immediate = False
        for c in pv.claims:
            claim = self.storage.claims[pv.key(c)]
            if claim.fully_bound:
                vol = self.storage.volumes.get(claim.volume_name)
                if vol is not None and vol.bad is not None:
                    return _Pod(vol.bad)  # its node affinity cannot be read: named, not guessed
                bound.append(claim)
                continue
            cls = self.storage.classes.get(claim.class_name) if claim.class_name else None
            if cls is not None and cls.delay_binding and not claim.volume_name:
                if cls.bad is not None:
                    return _Pod(cls.bad)
                delayed.append(claim)
            else:
                immediate = True
        if immediate:
            return _Pod(REASON_UNBOUND_IMMEDIATE)
        return _Pod(None, tuple(bound), tuple(delayed))

    # ------------------------------------------------------------------ volumes
    def prebound(self, claim: Claim) -> Volume | None:
        """The first volume of the claim's class whose claimRef already names the claim and
        that fits it (``FindMatchingVolume`` answers with it, or nothing, on any node)."""
        if self._prebound is None:
            by: dict[str, list[Volume]] = {}
            for v in sorted(self.storage.volumes.values(), key=lambda v: v.name):
                if v.claim_ref is not None:
                    by.setdefault(f"{v.claim_ref[0]}/{v.claim_ref[1]}", []).append(v)
            self._prebound = by
        for v in self._prebound.get(claim.key, ()):
            if v.class_name == claim.class_name and v.bound_to(claim) and volume_fits_claim(claim, v):
                return v
        return None

    def pool(self, claim: Claim) -> _Pool:
        """The available volumes claims like ``claim`` choose from (shared by such claims)."""
        key = (
            claim.class_name,
            claim.request,
            frozenset(claim.access_modes),
            claim.volume_mode,
            claim.attributes_class,
            claim.selector_key,
        )
        pool = self._pools.get(key)
        if pool is not None:
            return pool
        by_aff: dict[Any, list[Volume]] = {}
        for v in self.storage.volumes_of_class(claim.class_name):
            if v.claim_ref is None and volume_fits_claim(claim, v):
                by_aff.setdefault(v.affinity_key, []).append(v)
        groups: list[I64] = []
        vols: list[list[Volume]] = []
        avail: list[int] = []
        cover = np.zeros(len(self.nodes), dtype=np.int32)
        for members in by_aff.values():
            members.sort(key=lambda v: (v.capacity, v.name))
            gi = len(groups)
            nodes = self.index.covered(members[0])
            groups.append(nodes)
            vols.append(members)
            free = sum(1 for v in members if v.name not in self.taken)
            avail.append(free)
            if free:
                cover[nodes] += 1
        pool = self._pools[key] = _Pool(groups, vols, avail, cover)
        for gi, members in enumerate(vols):
            for v in members:
                self._pools_of.setdefault(v.name, []).append((pool, gi))
        return pool

    def match(self, claim: Claim, n: int, exclude: set[str]) -> Volume | None:
        """``FindMatchingVolume`` on node ``n``: the claim's pre-bound volume if its affinity
        admits the node, else the smallest available one there not taken nor in ``exclude``."""
        pre = self.prebound(claim)
        if pre is not None:
            return pre if pre.fits_node(self.nodes[n].labels) else None
        pool = self.pool(claim)
        best: Volume | None = None
        for gi in pool.groups_on(n):
            if not pool.avail[gi]:
                continue
            for v in pool.vols[gi]:
                if v.name in self.taken or v.name in exclude:
                    continue
                if best is None or (v.capacity, v.name) < (best.capacity, best.name):
                    best = v
                break
        return best

    def _take(self, v: Volume, claim: str, sign: int, changed: set[int]) -> None:
        """Volume ``v`` goes to ``claim`` (sign 1) or comes back (-1); the nodes where a pool
        lost its last volume, or got one back, are added to ``changed``."""
        if sign > 0:
            self.taken[v.name] = claim
        else:
            self.taken.pop(v.name, None)
        for pool, gi in self._pools_of.get(v.name, ()):
            before = pool.avail[gi]
            pool.avail[gi] -= sign
            if (before == 0) != (pool.avail[gi] == 0):
                pool.cover[pool.groups[gi]] += 1 if before == 0 else -1
                changed.update(pool.groups[gi].tolist())

    # ------------------------------------------------------------------ provisioning
    def provision_ok(self, claim: Claim, n: int) -> tuple[bool, bool]:
        """``checkVolumeProvisions`` for one claim on node ``n``: (provisionable, enough
        storage)."""
        cls = self.storage.classes.get(claim.class_name)
        if cls is None or cls.provisioner in ("", NOT_SUPPORTED_PROVISIONER):
            return False, True
        labels = self.nodes[n].labels
        if not cls.allows(labels):
            return False, True
        return True, self._capacity_ok(cls.provisioner, cls.name, claim, labels)

    def _capacity_ok(self, provisioner: str, cls: str, claim: Claim, labels: Mapping[str, str]) -> bool:
        """``hasEnoughCapacity``: no size asked, no CSIDriver, or a driver that publishes no
        capacity means enough; else some CSIStorageCapacity of the class that reaches the node
        must hold the size."""
        if claim.request is None:
            return True
        driver = self.storage.drivers.get(provisioner)
        if driver is None or not driver.storage_capacity:
            return True
        size = bytes_of(claim.request)
        return any(
            cap.class_name == cls
            and cap.limit is not None
            and bytes_of(cap.limit) >= size
            and cap.reaches(labels)
            for cap in self.storage.capacities.values()
        )

    def provision_mask(self, claim: Claim) -> Mask:
        """Where the claim could be provisioned (shared by claims of one class and size)."""
        key = (claim.class_name, claim.request)
        got = self._provision.get(key)
        if got is None:
            got = np.fromiter(
                (all(self.provision_ok(claim, n)) for n in range(len(self.nodes))),
                dtype=bool,
                count=len(self.nodes),
            )
            self._provision[key] = got
        return got

    # ------------------------------------------------------------------ Filter
    def find(self, p: _Pod, n: int) -> tuple[tuple[str, ...], list[tuple[Claim, Volume]], list[Claim]]:
        """``FindPodVolumes`` on node ``n``: (reasons, volumes to bind, claims to provision)."""
        node = self.nodes[n]
        bound_ok = pv_found = unbound_ok = space_ok = True
        static: list[tuple[Claim, Volume]] = []
        provision: list[Claim] = []

        def reasons() -> tuple[str, ...]:
            out = []
            for ok, why in (
                (bound_ok, REASON_NODE_CONFLICT),
                (unbound_ok, REASON_BIND_CONFLICT),
                (space_ok, REASON_NOT_ENOUGH_SPACE),
                (pv_found, REASON_PV_NOT_EXIST),
            ):
                if not ok:
                    out.append(why)
            return tuple(out)

        for c in p.bound:
            v = self.storage.volumes.get(c.volume_name)
            if v is None:
                pv_found = False
                break
            if not v.fits_node(node.labels):
                bound_ok = False
                break
        if not p.delayed:
            return reasons(), static, provision
        to_match: list[Claim] = []
        to_provision: list[Claim] = []
        for c in p.delayed:
            d = self.chosen.get(c.key)
            if d is not None:  # chosen this cycle: later pods of the claim follow the choice
                if d.volume is not None:
                    v = self.storage.volumes.get(d.volume)
                    if v is None or not v.fits_node(node.labels):
                        unbound_ok = False
                        return reasons(), [], []
                    static.append((c, v))
                elif d.node != node.name:
                    unbound_ok = False
                    return reasons(), [], []
                else:
                    provision.append(c)
                continue
            if c.selected_node is not None:
                if c.selected_node != node.name:
                    unbound_ok = False
                    return reasons(), [], []
                to_provision.append(c)
            else:
                to_match.append(c)
        if to_match:
            mine: set[str] = set()
            for c in sorted(to_match, key=_size):  # claims smallest first, as byPVCSize
                v = self.match(c, n, mine)
                if v is None:
                    unbound_ok = False
                    to_provision.append(c)
                    continue
                mine.add(v.name)
                static.append((c, v))
        if to_provision:
            unbound_ok, space_ok = True, True
            for c in to_provision:
                unbound_ok, space_ok = self.provision_ok(c, n)
                if not (unbound_ok and space_ok):
                    break
            if unbound_ok and space_ok:
                provision += to_provision
        return reasons(), static, provision

    def volume_mask(self, name: str) -> Mask:
        """Nodes a volume's node affinity admits (none when the volume is missing), per cycle."""
        got = self._bound.get(name)
        if got is None:
            got = np.zeros(len(self.nodes), dtype=bool)
            v = self.storage.volumes.get(name)
            if v is not None:
                got[self.index.covered(v)] = True
            self._bound[name] = got
        return got

    def node_named(self, name: str) -> Mask:
        """The node called ``name`` (none when there is no such node)."""
        key = f"node:{name}"
        got = self._bound.get(key)
        if got is None:
            got = np.fromiter((nd.name == name for nd in self.nodes), dtype=bool, count=len(self.nodes))
            self._bound[key] = got
        return got

    def delayed_ok(self, c: Claim, idx: I64) -> Mask:
        """Which of nodes ``idx`` one unbound delayed claim could be bound or provisioned on
        now (masks made once per cycle, read at ``idx``: a refresh of a few nodes costs few)."""
        d = self.chosen.get(c.key)
        if d is not None:
            return (
                self.volume_mask(d.volume)[idx] if d.volume is not None else self.node_named(str(d.node))[idx]
            )
        if c.selected_node is not None:
            return self.node_named(c.selected_node)[idx] & self.provision_mask(c)[idx]
        pre = self.prebound(c)
        matched = self.volume_mask(pre.name)[idx] if pre is not None else self.pool(c).cover[idx] > 0
        return matched | self.provision_mask(c)[idx]


def pending_claim_uses(snapshot: CycleInput) -> dict[str, int]:
    """How many pods waiting to be placed use each claim."""
    return pending_uses(snapshot, lambda c: (c.volumes.key(v) for v in c.volumes.claims))


def decisions(state: BindingState) -> dict[str, Decision]:
    """The claims the cycle chose a volume or a node for, by ``namespace/name`` (what the
    binder's PreBind writes before it binds their pods)."""
    return dict(state.chosen)


class VolumeBinding(LocalFilter):
    """kube-scheduler's VolumeBinding; see the module docstring."""

    name = "VolumeBinding"
    # Evicting pods frees no volume a claim of this filter could take: the victim search asks it.
    victims_change_nothing = True

    def applies(self, state: Any, pod: CompiledPod) -> bool:
        """Pods with a claim (kube-scheduler skips the others)."""
        return bool(pod.volumes.claims) or pod.volumes.bad is not None

    def most_per_node(self, pod: CompiledPod) -> int | None:
        """No bound of its own: pods sharing a volume share it on any node."""
        return None

    def cycle_state(self, snapshot: CycleInput) -> BindingState:
        """The storage the snapshot holds, nothing chosen yet."""
        return BindingState(snapshot.storage, snapshot.node_static, pending_claim_uses(snapshot))

    def pre_filter(self, state: BindingState, pod: CompiledPod) -> str | None:
        """Why the pod cannot be placed anywhere (a missing, lost or unbound immediate claim)."""
        return state.pod(pod).refusal

    def node_reasons(self, state: BindingState, pod: CompiledPod, node: int) -> tuple[str, ...]:
        """``FindPodVolumes``' reasons on ``node``."""
        p = state.pod(pod)
        if p.refusal is not None:
            return (p.refusal,)
        return state.find(p, node)[0]

    def cap_counts(self, state: BindingState, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """Zero where the pod's claims cannot be bound: by node masks, node by node only for a
        pod with more than one unbound claim (they must not take the same volume)."""
        p = state.pod(pod)
        if p.refusal is not None:
            counts[:] = 0
            return
        idx = np.asarray(nodes, dtype=np.int64)
        ok = np.ones(len(idx), dtype=bool)
        for c in p.bound:
            ok &= state.volume_mask(c.volume_name)[idx]
        if len(p.delayed) == 1:
            ok &= state.delayed_ok(p.delayed[0], idx)
        counts[~ok] = 0
        if len(p.delayed) > 1:
            for k, n in enumerate(idx.tolist()):
                if counts[k] and state.find(p, n)[0]:
                    counts[k] = 0

    def reserve_one(self, state: BindingState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The claims' choices on ``node`` are kept: volumes taken, claims pinned."""
        p = state.pod(pod)
        if p.refusal is not None or not p.delayed:
            return None
        reasons, static, provision = state.find(p, node)
        if reasons:
            return None  # placed where the filter refused: nothing to keep (never expected)
        changed: set[int] = set()
        for c in p.delayed:
            state.holders[c.key] = state.holders.get(c.key, 0) + 1
        fresh: list[str] = []
        for c, v in static:
            if c.key not in state.chosen:
                state.chosen[c.key] = Decision(c.key, volume=v.name)
                state._take(v, c.key, 1, changed)
                fresh.append(c.key)
        for c in provision:
            if c.key not in state.chosen:
                state.chosen[c.key] = Decision(c.key, node=state.nodes[node].name)
                fresh.append(c.key)
        if any(state.uses.get(k, 0) > 1 for k in fresh):
            return range(len(state.nodes))  # the claim's other pods must now follow it
        return sorted(changed) or None

    def unreserve_one(self, state: BindingState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The last pod of a claim leaving gives its choice back."""
        p = state.pod(pod)
        if p.refusal is not None or not p.delayed:
            return None
        changed: set[int] = set()
        freed: list[str] = []
        for c in p.delayed:
            held = state.holders.get(c.key, 0)
            if not held:
                continue
            if held > 1:
                state.holders[c.key] = held - 1
                continue
            del state.holders[c.key]
            d = state.chosen.pop(c.key, None)
            if d is None:
                continue
            freed.append(c.key)
            if d.volume is not None:
                v = state.storage.volumes.get(d.volume)
                if v is not None:
                    state._take(v, c.key, -1, changed)
        if any(state.uses.get(k, 0) > 1 for k in freed):
            return range(len(state.nodes))
        return sorted(changed) or None


FILTER = VolumeBinding()
