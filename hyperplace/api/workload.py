"""Kubernetes' own gang API: Workload and PodGroup (``scheduling.k8s.io/v1beta1``, Kubernetes 1.37).

Built into kube-apiserver 1.37 (feature gate ``GenericWorkload``, the group version enabled with
``--runtime-config=scheduling.k8s.io/v1beta1=true``), not CRDs: no schema is generated for them.
A pod joins a PodGroup of its namespace by ``spec.schedulingGroup.podGroupName``
(:func:`pod_group_name`). What the scheduler makes of a PodGroup: :func:`as_volcano_podgroup`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from .common import Condition, KubeModel, TypedObject
from .constants import QUEUE_NAME_KEY
from .exclusive import EXCLUSIVE_TOPOLOGY_ANNOTATION
from .podgroup import NetworkTopologySpec, PodGroup
from .relax import RELAX_TOPOLOGY_ANNOTATION

UPSTREAM_SCHEDULING_GROUP = "scheduling.k8s.io"
UPSTREAM_SCHEDULING_VERSION = "v1beta1"
UPSTREAM_API_VERSION = f"{UPSTREAM_SCHEDULING_GROUP}/{UPSTREAM_SCHEDULING_VERSION}"

# The condition kube-scheduler 1.37 writes on a PodGroup (never back from True), its reasons.
POD_GROUP_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"

# Set by :func:`as_volcano_podgroup` on the PodGroup the scheduler builds its job from (never on
# the wire): the topology key of ``schedulingConstraints`` (the snapshot maps it onto a tier).
UPSTREAM_TOPOLOGY_KEY = "hyperplace.io/upstream-topology-key"
# Set likewise: the job came from a scheduling.k8s.io PodGroup (status goes there).
UPSTREAM_MARK = "hyperplace.io/upstream-podgroup"


class Empty(KubeModel):
    """``{}``: a member of a one-of whose presence is the choice."""


class GangPolicy(KubeModel):
    min_count: int = Field(ge=1)


class SchedulingPolicy(KubeModel):
    """Exactly one of ``basic`` (pods one at a time) and ``gang`` (all of ``minCount`` or none)."""

    basic: Empty | None = None
    gang: GangPolicy | None = None

    @model_validator(mode="after")
    def _one_of(self) -> SchedulingPolicy:
        if (self.basic is None) == (self.gang is None):
            raise ValueError("exactly one of basic and gang must be set")
        return self


class TopologyConstraint(KubeModel):
    """All pods of the group within one value of the node label ``key``."""

    key: str = Field(min_length=1, max_length=317)


class SchedulingConstraints(KubeModel):
    topology: list[TopologyConstraint] | None = Field(default=None, max_length=1)


class DisruptionMode(KubeModel):
    """Exactly one of ``single`` (a pod at a time) and ``all`` (the group evicted whole)."""

    single: Empty | None = None
    all: Empty | None = None

    @model_validator(mode="after")
    def _one_of(self) -> DisruptionMode:
        if self.single is not None and self.all is not None:
            raise ValueError("at most one of single and all may be set")
        return self


class PodGroupResourceClaim(KubeModel):
    """Accepted and kept; not acted on (dynamic resource allocation is not judged yet)."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]


class _GroupFields(KubeModel):
    """What a PodGroup and a Workload's PodGroupTemplate share."""

    scheduling_policy: SchedulingPolicy
    scheduling_constraints: SchedulingConstraints | None = None
    resource_claims: list[PodGroupResourceClaim] | None = Field(default=None, max_length=4)
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: PreemptionPolicy | None = None


class WorkloadRef(KubeModel):
    workload_name: str
    template_name: str


class UpstreamPodGroupSpec(_GroupFields):
    parent_composite_pod_group_name: str | None = None
    workload_ref: WorkloadRef | None = None


class UpstreamPodGroupStatus(KubeModel):
    conditions: list[Condition] | None = None
    resource_claim_statuses: list[dict[str, Any]] | None = None


class UpstreamPodGroup(TypedObject):
    """``scheduling.k8s.io/v1beta1`` PodGroup: a gang kube-scheduler 1.37 (and we) place."""

    api_version: str = UPSTREAM_API_VERSION
    kind: str = "PodGroup"
    spec: UpstreamPodGroupSpec
    status: UpstreamPodGroupStatus | None = None

    @property
    def min_count(self) -> int:
        """The gang minimum: ``gang.minCount``; a ``basic`` group places its pods one by one."""
        gang = self.spec.scheduling_policy.gang
        return gang.min_count if gang is not None else 1

    @property
    def topology_key(self) -> str | None:
        """The node label key all its pods share one value of, when set."""
        sc = self.spec.scheduling_constraints
        return sc.topology[0].key if sc is not None and sc.topology else None

    def condition(self, type_: str) -> Condition | None:
        for c in (self.status.conditions if self.status else None) or []:
            if c.type == type_:
                return c
        return None


