"""Volcano Job -> PodGroup + pods, as a pure function (no I/O, deterministic).

This reproduces Volcano's job controller (``pkg/controllers/job/job_controller_actions.go``
``createOrUpdatePodGroup``/``syncJob`` and ``job_controller_util.go`` ``createJobPod``) for
the fields the suite relies on. The in-process simulator and the async manager both call
:func:`reconcile_job`; the manager turns the result into API calls.

PodGroup (``<job>-<jobUID>`` in the job's namespace, controller ownerReference to the Job):

* ``minMember`` = ``job.spec.minAvailable``. When that is unset (admission bypassed), the
  sum of the tasks' ``minTaskMember``, which is what Volcano's mutating webhook would have
  written into the job.
* ``minTaskMember[task]`` = ``task.minAvailable``; else ``minPartitions * partitionSize``
  when the task has a partition policy and both are non-zero; else ``replicas``.
* ``queue`` (``default`` when unset), ``priorityClassName``.
* ``minResources``: Volcano's ``calcPGMinResources`` over the tasks' templates (not over
  live pods): tasks are sorted by descending priority (``priority_classes`` maps a
  template's ``priorityClassName`` to its value; unknown classes count as 0). When
  ``job.minAvailable`` < the sum of the tasks' minimum members, it is the requests of the
  first ``minAvailable`` pods in that order (``CalcFirstCountResources``); otherwise every
  task contributes its own minimum first and the rest is filled from the remaining
  replicas, higher priority first (``CalcPGMinResources``). A pod's request is what the
  scheduler will charge it (``hyperplace.kube.requests.pod_requests``: containers and
  sidecars, at least the largest init container with the sidecars before it, a resource's
  limit standing in for a missing request, plus ``overhead``). Go's
  ``sort.Sort`` is not stable; we sort stably so equal priorities keep task order.
* ``networkTopology``: mode; ``highestTierAllowed`` when set, only otherwise
  ``highestTierName``.
* ``subGroupPolicy``: one entry per task with a partition policy, in task order.

On update only the fields Volcano updates are touched (minMember, minResources,
minTaskMember, priorityClassName, subGroupPolicy; networkTopology too while the gang has
not started, where admission let it change), and the PodGroup's other fields and status
are kept. A PodGroup under the legacy name (the Job's own name, from Volcano before
v1.5) is found and updated instead of a second one being created (:func:`find_podgroup`).

Pods ``<job>-<task>-<index>`` are built from the task template (kept unchanged apart from
what we add), as ``createJobPod`` does; see :func:`build_pod`.

The Job's phase, retries and version follow Volcano's lifecycle (policies, actions, Commands,
the state machine): :mod:`controller.job.lifecycle`; :func:`job_status` writes its outcome. A pod
lost with its node (:mod:`controller.job.node_failure`) is a ``PodEvicted`` event for it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hyperplace.api import (
    Job,
    JobState,
    JobStatus,
    LabelSelector,
    NetworkTopologySpec,
    ObjectMeta,
    OwnerReference,
    PodGroup,
    PodGroupSpec,
    SubGroupPolicySpec,
    TaskSpec,
)
from hyperplace.api.constants import (
    BATCH_GROUP,
    BATCH_VERSION,
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER_NAME,
    GROUP_NAME_ANNOTATION,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    JOB_VERSION_KEY,
    PARTITION_ID_KEY,
    QUEUE_NAME_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
)
from hyperplace.api.job import SYNC_JOB, TaskState
from hyperplace.api.times import parse_rfc3339
from hyperplace.kube.requests import PODS, pod_requests

from . import lifecycle, node_failure
from .lifecycle import PodView
from .tasks import effective_min_available, min_task_member, task_name

# Not a Volcano key: tells the pod webhook (and humans) the partition size without a
# lookup of the owning Job.
PARTITION_SIZE_ANNOTATION = "volcano.sh/partition-size"


@dataclass
class JobReconcile:
    """What the controller must do to make the cluster match one Job.

    Written in this order: the PodGroup, the out-of-sync marks on ``mark_pods``, the status (onto
    the Job as read: it carries the phase, version and retry count the lifecycle moved), the
    deletes, the creates. ``requeue_after``: seconds until a policy's timeout falls due.
    ``action``: what the lifecycle did (``SyncJob``: no policy or Command acted)."""

    podgroup: PodGroup
    podgroup_changed: bool
    create_pods: list[dict[str, Any]] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    status: JobStatus = field(default_factory=JobStatus)
    mark_pods: list[str] = field(default_factory=list)
    requeue_after: float | None = None
    action: str = SYNC_JOB
    # Pods lost with their node, and why (each named in the status message or deleted).
    lost_pods: dict[str, str] = field(default_factory=dict)
    # Pods stuck terminating on an unreachable node past the grace, to delete with grace 0, and why.
    force_delete_pods: dict[str, str] = field(default_factory=dict)


# --- names -------------------------------------------------------------------------------


def podgroup_name(job: Job) -> str:
    """``<job>-<jobUID>`` (Volcano's ``jobhelpers.GetPodGroupName``)."""
    return f"{job.name}-{job.metadata.uid or ''}"


def legacy_podgroup_name(job: Job) -> str:
    """The job's own name: what Volcano before v1.5 named the PodGroup."""
    return job.name


def find_podgroup(job: Job, lookup: Callable[[str], Mapping[str, Any] | None]) -> Mapping[str, Any] | None:
    """The Job's PodGroup (wire form): ``<job>-<uid>``, else one under the legacy name
    (Volcano's ``getPodGroupByJob``), which is then updated in place, not duplicated.

    ``lookup(name)`` returns the PodGroup of that name in the job's namespace, or None. A
    legacy-named PodGroup controlled by another object (a different uid) is not taken.
    """
    found = lookup(podgroup_name(job))
    if found is not None:
        return found
    legacy = lookup(legacy_podgroup_name(job))
    if legacy is None:
        return None
    for ref in (legacy.get("metadata") or {}).get("ownerReferences") or []:
        uid = ref.get("uid")
        if ref.get("controller") and uid and job.metadata.uid and uid != job.metadata.uid:
            return None
    return legacy


def pod_name(job_name: str, task: str, index: int) -> str:
    """``<job>-<task>-<index>`` (Volcano's ``PodNameFmt``)."""
    return f"{job_name}-{task}-{index}"


def partition_id(index: int, partition_size: int) -> int:
    """Go's ``index / partitionSize`` (truncating); 0 when the size is not positive."""
    if partition_size <= 0:
        return 0
    return int(index / partition_size) if index < 0 else index // partition_size


def _owner_reference(job: Job) -> OwnerReference:
    return OwnerReference(
        api_version=f"{BATCH_GROUP}/{BATCH_VERSION}",
        kind="Job",
        name=job.name,
        uid=job.metadata.uid or "",
        controller=True,
        block_owner_deletion=True,
    )


# --- PodGroup ----------------------------------------------------------------------------


def _podgroup_network_topology(nt: NetworkTopologySpec | None) -> NetworkTopologySpec | None:
    """Job-level topology as Volcano copies it: the tier number wins over the tier name."""
    if nt is None:
        return None
    if nt.highest_tier_allowed is not None:
        return NetworkTopologySpec(mode=nt.mode, highest_tier_allowed=nt.highest_tier_allowed)
    return NetworkTopologySpec(mode=nt.mode, highest_tier_name=nt.highest_tier_name or None)


def sub_group_policies(job: Job) -> list[SubGroupPolicySpec]:
    """One SubGroupPolicy per partitioned task, in task order (topology copied as-is)."""
    out: list[SubGroupPolicySpec] = []
    for i, task in enumerate(job.spec.tasks):
        pp = task.partition_policy
        if pp is None:
            continue
        name = task_name(task, i)
        out.append(
            SubGroupPolicySpec(
                name=name,
                sub_group_size=pp.partition_size,
                min_sub_groups=pp.min_partitions,
                label_selector=LabelSelector(match_labels={TASK_SPEC_KEY: name}),
                match_label_keys=[PARTITION_ID_KEY],
                network_topology=pp.network_topology.model_copy(deep=True) if pp.network_topology else None,
            )
        )
    return out


def _template_spec(task: TaskSpec) -> Mapping[str, Any]:
    spec = (task.template or {}).get("spec") or {}
    return spec if isinstance(spec, Mapping) else {}


def template_requests(pod_spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """Effective requests of one pod of a task template, as the scheduler will charge the pod
    (:func:`hyperplace.kube.requests.pod_requests`, sidecars included), without the pod slot.
    A quantity the API server would refuse is left out: admission refuses it, and a controller
    must not stop on one bad object."""
    got = pod_requests({"spec": pod_spec}, skip_invalid=True)
    return {k: Fraction(v, 1000) for k, v in got.items() if k != PODS}


def format_quantity(resource: str, value: Fraction) -> str:
    """A canonical quantity string: binary suffixes for byte-sized resources, else
    whole numbers or millis (``"12"``, ``"500m"``, ``"32Gi"``)."""
    if value.denominator == 1:
        n = int(value)
        if resource == "memory" or "storage" in resource or resource.startswith("hugepages-"):
            for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
                if n and n % size == 0:
                    return f"{n // size}{suffix}"
        return str(n)
    return f"{math.ceil(value * 1000)}m"


def min_resources(job: Job, priority_classes: Mapping[str, int] | None = None) -> dict[str, str]:
    """Volcano's ``calcPGMinResources`` (see the module docstring).

    A task without ``minAvailable`` is treated as Volcano's mutating webhook would have
    left it (:func:`min_task_member`), so admitted and unadmitted jobs agree.
    """
    prios = priority_classes or {}
    tasks = [
        (t, min_task_member(t), prios.get(str(_template_spec(t).get("priorityClassName") or ""), 0))
        for t in job.spec.tasks
    ]
    # Stable sort by descending priority (Go's sort.Sort is not stable; equal priorities
    # keeping task order makes the result reproducible).
    tasks.sort(key=lambda tp: -tp[2])
    job_min = effective_min_available(job)
    total_min = sum(m for _, m, _ in tasks)

    acc: dict[str, Fraction] = {}

    def add(task: TaskSpec, count: int) -> None:
        if count <= 0:
            return
        for k, v in template_requests(_template_spec(task)).items():
            acc[k] = acc.get(k, Fraction(0)) + v * count

    if job_min < total_min:
        # CalcFirstCountResources: the first job_min pods in priority order.
        left = job_min
        for task, _, _ in tasks:
            take = min(left, task.replicas)
            add(task, take)
            left -= take
            if left <= 0:
                break
    else:
        # CalcPGMinResources: each task's own minimum, then fill from spare replicas.
        count = 0
        for task, task_min, _ in tasks:
            take = min(task_min, job_min - count)
            add(task, take)
            count += take
            if count >= job_min:
                break
        left = job_min - count
        for task, task_min, _ in tasks:
            if left <= 0:
                break
            spare = task.replicas - task_min
            take = min(spare, left)
            add(task, take)
            left -= take
    return {k: format_quantity(k, v) for k, v in sorted(acc.items())}


def desired_podgroup(job: Job, priority_classes: Mapping[str, int] | None = None) -> PodGroup:
    """The PodGroup Volcano creates for ``job``."""
    task_members = {task_name(t, i): min_task_member(t) for i, t in enumerate(job.spec.tasks)}
    min_member = effective_min_available(job)
    policies = sub_group_policies(job)
    return PodGroup(
        metadata=ObjectMeta(
            name=podgroup_name(job),
            namespace=job.namespace,
            # Volcano copies the job's labels and annotations onto its PodGroup.
            labels=dict(job.metadata.labels) if job.metadata.labels else None,
            annotations=dict(job.metadata.annotations) if job.metadata.annotations else None,
            owner_references=[_owner_reference(job)],
        ),
        spec=PodGroupSpec(
            min_member=min_member,
            min_task_member=task_members,
            queue=job.spec.queue or DEFAULT_QUEUE,
            priority_class_name=job.spec.priority_class_name,
            min_resources=dict(min_resources(job, priority_classes)),
            network_topology=_podgroup_network_topology(job.spec.network_topology),
            sub_group_policy=policies or None,
        ),
    )


def _sub_group_dicts(policies: Iterable[SubGroupPolicySpec] | None) -> list[dict[str, Any]]:
    return [p.to_dict() for p in policies or []]


def _topology_dict(nt: NetworkTopologySpec | None) -> dict[str, Any] | None:
    return nt.to_dict() if nt is not None else None


def update_podgroup(existing: PodGroup, desired: PodGroup) -> tuple[PodGroup, bool]:
    """Apply Volcano's update rules to an existing PodGroup; returns (updated, changed)."""
    pg = existing.model_copy(deep=True)
    spec, want = pg.spec, desired.spec
    changed = False
    if spec.min_member != want.min_member or spec.min_resources != want.min_resources:
        spec.min_member = want.min_member
        spec.min_resources = want.min_resources
        changed = True
    merged = dict(spec.min_task_member or {})
    for name, count in (want.min_task_member or {}).items():
        if merged.get(name) != count:
            merged[name] = count
            changed = True
    spec.min_task_member = merged or None
    if spec.priority_class_name != want.priority_class_name:
        spec.priority_class_name = want.priority_class_name
        changed = True
    # networkTopology: Volcano never updates it (its webhook forbids changing it). Where an
    # update was allowed anyway (no webhook), it reaches a gang that has not started yet; a
    # running gang keeps the constraint it was placed under.
    phase = existing.status.phase if existing.status is not None else None
    if phase not in ("Running", "Completed") and _topology_dict(spec.network_topology) != _topology_dict(
        want.network_topology
    ):
        spec.network_topology = want.network_topology.model_copy(deep=True) if want.network_topology else None
        changed = True
    # The whole list is replaced when any entry differs or a task lost its policy.
    if _sub_group_dicts(spec.sub_group_policy) != _sub_group_dicts(want.sub_group_policy):
        spec.sub_group_policy = [p.model_copy(deep=True) for p in want.sub_group_policy or []] or None
        changed = True
    return pg, changed


# --- pods --------------------------------------------------------------------------------


def build_pod(job: Job, task: TaskSpec, task_idx: int, index: int, pg_name: str) -> dict[str, Any]:
    """The pod ``createJobPod`` makes for replica ``index`` of ``task``.

    The template is deep-copied and only added to: name, namespace, ownerReference,
    ``spec.schedulerName`` (the template's own wins, as in Volcano; else the job's, else
    ``volcano``), the group-name annotation and the volcano.sh labels/annotations.
    """
    template = copy.deepcopy(task.template or {})
    tmeta = template.get("metadata") or {}
    name = task_name(task, task_idx)
    version = str((job.status.version if job.status else None) or 0)
    queue = job.spec.queue or DEFAULT_QUEUE

    labels: dict[str, str] = dict(tmeta.get("labels") or {})
    annotations: dict[str, str] = dict(tmeta.get("annotations") or {})
    stamp = {
        JOB_NAME_KEY: job.name,
        JOB_NAMESPACE_KEY: job.namespace or "",
        QUEUE_NAME_KEY: queue,
        TASK_SPEC_KEY: name,
        TASK_INDEX_KEY: str(index),
        JOB_VERSION_KEY: version,
    }
    pp = task.partition_policy
    if pp is not None:
        stamp[PARTITION_ID_KEY] = str(partition_id(index, pp.partition_size))
    labels.update(stamp)
    annotations.update(stamp)
    annotations[GROUP_NAME_ANNOTATION] = pg_name
    if pp is not None:
        annotations[PARTITION_SIZE_ANNOTATION] = str(pp.partition_size)

    metadata: dict[str, Any] = {
        k: v for k, v in tmeta.items() if k not in ("name", "namespace", "labels", "annotations")
    }
    metadata.update(
        name=pod_name(job.name, name, index),
        namespace=job.namespace,
        labels=labels,
        annotations=annotations,
        ownerReferences=[_owner_reference(job).to_dict()],
    )
    spec = dict(template.get("spec") or {})
    if not spec.get("schedulerName"):
        spec["schedulerName"] = job.spec.scheduler_name or DEFAULT_SCHEDULER_NAME
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _pod_identity(pod: Mapping[str, Any], job: Job) -> tuple[str, int] | None:
    """(task, index) of a pod of this job, or None for a pod that is not ours."""
    meta = pod.get("metadata") or {}
    if (meta.get("namespace") or job.namespace) != job.namespace:
        return None
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    if owner is not None:
        if owner.get("kind") != "Job" or owner.get("name") != job.name:
            return None
        if job.metadata.uid and owner.get("uid") and owner.get("uid") != job.metadata.uid:
            return None  # a pod of an earlier job with the same name
    elif labels.get(JOB_NAME_KEY) != job.name:
        return None
    task = labels.get(TASK_SPEC_KEY) or annotations.get(TASK_SPEC_KEY)
    raw_index = labels.get(TASK_INDEX_KEY) or annotations.get(TASK_INDEX_KEY)
    if task is None:
        return None
    if raw_index is None:
        # Older pods carry the index only in their name: <job>-<task>-<index>.
        prefix = f"{job.name}-{task}-"
        pname = str(meta.get("name", ""))
        raw_index = pname[len(prefix) :] if pname.startswith(prefix) else None
    try:
        return task, int(raw_index) if raw_index is not None else -1
    except ValueError:
        return task, -1


# --- status ------------------------------------------------------------------------------


def job_status(job: Job, outcome: lifecycle.Outcome, *, now: str | None = None) -> JobStatus:
    """The Job's status after one lifecycle pass: its counts (a pod being deleted counts as
    terminating), ``taskStatusCount`` ``{task: {phase: {PodPhase: n}}}``, ``minAvailable``, and
    the phase, retry count and version the pass left.

    ``lastTransitionTime`` changes (to ``now``) only when the phase changes, and a Volcano-style
    ``{status: <phase>, lastTransitionTime}`` condition is appended for each phase entered. The
    state's ``reason`` and ``message`` say which action (on which event) last moved it, or which
    rule ended it.
    """
    old = job.status or JobStatus()
    d = outcome.draft
    old_state = old.state or JobState()
    changed = bool(outcome.entered)
    conditions = list(old.conditions or [])
    for phase in outcome.entered:
        conditions.append({"status": phase, "lastTransitionTime": now} if now else {"status": phase})
    return JobStatus(
        state=JobState(
            phase=d.phase,
            reason=d.reason,
            message=d.message,
            last_transition_time=now if changed else old_state.last_transition_time,
        ),
        min_available=d.min_available,
        task_status_count={t: TaskState(phase=dict(sorted(p.items()))) for t, p in sorted(d.per_task.items())}
        or None,
        pending=d.counts["Pending"],
        running=d.counts["Running"],
        succeeded=d.counts["Succeeded"],
        failed=d.counts["Failed"],
        terminating=d.counts["Terminating"],
        unknown=d.counts["Unknown"],
        version=d.version,
        retry_count=d.retry_count,
        conditions=conditions or None,
    )


# --- the reconcile -----------------------------------------------------------------------


def _views(
    job: Job, pods: Iterable[Mapping[str, Any]], lost: Mapping[str, str] | None = None
) -> list[PodView]:
    """What the lifecycle reads of the job's own pods among ``pods`` (``lost``: pods lost with
    their node, by name)."""
    out: list[PodView] = []
    for pod in pods:
        ident = _pod_identity(pod, job)
        if ident is not None:
            name = str((pod.get("metadata") or {}).get("name", ""))
            out.append(lifecycle.view_pod(ident[0], ident[1], pod, (lost or {}).get(name)))
    return out


@dataclass(frozen=True)
class NodeFailures:
    """How the caller sees the nodes of a Job's pods: ``nodes`` maps a node name to its Node, or
    to None once it counts as gone (a name not in it is not judged); ``not_ready_grace`` and
    ``force_delete_after`` (None: never) are the controller's settings, in seconds."""

    nodes: Mapping[str, Mapping[str, Any] | None]
    not_ready_grace: float = node_failure.DEFAULT_NOT_READY_GRACE
    force_delete_after: float | None = None


def _node_verdicts(
    pods: Iterable[Mapping[str, Any]], failures: NodeFailures, now: float
) -> tuple[dict[str, str], dict[str, str], float | None]:
    """The pods lost with their node, those to force-delete (each with why), and when a verdict
    may change unless a node does."""
    lost: dict[str, str] = {}
    force: dict[str, str] = {}
    waits: list[float] = []
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or node_name not in failures.nodes:
            continue
        node = failures.nodes[node_name]
        name = str((pod.get("metadata") or {}).get("name", ""))
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            if failures.force_delete_after is not None:
                due = node_failure.force_delete_due(pod, node, now=now, after=failures.force_delete_after)
                if due.reason is not None:
                    force[name] = due.reason
                elif due.wait is not None:
                    waits.append(due.wait)
            continue
        verdict = node_failure.node_failure(pod, node, now=now, not_ready_grace=failures.not_ready_grace)
        if verdict.reason is not None:
            lost[name] = verdict.reason
        elif verdict.wait is not None:
            waits.append(verdict.wait)
    return lost, force, min(waits) if waits else None


def reconcile_job(
    job: Job,
    podgroup: PodGroup | None,
    pods: list[dict[str, Any]],
    *,
    now: str | None = None,
    priority_classes: Mapping[str, int] | None = None,
    command: str | None = None,
    evicted: Iterable[Mapping[str, Any]] = (),
    nodes: NodeFailures | None = None,
    damaged_restart_after: float | None = None,
) -> JobReconcile:
    """Everything the controller must do for ``job`` given the current PodGroup and pods.

    ``pods`` may include pods of other jobs; only this job's pods (controller
    ownerReference to this Job's uid, or the job-name label) are considered. ``command``: the
    action of a Command for this Job, applied instead of the policies' events; ``evicted``:
    pods of the Job seen deleted by someone else since the last pass (``PodEvicted``);
    ``nodes``: the nodes of the pods, to find pods lost with their node (``PodEvicted`` too) and
    pods stuck terminating on an unreachable one (judged only with ``now``). Output is
    deterministic: pods to create in task order then index order, deletions sorted.
    """
    desired = desired_podgroup(job, priority_classes)
    if podgroup is None:
        pg, pg_changed = desired, True
    else:
        pg, pg_changed = update_podgroup(podgroup, desired)

    now_s = parse_rfc3339(now) if now else None
    lost: dict[str, str] = {}
    force: dict[str, str] = {}
    node_wait: float | None = None
    if nodes is not None and now_s is not None:
        ours = [p for p in pods if _pod_identity(p, job) is not None]
        lost, force, node_wait = _node_verdicts(ours, nodes, now_s)
    views = _views(job, pods, lost)
    gone = _views(job, evicted)
    pg_phase = podgroup.status.phase if podgroup is not None and podgroup.status is not None else None
    outcome = lifecycle.run(
        job,
        views,
        command=command,
        evicted=gone,
        podgroup_phase=pg_phase,
        now=now_s,
        damaged_restart_after=damaged_restart_after,
    )
    status = job_status(job, outcome, now=now)

    creates: list[dict[str, Any]] = []
    if outcome.create:
        # Build the new pods for the version the pass left (a restart's new version).
        versioned = job.model_copy(update={"status": status})
        existing = {(v.task, v.index) for v in views}
        for ti, task in enumerate(job.spec.tasks):
            name = task_name(task, ti)
            for index in range(task.replicas):
                if (name, index) not in existing:
                    creates.append(build_pod(versioned, task, ti, index, pg.name))

    return JobReconcile(
        podgroup=pg,
        podgroup_changed=pg_changed,
        create_pods=creates,
        delete_pods=sorted(outcome.deletes),
        status=status,
        mark_pods=sorted(outcome.marks),
        requeue_after=min((w for w in (outcome.wait, node_wait) if w is not None), default=None),
        action=outcome.action,
        lost_pods=lost,
        force_delete_pods=force,
    )
