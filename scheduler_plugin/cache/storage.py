"""The storage objects the volume filters read, kept from watch events like the rest of the
cluster state: PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers
and CSIStorageCapacities, each parsed once per version (:mod:`..filters.volumes`), and which
claims the pods bound to a node use; beside them the objects of dynamic resource allocation
(DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates, parsed by
:mod:`..filters.dra`), which the DynamicResources filter reads as :meth:`StorageState.dra_view`.

Feed each kind (``claims``, ``volumes``, ``classes``, ``csinodes``, ``drivers``, ``capacities``;
``device_classes``, ``resource_slices``, ``resource_claims``, ``claim_templates``)
with ``set`` / ``remove`` (one object) or :meth:`StorageState.replace` (whole listings), and the
pods with :meth:`StorageState.set_pod`; take :meth:`StorageState.view` once per cycle: the same :class:`~..filters.volumes.Storage` while
nothing changed, else a new one (only the kinds that changed are copied)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from hyperplace.kube.objects import namespaced_key

from ..filters.dra import (
    DraObjects,
    apply_taint_rules,
    parse_claim_template,
    parse_device_class,
    parse_slice,
    parse_taint_rule,
)
from ..filters.dra import (
    parse_claim as parse_resource_claim,
)
from ..filters.volumes import (
    PodUse,
    Storage,
    parse_capacity,
    parse_claim,
    parse_csidriver,
    parse_csinode,
    parse_storage_class,
    parse_volume,
    pod_use,
)
from .records import detached, name_of

T = TypeVar("T")


@dataclass(frozen=True)
class StorageListing:
    """Whole listings of the storage kinds (a relist, or a from-scratch build)."""

    claims: Iterable[dict[str, Any]] = ()
    volumes: Iterable[dict[str, Any]] = ()
    classes: Iterable[dict[str, Any]] = ()
    csinodes: Iterable[dict[str, Any]] = ()
    drivers: Iterable[dict[str, Any]] = ()
    capacities: Iterable[dict[str, Any]] = ()
    device_classes: Iterable[dict[str, Any]] = ()
    resource_slices: Iterable[dict[str, Any]] = ()
    resource_claims: Iterable[dict[str, Any]] = ()
    claim_templates: Iterable[dict[str, Any]] = ()
    device_taint_rules: Iterable[dict[str, Any]] = ()


class _Kind(Generic[T]):
    """One kind: the objects as fed in (to compare a relist against) and what they parse to."""

    def __init__(
        self, parse: Callable[[Mapping[str, Any]], T], key: Callable[[Mapping[str, Any]], str], detach: bool
    ) -> None:
        self.parse, self.key, self.detach = parse, key, detach
        self.objs: dict[str, dict[str, Any]] = {}
        self.parsed: dict[str, T] = {}
        self.dirty = True

    def set(self, obj: dict[str, Any]) -> None:
        k = self.key(obj)
        self.objs[k] = detached(obj) if self.detach else obj
        self.parsed[k] = self.parse(obj)
        self.dirty = True

    def remove(self, key: str) -> None:
        if self.objs.pop(key, None) is not None:
            self.parsed.pop(key, None)
            self.dirty = True

    def replace(self, objs: Iterable[dict[str, Any]]) -> None:
        fresh = {self.key(o): o for o in objs}
        for k in [k for k in self.objs if k not in fresh]:
            self.remove(k)
        for k, o in fresh.items():
            prev = self.objs.get(k)
            if prev is None or (prev != o if self.detach else prev is not o):
                self.set(o)


class StorageState:
    """The storage kinds and the claims bound pods use; see the module docstring."""

    def __init__(self, *, detach: bool = False) -> None:
        """``detach``: keep copies (callers that change their objects in place)."""
        self.claims = _Kind(parse_claim, namespaced_key, detach)
        self.volumes = _Kind(parse_volume, name_of, detach)
        self.classes = _Kind(parse_storage_class, name_of, detach)
        self.csinodes = _Kind(parse_csinode, name_of, detach)
        self.drivers = _Kind(parse_csidriver, name_of, detach)
        self.capacities = _Kind(parse_capacity, namespaced_key, detach)
        # Dynamic resource allocation (resource.k8s.io/v1).
        self.device_classes = _Kind(parse_device_class, name_of, detach)
        self.resource_slices = _Kind(parse_slice, name_of, detach)
        self.resource_claims = _Kind(parse_resource_claim, namespaced_key, detach)
        self.claim_templates = _Kind(parse_claim_template, namespaced_key, detach)
        self.device_taint_rules = _Kind(parse_taint_rule, name_of, detach)
        self._dra_view: DraObjects | None = None
        # The claims of the bound pods, by node then pod. A view shares the inner dicts: one a
        # view holds is copied before it changes (a cycle copies the nodes whose pods changed,
        # not every pod's use), and the claims' users are counted as pods come and go.
        self._by_node: dict[str, dict[str, PodUse]] = {}
        self._owned: set[str] = set()  # nodes whose inner dict no view holds yet
        self._node_of: dict[str, str] = {}  # pod key -> node of its use
        self._users: dict[str, int] = {}
        self._uses_dirty = True
        self._view: Storage | None = None

    def _kinds(self) -> tuple[_Kind[Any], ...]:
        return (self.claims, self.volumes, self.classes, self.csinodes, self.drivers, self.capacities)

    def _dra_kinds(self) -> tuple[_Kind[Any], ...]:
        return (
            self.device_classes,
            self.resource_slices,
            self.resource_claims,
            self.claim_templates,
            self.device_taint_rules,
        )

    # ------------------------------------------------------------------ pods
    def set_pod(self, key: str, obj: Mapping[str, Any] | None) -> None:
        """A pod added, updated (as the scheduler sees it: assumed pods bound) or, with None,
        deleted: the claims it holds on its node, if it is bound and uses any."""
        use = None if obj is None else pod_use(obj)
        node = self._node_of.get(key)
        old = None if node is None else self._by_node[node][key]
        if old == use:
            return
        if old is not None and node is not None:
            inner = self._mutable(node)
            del inner[key]
            if not inner:
                del self._by_node[node]
                self._owned.discard(node)
            self._count(old, -1)
            del self._node_of[key]
        if use is not None:
            self._mutable(use.node)[key] = use
            self._node_of[key] = use.node
            self._count(use, +1)
        self._uses_dirty = True

    def _mutable(self, node: str) -> dict[str, PodUse]:
        """The node's uses, copied first if a view holds them."""
        if node not in self._owned:
            self._by_node[node] = dict(self._by_node.get(node, {}))
            self._owned.add(node)
        return self._by_node[node]

    def _count(self, use: PodUse, sign: int) -> None:
        """Bound pods per claim, counting ``persistentVolumeClaim`` volumes only (what
        kube-scheduler's ``IsPVCUsedByPods`` counts)."""
        for claim, ephemeral in use.claims:
            if ephemeral:
                continue
            n = self._users.get(claim, 0) + sign
            if n:
                self._users[claim] = n
            else:
                self._users.pop(claim, None)

    # ------------------------------------------------------------------ listings
    def replace(self, listing: StorageListing) -> None:
        """Every storage kind becomes exactly the listing's."""
        self.claims.replace(listing.claims)
        self.volumes.replace(listing.volumes)
        self.classes.replace(listing.classes)
        self.csinodes.replace(listing.csinodes)
        self.drivers.replace(listing.drivers)
        self.capacities.replace(listing.capacities)
        self.device_classes.replace(listing.device_classes)
        self.resource_slices.replace(listing.resource_slices)
        self.resource_claims.replace(listing.resource_claims)
        self.claim_templates.replace(listing.claim_templates)
        self.device_taint_rules.replace(listing.device_taint_rules)

    @property
    def changed(self) -> bool:
        """Something changed since the last :meth:`view`."""
        return self._uses_dirty or any(k.dirty for k in self._kinds())

    def dra_view(self) -> DraObjects:
        """The objects of dynamic resource allocation as one cycle reads them (the previous
        view while none changed; a view is never changed once made)."""
        prev = self._dra_view
        if prev is not None and not any(k.dirty for k in self._dra_kinds()):
            return prev
        devices_same = not (
            self.device_classes.dirty or self.resource_slices.dirty or self.device_taint_rules.dirty
        )
        for k in self._dra_kinds():
            k.dirty = False
        same = prev if devices_same else None  # a claim or template changed, not a device
        view = DraObjects(
            classes=same.classes if same is not None else dict(self.device_classes.parsed),
            # DeviceTaintRules taint the devices they pick, as kube-scheduler's slice tracker does.
            slices=same.slices
            if same is not None
            else apply_taint_rules(self.resource_slices.parsed, self.device_taint_rules.parsed),
            claims=dict(self.resource_claims.parsed),
            templates=dict(self.claim_templates.parsed),
        )
        if same is not None:
            view.carry_from(same)
        self._dra_view = view
        return view

    def view(self) -> Storage:
        """The storage as one cycle reads it (the previous view while nothing changed)."""
        prev = self._view
        if prev is not None and not self.changed:
            return prev

        def take(kind: _Kind[Any], old: Mapping[str, Any] | None) -> Mapping[str, Any]:
            if old is not None and not kind.dirty:
                return old
            kind.dirty = False
            return dict(kind.parsed)

        view = Storage(
            claims=take(self.claims, prev.claims if prev else None),
            volumes=take(self.volumes, prev.volumes if prev else None),
            classes=take(self.classes, prev.classes if prev else None),
            csinodes=take(self.csinodes, prev.csinodes if prev else None),
            drivers=take(self.drivers, prev.drivers if prev else None),
            capacities=take(self.capacities, prev.capacities if prev else None),
            uses_by_node=prev.uses_by_node
            if prev is not None and not self._uses_dirty
            else dict(self._by_node),
            users=prev.users if prev is not None and not self._uses_dirty else dict(self._users),
        )
        self._owned.clear()  # the view holds every inner dict now
        self._uses_dirty = False
        self._view = view
        return view


def build_storage_view(
    listing: StorageListing | None, pods: Iterable[Mapping[str, Any]]
) -> tuple[Storage, DraObjects]:
    """The views a from-scratch build makes of the same listings (``pods``: all of them)."""
    state = StorageState()
    if listing is not None:
        state.replace(listing)
    for p in pods:
        state.set_pod(namespaced_key(p), p)
    return state.view(), state.dra_view()