class PodGroupTemplate(_GroupFields):
    name: str


class ControllerRef(KubeModel):
    api_group: str | None = None
    kind: str
    name: str


class WorkloadSpec(KubeModel):
    controller_ref: ControllerRef | None = None
    pod_group_templates: list[PodGroupTemplate] | None = Field(default=None, max_length=8)


class Workload(TypedObject):
    """``scheduling.k8s.io/v1beta1`` Workload: the PodGroup templates of one workload.

    kube-scheduler does not read it (it reads the PodGroups made from it); neither do we."""

    api_version: str = UPSTREAM_API_VERSION
    kind: str = "Workload"
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)

    @model_validator(mode="after")
    def _unique_templates(self) -> Workload:
        names = [t.name for t in self.spec.pod_group_templates or []]
        if len(names) != len(set(names)):
            raise ValueError("podGroupTemplates: names must be unique")
        return self


def is_upstream(obj: Mapping[str, Any]) -> bool:
    """The object is of ``scheduling.k8s.io`` (not Volcano's ``scheduling.volcano.sh``)."""
    return str(obj.get("apiVersion", "")).rpartition("/")[0] == UPSTREAM_SCHEDULING_GROUP


def pod_group_name(pod: Mapping[str, Any]) -> str | None:
    """``spec.schedulingGroup.podGroupName`` of a pod (the PodGroup of its namespace it joins)."""
    group = (pod.get("spec") or {}).get("schedulingGroup") or {}
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return str(name) if name else None


