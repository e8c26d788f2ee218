"""Adapter standing in for kube-controller-manager's PersistentVolume controller (and an
external provisioner): claims are bound to volumes as the real controller binds them.

* A volume whose ``claimRef`` names an existing claim (the scheduler's PreBind sets it for a
  ``WaitForFirstConsumer`` claim, or it was pre-bound) is bound to it: the claim gets the
  volume's name, the ``pv.kubernetes.io/bind-completed`` and ``bound-by-controller``
  annotations and phase Bound; the volume phase Bound.
* A claim naming a volume (``spec.volumeName``) is bound to it when the volume is free.
* An unbound claim of an ``Immediate`` class (or of no class) takes the smallest available
  volume that fits it (``FindMatchingVolume`` with no node).
* A claim to provision (a class with a provisioner: ``Immediate``, or ``WaitForFirstConsumer``
  once the scheduler annotated it with ``volume.kubernetes.io/selected-node``) gets a new volume
  ``pvc-<claim uid>`` of the size it asks, on that node (node affinity on its hostname label).
* A volume whose claim is gone is Released; one with no claimRef is Available.

:func:`bind_step` is the rule, over wire objects (the scheduler's tests run it against the
in-memory API server too); :class:`PersistentVolumes` runs it on the simulated store."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperplace.runtime.api import clone

from ..cluster import Cluster
from ..store import key_of

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
HOSTNAME = "kubernetes.io/hostname"


@dataclass
class Changes:
    """What one step changed: objects updated in place (by key) and volumes created."""

    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    volumes: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.claims or self.volumes or self.created)


def _meta(o: Mapping[str, Any]) -> dict[str, Any]:
    return o.setdefault("metadata", {})  # type: ignore[attr-defined]


def _ckey(c: Mapping[str, Any]) -> str:
    m = c.get("metadata") or {}
    return f"{m.get('namespace') or 'default'}/{m.get('name', '')}"


def _class_of(o: Mapping[str, Any]) -> str:
    ann = (o.get("metadata") or {}).get("annotations") or {}
    return str(
        ann.get("volume.beta.kubernetes.io/storage-class")
        or (o.get("spec") or {}).get("storageClassName")
        or ""
    )


def _ref_key(pv: Mapping[str, Any]) -> str | None:
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return None
    return f"{ref.get('namespace') or 'default'}/{ref.get('name', '')}"


def _bytes(q: Any) -> float:
    # lazy: the simulator loads numpy-free parts first
    from hyperplace.kube.quantity import QuantityError, parse_quantity

    try:
        return float(parse_quantity(q if q is not None else 0))
    except (QuantityError, TypeError):
        return float("inf")


def bind_step(
    claims: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    classes: Mapping[str, Mapping[str, Any]],
    node_labels: Callable[[str], Mapping[str, str] | None],
) -> Changes:
    """One pass of the PersistentVolume controller over wire objects, changed in place."""
    out = Changes()
    by_claim = {_ckey(c): c for c in claims}
    by_name = {str(_meta(v).get("name")): v for v in volumes}

    def bind(pv: dict[str, Any], claim: dict[str, Any]) -> None:
        cm = _meta(claim)
        spec = claim.setdefault("spec", {})
        ann = cm.setdefault("annotations", {}) or {}
        cm["annotations"] = ann
        if not spec.get("volumeName"):
            spec["volumeName"] = _meta(pv)["name"]
            ann[ANN_BOUND_BY_CONTROLLER] = "yes"
        ann[ANN_BIND_COMPLETED] = "yes"
        claim["status"] = {
            **(claim.get("status") or {}),
            "phase": "Bound",
            "accessModes": list((pv.get("spec") or {}).get("accessModes") or []),
            "capacity": dict((pv.get("spec") or {}).get("capacity") or {}),
        }
        pspec = pv.setdefault("spec", {})
        if not pspec.get("claimRef"):
            pspec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1"}
            pann = _meta(pv).setdefault("annotations", {}) or {}
            _meta(pv)["annotations"] = pann
            pann[ANN_BOUND_BY_CONTROLLER] = "yes"
        pspec["claimRef"].update(
            {
                "namespace": cm.get("namespace") or "default",
                "name": cm.get("name"),
                "uid": cm.get("uid") or "",
            }
        )
        pv["status"] = {**(pv.get("status") or {}), "phase": "Bound"}
        out.claims[_ckey(claim)] = claim
        out.volumes[str(_meta(pv)["name"])] = pv

    for claim in claims:
        cm = _meta(claim)
        if ANN_BIND_COMPLETED in (cm.get("annotations") or {}) or cm.get("deletionTimestamp"):
            continue
        key = _ckey(claim)
        spec = claim.get("spec") or {}
        name = spec.get("volumeName")
        if name:  # pre-bound claim: bind when its volume is free (or already names it)
            pv = by_name.get(str(name))
            if pv is not None and _ref_key(pv) in (None, key):
                bind(pv, claim)
            continue
        pre = next((v for v in volumes if _ref_key(v) == key and not _meta(v).get("deletionTimestamp")), None)
        if pre is not None:  # a volume whose claimRef the scheduler (or a user) set
            bind(pre, claim)
            continue
        cls = classes.get(_class_of(claim))
        wait = cls is not None and cls.get("volumeBindingMode") == "WaitForFirstConsumer"
        selected = (cm.get("annotations") or {}).get(ANN_SELECTED_NODE)
        if not wait:
            pv = _smallest_fit(claim, volumes)
            if pv is not None:
                bind(pv, claim)
                continue
        provisioner = str((cls or {}).get("provisioner") or "")
        if cls is None or provisioner in ("", NO_PROVISIONER) or (wait and not selected):
            continue  # waits: for the scheduler (WaitForFirstConsumer) or for a volume
        pv = _provisioned(claim, provisioner, selected, node_labels)
        volumes.append(pv)
        by_name[str(_meta(pv)["name"])] = pv
        out.created.append(pv)
        bind(pv, claim)
    for pv in volumes:
        ref = _ref_key(pv)
        phase = (pv.get("status") or {}).get("phase")
        want = phase
        if ref is None:
            want = "Available"
        elif ref not in by_claim and ((pv.get("spec") or {}).get("claimRef") or {}).get("uid"):
            want = "Released"
        if want != phase:
            pv["status"] = {**(pv.get("status") or {}), "phase": want}
            out.volumes[str(_meta(pv)["name"])] = pv
    return out


def _smallest_fit(claim: Mapping[str, Any], volumes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``FindMatchingVolume`` with no node: the smallest available volume of the claim's class
    that holds its size and offers its access modes."""
    spec = claim.get("spec") or {}
    want = _bytes(((spec.get("resources") or {}).get("requests") or {}).get("storage"))
    modes = set(spec.get("accessModes") or [])
    cls = _class_of(claim)
    best: tuple[float, str, dict[str, Any]] | None = None
    for v in volumes:
        vs = v.get("spec") or {}
        if vs.get("claimRef") or (v.get("status") or {}).get("phase") not in (None, "", "Available"):
            continue
        if _class_of(v) != cls or not modes <= set(vs.get("accessModes") or []):
            continue
        size = _bytes((vs.get("capacity") or {}).get("storage"))
        if size < want:
            continue
        cand = (size, str(_meta(v).get("name")), v)
        if best is None or cand[:2] < best[:2]:
            best = cand
    return None if best is None else best[2]


