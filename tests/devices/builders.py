"""DRA objects in wire form for the device stories: DeviceClasses, per-node ResourceSlices of GPUs
(as NVIDIA's DRA driver publishes them: ``gpu.nvidia.com``, attributes ``productName``, ``index``
and the NVLink ``cliqueId``, capacity ``memory``), claims, templates, and pods that use them."""

from __future__ import annotations

from typing import Any

from scheduler_plugin.cache.storage import StorageListing

DRIVER = "gpu.nvidia.com"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
GPU_CLASS = "gpu.nvidia.com"


def device_class(
    name: str = GPU_CLASS, driver: str = DRIVER, extra: list[str] | None = None
) -> dict[str, Any]:
    """A DeviceClass selecting the driver's devices (as the NVIDIA chart installs it)."""
    selectors = [{"cel": {"expression": f"device.driver == '{driver}'"}}]
    selectors += [{"cel": {"expression": e}} for e in extra or []]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": selectors},
    }


def gpu_slice(
    node: str,
    gpus: int = 8,
    *,
    clique: str | None = None,
    product: str = "NVIDIA GB200",
    memory: str = "186Gi",
) -> dict[str, Any]:
    """The node's ResourceSlice: ``gpus`` GPUs ``gpu-0`` ... of one pool named after the node."""
    devices = []
    for i in range(gpus):
        attrs: dict[str, Any] = {
            "productName": {"string": product},
            "index": {"int": i},
            "driverVersion": {"version": "580.65.6"},
        }
        if clique is not None:
            attrs["cliqueId"] = {"string": clique}
        devices.append({"name": f"gpu-{i}", "attributes": attrs, "capacity": {"memory": {"value": memory}}})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim_spec(
    count: int = 1, *, cls: str = GPU_CLASS, selectors: list[str] | None = None, same: str | None = None
) -> dict[str, Any]:
    """One request ``gpus`` of ``count`` devices of the class; ``same``: a matchAttribute
    constraint (a fully qualified attribute name)."""
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count, "allocationMode": "ExactCount"}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": exactly}]}
    if same:
        devices["constraints"] = [{"requests": ["gpus"], "matchAttribute": same}]
    return {"devices": devices}


def template(name: str, spec: dict[str, Any], ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": spec},
    }


def claim(
    name: str,
    spec: dict[str, Any],
    *,
    ns: str = "default",
    owner_pod: dict[str, Any] | None = None,
    allocation: dict[str, Any] | None = None,
    reserved_for: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ResourceClaim; ``owner_pod``: made from a template for that pod (controlled by it)."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-claim-{ns}-{name}"}
    if owner_pod is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner_pod["metadata"]["name"],
                "uid": owner_pod["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    out: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": spec,
    }
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved_for:
        status["reservedFor"] = reserved_for
    if status:
        out["status"] = status
    return out


def node_allocation(node: str, devices: list[str], request: str = "gpus") -> dict[str, Any]:
    """``status.allocation`` of devices of ``node``'s pool, as kube-scheduler writes it."""
    return {
        "devices": {
            "results": [{"request": request, "driver": DRIVER, "pool": node, "device": d} for d in devices]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


def uses_template(p: dict[str, Any], tmpl: str, *, made: bool = True, claim_name: str | None = None) -> str:
    """``p`` claims ``gpus`` from template ``tmpl``; ``made``: the resourceclaim controller made
    the claim (named in the pod's status). Returns the claim's name."""
    name = claim_name or f"{p['metadata']['name']}-gpus-x1y2z"
    p["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": tmpl}]
    if made:
        p["status"]["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": name}]
    return name


def uses_claim(p: dict[str, Any], name: str) -> None:
    """``p`` uses the shared claim ``name``."""
    p["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": name}]


def dra_listing(*objs: dict[str, Any]) -> StorageListing:
    by: dict[str, list[dict[str, Any]]] = {}
    for o in objs:
        by.setdefault(o["kind"], []).append(o)
    return StorageListing(
        device_classes=by.get("DeviceClass", []),
        resource_slices=by.get("ResourceSlice", []),
        resource_claims=by.get("ResourceClaim", []),
        claim_templates=by.get("ResourceClaimTemplate", []),
        device_taint_rules=by.get("DeviceTaintRule", []),
    )


def template_claims(pods: list[dict[str, Any]], tmpl: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Each pod uses ``tmpl``, and its claim exists (made for it by the resourceclaim controller)."""
    return [claim(uses_template(p, tmpl), spec, owner_pod=p) for p in pods]


CD_DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"


def channel_class() -> dict[str, Any]:
    """The DeviceClass NVIDIA's chart installs for a ComputeDomain's default IMEX channel."""
    return device_class(
        CHANNEL_CLASS,
        CD_DRIVER,
        extra=[
            f"device.attributes['{CD_DRIVER}'].type == 'channel' && device.attributes['{CD_DRIVER}'].id == 0"
        ],
    )


def channel_slice(node: str) -> dict[str, Any]:
    """The compute-domain kubelet plugin's slice on ``node``: its IMEX channel 0."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{CD_DRIVER}"},
        "spec": {
            "driver": CD_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}
            ],
        },
    }


def channel_template(name: str, domain_uid: str, ns: str = "default") -> dict[str, Any]:
    """The workload ResourceClaimTemplate the ComputeDomain controller makes for a domain."""
    out = template(
        name,
        {
            "devices": {
                "requests": [{"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}],
                "config": [
                    {
                        "requests": ["channel"],
                        "opaque": {
                            "driver": CD_DRIVER,
                            "parameters": {
                                "apiVersion": "resource.nvidia.com/v1beta1",
                                "kind": "ComputeDomainChannelConfig",
                                "domainID": domain_uid,
                                "allocationMode": "Single",
                            },
                        },
                    }
                ],
            }
        },
        ns,
    )
    out["metadata"]["labels"] = {
        "resource.nvidia.com/computeDomain": domain_uid,
        "resource.nvidia.com/computeDomainTarget": "Workload",
    }
    return out
