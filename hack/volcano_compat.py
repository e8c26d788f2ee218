"""How Volcano's published CRD schemas differ from the ones our models generate.

``python hack/gen_crds.py --volcano-compatible`` starts from our generated schema and sets, at
each path below, exactly the validation keywords Volcano's CRD has there (``None``: the field
does not exist in Volcano's CRD). Paths use ``.field``, ``[]`` for list items and ``.*`` for
map values. What differs is mostly Volcano's stricter or looser validation (``format: int32``,
``maxLength``, name patterns, defaults, list/map types), the Queue and Job fields our models do
not use (``affinity``, ``extendClusters``, ``dequeueStrategy``, volumes, ...), and the PodGroup
and HyperNode condition schemas.

The table was first written from the difference between our models and
``tests/manifests/fixtures/volcano-crd-fields.json`` (Volcano's CRDs, extracted by
``hack/volcano_crd_fields.py``); ``tests/manifests/test_volcano_crds.py`` checks the result
field by field against that extraction, so a model change or a newer Volcano shows up there.

The Job's ``tasks[].template`` and ``volumes[].volumeClaim`` are Kubernetes' PodTemplateSpec and
PersistentVolumeClaimSpec in Volcano's CRD; the variant keeps them free-form
(``x-kubernetes-preserve-unknown-fields``): it accepts and keeps everything Volcano's does,
but does not prune unknown fields inside them.
"""

from __future__ import annotations

from typing import Any

# Volcano's names, columns and subresources where they differ from ours.
VOLCANO_SHORT_NAMES = {"Queue": ("q", "queue-v1beta1")}
VOLCANO_DROP_COLUMNS = {"HyperNode": ("READY",)}  # ours, not Volcano's

