"""kube-scheduler's DynamicResources filter: a pod's ResourceClaims must be allocated, or
allocatable, on the node (``resource.k8s.io/v1``, structured parameters).

* PreFilter (``podResourceClaims``): every claim the pod names exists (one made from a template
  is found through the pod's ``status.resourceClaimStatuses``; until the resourceclaim controller
  made it the pod waits: "ResourceClaim not created yet"), is not being deleted, and a claim made
  from a template was made for this pod (its controller owner).
* Filter: the claims still to allocate must be allocatable there together, from the devices the
  node reaches that no other claim holds (:func:`.dra_allocator.allocate`, "cannot allocate all
  claims" or the allocator's error, naming the claim by ``namespace/name``); then an allocated
  claim's ``nodeSelector`` must admit the node ("resourceclaim not available on the node"). Go
  gives the allocator's reason first, even on a node where an allocated claim is not available.
* Reserve: the devices chosen on the node are taken for the claims (no other pod gets them this
  cycle: kube-scheduler's in-flight allocations), and a claim several pending pods share keeps
  its allocation for every later pod (they follow the first). What was chosen is what the
  binder's PreBind writes before the bind (:func:`decisions`): the claim's ``status.allocation``
  and the pod in ``status.reservedFor``.
* Unreserve: a placement undone gives its devices back; a running pod leaving (a victim) gives
  back the devices of the claims no other pod uses.

Verdicts are node masks per set of claim specs, kept per node with a version that moves when a
device the node reaches is taken or given back, so the pods of a 512-pod gang made from one
template cost one allocation per node, not one per pod and node."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .dra import AllocationInfo, ClaimSpec, DeviceId, DraObjects, PodClaims
from .dra_allocator import Allocated, ClaimAllocation, allocate, allocation_admits
from .nodes import NodeStatic
from .plugin import I64, CompiledPod, CycleInput, LocalFilter, pending_uses

REASON_NOT_AVAILABLE = "resourceclaim not available on the node"
# Pods of one claim template counted together on a node by the victim search (a node holds a
# few GPU pods, never more than this).
MAX_JOINT = 64

Mask = npt.NDArray[np.bool_]
Specs = tuple[ClaimSpec, ...]


@dataclass(frozen=True)
class Chosen:
    """A claim allocated by this cycle: on which node, how, and the devices it took."""

    node: int
    allocation: AllocationInfo
    devices: frozenset[DeviceId]


@dataclass
class _Pod:
    """A pod's claims as PreFilter sorts them (per pod signature, per cycle)."""

    refusal: str | None
    allocated: tuple[tuple[str, AllocationInfo], ...] = ()  # claim key, its allocation
    pending: tuple[tuple[str, ClaimSpec], ...] = ()  # claims to allocate: key, spec


def _devices_of(a: AllocationInfo) -> frozenset[DeviceId]:
    """The devices an allocation holds (an adminAccess result holds none)."""
    return frozenset((r.driver, r.pool, r.device) for r in a.results if not r.admin_access)


# How the allocator's errors name a claim: ``claim <label>, request ...`` or ``claim <label>:
# selector ...``; the verdicts are kept per set of specs, so the label is the claim's position.
_CLAIM_LABEL = re.compile(r"^claim (\d+)([,:] )")


def _named(reason: str, keys: Sequence[str]) -> str:
    """An allocator error with the claim's ``namespace/name`` for its position, as kube-scheduler
    names it (``klog.KObj(claim)``)."""
    m = _CLAIM_LABEL.match(reason)
    if m is None or int(m.group(1)) >= len(keys):
        return reason
    return f"claim {keys[int(m.group(1))]}{m.group(2)}{reason[m.end() :]}"


def claim_refusal(claims: PodClaims, objects: DraObjects) -> str | None:
    """``podResourceClaims``: why no node can take the pod, in kube-scheduler's words."""
    if claims.bad is not None:
        return claims.bad
    for ref in claims.refs:
        if ref.no_claim:
            continue  # the resourceclaim controller made no claim: nothing is needed
        if ref.claim_name is None:
            return f'pod "{claims.namespace}/{claims.pod}": ResourceClaim not created yet'
        claim = objects.claims.get(claims.key(ref))
        if claim is None:
            return f'resourceclaim.resource.k8s.io "{ref.claim_name}" not found'
        if claim.deleting:
            return f'resourceclaim "{claim.name}" is being deleted'
        if ref.template is not None and claim.owner_pod_uid != claims.uid:
            return (
                f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
                f"{claims.namespace}/{claims.pod} (Pod is not owner)"
            )
        if claim.bad is not None:
            return claim.bad
        if claim.allocation is None:
            if claim.spec.bad is not None:
                return claim.spec.bad
            for request, cls in claim.spec.classes:
                info = objects.classes.get(cls)
                if info is None:
                    return f"request {request}: device class {cls} does not exist"
                if info.bad is not None:
                    return info.bad
    return None


