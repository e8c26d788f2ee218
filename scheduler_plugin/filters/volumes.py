"""What the volume filters read of the storage objects and of a pod's volumes, parsed once per
object version, and the cluster's storage as one immutable view a cycle reads.

The kinds are the ones kube-scheduler's volume plugins list: PersistentVolumeClaims,
PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities. An object
with a field the rules cannot read keeps a ``bad`` message naming the object and the field; a
pod that needs such an object waits with that message, and nothing crashes on it.

The rules here are the shared helpers of kube-scheduler's volume plugins
(``k8s.io/component-helpers/storage/volume``): a claim's class, whether it is fully bound, a
PersistentVolume's node affinity, and ``FindMatchingVolume``, the PersistentVolume controller's
and the scheduler's choice of the smallest available volume that fits a claim."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from hyperplace.kube import SelectorError
from hyperplace.kube.labels import label_selector_matches
from hyperplace.kube.quantity import QuantityError, parse_quantity

from .node_affinity import node_selector_term_matches_node
from .plugin import freeze

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
FILESYSTEM = "Filesystem"
VOLUME_AVAILABLE = "Available"
CLAIM_LOST = "Lost"


class VolumeError(ValueError):
    """A storage object or pod volume whose field cannot be read; the message names both."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    s = obj.get("spec")
    return s if isinstance(s, Mapping) else {}


def _strings(owner: str, path: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise VolumeError(f"{owner}: {path}: must be a list of strings, got {value!r}")
    return tuple(value)


def _quantity(owner: str, path: str, value: Any) -> Fraction:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError) as exc:
        raise VolumeError(f"{owner}: {path}: {exc}") from None


def _terms(owner: str, path: str, value: Any) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list) or not all(isinstance(t, Mapping) for t in value):
        raise VolumeError(f"{owner}: {path}: must be a list of NodeSelectorTerms, got {value!r}")
    return tuple(value)


def bytes_of(q: Fraction) -> int:
    """``Quantity.Value()``: the quantity in whole units, rounded up."""
    return math.ceil(q)


# ---------------------------------------------------------------------------------- claims
@dataclass(frozen=True)
class Claim:
    """A PersistentVolumeClaim as the volume filters read it."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    class_name: str = ""  # GetPersistentVolumeClaimClass: the beta annotation, else spec
    volume_name: str = ""
    bind_completed: bool = False
    selected_node: str | None = None
    phase: str = "Pending"
    deleting: bool = False
    access_modes: tuple[str, ...] = ()
    request: Fraction | None = None  # spec.resources.requests.storage (None: not asked)
    volume_mode: str = FILESYSTEM
    selector: Any = field(default=None, compare=False)  # spec.selector (a LabelSelector dict)
    selector_key: Any = None  # the selector, frozen (what equality compares)
    attributes_class: str = ""  # spec.volumeAttributesClassName
    controller_uid: str | None = None  # the UID of the owner that controls it (ephemeral volumes)
    bad: str | None = None

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def fully_bound(self) -> bool:
        """``isPVCFullyBound``: a volume name and the controller's bind-completed annotation."""
        return bool(self.volume_name) and self.bind_completed


def parse_claim(obj: Mapping[str, Any]) -> Claim:
    """A PersistentVolumeClaim in wire form, read once."""
    m, spec = _meta(obj), _spec(obj)
    ns, name = str(m.get("namespace") or "default"), str(m.get("name") or "")
    owner = f"persistentvolumeclaim {ns}/{name}"
    ann = m.get("annotations") if isinstance(m.get("annotations"), Mapping) else {}
    assert isinstance(ann, Mapping)
    base = Claim(
        namespace=ns,
        name=name,
        uid=str(m.get("uid") or ""),
        resource_version=str(m.get("resourceVersion") or ""),
        class_name=str(ann[ANN_BETA_STORAGE_CLASS])
        if ANN_BETA_STORAGE_CLASS in ann
        else str(spec.get("storageClassName") or ""),
        volume_name=str(spec.get("volumeName") or ""),
        bind_completed=ANN_BIND_COMPLETED in ann,
        selected_node=str(ann[ANN_SELECTED_NODE]) if ANN_SELECTED_NODE in ann else None,
        phase=str((obj.get("status") or {}).get("phase") or "Pending"),
        deleting=bool(m.get("deletionTimestamp")),
        controller_uid=_controller_uid(m),
    )
    try:
        modes = _strings(owner, "spec.accessModes", spec.get("accessModes"))
        resources = spec.get("resources") or {}
        requests = resources.get("requests") if isinstance(resources, Mapping) else None
        if requests is not None and not isinstance(requests, Mapping):
            raise VolumeError(f"{owner}: spec.resources.requests: must be a map, got {requests!r}")
        raw = (requests or {}).get("storage")
        request = None if raw is None else _quantity(owner, "spec.resources.requests.storage", raw)
        selector = spec.get("selector")
        if selector is not None:
            if not isinstance(selector, Mapping):
                raise VolumeError(f"{owner}: spec.selector: must be a label selector, got {selector!r}")
            label_selector_matches(selector, {})  # refuses an operator Kubernetes would refuse
    except SelectorError as exc:
        return _bad(base, f"{owner}: spec.selector: {exc}")
    except VolumeError as exc:
        return _bad(base, str(exc))
    return Claim(
        **{
            **base.__dict__,
            "access_modes": modes,
            "request": request,
            "volume_mode": str(spec.get("volumeMode") or FILESYSTEM),
            "selector": selector,
            "selector_key": freeze(selector),
            "attributes_class": str(spec.get("volumeAttributesClassName") or ""),
        }
    )