OVERLAY: dict[str, dict[str, dict[str, Any] | None]] = {
    "HyperNode": {
        ".": {"type": "object"},
        ".spec": {"required": ["tier"], "type": "object"},
        ".spec.members[]": {"required": ["type"], "type": "object"},
        ".spec.members[].selector.labelMatch": {"type": "object", "x-kubernetes-map-type": "atomic"},
        ".spec.members[].selector.labelMatch.matchExpressions": {
            "type": "array",
            "x-kubernetes-list-type": "atomic",
        },
        ".spec.members[].selector.labelMatch.matchExpressions[].operator": {"type": "string"},
        ".spec.members[].selector.labelMatch.matchExpressions[].values": {
            "type": "array",
            "x-kubernetes-list-type": "atomic",
        },
        ".status.conditions[]": {
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "type": "object",
        },
        ".status.conditions[].lastTransitionTime": {"format": "date-time", "type": "string"},
        ".status.conditions[].message": {"maxLength": 32768, "type": "string"},
        ".status.conditions[].observedGeneration": {"format": "int64", "minimum": 0, "type": "integer"},
        ".status.conditions[].reason": {
            "maxLength": 1024,
            "minLength": 1,
            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            "type": "string",
        },
        ".status.conditions[].type": {
            "maxLength": 316,
            "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            "type": "string",
        },
        ".status.nodeCount": {"format": "int64", "minimum": 0, "type": "integer"},
    },
    "Job": {
        ".spec.maxRetry": {"default": 3, "format": "int32", "minimum": 0, "type": "integer"},
        ".spec.minAvailable": {"format": "int32", "minimum": 0, "type": "integer"},
        ".spec.minSuccess": {"format": "int32", "minimum": 1, "type": "integer"},
        ".spec.policies[].event": {
            "enum": [
                "*",
                "PodPending",
                "PodRunning",
                "PodFailed",
                "PodEvicted",
                "Unknown",
                "TaskCompleted",
                "OutOfSync",
                "CommandIssued",
                "JobUpdated",
                "TaskFailed",
            ],
            "type": "string",
        },
        ".spec.policies[].events[]": {
            "enum": [
                "*",
                "PodPending",
                "PodRunning",
                "PodFailed",
                "PodEvicted",
                "Unknown",
                "TaskCompleted",
                "OutOfSync",
                "CommandIssued",
                "JobUpdated",
                "TaskFailed",
            ],
            "type": "string",
        },
        ".spec.policies[].exitCode": {"format": "int32", "type": "integer"},
        ".spec.priorityClassName": {
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "type": "string",
        },
        ".spec.queue": {
            "default": "default",
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "type": "string",
        },
        ".spec.schedulerName": {"maxLength": 63, "type": "string"},
        ".spec.tasks": {"minItems": 1, "type": "array"},
        ".spec.tasks[].dependsOn": {"type": "object"},
        ".spec.tasks[].dependsOn.iteration": {"type": "string"},
        ".spec.tasks[].dependsOn.name": {"type": "array"},
        ".spec.tasks[].dependsOn.name[]": {"type": "string"},
        ".spec.tasks[].maxRetry": {"format": "int32", "minimum": 0, "type": "integer"},
        ".spec.tasks[].minAvailable": {"format": "int32", "minimum": 0, "type": "integer"},
        ".spec.tasks[].name": {
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "type": "string",
        },
        ".spec.tasks[].partitionPolicy.minPartitions": {
            "default": 0,
            "format": "int32",
            "minimum": 0,
            "type": "integer",
        },
        ".spec.tasks[].partitionPolicy.partitionSize": {"format": "int32", "minimum": 1, "type": "integer"},
        ".spec.tasks[].partitionPolicy.totalPartitions": {"format": "int32", "minimum": 1, "type": "integer"},
        ".spec.tasks[].policies[].event": {
            "enum": [
                "*",
                "PodPending",
                "PodRunning",
                "PodFailed",
                "PodEvicted",
                "Unknown",
                "TaskCompleted",
                "OutOfSync",
                "CommandIssued",
                "JobUpdated",
                "TaskFailed",
            ],
            "type": "string",
        },
        ".spec.tasks[].policies[].events[]": {
            "enum": [
                "*",
                "PodPending",
                "PodRunning",
                "PodFailed",
                "PodEvicted",
                "Unknown",
                "TaskCompleted",
                "OutOfSync",
                "CommandIssued",
                "JobUpdated",
                "TaskFailed",
            ],
            "type": "string",
        },
        ".spec.tasks[].policies[].exitCode": {"format": "int32", "type": "integer"},
        ".spec.tasks[].replicas": {"format": "int32", "minimum": 0, "type": "integer"},
        ".spec.tasks[].template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        ".spec.tasks[].topologyPolicy": {
            "enum": ["none", "best-effort", "restricted", "single-numa-node"],
            "type": "string",
        },
        ".spec.ttlSecondsAfterFinished": {"format": "int32", "minimum": 0, "type": "integer"},
        ".spec.volumes[]": {"required": ["mountPath"], "type": "object"},
        ".spec.volumes[].mountPath": {"minLength": 1, "pattern": "^[^:]+$", "type": "string"},
        ".spec.volumes[].volumeClaim": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        ".spec.volumes[].volumeClaimName": {"maxLength": 253, "type": "string"},
        ".status.conditions[]": {"required": ["status"], "type": "object"},
        ".status.conditions[].lastTransitionTime": {"format": "date-time", "type": "string"},
        ".status.conditions[].status": {"type": "string"},
        ".status.failed": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.minAvailable": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.pending": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.retryCount": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.running": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.state.lastTransitionTime": {"format": "date-time", "type": "string"},
        ".status.state.phase": {
            "enum": [
                "Pending",
                "Aborting",
                "Aborted",
                "Running",
                "Restarting",
                "Completing",
                "Completed",
                "Terminating",
                "Terminated",
                "Failed",
            ],
            "type": "string",
        },
        ".status.succeeded": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.taskStatusCount.*.phase.*": {"format": "int32", "type": "integer"},
        ".status.terminating": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.unknown": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.version": {"format": "int32", "minimum": 0, "type": "integer"},
    },
    "PodGroup": {
        ".spec.minMember": {"format": "int32", "minimum": 0, "type": "integer"},
        ".spec.minTaskMember.*": {"format": "int32", "type": "integer"},
        ".spec.priorityClassName": {"maxLength": 253, "type": "string"},
        ".spec.queue": {
            "default": "default",
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "type": "string",
        },
        ".spec.subGroupPolicy[]": {"type": "object"},
        ".spec.subGroupPolicy[].labelSelector": {"type": "object", "x-kubernetes-map-type": "atomic"},
        ".spec.subGroupPolicy[].labelSelector.matchExpressions": {
            "type": "array",
            "x-kubernetes-list-type": "atomic",
        },
        ".spec.subGroupPolicy[].labelSelector.matchExpressions[].operator": {"type": "string"},
        ".spec.subGroupPolicy[].labelSelector.matchExpressions[].values": {
            "type": "array",
            "x-kubernetes-list-type": "atomic",
        },
        ".spec.subGroupPolicy[].matchLabelKeys": {"type": "array", "x-kubernetes-list-type": "atomic"},
        ".spec.subGroupPolicy[].minSubGroups": {
            "default": 0,
            "format": "int32",
            "minimum": 0,
            "type": "integer",
        },
        ".spec.subGroupPolicy[].name": {"maxLength": 253, "type": "string"},
        ".spec.subGroupPolicy[].subGroupSize": {
            "default": 1,
            "format": "int32",
            "minimum": 1,
            "type": "integer",
        },
        ".status.conditions[]": {"type": "object"},
        ".status.conditions[].lastTransitionTime": {"format": "date-time", "type": "string"},
        ".status.conditions[].status": {"type": "string"},
        ".status.failed": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.running": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.succeeded": {"format": "int32", "minimum": 0, "type": "integer"},
    },
    "Queue": {
        ".spec.affinity": {"type": "object"},
        ".spec.affinity.nodeGroupAffinity": {"type": "object"},
        ".spec.affinity.nodeGroupAffinity.preferredDuringSchedulingIgnoredDuringExecution": {"type": "array"},
        ".spec.affinity.nodeGroupAffinity.preferredDuringSchedulingIgnoredDuringExecution[]": {
            "type": "string"
        },
        ".spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution": {"type": "array"},
        ".spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution[]": {
            "type": "string"
        },
        ".spec.affinity.nodeGroupAntiAffinity": {"type": "object"},
        ".spec.affinity.nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution": {
            "type": "array"
        },
        ".spec.affinity.nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[]": {
            "type": "string"
        },
        ".spec.affinity.nodeGroupAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution": {
            "type": "array"
        },
        ".spec.affinity.nodeGroupAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[]": {
            "type": "string"
        },
        ".spec.dequeueStrategy": {"default": "traverse", "enum": ["fifo", "traverse"], "type": "string"},
        ".spec.extendClusters": {"type": "array"},
        ".spec.extendClusters[]": {"type": "object"},
        ".spec.extendClusters[].capacity": {"type": "object"},
        ".spec.extendClusters[].capacity.*": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": True,
        },
        ".spec.extendClusters[].name": {"type": "string"},
        ".spec.extendClusters[].weight": {"format": "int32", "type": "integer"},
        ".spec.guarantee.*": None,
        ".spec.guarantee.*.*": None,
        ".spec.guarantee.resource": {"type": "object"},
        ".spec.guarantee.resource.*": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": True,
        },
        ".spec.parent": {
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "type": "string",
        },
        ".spec.priority": {"format": "int32", "minimum": 0, "type": "integer"},
        ".spec.type": {"maxLength": 253, "type": "string"},
        ".spec.weight": {"default": 1, "format": "int32", "maximum": 65535, "minimum": 1, "type": "integer"},
        ".status.allocated": {"type": "object"},
        ".status.allocated.*": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": True,
        },
        ".status.completed": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.inqueue": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.pending": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.reservation": {"type": "object"},
        ".status.reservation.nodes": {"type": "array"},
        ".status.reservation.nodes[]": {"type": "string"},
        ".status.reservation.resource": {"type": "object"},
        ".status.reservation.resource.*": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": True,
        },
        ".status.running": {"format": "int32", "minimum": 0, "type": "integer"},
        ".status.unknown": {"format": "int32", "minimum": 0, "type": "integer"},
    },
    # Volcano's target is a metav1.OwnerReference, which controller-gen marks atomic (a server-side
    # apply replaces it whole).
    "Command": {
        ".target": {
            "required": ["apiVersion", "kind", "name", "uid"],
            "type": "object",
            "x-kubernetes-map-type": "atomic",
        },
    },
}