def _provisioned(
    claim: Mapping[str, Any],
    provisioner: str,
    node: str | None,
    node_labels: Callable[[str], Mapping[str, str] | None],
) -> dict[str, Any]:
    """The volume a provisioner makes for the claim (on ``node`` when the scheduler chose one)."""
    m = claim.get("metadata") or {}
    spec = claim.get("spec") or {}
    name = f"pvc-{m.get('uid') or m.get('name')}"
    pv_spec: dict[str, Any] = {
        "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")},
        "accessModes": list(spec.get("accessModes") or []),
        "storageClassName": _class_of(claim),
        "persistentVolumeReclaimPolicy": "Delete",
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "csi": {"driver": provisioner, "volumeHandle": name},
    }
    if node:
        host = (node_labels(node) or {}).get(HOSTNAME, node)
        pv_spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [host]}]}
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: provisioner}},
        "spec": pv_spec,
        "status": {"phase": "Pending"},
    }


class PersistentVolumes:
    """The PersistentVolume controller (and provisioners), over the simulated store."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reconcile(self) -> bool:
        """One pass; whether it changed anything."""
        c = self.cluster
        claims = c.of_kind("PersistentVolumeClaim")
        if not claims and not c.of_kind("PersistentVolume"):
            return False
        classes = {str((o.get("metadata") or {}).get("name")): o for o in c.of_kind("StorageClass")}
        nodes = {str((o.get("metadata") or {}).get("name")): o for o in c.of_kind("Node")}

        def labels(name: str) -> Mapping[str, str] | None:
            n = nodes.get(name)
            return None if n is None else (n.get("metadata") or {}).get("labels") or {}

        volumes = c.of_kind("PersistentVolume")
        changes = bind_step(claims, list(volumes), classes, labels)
        created = {id(pv) for pv in changes.created}
        for obj in [*changes.claims.values(), *changes.volumes.values()]:
            if id(obj) not in created:
                c.objects[key_of(obj)] = obj  # changed in place: logged as a change
        for pv in changes.created:
            c.create(clone(pv), "persistentvolume-controller", namespaced=False, admit=False)
        return bool(changes)