def _bad(base: Claim, why: str) -> Claim:
    return Claim(**{**base.__dict__, "bad": why})


def _controller_uid(m: Mapping[str, Any]) -> str | None:
    for ref in m.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(ref.get("uid") or "")
    return None


# ---------------------------------------------------------------------------------- volumes
@dataclass(frozen=True)
class Volume:
    """A PersistentVolume as the volume filters read it."""

    name: str
    resource_version: str = ""
    class_name: str = ""  # GetPersistentVolumeClass
    capacity: Fraction = Fraction(0)
    access_modes: tuple[str, ...] = ()
    volume_mode: str = FILESYSTEM
    attributes_class: str = ""
    phase: str = ""
    deleting: bool = False
    claim_ref: tuple[str, str, str] | None = None  # (namespace, name, uid)
    # spec.nodeAffinity.required.nodeSelectorTerms (ORed); None: no required affinity.
    affinity: tuple[Mapping[str, Any], ...] | None = field(default=None, compare=False)
    affinity_key: Any = None  # the affinity, frozen (equality, and volumes grouped by it)
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)
    labels_key: Any = None
    csi: tuple[str, str] | None = None  # (driver, volumeHandle)
    bad: str | None = None

    def bound_to(self, claim: Claim) -> bool:
        """``IsVolumeBoundToClaim``: the claimRef names the claim (and its UID, when set)."""
        if self.claim_ref is None:
            return False
        ns, name, uid = self.claim_ref
        return ns == claim.namespace and name == claim.name and (not uid or uid == claim.uid)

    def fits_node(self, labels: Mapping[str, str]) -> bool:
        """``CheckNodeAffinity``: the node's labels (only: the check builds a node of labels
        alone, so a matchFields term matches nothing) satisfy a required term."""
        if self.affinity is None:
            return True
        return any(node_selector_term_matches_node(t, "", labels) for t in self.affinity)


def parse_volume(obj: Mapping[str, Any]) -> Volume:
    """A PersistentVolume in wire form, read once."""
    m, spec = _meta(obj), _spec(obj)
    name = str(m.get("name") or "")
    owner = f"persistentvolume {name}"
    ann = m.get("annotations") if isinstance(m.get("annotations"), Mapping) else {}
    assert isinstance(ann, Mapping)
    labels = {str(k): str(v) for k, v in (m.get("labels") or {}).items()}
    ref = spec.get("claimRef")
    claim_ref = None
    if isinstance(ref, Mapping):
        claim_ref = (str(ref.get("namespace") or ""), str(ref.get("name") or ""), str(ref.get("uid") or ""))
    csi_src = spec.get("csi")
    csi = None
    if isinstance(csi_src, Mapping) and csi_src.get("driver"):
        csi = (str(csi_src.get("driver")), str(csi_src.get("volumeHandle") or ""))
    base = Volume(
        name=name,
        resource_version=str(m.get("resourceVersion") or ""),
        class_name=str(ann[ANN_BETA_STORAGE_CLASS])
        if ANN_BETA_STORAGE_CLASS in ann
        else str(spec.get("storageClassName") or ""),
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        phase=str((obj.get("status") or {}).get("phase") or ""),
        deleting=bool(m.get("deletionTimestamp")),
        claim_ref=claim_ref,
        labels=labels,
        labels_key=tuple(sorted(labels.items())),
        csi=csi,
    )
    try:
        modes = _strings(owner, "spec.accessModes", spec.get("accessModes"))
        cap = spec.get("capacity") or {}
        if not isinstance(cap, Mapping):
            raise VolumeError(f"{owner}: spec.capacity: must be a map, got {cap!r}")
        capacity = _quantity(owner, "spec.capacity.storage", cap.get("storage", 0))
        affinity = None
        na = spec.get("nodeAffinity")
        if isinstance(na, Mapping) and na.get("required") is not None:
            req = na.get("required")
            if not isinstance(req, Mapping):
                raise VolumeError(f"{owner}: spec.nodeAffinity.required: must be a NodeSelector, got {req!r}")
            affinity = _terms(
                owner, "spec.nodeAffinity.required.nodeSelectorTerms", req.get("nodeSelectorTerms") or []
            )
    except VolumeError as exc:
        return Volume(**{**base.__dict__, "bad": str(exc)})
    return Volume(
        **{
            **base.__dict__,
            "access_modes": modes,
            "capacity": capacity,
            "affinity": affinity,
            "affinity_key": freeze(list(affinity)) if affinity is not None else None,
        }
    )