@dataclass
class DraState:
    """The cycle's view of the devices: what is in use, what this cycle chose, and the node
    verdicts per set of claim specs (see the module docstring)."""

    objects: DraObjects
    nodes: Sequence[NodeStatic]
    uses: dict[str, int]  # pending pods of the cycle per claim key
    # The devices held (allocated claims, then this cycle's choices): made at first use, so a
    # cycle whose pods all wait for their claims to be made reads no allocation.
    _in_use: set[DeviceId] | None = None
    chosen: dict[str, Chosen] = field(default_factory=dict)
    holders: dict[str, int] = field(default_factory=dict)  # pods placed this cycle per chosen claim
    # Pods holding an already-allocated claim (its reservedFor, then the placements and victims
    # of the cycle); when every one leaves, its devices come back.
    users: dict[str, int] = field(default_factory=dict)
    _held: set[str] = field(default_factory=set)  # allocated claims some pod held at the start
    _pods: dict[Any, _Pod] = field(default_factory=dict)
    _local: dict[DeviceId, int] = field(default_factory=dict)  # node-local device -> its node
    _ver: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _fits: dict[Specs, tuple[I64, Mask, list[Allocated | str | None]]] = field(default_factory=dict)
    _avail: dict[Any, Mask] = field(default_factory=dict)  # by frozen node selector
    _by_name: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._ver = np.zeros(len(self.nodes), dtype=np.int64)
        self._by_name = {n.name: i for i, n in enumerate(self.nodes)}
        self._local = self.objects.derive(  # read only
            "node-local devices", tuple(n.name for n in self.nodes), self._node_local
        )
        for key, c in self.objects.claims.items():
            if c.allocation is not None:
                self.users[key] = len(c.reserved_for)
                if c.reserved_for:
                    self._held.add(key)

    @property
    def in_use(self) -> set[DeviceId]:
        """The devices no claim may be given now."""
        if self._in_use is None:
            self._in_use = set(self.objects.allocated())
        return self._in_use

    @in_use.setter
    def in_use(self, value: set[DeviceId]) -> None:
        self._in_use = value

    def _node_local(self) -> dict[DeviceId, int]:
        out: dict[DeviceId, int] = {}
        for s in self.objects.slices.values():
            if s.node_name is not None and s.node_name in self._by_name:
                n = self._by_name[s.node_name]
                for d in s.devices:
                    out[d.id] = n
        return out

    # ------------------------------------------------------------------ pods
    def pod(self, pod: CompiledPod) -> _Pod:
        """The pod's claims sorted once per cycle."""
        pc = pod.claims
        sig = (pc.namespace, pc.uid, pc.refs, pc.bad)
        got = self._pods.get(sig)
        if got is None:
            got = self._pods[sig] = self._classify(pc)
        return got

    def _classify(self, pc: PodClaims) -> _Pod:
        refusal = claim_refusal(pc, self.objects)
        if refusal is not None:
            return _Pod(refusal)
        allocated: list[tuple[str, AllocationInfo]] = []
        pending: list[tuple[str, ClaimSpec]] = []
        for ref in pc.refs:
            if ref.no_claim:
                continue
            key = pc.key(ref)
            claim = self.objects.claims[key]
            if claim.allocation is not None:
                allocated.append((key, claim.allocation))
            elif not any(k == key for k, _ in pending):
                pending.append((key, claim.spec))
        return _Pod(None, tuple(allocated), tuple(pending))

    def _split(self, p: _Pod) -> tuple[list[tuple[str, AllocationInfo]], list[tuple[str, ClaimSpec]]]:
        """The pod's claims now: allocated (before the cycle or by it) and still to allocate."""
        fixed = list(p.allocated)
        todo: list[tuple[str, ClaimSpec]] = []
        for key, spec in p.pending:
            ch = self.chosen.get(key)
            if ch is not None:
                fixed.append((key, ch.allocation))
            else:
                todo.append((key, spec))
        return fixed, todo

    # ------------------------------------------------------------------ verdicts
    def available(self, allocation: AllocationInfo) -> Mask:
        """The nodes an allocation's node selector admits (per selector, per cycle: a shared
        claim this cycle gave back and allocated again elsewhere is judged by its new one)."""
        got = self._avail.get(allocation.node_selector)
        if got is None:
            got = self._avail[allocation.node_selector] = self._admitted(allocation)
        return got

    def _admitted(self, allocation: AllocationInfo) -> Mask:
        admits = allocation_admits(allocation)
        return np.fromiter((admits(x) for x in self.nodes), dtype=bool, count=len(self.nodes))

    def _entry(self, specs: Specs) -> tuple[I64, Mask, list[Allocated | str | None]]:
        got = self._fits.get(specs)
        if got is None:
            n = len(self.nodes)
            got = self._fits[specs] = (np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool), [None] * n)
        return got

    def attempt(self, specs: Specs, node: int) -> Allocated | str:
        """The allocation of claims with these specs on ``node`` now (claims labelled by their
        position), memoized until a device the node reaches changes hands."""
        vers, ok, results = self._entry(specs)
        if vers[node] != self._ver[node] or results[node] is None:
            got = allocate(
                [(str(i), s) for i, s in enumerate(specs)], self.nodes[node], self.objects, self.in_use
            )
            results[node] = got
            ok[node] = not isinstance(got, str)
            vers[node] = self._ver[node]
        out = results[node]
        assert out is not None
        return out

    def fit_mask(self, specs: Specs, idx: I64) -> Mask:
        """Where claims with these specs can be allocated now, for the nodes ``idx``."""
        vers, ok, _ = self._entry(specs)
        stale = idx[vers[idx] != self._ver[idx]]
        for n in stale.tolist():
            self.attempt(specs, n)
        return ok[idx]

    def fit_count(self, specs: Specs, node: int, upto: int) -> int:
        """How many pods, each with claims of these specs, could have them allocated on
        ``node`` together now (at most ``upto``)."""
        k = 0
        while k < min(upto, MAX_JOINT) and not isinstance(self.attempt(specs * (k + 1), node), str):
            k += 1
        return k

    def reasons(self, p: _Pod, node: int) -> tuple[str, ...]:
        """The Filter's reasons on ``node`` (empty: it passes)."""
        if p.refusal is not None:
            return (p.refusal,)
        fixed, todo = self._split(p)
        # As Go's Filter: the claims to allocate are allocated even where an allocated claim is
        # not available, and their failure is the reason given.
        if todo:
            got = self.attempt(tuple(s for _, s in todo), node)
            if isinstance(got, str):
                return (_named(got, [key for key, _ in todo]),)
        if any(not self.available(a)[node] for _key, a in fixed):
            return (REASON_NOT_AVAILABLE,)
        return ()

    # ------------------------------------------------------------------ taking devices
    def _moved(self, devices: frozenset[DeviceId], changed: set[int]) -> bool:
        """Devices changed hands: bump the versions of the nodes that reach them; True when
        one reaches beyond its node (every node is to be judged again)."""
        wide = False
        for d in devices:
            n = self._local.get(d)
            if n is None:
                wide = True
            else:
                self._ver[n] += 1
                changed.add(n)
        if wide:
            self._ver += 1
        return wide

    def take(self, p: _Pod, node: int) -> Sequence[int] | None:
        """A pod of ``p`` placed on ``node``: its claims' allocations kept."""
        if p.refusal is not None:
            return None
        changed: set[int] = set()
        wide = False
        for key, a in p.allocated:
            was = self.users.get(key, 0)
            self.users[key] = was + 1
            if was == 0 and key in self._held:
                # A victim put back (a plan undone): the devices it gave back are its again.
                devices = _devices_of(a)
                self.in_use |= devices
                wide |= self._moved(devices, changed)
        fixed, todo = self._split(p)
        for key, _a in fixed:
            if key in self.chosen:
                self.holders[key] = self.holders.get(key, 0) + 1
        fresh: list[str] = []
        if todo:
            got = self.attempt(tuple(s for _, s in todo), node)
            if isinstance(got, str):
                return None  # placed where the filter refused: nothing to keep (never expected)
            for ca in got.claims:
                key = todo[int(ca.claim)][0]
                devices = _devices_of(ca.allocation)
                self.chosen[key] = Chosen(node, ca.allocation, devices)
                self.holders[key] = 1
                self.in_use |= devices
                wide |= self._moved(devices, changed)
                fresh.append(key)
        if wide or any(self.uses.get(k, 0) > 1 for k in fresh):
            return range(len(self.nodes))  # the claim's other pods must now follow it
        return sorted(changed - {node}) or None

    def give_back(self, p: _Pod, node: int) -> Sequence[int] | None:
        """A placement of ``p`` on ``node`` undone, or a running pod of ``p`` leaving."""
        if p.refusal is not None:
            return None
        changed: set[int] = set()
        wide = False
        for key, a in p.allocated:
            left = self.users.get(key, 0) - 1
            self.users[key] = left
            if left == 0 and key in self._held:
                # Every pod holding the claim left (victims): its devices come back.
                devices = _devices_of(a)
                self.in_use -= devices
                wide |= self._moved(devices, changed)
        freed: list[str] = []
        for key, _spec in p.pending:
            held = self.holders.get(key, 0)
            if not held:
                continue
            if held > 1:
                self.holders[key] = held - 1
                continue
            del self.holders[key]
            ch = self.chosen.pop(key)
            self.in_use -= ch.devices
            wide |= self._moved(ch.devices, changed)
            freed.append(key)
        if wide or any(self.uses.get(k, 0) > 1 for k in freed):
            return range(len(self.nodes))
        return sorted(changed - {node}) or None


