"""Adapter standing in for kube-controller-manager's resourceclaim controller: a pod's
``spec.resourceClaims`` entry naming a ``resourceClaimTemplateName`` gets its ResourceClaim,
``<pod>-<claim>-<suffix>``, made from the template's ``spec.spec`` and controlled by the pod, and
the pod's ``status.resourceClaimStatuses`` names it (the scheduler waits for it until then); a
claim's ``reservedFor`` loses the pods that are gone or finished, a claim no pod holds any more is
deallocated, and a claim made for a pod that is gone is deleted."""

from __future__ import annotations

import hashlib
from typing import Any

from hyperplace.runtime.api import clone

from ..cluster import Cluster

CLAIM = "ResourceClaim"
TEMPLATE = "ResourceClaimTemplate"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"  # the annotation the controller sets


def _suffix(uid: str, claim: str) -> str:
    """The generated name's random part, stable per pod and claim (a replay makes the same)."""
    return hashlib.sha256(f"{uid}/{claim}".encode()).hexdigest()[:5]


class ResourceClaims:
    """The resourceclaim controller, over every pod and claim."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reconcile(self) -> bool:
        """One pass; whether it made, released or deleted a claim."""
        c = self.cluster
        changed = False
        live: dict[str, str] = {}  # uid -> pod key, of pods not finished
        for pod in c.of_kind("Pod"):
            meta = pod.get("metadata") or {}
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            live[str(meta.get("uid") or "")] = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            changed |= self._make_claims(pod)
        for claim in list(c.of_kind(CLAIM)):
            changed |= self._release(claim, live)
        return changed

    def _make_claims(self, pod: dict[str, Any]) -> bool:
        c = self.cluster
        spec = pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        ns, name, uid = (
            str(meta.get("namespace") or "default"),
            str(meta.get("name")),
            str(meta.get("uid") or ""),
        )
        status = pod.setdefault("status", {})
        have = {s.get("name") for s in status.get("resourceClaimStatuses") or []}
        changed = False
        for ref in spec.get("resourceClaims") or []:
            tname = ref.get("resourceClaimTemplateName") if isinstance(ref, dict) else None
            if not tname or ref.get("name") in have:
                continue
            template = c.objects.get((TEMPLATE, ns, str(tname)))
            if template is None:
                continue  # the pod waits: the claim cannot be made yet
            tmeta = (template.get("spec") or {}).get("metadata") or {}
            cname = f"{name}-{ref.get('name')}-{_suffix(uid, str(ref.get('name')))}"
            if (CLAIM, ns, cname) not in c.objects:
                body: dict[str, Any] = {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": CLAIM,
                    "metadata": {
                        "name": cname,
                        "namespace": ns,
                        "labels": dict(tmeta.get("labels") or {}),
                        "annotations": {
                            **dict(tmeta.get("annotations") or {}),
                            POD_CLAIM_NAME: str(ref.get("name")),
                        },
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Pod",
                                "name": name,
                                "uid": uid,
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": clone((template.get("spec") or {}).get("spec") or {}),
                }
                c.create(body, "resourceclaim-controller", admit=False)
            status.setdefault("resourceClaimStatuses", []).append(
                {"name": ref.get("name"), "resourceClaimName": cname}
            )
            changed = True
        if changed:
            c.objects[("Pod", ns, name)] = pod  # a change the store logs
        return changed

    def _release(self, claim: dict[str, Any], live: dict[str, str]) -> bool:
        c = self.cluster
        meta = claim.get("metadata") or {}
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        kept = [r for r in reserved if r.get("resource") != "pods" or str(r.get("uid") or "") in live]
        changed = False
        if len(kept) != len(reserved):
            status["reservedFor"] = kept
            changed = True
        if not kept and status.get("allocation"):
            status.pop("allocation", None)
            status.pop("reservedFor", None)
            changed = True
        owner = next(
            (o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod" and o.get("controller")),
            None,
        )
        if owner is not None and str(owner.get("uid") or "") not in live and not status.get("allocation"):
            c.objects.pop((CLAIM, str(meta.get("namespace") or "default"), str(meta.get("name"))), None)
            return True
        if changed:
            claim["status"] = status
            c.objects[(CLAIM, str(meta.get("namespace") or "default"), str(meta.get("name")))] = claim
        return changed