# ---------------------------------------------------------------------------------- classes
@dataclass(frozen=True)
class StorageClassInfo:
    """A StorageClass as the volume filters read it."""

    name: str
    provisioner: str = ""
    binding_mode: str = IMMEDIATE  # the API server's default
    # allowedTopologies (TopologySelectorTerms, ORed); empty: every node.
    allowed_topologies: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = ()
    bad: str | None = None

    @property
    def delay_binding(self) -> bool:
        """``volumeBindingMode: WaitForFirstConsumer``."""
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER

    def allows(self, labels: Mapping[str, str]) -> bool:
        """``MatchTopologySelectorTerms``: no terms match every node; else some term whose
        every expression has the node's label among its values."""
        if not self.allowed_topologies:
            return True
        return any(all(labels.get(k) in values for k, values in term) for term in self.allowed_topologies)


def parse_storage_class(obj: Mapping[str, Any]) -> StorageClassInfo:
    """A StorageClass in wire form (its fields are top-level, not under ``spec``)."""
    name = str(_meta(obj).get("name") or "")
    owner = f"storageclass {name}"
    base = StorageClassInfo(
        name=name,
        provisioner=str(obj.get("provisioner") or ""),
        binding_mode=str(obj.get("volumeBindingMode") or IMMEDIATE),
    )
    terms: list[tuple[tuple[str, frozenset[str]], ...]] = []
    for i, term in enumerate(obj.get("allowedTopologies") or []):
        exprs = term.get("matchLabelExpressions") if isinstance(term, Mapping) else None
        if not isinstance(exprs, list):
            return StorageClassInfo(
                **{
                    **base.__dict__,
                    "bad": f"{owner}: allowedTopologies[{i}].matchLabelExpressions: must be a list",
                }
            )
        terms.append(
            tuple((str(e.get("key") or ""), frozenset(str(v) for v in e.get("values") or [])) for e in exprs)
        )
    return StorageClassInfo(**{**base.__dict__, "allowed_topologies": tuple(terms)})


@dataclass(frozen=True)
class CSINodeInfo:
    """A CSINode: the attach limit of each driver on its node (``allocatable.count``)."""

    name: str
    limits: tuple[tuple[str, int], ...] = ()


def parse_csinode(obj: Mapping[str, Any]) -> CSINodeInfo:
    """A CSINode in wire form."""
    limits: list[tuple[str, int]] = []
    for d in _spec(obj).get("drivers") or []:
        count = ((d.get("allocatable") or {}) if isinstance(d, Mapping) else {}).get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            limits.append((str(d.get("name") or ""), count))
    return CSINodeInfo(name=str(_meta(obj).get("name") or ""), limits=tuple(limits))


@dataclass(frozen=True)
class CSIDriverInfo:
    """A CSIDriver: whether it publishes storage capacity (``spec.storageCapacity``)."""

    name: str
    storage_capacity: bool = False


def parse_csidriver(obj: Mapping[str, Any]) -> CSIDriverInfo:
    """A CSIDriver in wire form."""
    return CSIDriverInfo(
        name=str(_meta(obj).get("name") or ""), storage_capacity=_spec(obj).get("storageCapacity") is True
    )


