"""The scheduler in a simulation: one session per cycle on the simulated cluster, and its
decisions applied as the API server would take them.

A session runs on the scheduler's cluster state (``scheduler_plugin.cache``), kept across
cycles as a scheduler process keeps it and brought up to date with what changed; its
victims are evicted at once, its bindings applied (the pod gets ``spec.nodeName``, phase
Running, ``PodScheduled``), and the PodGroups and Queues get the status the scheduler reports.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from hyperplace.api import HyperNode, PodGroup, Queue
from hyperplace.api.constants import JOB_ALLOCATED_HYPERNODE_ANNOTATION
from hyperplace.api.times import rfc3339
from hyperplace.api.workload import (
    UpstreamPodGroup,
    as_volcano_podgroup,
    initially_scheduled_conditions,
    with_upstream,
)
from hyperplace.kube.objects import namespaced_key

from .clock import strip_times
from .cluster import Cluster
from .loader import UPSTREAM_PODGROUP, scheduler_conf_from_configmaps
from .result import SimulationError


class Scheduler:
    """The scheduler of a simulation and what it decided over the run."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        conf_text: str | None = None,
        conf_source: str = "--scheduler-config",
        verify_state: bool | None = None,
    ) -> None:
        """``conf_text``: volcano-scheduler.conf given apart from the input (``conf_source``
        names it). ``verify_state``: rebuild the scheduler's snapshot from scratch every cycle
        and fail on a difference (default: the ``HYPERPLACE_VERIFY_STATE=1`` environment
        variable)."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from scheduler_plugin.cache.cluster_state import ClusterState

        self.cluster = cluster
        self._conf_text = conf_text
        self._conf_source = conf_source
        if verify_state is None:
            verify_state = os.environ.get("HYPERPLACE_VERIFY_STATE") == "1"
        self.verify_state = verify_state
        self.config: Any = None
        # The scheduler's cluster state, kept across cycles; it shares the HyperNode member index.
        self.state = ClusterState(detach=True, members=cluster.members)
        self.history: Any = None  # run times of finished gangs (made on first use)
        self.nominations: dict[str, Any] = {}  # held for the next session, as the scheduler does
        self.reservations: dict[str, Any] = {}  # head-of-queue holds, kept across cycles too
        self.ran = False
        self.snapshot: Any = None  # the last session's
        self.clock: float | None = None  # the last session's time (epoch seconds)
        self.session: Any = None  # the last SessionResult
        self.bindings: dict[str, str] = {}  # "ns/pod" -> node, in binding order
        self.bound_in_cycle: dict[str, int] = {}
        self.outcomes: dict[str, Any] = {}  # "ns/podgroup" -> the last JobOutcome
        self.unschedulable: dict[str, str] = {}  # "ns/pod" -> reason, from the last session that tried it
        self.preemptions: list[Any] = []  # Eviction records, in order
        self.preemption_reasons: dict[str, str] = {}  # preemptor job key -> why that domain

    def _load_config(self) -> Any:
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG, ConfigError, load_scheduler_config

        inputs = self.cluster.inputs
        text, source = self._conf_text, self._conf_source
        if text is None and inputs.scheduler_conf is not None:
            text, source = inputs.scheduler_conf, inputs.scheduler_conf_source or "scheduler.conf"
        if text is None:
            from_cm = scheduler_conf_from_configmaps(inputs.objects)
            if from_cm is not None:
                text, source = from_cm
        if text is None:
            return DEFAULT_CONFIG
        try:
            return load_scheduler_config(text, source=source)
        except ConfigError as exc:  # its message names the source, the field and the line
            raise SimulationError(f"invalid scheduler configuration: {exc}") from None

    def _runtime_history(self) -> Any:
        """The run times of finished gangs the scheduler learns, kept across cycles as its
        process keeps them."""
        if self.history is None:
            # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
            from scheduler_plugin.model.runtime_history import RuntimeHistory

            self.history = RuntimeHistory()
        return self.history

    def can_change_anything(self) -> bool:
        """False when no pod is pending and every PodGroup already has the scheduler's
        verdict: a session then binds nothing and reports what it reported before, so the
        (costly, on big clusters) snapshot is not rebuilt."""
        c = self.cluster
        for p in c.of_kind("Pod"):
            if (
                not (p.get("spec") or {}).get("nodeName")
                and (p.get("status") or {}).get("phase") == "Pending"
            ):
                return True
        return any(
            namespaced_key(pg) not in self.outcomes
            for kind in ("PodGroup", UPSTREAM_PODGROUP)
            for pg in c.of_kind(kind)
        )

    def run_session(self) -> bool:
        """One scheduler session; returns whether it changed anything (bindings, PodGroups)."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from scheduler_plugin.cache.rebuild import build_snapshot
        from scheduler_plugin.cache.storage import StorageListing
        from scheduler_plugin.cycle import run_session
        from scheduler_plugin.cycle.carried import verify_state

        c = self.cluster
        if self.config is None:
            self.config = self._load_config()
        pods = c.of_kind("Pod")
        c.progress.start(f"cycle {c.clock.cycle}: scheduling {len(pods)} pods", None)
        # The scheduler's state is kept across cycles and brought up to date with what changed
        # (the simulator edits objects in place, so the state compares contents).
        nodes, hns = c.of_kind("Node"), [m for _, m in c.models(HyperNode)]
        pgs, queues = [m for _, m in c.models(PodGroup)], [m for _, m in c.models(Queue)]
        # Kubernetes' own PodGroups, as the jobs the scheduler builds from them.
        upstream = [as_volcano_podgroup(m) for _, m in c.models(UpstreamPodGroup, UPSTREAM_PODGROUP)]
        pgs, clashes = with_upstream(pgs, upstream)
        for key in clashes:
            c.warn_once(
                f"PodGroup.scheduling.k8s.io {key}: a Volcano PodGroup of the same name is scheduled instead"
            )
        pcs = c.of_kind("PriorityClass")
        pdbs, quotas = c.of_kind("PodDisruptionBudget"), c.of_kind("ResourceQuota")
        storage = StorageListing(
            claims=c.of_kind("PersistentVolumeClaim"),
            volumes=c.of_kind("PersistentVolume"),
            classes=c.of_kind("StorageClass"),
            csinodes=c.of_kind("CSINode"),
            drivers=c.of_kind("CSIDriver"),
            capacities=c.of_kind("CSIStorageCapacity"),
            device_classes=c.of_kind("DeviceClass"),
            resource_slices=c.of_kind("ResourceSlice"),
            resource_claims=c.of_kind("ResourceClaim"),
            claim_templates=c.of_kind("ResourceClaimTemplate"),
            device_taint_rules=c.of_kind("DeviceTaintRule"),
        )
        namespaces = c.of_kind("Namespace")
        self.state.replace_all(nodes, pods, hns, pgs, queues, pcs, pdbs, quotas, namespaces, storage=storage)
        snap = self.state.snapshot()
        if self.verify_state:
            rebuilt = build_snapshot(
                nodes=nodes,
                pods=pods,
                hypernodes=hns,
                podgroups=pgs,
                queues=queues,
                priority_classes=pcs,
                pdbs=pdbs,
                quotas=quotas,
                namespaces=namespaces,
                storage=storage,
            )
            verify_state(self.state, snap, rebuilt)
        # Candidates are recorded for ``explain`` (bounded per tier; the decisions are the same).
        self.clock = c.clock.scheduler_clock()
        result = run_session(
            snap,
            config=self.config,
            nominations=self.nominations,
            record_candidates=True,
            now=self.clock,
            reserve=c.clock.given,
            reservations=self.reservations,
            history=self._runtime_history(),
        )
        self.reservations = dict(result.reservations)
        self.snapshot, self.session, self.ran = snap, result, True
        self._evict(result)
        before = {
            namespaced_key(pg): strip_times(pg)
            for k in ("PodGroup", UPSTREAM_PODGROUP)
            for pg in c.of_kind(k)
        }
        bound = self._bind(result)
        self._podgroup_status(result)
        self._queue_status(result)
        after = {
            namespaced_key(pg): strip_times(pg)
            for k in ("PodGroup", UPSTREAM_PODGROUP)
            for pg in c.of_kind(k)
        }
        return bound > 0 or before != after or bool(result.evictions)

    def _evict(self, result: Any) -> None:
        """Victims are evicted at once (the simulator has no grace period): their room is free
        in the next cycle, where the preemptor binds on its nominated nodes; a Job's controller
        recreates its evicted pods, pending."""
        c = self.cluster
        self.nominations = dict(result.nominations)
        for ev in result.evictions:
            ns, _, name = ev.victim.partition("/")
            pod = c.objects.pop(("Pod", ns, name), None)
            if pod is not None:
                c.evicted_pods.append(pod)
                c.evictions.append(ev.victim)
                self.preemptions.append(ev)
                self.bindings.pop(ev.victim, None)
        for jkey, nom in result.nominations.items():
            self.preemption_reasons[jkey] = nom.reason

    def _prebind(self, result: Any) -> None:
        """kube-scheduler's VolumeBinding PreBind, before the binds: a claim the session matched
        to a volume gets it as the volume's claimRef, a claim to provision the selected-node
        annotation; the PersistentVolume controller binds them in the next round."""
        if not result.volumes:
            return
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from scheduler_plugin.filters.volumes import pod_claim_keys

        c = self.cluster
        wanted: dict[str, None] = {}
        for pod_key in result.bindings:
            ns, _, name = pod_key.partition("/")
            pod = c.objects.get(("Pod", ns, name))
            for key, _eph in pod_claim_keys(pod) if pod is not None else ():
                wanted[key] = None
        for key in wanted:
            d = result.volumes.get(key)
            if d is None:
                continue
            ns, _, name = key.partition("/")
            claim = c.objects.get(("PersistentVolumeClaim", ns, name))
            if claim is None:
                continue
            cm = claim.setdefault("metadata", {})
            if d.volume is not None:
                pv = c.objects.get(("PersistentVolume", "", d.volume))
                if pv is None or (pv.get("spec") or {}).get("claimRef"):
                    continue
                pv.setdefault("spec", {})["claimRef"] = {
                    "kind": "PersistentVolumeClaim",
                    "apiVersion": "v1",
                    "namespace": ns,
                    "name": name,
                    "uid": cm.get("uid") or "",
                }
                pv.setdefault("metadata", {}).setdefault("annotations", {})[
                    "pv.kubernetes.io/bound-by-controller"
                ] = "yes"
                c.objects[("PersistentVolume", "", d.volume)] = pv
            elif d.node is not None:
                cm.setdefault("annotations", {})["volume.kubernetes.io/selected-node"] = d.node
                c.objects[("PersistentVolumeClaim", ns, name)] = claim

    def _prebind_devices(self, result: Any) -> None:
        """kube-scheduler's DynamicResources PreBind, before the binds: a ResourceClaim the
        session allocated gets ``status.allocation`` (and the delete-protection finalizer), and
        every claim of a bound pod the pod in ``status.reservedFor``."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from scheduler_plugin.filters.dra import compile_pod_claims
        from scheduler_plugin.filters.dra_allocator import allocation_to_wire

        c = self.cluster
        for pod_key in result.bindings:
            ns, _, name = pod_key.partition("/")
            pod = c.objects.get(("Pod", ns, name))
            if pod is None or not (pod.get("spec") or {}).get("resourceClaims"):
                continue
            pc = compile_pod_claims(pod)
            for ref in pc.refs:
                if ref.claim_name is None:
                    continue
                claim = c.objects.get(("ResourceClaim", ns, ref.claim_name))
                if claim is None:
                    continue
                status = claim.setdefault("status", {})
                decided = result.claims.get(pc.key(ref))
                if decided is not None and not status.get("allocation"):
                    fins = claim.setdefault("metadata", {}).setdefault("finalizers", [])
                    if "resource.kubernetes.io/delete-protection" not in fins:
                        fins.append("resource.kubernetes.io/delete-protection")
                    status["allocation"] = allocation_to_wire(decided.allocation)
                reserved = status.setdefault("reservedFor", [])
                uid = str((pod.get("metadata") or {}).get("uid") or "")
                if all(r.get("uid") != uid for r in reserved):
                    reserved.append({"resource": "pods", "name": name, "uid": uid})
                c.objects[("ResourceClaim", ns, ref.claim_name)] = claim  # a change the store logs

    def _bind(self, result: Any) -> int:
        """The session's bindings applied (after its claims' writes); how many pods were bound."""
        c = self.cluster
        self._prebind(result)
        self._prebind_devices(result)
        bound = 0
        for pod_key, node in result.bindings.items():
            ns, _, name = pod_key.partition("/")
            pod = c.objects.get(("Pod", ns, name))
            if pod is None or (pod.get("spec") or {}).get("nodeName"):
                continue
            pod.setdefault("spec", {})["nodeName"] = node
            status = pod.setdefault("status", {})
            status["phase"] = "Running"
            # As the apiserver's binding does: PodScheduled True from now (the cooldown of
            # volcano.sh/cooldown-time counts from it), and the kubelet's start time.
            since = rfc3339(c.clock.scheduler_clock())
            status["conditions"] = [
                *(x for x in status.get("conditions") or [] if x.get("type") != "PodScheduled"),
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": since},
            ]
            status.setdefault("startTime", since)
            self.bindings[pod_key] = node
            self.bound_in_cycle[pod_key] = c.clock.cycle
            self.unschedulable.pop(pod_key, None)
            bound += 1
        for pod_key, reason in result.unschedulable.items():
            if pod_key not in self.bindings:
                self.unschedulable[pod_key] = reason
        return bound

    def _podgroup_status(self, result: Any) -> None:
        """Each job's outcome kept, and its PodGroup's phase, conditions and HyperNode written."""
        c = self.cluster
        for pg_key, outcome in result.jobs.items():
            prev = self.outcomes.get(pg_key)
            earlier = prev.candidates if prev is not None and prev.phase == "Running" else None
            if outcome.candidates is not None:
                # More pods of a running job: the search that chose its domain came earlier.
                found = outcome.candidates
                outcome = result.own_job(pg_key)
                outcome.candidates = found.after(earlier)
            elif outcome.phase == "Running":
                # Settled since: the domain search that placed it was an earlier cycle's.
                outcome = result.own_job(pg_key)
                outcome.candidates = earlier
            self.outcomes[pg_key] = outcome
            ns, _, name = pg_key.partition("/")
            pg = c.objects.get(("PodGroup", ns, name))
            if pg is None:
                upg = c.objects.get((UPSTREAM_PODGROUP, ns, name))
                if upg is not None:
                    self._upstream_status(upg, outcome)
                continue
            status = pg.setdefault("status", {})
            if outcome.pg_phase or outcome.phase:
                status["phase"] = outcome.pg_phase or outcome.phase
            if outcome.conditions is not None:
                # The PodGroup controller's condition stays (the reporter keeps it too).
                kept = [x for x in status.get("conditions") or [] if x.get("type") == "InvalidAnnotation"]
                conds = c.clock.freeze_times(copy.deepcopy(list(outcome.conditions)))
                status["conditions"] = [*kept, *conds] or None
                if status["conditions"] is None:
                    del status["conditions"]
            if outcome.allocated_hypernode:
                pg.setdefault("metadata", {}).setdefault("annotations", {})[
                    JOB_ALLOCATED_HYPERNODE_ANNOTATION
                ] = outcome.allocated_hypernode

    def _upstream_status(self, pg: dict[str, Any], outcome: Any) -> None:
        """A scheduling.k8s.io PodGroup's ``PodGroupInitiallyScheduled``, as kube-scheduler
        writes it (the rest of its status is not the scheduler's)."""
        expl = outcome.explanation
        message = expl.message() if expl is not None else "waiting for the gang's pods"
        conds = initially_scheduled_conditions(
            pg, outcome.phase == "Running", message, self.cluster.clock.now
        )
        if conds is not None:
            pg.setdefault("status", {})["conditions"] = conds

    def _queue_status(self, result: Any) -> None:
        """The scheduler's part of Queue status."""
        for q in self.cluster.of_kind("Queue"):
            qo = result.queues.get(str((q.get("metadata") or {}).get("name")))
            if qo is not None:
                q.setdefault("status", {})["allocated"] = qo.to_dict()["allocated"]
