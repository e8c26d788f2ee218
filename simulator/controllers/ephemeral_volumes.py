"""Adapter standing in for kube-controller-manager's ephemeral volume controller: a pod's
generic ``ephemeral`` volume gets its claim, ``<pod>-<volume>``, made from the volume's
``volumeClaimTemplate`` and controlled by the pod (the scheduler waits for it until then)."""

from __future__ import annotations

from typing import Any

from hyperplace.runtime.api import clone

from ..cluster import Cluster


class EphemeralVolumes:
    """The ephemeral volume controller, over every pending pod."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reconcile(self) -> bool:
        """One pass; whether it made a claim."""
        c = self.cluster
        changed = False
        for pod in c.of_kind("Pod"):
            spec = pod.get("spec") or {}
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            meta = pod.get("metadata") or {}
            ns, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
            for v in spec.get("volumes") or []:
                template = (
                    (v.get("ephemeral") or {}).get("volumeClaimTemplate") if isinstance(v, dict) else None
                )
                if not isinstance(template, dict):
                    continue
                claim = f"{name}-{v.get('name')}"
                if ("PersistentVolumeClaim", ns, claim) in c.objects:
                    continue
                tmeta = template.get("metadata") or {}
                body: dict[str, Any] = {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": claim,
                        "namespace": ns,
                        "labels": dict(tmeta.get("labels") or {}),
                        "annotations": dict(tmeta.get("annotations") or {}),
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Pod",
                                "name": name,
                                "uid": meta.get("uid"),
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": clone(template.get("spec") or {}),
                    "status": {"phase": "Pending"},
                }
                body["spec"].setdefault("volumeMode", "Filesystem")
                c.create(body, "ephemeral-volume-controller", admit=False)
                changed = True
        return changed