@dataclass(frozen=True)
class CapacityInfo:
    """A CSIStorageCapacity: how large a volume of a class its nodes can still provision."""

    key: str
    class_name: str
    node_topology: Any = field(default=None, compare=False)  # a LabelSelector dict, or None
    topology_key: Any = None
    limit: Fraction | None = None  # maximumVolumeSize, else capacity (None: neither)
    bad: str | None = None

    def reaches(self, labels: Mapping[str, str]) -> bool:
        """``nodeHasAccess``: a node topology selector that matches the node (none: no node)."""
        if self.node_topology is None:
            return False
        try:
            return label_selector_matches(self.node_topology, labels)
        except SelectorError:
            return False


def parse_capacity(obj: Mapping[str, Any]) -> CapacityInfo:
    """A CSIStorageCapacity in wire form (its fields are top-level)."""
    m = _meta(obj)
    key = f"{m.get('namespace') or 'default'}/{m.get('name') or ''}"
    owner = f"csistoragecapacity {key}"
    topo = obj.get("nodeTopology")
    base = CapacityInfo(
        key=key,
        class_name=str(obj.get("storageClassName") or ""),
        node_topology=topo if isinstance(topo, Mapping) else None,
        topology_key=freeze(topo),
    )
    raw = obj.get("maximumVolumeSize")
    path = "maximumVolumeSize"
    if raw is None:
        raw, path = obj.get("capacity"), "capacity"
    try:
        limit = None if raw is None else _quantity(owner, path, raw)
    except VolumeError as exc:
        return CapacityInfo(**{**base.__dict__, "bad": str(exc)})
    return CapacityInfo(**{**base.__dict__, "limit": limit})


# ---------------------------------------------------------------------------------- pods
@dataclass(frozen=True)
class PodClaim:
    """One of a pod's volumes backed by a claim: a ``persistentVolumeClaim`` volume, or a
    generic ``ephemeral`` one (its claim is ``<pod>-<volume>``, made for the pod)."""

    volume: str
    name: str
    ephemeral: bool = False


@dataclass(frozen=True)
class PodVolumes:
    """A pod's claims, compiled once (what every volume filter reads of the pod)."""

    namespace: str = ""
    pod: str = ""
    uid: str = ""
    claims: tuple[PodClaim, ...] = ()
    bad: str | None = None  # a claim volume with no claim name

    def key(self, claim: PodClaim) -> str:
        """The claim's ``namespace/name``."""
        return f"{self.namespace}/{claim.name}"

    @cached_property
    def signature(self) -> tuple[Any, ...]:
        """What the volume filters' verdicts depend on, of the pod: its namespace and claims
        (and its UID when a claim is ephemeral: only the pod's own such claim is usable)."""
        if not self.claims and self.bad is None:
            return ()
        uid = self.uid if any(c.ephemeral for c in self.claims) else ""
        return (self.namespace, tuple((c.name, c.ephemeral) for c in self.claims), uid, self.bad)

    @cached_property
    def has_pvc(self) -> bool:
        """A ``persistentVolumeClaim`` volume (what VolumeRestrictions and VolumeZone read)."""
        return any(not c.ephemeral for c in self.claims) or self.bad is not None


NO_VOLUMES = PodVolumes()


def compile_pod_volumes(pod: Mapping[str, Any]) -> PodVolumes:
    """The claims of a pod's ``spec.volumes``, in order."""
    spec = _spec(pod)
    vols = spec.get("volumes") or []
    if not isinstance(vols, list):
        return NO_VOLUMES
    m = _meta(pod)
    ns, name = str(m.get("namespace") or "default"), str(m.get("name") or "")
    claims: list[PodClaim] = []
    bad = None
    for i, v in enumerate(vols):
        if not isinstance(v, Mapping):
            continue
        vname = str(v.get("name") or "")
        pvc = v.get("persistentVolumeClaim")
        if isinstance(pvc, Mapping):
            cname = str(pvc.get("claimName") or "")
            if not cname and bad is None:
                # kube-scheduler's words (VolumeZone, NodeVolumeLimits); the API server refuses it.
                bad = f"pod {ns}/{name}: spec.volumes[{i}].persistentVolumeClaim.claimName: PersistentVolumeClaim had no name"
            claims.append(PodClaim(vname, cname))
        elif isinstance(v.get("ephemeral"), Mapping):
            claims.append(PodClaim(vname, f"{name}-{vname}", ephemeral=True))
    if not claims:
        return NO_VOLUMES
    return PodVolumes(ns, name, str(m.get("uid") or ""), tuple(claims), bad)


def pod_claim_keys(pod: Mapping[str, Any]) -> tuple[tuple[str, bool], ...]:
    """``(namespace/claim, ephemeral)`` of each claim a pod's volumes use (a bound pod's
    volumes, as the volume filters count them on its node)."""
    pv = compile_pod_volumes(pod)
    return tuple((pv.key(c), c.ephemeral) for c in pv.claims if c.name)


