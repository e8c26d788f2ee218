"""Adapter of the PodGroup controller for pods of any controlling owner (``controller.podgroup``):
one PodGroup per owner, per JobSet or per LeaderWorkerSet group, the pods annotated with it; a
training operator's PodGroup gets its networkTopology from its annotations. A bare pod keeps
the scheduler's one-pod gang, as without the controller."""

from __future__ import annotations

from typing import Any

from hyperplace.api.constants import DEFAULT_SCHEDULER_NAME, GROUP_NAME_ANNOTATION
from hyperplace.api.workload import pod_group_name, volcano_intent
from hyperplace.kube.workloads import JOBSET_UID, controlled_podgroup_name, lws_group
from hyperplace.runtime.api import object_key

from ..cluster import Cluster
from ..store import key_of
from ..workloads import BATCH_JOB, LEADERWORKERSET, STATEFULSET


class PodGroups:
    """The PodGroup controller, over the pods no PodGroup names yet."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reconcile(self) -> bool:
        """One pass; whether it changed anything."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.podgroup.build import (
            LwsInfo,
            Owner,
            controller_ref,
            desired_podgroup,
            jobset_podgroup,
            lws_podgroup,
            operator_topology,
        )

        c = self.cluster
        changed = False
        for pg in c.of_kind("PodGroup"):
            # A training operator's PodGroup reads its topology annotations as its networkTopology
            # (hyperplace.api.topology_annotations); what could not be used is said here.
            _, problems = operator_topology(pg)
            for problem in problems:
                c.warn_once(f"PodGroup {object_key(pg)}: {problem.message}")
        tiers = c.admission.caches.tier_names() or {}
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for p in c.of_kind("Pod"):
            meta = p["metadata"]
            if (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION) or controller_ref(p) is None:
                continue
            if pod_group_name(p) is not None and not volcano_intent(p):
                continue  # in a scheduling.k8s.io PodGroup
            if (p.get("spec") or {}).get("schedulerName", DEFAULT_SCHEDULER_NAME) != DEFAULT_SCHEDULER_NAME:
                continue
            groups.setdefault(
                (meta.get("namespace") or "default", str(controlled_podgroup_name(p))), []
            ).append(p)
        kinds = {"Job": BATCH_JOB, "StatefulSet": STATEFULSET}
        for (ns, name), pods in groups.items():
            pod = max(
                pods, key=lambda p: (str(p["metadata"].get("creationTimestamp") or ""), p["metadata"]["name"])
            )
            labels = pod["metadata"].get("labels") or {}
            lws_of = lws_group(labels)
            if labels.get(JOBSET_UID):
                uid = labels[JOBSET_UID]
                jobs = [
                    j
                    for j in c.of_kind(BATCH_JOB)
                    if (j["metadata"].get("labels") or {}).get(JOBSET_UID) == uid
                ]
                special = jobset_podgroup(pod, jobs)
                if special is not None:
                    changed = self._store(ns, special, pods, f"JobSet {ns}/{name}") or changed
                continue
            if lws_of is not None:
                lws_obj = c.objects.get((LEADERWORKERSET, ns, lws_of[0]))
                if lws_obj is not None:
                    lm = lws_obj["metadata"]
                    info = LwsInfo(
                        lws_of[0],
                        str(lm.get("uid")),
                        {str(k): str(v) for k, v in (lm.get("annotations") or {}).items()},
                        (lws_obj.get("spec") or {}).get("startupPolicy"),
                    )
                    special = lws_podgroup(pods, info, tiers.get)
                    if special is not None:
                        changed = (
                            self._store(ns, special, pods, f"LeaderWorkerSet {ns}/{lws_of[0]}") or changed
                        )
                continue
            ref = controller_ref(pod) or {}
            kind = (
                kinds.get(str(ref.get("kind")))
                if str(ref.get("apiVersion", "")).split("/")[0] in ("batch", "apps")
                else None
            )
            owner_obj = c.objects.get((kind, ns, str(ref.get("name")))) if kind else None
            owner = Owner(str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid")))
            if owner_obj is not None:
                spec = owner_obj.get("spec") or {}
                if kind == BATCH_JOB:
                    n = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
                    replicas = n if spec.get("completions") is None else min(n, int(spec["completions"]))
                else:
                    replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
                ann = {
                    str(k): str(v)
                    for k, v in ((owner_obj.get("metadata") or {}).get("annotations") or {}).items()
                }
                owner = Owner(owner.kind, owner.name, owner.uid, ann, replicas)
            want = desired_podgroup(pod, owner)
            changed = self._store(ns, want, pods, f"{owner.kind} {ns}/{owner.name}") or changed
        return changed

    def _store(self, ns: str, want: Any, pods: list[dict[str, Any]], source: str) -> bool:
        """Create or update the PodGroup the PodGroup controller wants and name it on its pods;
        an annotation it could not use is a warning and the PodGroup's InvalidAnnotation condition."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.podgroup.build import invalid_condition, needs_update, updated, with_condition

        c = self.cluster
        for problem in want.problems:
            c.warn_once(f"Pod {ns}/{pods[0]['metadata']['name']}: {problem.message}")
        cond = invalid_condition(want.problems, c.clock.now)
        existing = c.objects.get(("PodGroup", ns, want.name))
        if existing is None:
            admitted = c.create({**want.podgroup, "status": with_condition(None, cond)}, source)
            if admitted is None:
                return False
            admitted.setdefault("status", with_condition(None, cond))
        elif needs_update(existing, want):
            new = updated(existing, want)
            new["status"] = with_condition(existing.get("status"), cond)
            c.objects[key_of(new)] = new
        for p in pods:
            p["metadata"].setdefault("annotations", {})[GROUP_NAME_ANNOTATION] = want.name
        return True
