"""Storage objects in wire form for the volume stories: claims, volumes, classes, CSI objects."""

from __future__ import annotations

from typing import Any

from scheduler_plugin.cache.storage import StorageListing

WFFC = "WaitForFirstConsumer"
LOCAL = "kubernetes.io/no-provisioner"


def storage_class(
    name: str,
    *,
    mode: str = WFFC,
    provisioner: str = LOCAL,
    allowed: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if allowed:
        out["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": v} for k, v in allowed.items()]}
        ]
    return out


def claim(
    name: str,
    *,
    size: str = "10Gi",
    cls: str | None = "local",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    volume: str | None = None,
    bound: bool = False,
    ns: str = "default",
    selector: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A claim; ``bound``: bound by the PersistentVolume controller to ``volume``."""
    ann = dict(annotations or {})
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    if volume is not None:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = selector
    status: dict[str, Any] = {"phase": "Pending"}
    if bound:
        ann["pv.kubernetes.io/bind-completed"] = "yes"
        status = {"phase": "Bound", "accessModes": list(modes), "capacity": {"storage": size}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-claim-{name}", "annotations": ann},
        "spec": spec,
        "status": status,
    }


def volume(
    name: str,
    *,
    size: str = "10Gi",
    cls: str = "local",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    on: dict[str, list[str]] | None = None,
    claim_ref: tuple[str, str] | None = None,
    labels: dict[str, str] | None = None,
    csi: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """A volume, Available unless ``claim_ref`` (namespace, name) binds it; ``on``: node
    affinity, ``{label: [values]}``."""
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": cls,
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    else:
        spec["local"] = {"path": f"/mnt/{name}"}
    if on:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": k, "operator": "In", "values": v} for k, v in on.items()]}
                ]
            }
        }
    phase = "Available"
    if claim_ref is not None:
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": claim_ref[0],
            "name": claim_ref[1],
            "uid": f"uid-claim-{claim_ref[1]}",
        }
        phase = "Bound"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase},
    }


def csinode(node: str, limits: dict[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {
            "drivers": [
                {"name": d, "nodeID": node, "topologyKeys": None, "allocatable": {"count": n}}
                for d, n in limits.items()
            ]
        },
    }


def csidriver(name: str, capacity: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"storageCapacity": capacity},
    }


def capacity(
    name: str, cls: str, size: str, match: dict[str, str], ns: str = "kube-system"
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": ns},
        "storageClassName": cls,
        "capacity": size,
        "nodeTopology": {"matchLabels": match},
    }


def mounts(*claims: str, ephemeral: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``spec`` fields of a pod mounting these claims (and generic ephemeral volumes)."""
    vols: list[dict[str, Any]] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    vols += [
        {
            "name": e,
            "ephemeral": {
                "volumeClaimTemplate": {
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "local",
                        "resources": {"requests": {"storage": "1Gi"}},
                    }
                }
            },
        }
        for e in ephemeral
    ]
    return {"volumes": vols}


def listing(*objs: dict[str, Any]) -> StorageListing:
    """The storage objects among ``objs``, sorted by kind."""
    by: dict[str, list[dict[str, Any]]] = {}
    for o in objs:
        by.setdefault(o["kind"], []).append(o)
    return StorageListing(
        claims=by.get("PersistentVolumeClaim", []),
        volumes=by.get("PersistentVolume", []),
        classes=by.get("StorageClass", []),
        csinodes=by.get("CSINode", []),
        drivers=by.get("CSIDriver", []),
        capacities=by.get("CSIStorageCapacity", []),
    )