def volcano_intent(pod: Mapping[str, Any]) -> bool:
    """Whether a pod was written for Volcano's gang scheduling (a ``volcano.sh/`` or
    ``scheduling.volcano.sh/`` annotation: a topology, a group): such a pod gets a Volcano
    PodGroup, and joins it, even where kube-controller-manager also put it in a Kubernetes one
    (1.37's Job controller does for an indexed Job under WorkloadWithJob)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return any(str(k).startswith(("volcano.sh/", "scheduling.volcano.sh/")) for k in annotations)


# Our annotations (and labels) on an upstream PodGroup that its job reads as it would read them
# on a Volcano PodGroup: kept as they are on the PodGroup the scheduler builds from it.
PASSED_ANNOTATIONS = (
    QUEUE_NAME_KEY,
    RELAX_TOPOLOGY_ANNOTATION,
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    "volcano.sh/preemptable",  # the scheduler's names for these two: scheduler_plugin.model.jobs
    "volcano.sh/cooldown-time",
)


def as_volcano_podgroup(pg: UpstreamPodGroup) -> PodGroup:
    """The Volcano-shaped PodGroup the scheduler builds the group's job from.

    ``minMember`` is ``gang.minCount`` (``basic``: 1), the priority class is the group's, the
    queue is ``volcano.sh/queue-name``; a topology key becomes a hard constraint named after
    the key, which the snapshot resolves to a tier whose domains are the key's values
    (:data:`UPSTREAM_TOPOLOGY_KEY`). The status is not carried (ours is written to the
    upstream object as kube-scheduler writes it)."""
    meta = pg.metadata
    annotations = {k: v for k, v in (meta.annotations or {}).items() if k in PASSED_ANNOTATIONS}
    labels = {k: v for k, v in (meta.labels or {}).items() if k in PASSED_ANNOTATIONS}
    annotations[UPSTREAM_MARK] = "true"
    key = pg.topology_key
    nt: NetworkTopologySpec | None = None
    if key is not None:
        annotations[UPSTREAM_TOPOLOGY_KEY] = key
        nt = NetworkTopologySpec(mode="hard", highest_tier_name=key)
    spec: dict[str, Any] = {
        "minMember": pg.min_count,
        "priorityClassName": pg.spec.priority_class_name,
        "queue": annotations.get(QUEUE_NAME_KEY) or labels.get(QUEUE_NAME_KEY),
    }
    if nt is not None:
        spec["networkTopology"] = nt.to_dict()
    if pg.spec.priority is not None:
        spec["priority"] = pg.spec.priority  # an extra field: read by the job's priority only
    # Extra fields too, read by the eviction actions (upstream_disruption_all, upstream_preempt_never).
    if pg.spec.disruption_mode is not None and pg.spec.disruption_mode.all is not None:
        spec["disruptionMode"] = "All"
    if pg.spec.preemption_policy is not None:
        spec["preemptionPolicy"] = pg.spec.preemption_policy
    return PodGroup.model_validate(
        {
            "metadata": {
                "name": meta.name,
                "namespace": meta.namespace,
                "uid": meta.uid,
                "creationTimestamp": meta.creation_timestamp,
                "annotations": annotations,
                "labels": labels or None,
            },
            "spec": spec,
        }
    )


def is_upstream_job(pg: PodGroup) -> bool:
    """The job was built from a ``scheduling.k8s.io`` PodGroup."""
    return (pg.metadata.annotations or {}).get(UPSTREAM_MARK) == "true"


def upstream_priority(pg: PodGroup) -> int | None:
    """The explicit ``priority`` of the upstream PodGroup a job was built from (None: unset,
    or a Volcano PodGroup, whose priority is its class's)."""
    if not is_upstream_job(pg):
        return None
    raw = (pg.spec.model_extra or {}).get("priority")
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def upstream_disruption_all(pg: PodGroup) -> bool:
    """The upstream PodGroup a job was built from says ``disruptionMode: {all: {}}``: its pods
    are evicted together or not at all."""
    return is_upstream_job(pg) and (pg.spec.model_extra or {}).get("disruptionMode") == "All"


def upstream_preempt_never(pg: PodGroup) -> bool:
    """The upstream PodGroup a job was built from says ``preemptionPolicy: Never``: the gang
    never evicts others to make room."""
    return is_upstream_job(pg) and (pg.spec.model_extra or {}).get("preemptionPolicy") == "Never"


def upstream_topology_keys(pgs: Iterable[PodGroup]) -> tuple[str, ...]:
    """The topology keys of the jobs built from upstream PodGroups, sorted, once each."""
    return tuple(
        sorted({k for pg in pgs if (k := (pg.metadata.annotations or {}).get(UPSTREAM_TOPOLOGY_KEY))})
    )


def initially_scheduled_conditions(
    obj: Mapping[str, Any], scheduled: bool, message: str, now: str
) -> list[dict[str, Any]] | None:
    """The PodGroup's ``status.conditions`` with ``PodGroupInitiallyScheduled`` as
    kube-scheduler 1.37 writes it: True/Scheduled once the gang is placed, never back from
    True; else False/Unschedulable with ``message``. None when that is what the object says
    already. Other conditions (``DisruptionTarget``) are kept as they are; the transition time
    moves only with the status."""
    conds = [dict(c) for c in ((obj.get("status") or {}).get("conditions") or []) if isinstance(c, Mapping)]
    old = next((c for c in conds if c.get("type") == POD_GROUP_INITIALLY_SCHEDULED), None)
    if old is not None and old.get("status") == "True":
        return None  # never regresses
    if scheduled:
        want = {"status": "True", "reason": REASON_SCHEDULED, "message": "the gang is placed"}
    else:
        want = {"status": "False", "reason": REASON_UNSCHEDULABLE, "message": message}
    if old is not None and all(old.get(k) == v for k, v in want.items()):
        return None
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == want["status"] else None
    new = {"type": POD_GROUP_INITIALLY_SCHEDULED, **want, "lastTransitionTime": since or now}
    generation = (obj.get("metadata") or {}).get("generation")
    if generation is not None:
        new["observedGeneration"] = generation
    return [new if c is old else c for c in conds] if old is not None else [*conds, new]


def with_upstream(volcano: list[PodGroup], upstream: Iterable[PodGroup]) -> tuple[list[PodGroup], list[str]]:
    """Volcano's PodGroups and those built from upstream ones (:func:`as_volcano_podgroup`),
    one job per ``namespace/name``: a Volcano PodGroup of the same name wins. Returns the
    list and the keys of the upstream PodGroups left out so."""
    taken = {pg.key for pg in volcano}
    out = list(volcano)
    clashes: list[str] = []
    for pg in upstream:
        if pg.key in taken:
            clashes.append(pg.key)
        else:
            out.append(pg)
    return out, clashes


def upstream_spec_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The Volcano-shaped ``spec`` of a wire ``scheduling.k8s.io`` PodGroup, as the scheduler
    reads it (``minMember``, ``networkTopology``), for views; ``{}`` when it does not parse."""
    try:
        return as_volcano_podgroup(UpstreamPodGroup.model_validate(obj)).to_dict().get("spec") or {}
    except ValueError:
        return {}
