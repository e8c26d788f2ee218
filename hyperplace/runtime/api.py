"""The seam between the controllers and an API server.

Everything above this module talks to :class:`ApiClient`: objects are plain wire-form
dicts, errors are :class:`ApiError` with the HTTP status. ``hyperplace.runtime.kube``
implements it with kubernetes-asyncio; ``hyperplace.runtime.fakeapi`` implements it in memory,
with the API server's concurrency semantics, for the tests and the chaos bench.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hyperplace.api.constants import (
    BATCH_GROUP,
    BATCH_VERSION,
    BUS_GROUP,
    BUS_VERSION,
    SCHEDULING_GROUP,
    SCHEDULING_VERSION,
    TOPOLOGY_GROUP,
    TOPOLOGY_VERSION,
)
from hyperplace.api.workload import UPSTREAM_SCHEDULING_GROUP, UPSTREAM_SCHEDULING_VERSION

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``group`` is "" for the core API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def custom(self) -> bool:
        """True for our CRDs (served by the apiextensions machinery)."""
        return self.group.endswith("volcano.sh")

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path, e.g. ``/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs/j/status``."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", "Pod", True)
EVENTS = Resource("", "v1", "events", "Event", True)
NODES = Resource("", "v1", "nodes", "Node", False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
JOBS = Resource(BATCH_GROUP, BATCH_VERSION, "jobs", "Job", True)
PODGROUPS = Resource(SCHEDULING_GROUP, SCHEDULING_VERSION, "podgroups", "PodGroup", True)
QUEUES = Resource(SCHEDULING_GROUP, SCHEDULING_VERSION, "queues", "Queue", False)
HYPERNODES = Resource(TOPOLOGY_GROUP, TOPOLOGY_VERSION, "hypernodes", "HyperNode", False)
COMMANDS = Resource(BUS_GROUP, BUS_VERSION, "commands", "Command", True)
# Kubernetes' own gang API (1.37, built into kube-apiserver, not CRDs).
K8S_PODGROUPS = Resource(
    UPSTREAM_SCHEDULING_GROUP, UPSTREAM_SCHEDULING_VERSION, "podgroups", "PodGroup", True
)
WORKLOADS = Resource(UPSTREAM_SCHEDULING_GROUP, UPSTREAM_SCHEDULING_VERSION, "workloads", "Workload", True)
# Storage the scheduler's volume filters read (and its PreBind writes: claimRef, selected-node).
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", False)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
CSI_NODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False)
CSI_DRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False)
CSI_STORAGE_CAPACITIES = Resource("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True)
# Dynamic resource allocation (resource.k8s.io/v1): what the DynamicResources filter reads, and
# the claims' status its PreBind writes (allocation, reservedFor).
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
DEVICE_TAINT_RULES = Resource("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)
# Workload owners the PodGroup controller reads (annotations, replicas, templates).
BATCH_JOBS = Resource("batch", "v1", "jobs", "Job", True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
LEADERWORKERSETS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True)


class ApiError(Exception):
    """An API failure with the server's HTTP status (409 Conflict, 410 Gone, ...)."""

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410


class ApiClient(Protocol):
    """What controllers need from an API server. Objects are wire-form dicts."""

    async def list(
        self, res: Resource, namespace: str | None = None, *, resource_version: str | None = None
    ) -> tuple[list[Obj], str]:
        """All objects (across namespaces when ``namespace`` is None) and the list's RV."""
        ...

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[Obj]:
        """Events ``{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}``.

        A too-old ``resource_version`` ends the stream with an ERROR event whose object
        is a Status with ``code: 410``, or raises ApiError(410); callers handle both.
        """
        ...

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj: ...

    async def create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """POST. With ``subresource`` (e.g. ``binding``) the parent object is the one named by
        ``obj``'s ``metadata.name``, and the answer may be a Status rather than an object."""
        ...

    async def replace(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        """PUT; 409 Conflict when ``metadata.resourceVersion`` is stale."""
        ...

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """JSON merge patch (RFC 7386), optionally of the ``status`` subresource."""
        ...

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """DELETE; with ``uid`` a precondition (409 Conflict when the name now belongs to
        another object), as ``metav1.Preconditions`` on a real API server;
        ``grace_period_seconds`` overrides the object's own (0 on a terminating pod: a force
        delete, the object goes without waiting for its kubelet)."""
        ...


def clone(obj: Any) -> Any:
    """A deep copy of a wire-form object (dicts, lists, scalars): ``copy.deepcopy`` without its
    memo, several times faster (the simulator copies every input object, the fake API server
    every stored one)."""
    if isinstance(obj, dict):
        return {k: clone(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [clone(v) for v in obj]
    return obj


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata") or {}
    return m if isinstance(m, Mapping) else {}


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` or ``name`` (client-go's MetaNamespaceKeyFunc)."""
    m = meta(obj)
    ns, name = m.get("namespace"), str(m.get("name", ""))
    return f"{ns}/{name}" if ns else name