# ---------------------------------------------------------------------------------- the view
@dataclass(frozen=True)
class PodUse:
    """The claims a pod bound to a node uses (assumed pods included)."""

    node: str
    claims: tuple[tuple[str, bool], ...]  # (namespace/claim, ephemeral)


@dataclass(eq=False)
class Storage:
    """The cluster's storage objects as one cycle reads them; never changed once made (the
    cache hands out a new one when anything changed)."""

    claims: Mapping[str, Claim] = field(default_factory=dict)
    volumes: Mapping[str, Volume] = field(default_factory=dict)
    classes: Mapping[str, StorageClassInfo] = field(default_factory=dict)
    csinodes: Mapping[str, CSINodeInfo] = field(default_factory=dict)
    drivers: Mapping[str, CSIDriverInfo] = field(default_factory=dict)
    capacities: Mapping[str, CapacityInfo] = field(default_factory=dict)
    # The claims of the bound pods (assumed ones included), by node then pod key.
    uses_by_node: Mapping[str, Mapping[str, PodUse]] = field(default_factory=dict)
    # Bound pods per claim, counting ``persistentVolumeClaim`` volumes only (what
    # kube-scheduler's ``IsPVCUsedByPods`` counts).
    users: Mapping[str, int] = field(default_factory=dict)
    _by_class: dict[str, list[Volume]] | None = field(default=None, repr=False)

    def volumes_of_class(self, class_name: str) -> list[Volume]:
        """``pvCache.ListPVs(class)``: the PersistentVolumes of a class, by name."""
        if self._by_class is None:
            by: dict[str, list[Volume]] = {}
            for v in sorted(self.volumes.values(), key=lambda v: v.name):
                by.setdefault(v.class_name, []).append(v)
            self._by_class = by
        return self._by_class.get(class_name, [])

    @property
    def pod_uses(self) -> dict[str, PodUse]:
        """Pod key -> the claims it uses, for every bound pod that uses one."""
        return {k: u for per in self.uses_by_node.values() for k, u in per.items()}

    def content(self) -> tuple[Any, ...]:
        """Everything the filters read, comparable (``--verify-state``)."""
        return (
            dict(self.claims),
            dict(self.volumes),
            dict(self.classes),
            dict(self.csinodes),
            dict(self.drivers),
            dict(self.capacities),
            self.pod_uses,
        )

    @property
    def empty(self) -> bool:
        """No storage object and no bound pod using a claim."""
        return not (self.claims or self.volumes or self.classes or self.uses_by_node)


EMPTY_STORAGE = Storage()


def pod_use(pod: Mapping[str, Any]) -> PodUse | None:
    """The claims a pod holds on its node: None unless it is bound, not terminal, and uses a
    claim (Succeeded and Failed pods are not in kube-scheduler's cache)."""
    node = _spec(pod).get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    claims = pod_claim_keys(pod)
    return PodUse(str(node), claims) if claims else None


# ---------------------------------------------------------------------------------- matching
def access_modes_fit(claim: Claim, volume: Volume) -> bool:
    """``CheckAccessModes``: every mode the claim asks for, the volume offers."""
    return all(m in volume.access_modes for m in claim.access_modes)


def selector_admits(claim: Claim, volume: Volume) -> bool:
    """The claim's ``spec.selector`` matches the volume's labels (no selector: any)."""
    if claim.selector is None:
        return True
    try:
        return label_selector_matches(claim.selector, volume.labels)
    except SelectorError:
        return False


def volume_fits_claim(claim: Claim, volume: Volume) -> bool:
    """The node-independent half of ``FindMatchingVolume`` for an available volume: class,
    size, volume mode, attributes class, not being deleted, phase Available, selector and
    access modes (the scheduler always passes a node, so access modes are checked)."""
    if volume.bad is not None or volume.deleting:
        return False
    if volume.claim_ref is not None and not volume.bound_to(claim):
        return False
    if claim.request is not None and volume.capacity < claim.request:
        return False
    if claim.volume_mode != volume.volume_mode:
        return False
    if claim.attributes_class != volume.attributes_class:
        return False
    if volume.bound_to(claim):
        return True  # pre-bound to this claim: only its node affinity is left to check
    return (
        volume.phase == VOLUME_AVAILABLE
        and selector_admits(claim, volume)
        and volume.class_name == claim.class_name
        and access_modes_fit(claim, volume)
    )