def pending_claim_uses(snapshot: CycleInput) -> dict[str, int]:
    """How many pods waiting to be placed use each ResourceClaim."""
    return pending_uses(
        snapshot, lambda c: (c.claims.key(r) for r in c.claims.refs if r.claim_name is not None)
    )


def decisions(state: DraState) -> dict[str, ClaimAllocation]:
    """The claims the cycle allocated, by ``namespace/name`` (what the binder's PreBind writes,
    with the pods that use them in ``reservedFor``, before it binds them)."""
    return {k: ClaimAllocation(k, ch.allocation) for k, ch in state.chosen.items()}


class DynamicResources(LocalFilter):
    """kube-scheduler's DynamicResources; see the module docstring."""

    name = "DynamicResources"
    # Victims change the verdict (a victim gives back the devices of the claims only it
    # holds): the victim search asks this filter with them gone, so a gang short of devices,
    # not of cpu, plans the evictions that free them.
    first_pod_bounds = True

    def applies(self, state: Any, pod: CompiledPod) -> bool:
        """Pods with ResourceClaims (kube-scheduler skips the others)."""
        return bool(pod.claims.refs) or pod.claims.bad is not None

    def cycle_state(self, snapshot: CycleInput) -> DraState | None:
        """The devices the snapshot shows, nothing chosen yet; None when no pod has a claim
        and no pod waits for one."""
        if snapshot.dra.empty and not any(c.claims.refs for c in snapshot.pending):
            return None
        return DraState(snapshot.dra, snapshot.node_static, pending_claim_uses(snapshot))

    def pre_filter(self, state: DraState, pod: CompiledPod) -> str | None:
        """Why no node can take the pod (a claim missing, being deleted, not the pod's)."""
        return state.pod(pod).refusal

    def node_reasons(self, state: DraState, pod: CompiledPod, node: int) -> tuple[str, ...]:
        """The Filter's reasons on ``node``."""
        return state.reasons(state.pod(pod), node)

    def cap_counts(self, state: DraState, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """Zero where the pod's claims are not available or cannot be allocated."""
        p = state.pod(pod)
        if p.refusal is not None:
            counts[:] = 0
            return
        idx = np.asarray(nodes, dtype=np.int64)
        ok = np.ones(len(idx), dtype=bool)
        fixed, todo = state._split(p)
        for _key, a in fixed:
            ok &= state.available(a)[idx]
        if todo:
            live = ok & (counts > 0)
            sub = idx[live]
            if len(sub):
                ok[live] = state.fit_mask(tuple(s for _, s in todo), sub)
        counts[~ok] = 0

    def one_pod_shape(self, state: DraState, pod: CompiledPod) -> bool:
        """Every claim of the pod was made from a template for it alone: its shape (which
        names its claims) is its own."""
        refs = pod.claims.refs
        return bool(refs) and all(r.template is not None and r.claim_name is not None for r in refs)

    def count_key(self, state: DraState, pod: CompiledPod) -> Any:
        """Pods whose claims all wait for allocation, with equal specs (the pods of one
        template: each is a shape of its own), share this key: the filter gives them the same
        counts on every node now, so they are counted once, and their room on a node is counted
        together by the victim search (:meth:`cap_counts_joint`). None for a pod with a claim
        allocated (before or by this cycle) or refused."""
        p = state.pod(pod)
        if p.refusal is not None:
            return None
        fixed, todo = state._split(p)
        if fixed or not todo:
            return None
        return tuple(spec for _key, spec in todo)

    def cap_counts_joint(self, state: DraState, pod: CompiledPod, nodes: I64, counts: I64) -> None:
        """How many pods with the claims of ``pod`` (see :meth:`count_key`) each node can give
        devices to together, at most ``counts``."""
        p = state.pod(pod)
        fixed, todo = state._split(p)
        if fixed or not todo:
            self.cap_counts(state, pod, nodes, counts)
            return
        specs = tuple(s for _, s in todo)
        idx = np.asarray(nodes, dtype=np.int64)
        for i in np.flatnonzero(counts > 0).tolist():
            counts[i] = state.fit_count(specs, int(idx[i]), int(counts[i]))

    def reserve_one(self, state: DraState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The claims' allocations on ``node`` are kept: devices taken, claims pinned."""
        return state.take(state.pod(pod), node)

    def unreserve_one(self, state: DraState, pod: CompiledPod, node: int) -> Sequence[int] | None:
        """The devices come back as the module docstring says."""
        return state.give_back(state.pod(pod), node)


FILTER = DynamicResources()
