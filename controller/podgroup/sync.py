"""The PodGroup controller for pods of any owner: informers and a work queue around
:mod:`controller.podgroup.build`.

Key ``namespace/podgroup-<uid>``. A pod of one of the scheduler's names without a PodGroup
(or in the one this controller made) queues its PodGroup; so does any change of its owner
(a StatefulSet's template or annotations, a ReplicaSet's, a batch Job's), and the deletion of
the PodGroup while pods still need it. A reconcile computes the PodGroup from the owner and
the newest pod (of the StatefulSet's update revision, as Volcano picks it), creates or updates
it, then annotates every pod of it that lacks ``scheduling.k8s.io/group-name``. Annotations
that could not be used become a Warning Event on each pod adopted and the PodGroup's
``InvalidAnnotation`` condition. A StatefulSet or ReplicaSet scaled to zero loses its
PodGroup (Volcano); otherwise the PodGroup goes with its owner through ownerReferences and
the garbage collector.

Pods of other schedulers, and pods in a PodGroup someone else named (a Volcano Job's, a
training operator's), are never touched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hyperplace.api.constants import GROUP_NAME_ANNOTATION
from hyperplace.api.topology_annotations import TRAINING_KINDS
from hyperplace.api.workload import pod_group_name, volcano_intent
from hyperplace.kube.workloads import JOBSET_UID, LWS_NAME, lws_group
from hyperplace.runtime.api import (
    BATCH_JOBS,
    EVENTS,
    LEADERWORKERSETS,
    PODGROUPS,
    PODS,
    REPLICASETS,
    STATEFULSETS,
    ApiClient,
    ApiError,
    Obj,
    meta,
)
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.status_writer import StatusWriter
from hyperplace.runtime.workqueue import WorkQueue

from .build import (
    INVALID_ANNOTATION,
    Desired,
    LwsInfo,
    Owner,
    Problem,
    controller_ref,
    desired_podgroup,
    invalid_condition,
    jobset_podgroup,
    lws_podgroup,
    needs_update,
    operator_topology,
    podgroup_name,
    updated,
    with_condition,
)

log = logging.getLogger(__name__)

REVISION_LABEL = "controller-revision-hash"
COMPONENT = "hyperplace-controller"
OWNER_SYNC_WAIT = 30.0
# Work-queue keys of training operators' PodGroups to give a networkTopology.
OPERATOR_PREFIX = "operator:"


def _replicas(obj: Mapping[str, Any]) -> int:
    v = (obj.get("spec") or {}).get("replicas")
    return 1 if v is None else int(v)


def _job_pods(obj: Mapping[str, Any]) -> int:
    """Pods a batch Job runs at once: parallelism (1 when unset), at most completions."""
    spec = obj.get("spec") or {}
    par = spec.get("parallelism")
    par = 1 if par is None else int(par)
    comp = spec.get("completions")
    return par if comp is None else min(par, int(comp))


class PodGroupController:
    """PodGroups for pods of any owner; see the module docstring."""

    def __init__(
        self,
        api: ApiClient,
        pods: Informer,
        podgroups: Informer,
        status_writer: StatusWriter,
        *,
        scheduler_names: Sequence[str],
        inherit_owner_annotations: bool = True,
        now: Callable[[], str],
        on_write: Callable[[str, str], None] = lambda _res, _verb: None,
        tier_of_label: Callable[[str], int | None] = lambda _key: None,
    ) -> None:
        self.api = api
        self.pods = pods
        self.podgroups = podgroups
        self.status_writer = status_writer
        self.scheduler_names = tuple(scheduler_names)
        self.inherit = inherit_owner_annotations
        self._now = now
        self._on_write = on_write
        self.tier_of_label = tier_of_label
        self.batch_jobs = Informer(api, BATCH_JOBS)
        # LeaderWorkerSets (startup policy, annotations); their CRD may not be installed.
        self.leaderworkersets = Informer(api, LEADERWORKERSETS)
        self.statefulsets = Informer(api, STATEFULSETS)
        self.replicasets = Informer(api, REPLICASETS)
        self.owner_informers = {
            "Job": self.batch_jobs,
            "StatefulSet": self.statefulsets,
            "ReplicaSet": self.replicasets,
        }
        self.queue: WorkQueue[str] = WorkQueue(name="podgroups")
        # (pod uid, message) of Warning Events already written: one per pod and problem.
        self._warned: set[tuple[str, str]] = set()
        self._deadline: float | None = None
        self._wire()

    def _owner_deadline(self) -> float:
        """Until when a reconcile waits for the owner informers' first listing; past it (the
        owners cannot be listed: RBAC) PodGroups are made from the pods alone."""
        if self._deadline is None:
            self._deadline = time.monotonic() + OWNER_SYNC_WAIT
        return self._deadline

    @property
    def informers(self) -> list[Informer]:
        return [*self.owner_informers.values(), self.leaderworkersets]

    # -- which pods are ours ----------------------------------------------------------------

    def group_of(self, pod: Mapping[str, Any]) -> str | None:
        """``namespace/podgroup-<uid>`` of a pod this controller serves, else None."""
        if (pod.get("spec") or {}).get("schedulerName") not in self.scheduler_names:
            return None
        if pod_group_name(pod) is not None and not volcano_intent(pod):
            return None  # in a scheduling.k8s.io PodGroup of its own controller's
        m = meta(pod)
        name = podgroup_name(pod)
        have = (m.get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        if have and have != name:
            return None  # a PodGroup someone else made (a Volcano Job's, an operator's)
        return f"{m.get('namespace') or 'default'}/{name}"

    def _wire(self) -> None:
        self.pods.add_index("podgroup-of", lambda o: [k] if (k := self.group_of(o)) else [])

        def pod_added(o: Obj) -> None:
            if (k := self.group_of(o)) is not None:
                self.queue.add(k)

        def pod_updated(old: Obj, new: Obj) -> None:
            k = self.group_of(new)
            if k is None:
                return
            mo, mn = meta(old), meta(new)
            lacks = GROUP_NAME_ANNOTATION not in (mn.get("annotations") or {})
            if (
                lacks
                or mo.get("annotations") != mn.get("annotations")
                or mo.get("labels") != mn.get("labels")
            ):
                self.queue.add(k)

        self.pods.add_handler(pod_added, pod_updated, None)
        self.pods.add_index(
            "lws",
            lambda o: (
                [f"{meta(o).get('namespace')}/{n}"]
                if (n := (meta(o).get("labels") or {}).get(LWS_NAME))
                else []
            ),
        )
        self.batch_jobs.add_index(
            "jobset", lambda o: [str(u)] if (u := (meta(o).get("labels") or {}).get(JOBSET_UID)) else []
        )

        def lws_event(o: Obj) -> None:
            m = meta(o)
            for p in self.pods.by_index("lws", f"{m.get('namespace')}/{m.get('name')}"):
                if (k := self.group_of(p)) is not None:
                    self.queue.add(k)

        self.leaderworkersets.add_handler(lws_event, lambda _old, new: lws_event(new), None)

        def pg_topology(o: Obj) -> None:
            # A training operator's PodGroup whose topology annotations could not be used.
            ref = controller_ref(o)
            if ref is None or ref.get("kind") not in TRAINING_KINDS:
                return
            if operator_topology(o)[1] or _condition(o.get("status") or {}) is not None:
                self.queue.add(f"{OPERATOR_PREFIX}{meta(o).get('namespace')}/{meta(o).get('name')}")

        self.podgroups.add_handler(pg_topology, lambda _old, new: pg_topology(new), None)

        def pg_deleted(o: Obj) -> None:
            key = f"{meta(o).get('namespace')}/{meta(o).get('name')}"
            if self.pods.by_index("podgroup-of", key):
                self.queue.add(key)  # pods still need it: make it again

        self.podgroups.add_handler(None, None, pg_deleted)

        def owner_event(o: Obj) -> None:
            m = meta(o)
            self.queue.add(f"{m.get('namespace')}/podgroup-{m.get('uid')}")
            if (js := (m.get("labels") or {}).get(JOBSET_UID)) is not None:
                self.queue.add(f"{m.get('namespace')}/podgroup-{js}")  # a JobSet's Job came or changed

        def owner_changed(old: Obj, new: Obj) -> None:
            # Status-only updates (every pod start bumps a StatefulSet's) change nothing here,
            # except the update revision a rolling StatefulSet moves to.
            mo, mn = meta(old), meta(new)
            if (
                old.get("spec") != new.get("spec")
                or mo.get("annotations") != mn.get("annotations")
                or (old.get("status") or {}).get("updateRevision")
                != (new.get("status") or {}).get("updateRevision")
            ):
                owner_event(new)

        for inf in self.owner_informers.values():
            inf.add_handler(owner_event, owner_changed, None)

    # -- reading ----------------------------------------------------------------------------

    def owner_of(self, pod: Mapping[str, Any]) -> tuple[Owner | None, Mapping[str, Any] | None]:
        """The pod's controlling owner as the controller reads it, and its object (if cached)."""
        ref = controller_ref(pod)
        if ref is None:
            return None, None
        kind, name, uid = str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid"))
        inf = self.owner_informers.get(kind)
        obj = inf.get(f"{meta(pod).get('namespace')}/{name}") if inf is not None else None
        if obj is None or meta(obj).get("uid") != uid:
            return Owner(kind, name, uid), None
        annotations = {str(k): str(v) for k, v in (meta(obj).get("annotations") or {}).items()}
        replicas = _job_pods(obj) if kind == "Job" else _replicas(obj)
        return Owner(kind, name, uid, annotations, replicas), obj

    @staticmethod
    def representative(pods: Sequence[Obj], owner_obj: Mapping[str, Any] | None) -> Obj | None:
        """The pod the PodGroup is built from: the newest live one, of the StatefulSet's update
        revision when there is one (Volcano builds from a pod of that revision)."""
        live = [p for p in pods if not meta(p).get("deletionTimestamp")] or list(pods)
        if not live:
            return None
        revision = ((owner_obj or {}).get("status") or {}).get("updateRevision")
        if revision:
            current = [p for p in live if (meta(p).get("labels") or {}).get(REVISION_LABEL) == revision]
            live = current or live
        return max(
            live, key=lambda p: (str(meta(p).get("creationTimestamp") or ""), str(meta(p).get("name")))
        )

    # -- reconcile --------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        if key.startswith(OPERATOR_PREFIX):
            await self._operator_topology(key[len(OPERATOR_PREFIX) :])
            return
        ns, _, name = key.partition("/")
        pods = self.pods.by_index("podgroup-of", key)
        existing = self.podgroups.get(key)
        if not pods:
            return  # nothing to serve; a PodGroup left goes with its owner (ownerReferences)
        if all(meta(p).get("deletionTimestamp") for p in pods):
            # Every pod is leaving (its owner deleted, a finalizer holding it a while): a
            # PodGroup made now would start them again, a pod at a time.
            return
        pod = self.representative(pods, None)
        assert pod is not None
        workload = await self._workload(key, pods, pod)
        if workload is not None:
            desired, ready = workload
            if not ready or desired is None:
                self.queue.add_after(key, 0.5)  # its Jobs or its LeaderWorkerSet not seen yet
                return
            await self._write(ns, desired, existing)
            await self._adopt(ns, desired, pods)
            return
        ref = controller_ref(pod)
        inf = self.owner_informers.get(str(ref.get("kind"))) if ref is not None else None
        if inf is not None and not inf.synced.is_set() and time.monotonic() < self._owner_deadline():
            # Its owner's annotations (minMember) are not known yet: a PodGroup of minMember 1
            # now would let the scheduler start the gang a pod at a time.
            self.queue.add_after(key, 1.0)
            return
        owner, owner_obj = self.owner_of(pod)
        if owner_obj is None and inf is not None and inf.synced.is_set():
            # The owner is gone and its pods go with it (the garbage collector): without its
            # annotations the PodGroup would be a gang of one. An owner only late in its
            # informer queues this key again when it arrives (owner_event).
            return
        if owner_obj is not None and owner is not None and owner.kind in ("StatefulSet", "ReplicaSet"):
            if _replicas(owner_obj) == 0:
                await self._delete(ns, name, existing)  # Volcano: a scaled-to-zero owner has none
                return
            pod = self.representative(pods, owner_obj) or pod
        desired = desired_podgroup(pod, owner, inherit_owner_annotations=self.inherit)
        await self._write(ns, desired, existing)
        await self._adopt(ns, desired, pods)

    async def _workload(self, key: str, pods: Sequence[Obj], pod: Obj) -> tuple[Desired | None, bool] | None:
        """The PodGroup of a JobSet or of a LeaderWorkerSet group ((None, False): not all of it
        is known yet), or None for a pod of any other owner."""
        labels = meta(pod).get("labels") or {}
        ref = controller_ref(pod)
        if labels.get(JOBSET_UID) and ref is not None and ref.get("kind") == "Job":
            if not self.batch_jobs.synced.is_set():
                return None, False
            return jobset_podgroup(pod, self.batch_jobs.by_index("jobset", str(labels[JOBSET_UID]))), True
        group = lws_group(labels)
        if group is None:
            return None
        ns = str(meta(pod).get("namespace"))
        info = self._lws_info(ns, group[0])
        if info is None:
            return None, False
        return lws_podgroup(pods, info, self.tier_of_label), True

    def _lws_info(self, ns: str, name: str) -> LwsInfo | None:
        """The LeaderWorkerSet from its informer, else from its leader StatefulSet's reference."""
        lws = self.leaderworkersets.get(f"{ns}/{name}")
        if lws is not None:
            m = meta(lws)
            ann = {str(k): str(v) for k, v in (m.get("annotations") or {}).items()}
            policy = (lws.get("spec") or {}).get("startupPolicy")
            return LwsInfo(name, str(m.get("uid")), ann, str(policy) if policy else None)
        sts = self.statefulsets.get(f"{ns}/{name}")
        ref = controller_ref(sts) if sts is not None else None
        if ref is not None and ref.get("kind") == "LeaderWorkerSet":
            return LwsInfo(name, str(ref.get("uid")))
        return None

    async def _operator_topology(self, key: str) -> None:
        """Say on a training operator's PodGroup which of its topology annotations could not
        be used. The annotations themselves stand for its networkTopology wherever it is read
        (hyperplace.api.topology_annotations): writing the field would start a fight, as the
        operator rewrites the PodGroup without it on every reconcile."""
        pg = self.podgroups.get(key)
        if pg is None:
            return
        _, problems = operator_topology(pg)
        ns, _, name = key.partition("/")
        status = pg.get("status") or {}
        want = with_condition(status, invalid_condition(problems, self._now()))
        if _condition(status) != _condition(want):
            await self.status_writer.patch_status(
                PODGROUPS, name, {"status": {"conditions": want.get("conditions") or None}}, ns
            )
            self._on_write("podgroups", "patch-status")

    async def _delete(self, ns: str, name: str, existing: Mapping[str, Any] | None) -> None:
        if existing is None:
            return
        try:
            await self.api.delete(PODGROUPS, name, ns, uid=meta(existing).get("uid"))
            self._on_write("podgroups", "delete")
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise

    async def _write(self, ns: str, desired: Desired, existing: Mapping[str, Any] | None) -> None:
        cond = invalid_condition(desired.problems, self._now())
        if existing is None:
            # Volcano's PodGroup CRD keeps the status sent on create; one with a status
            # subresource drops it, and the condition is then patched below.
            body = {**desired.podgroup, "status": with_condition(None, cond)}
            try:
                existing = await self.api.create(PODGROUPS, body, ns)
                self._on_write("podgroups", "create")
            except ApiError as exc:
                if not exc.already_exists:
                    raise
                return  # made meanwhile: its event brings the next reconcile
        elif needs_update(existing, desired):
            existing = await self.api.replace(PODGROUPS, updated(existing, desired), ns)
            self._on_write("podgroups", "update")
        status = existing.get("status") or {}
        want = with_condition(status, cond)
        if _condition(status) != _condition(want):
            conds = want.get("conditions") or []
            await self.status_writer.patch_status(
                PODGROUPS, desired.name, {"status": {"conditions": conds or None}}, ns
            )
            self._on_write("podgroups", "patch-status")

    async def _adopt(self, ns: str, desired: Desired, pods: Sequence[Obj]) -> None:
        """Name the PodGroup on every pod of it (Volcano's ``updatePodAnnotations``), and warn
        each pod once about every annotation that was not understood."""
        for pod in pods:
            m = meta(pod)
            if (m.get("annotations") or {}).get(GROUP_NAME_ANNOTATION) != desired.name:
                patch = {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: desired.name}}}
                try:
                    await self.api.patch(PODS, str(m.get("name")), patch, ns)
                    self._on_write("pods", "patch")
                except ApiError as exc:
                    if not exc.not_found:
                        raise
                    continue
            for problem in desired.problems:
                await self._warn(pod, problem)

    async def _warn(self, pod: Mapping[str, Any], problem: Problem) -> None:
        m = meta(pod)
        seen = (str(m.get("uid")), problem.message)
        if seen in self._warned:
            return
        now = self._now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{m.get('name')}.", "namespace": m.get("namespace")},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": m.get("name"),
                "namespace": m.get("namespace"),
                "uid": m.get("uid"),
            },
            "type": "Warning",
            "reason": INVALID_ANNOTATION,
            "message": problem.message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.api.create(EVENTS, body, str(m.get("namespace")))
            self._on_write("events", "create")
        except ApiError as exc:
            log.warning("event for pod %s/%s: %s", m.get("namespace"), m.get("name"), exc)
            return
        self._warned.add(seen)


def _condition(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == INVALID_ANNOTATION
        ),
        None,
    )
