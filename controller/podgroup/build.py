"""The PodGroup Volcano's podgroup controller makes for a pod of no PodGroup. Pure, no I/O.

For a pod of the scheduler's names without ``scheduling.k8s.io/group-name``, Volcano's
controller (``pkg/controllers/podgroup``) creates one PodGroup per controlling owner and
annotates the pod with its name:

* name ``podgroup-<controller owner uid>`` (``podgroup-<pod uid>`` for a pod of no owner);
* ``ownerReferences``: the pod's own when one is a controller (so the garbage collector
  removes the PodGroup with the owner), else a controller reference to the pod;
* ``minMember`` from the owner's ``scheduling.volcano.sh/group-min-member`` (with
  ``inheritOwnerAnnotations``, the default), else 1; ``minResources`` the pod's requests
  times ``minMember``; ``priorityClassName`` the pod's; ``queue`` from the pod's
  ``scheduling.volcano.sh/queue-name``;
* ``networkTopology`` from the pod's ``volcano.sh/network-topology-mode`` (``hard`` when
  absent or unknown) and ``volcano.sh/network-topology-highest-tier``;
* annotations: the owner's ``scheduling.volcano.sh/*`` and ``volcano.sh/*`` ones (with
  ``inheritOwnerAnnotations``), and the pod's ``volcano.sh/preemptable``,
  ``volcano.sh/cooldown-time``, ``volcano.sh/revocable-zone``, ``volcano.sh/jdb-*``;
  labels: the pod's ``volcano.sh/preemptable`` and ``volcano.sh/cooldown-time``.

Where Volcano reads only the pod, the owner's annotation is read too when the pod has none
(a queue or a topology set once on a StatefulSet or a JobSet rather than in its template).

Volcano logs a bad annotation and carries on (``minMember`` 1, mode ``hard``, no tier); so
do we, and say so where the user looks: each :class:`Problem` becomes a Warning Event on the
pod and the ``InvalidAnnotation`` condition of the PodGroup, both naming the annotation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from controller.job.reconcile import format_quantity
from hyperplace.api.exclusive import EXCLUSIVE_LABEL_KEY_ANNOTATION, EXCLUSIVE_TOPOLOGY_ANNOTATION
from hyperplace.api.topology_annotations import (
    TOPOLOGY_MODE_ANNOTATION,
    TOPOLOGY_TIER_ANNOTATION,
    operator_podgroup_topology,
    topology_from_annotations,
)
from hyperplace.kube.requests import PODS, pod_requests
from hyperplace.kube.workloads import (
    JOBSET_GLOBAL_REPLICAS,
    JOBSET_JOB_INDEX,
    JOBSET_NAME,
    JOBSET_REPLICATED_JOB,
    JOBSET_UID,
    LWS_EXCLUSIVE_TOPOLOGY,
    LWS_SIZE,
    controlled_podgroup_name,
    lws_group,
)

PODGROUP_PREFIX: Final = "podgroup-"
MIN_MEMBER_ANNOTATION: Final = "scheduling.volcano.sh/group-min-member"
QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
# Owner annotations with these prefixes are copied (Volcano: scheduling.AnnotationPrefix and
# the default --inherit-owner-annotation-prefixes).
OWNER_ANNOTATION_PREFIXES: Final = ("scheduling.volcano.sh/", "volcano.sh/")
# Pod annotations and labels copied (Volcano's default --inherit-pod-annotation-prefixes and
# --inherit-pod-label-prefixes).
POD_ANNOTATION_PREFIXES: Final = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
)
POD_LABEL_PREFIXES: Final = ("volcano.sh/preemptable", "volcano.sh/cooldown-time")

# The PodGroup condition listing the annotations that were not understood.
INVALID_ANNOTATION: Final = "InvalidAnnotation"


@dataclass(frozen=True)
class Owner:
    """What the controller reads of a pod's controlling owner (None fields: not known)."""

    kind: str
    name: str
    uid: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    replicas: int | None = None  # how many pods it runs at once, when the kind says


@dataclass(frozen=True)
class Problem:
    """An annotation that could not be used as written; ``message`` names it."""

    annotation: str
    message: str


@dataclass
class Desired:
    """The PodGroup a pod should belong to (wire form, without status), and what was wrong."""

    name: str
    podgroup: dict[str, Any]
    problems: list[Problem]


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def podgroup_name(pod: Mapping[str, Any]) -> str:
    """Volcano's ``GeneratePodgroupName``: ``podgroup-<controller uid>``, else of the pod's uid."""
    name = controlled_podgroup_name(pod)
    return name if name is not None else f"{PODGROUP_PREFIX}{(pod.get('metadata') or {}).get('uid')}"


def _owner_references(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = pod.get("metadata") or {}
    if controller_ref(pod) is not None:
        return [dict(r) for r in meta.get("ownerReferences") or []]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def min_member(owner: Owner | None, inherit: bool) -> tuple[int, list[Problem]]:
    """``minMember`` from the owner's annotation (Volcano: 1 when absent, not a number or
    negative), and what was wrong with it."""
    if owner is None or not inherit or MIN_MEMBER_ANNOTATION not in owner.annotations:
        return 1, []
    raw = str(owner.annotations[MIN_MEMBER_ANNOTATION])
    where = f"{owner.kind} {owner.name}: annotation {MIN_MEMBER_ANNOTATION}={raw!r}"
    try:
        value = int(raw.strip())
    except ValueError:
        return 1, [Problem(MIN_MEMBER_ANNOTATION, f"{where} is not a number; minMember stays 1")]
    if value < 0:
        return 1, [Problem(MIN_MEMBER_ANNOTATION, f"{where} is negative; minMember stays 1")]
    if value > 2**31 - 1:
        return 1, [Problem(MIN_MEMBER_ANNOTATION, f"{where} is out of range; minMember stays 1")]
    problems: list[Problem] = []
    if owner.replicas is not None and value > owner.replicas:
        problems.append(
            Problem(
                MIN_MEMBER_ANNOTATION,
                f"{where} asks for more pods than the {owner.kind} runs ({owner.replicas}); "
                f"the gang waits until {value} of its pods can start together",
            )
        )
    return value, problems


def network_topology(
    pod_annotations: Mapping[str, str], owner_annotations: Mapping[str, str]
) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Volcano's ``parseNetworkTopologyFromPod`` (the owner's annotations when the pod has
    neither): mode ``hard`` unless ``soft``, tier when a non-negative integer."""
    src = pod_annotations
    if TOPOLOGY_MODE_ANNOTATION not in src and TOPOLOGY_TIER_ANNOTATION not in src:
        src = owner_annotations
    nt, problems = topology_from_annotations(src)
    return nt, [Problem(a, m) for a, m in problems]


def min_resources(pod: Mapping[str, Any], members: int) -> dict[str, str]:
    """Volcano's ``CalTaskRequests``: the pod's requests times ``members``."""
    got = pod_requests(pod, skip_invalid=True)
    return {
        k: format_quantity(k, Fraction(v, 1000) * members) for k, v in sorted(got.items()) if k != PODS and v
    }


def _copied(src: Mapping[str, Any], prefixes: Sequence[str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in src.items() if any(str(k).startswith(p) for p in prefixes)}


def desired_podgroup(
    pod: Mapping[str, Any], owner: Owner | None, *, inherit_owner_annotations: bool = True
) -> Desired:
    """The PodGroup Volcano's controller makes for ``pod`` (see the module docstring)."""
    meta = pod.get("metadata") or {}
    spec_in = pod.get("spec") or {}
    pod_ann = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    owner_ann = dict(owner.annotations) if owner is not None and inherit_owner_annotations else {}
    members, problems = min_member(owner, inherit_owner_annotations)
    annotations = _copied(owner_ann, OWNER_ANNOTATION_PREFIXES)
    annotations.update(_copied(pod_ann, POD_ANNOTATION_PREFIXES))
    labels = _copied(meta.get("labels") or {}, POD_LABEL_PREFIXES)
    spec: dict[str, Any] = {"minMember": members, "minResources": min_resources(pod, members)}
    if spec_in.get("priorityClassName"):
        spec["priorityClassName"] = spec_in["priorityClassName"]
    queue = pod_ann.get(QUEUE_ANNOTATION) or owner_ann.get(QUEUE_ANNOTATION)
    if queue:
        spec["queue"] = queue
    nt, nt_problems = network_topology(pod_ann, owner_ann)
    problems += nt_problems
    if nt is not None:
        spec["networkTopology"] = nt
    name = podgroup_name(pod)
    body: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace") or "default",
            "ownerReferences": _owner_references(pod),
            "annotations": annotations,
            "labels": labels,
        },
        "spec": spec,
    }
    return Desired(name, body, problems)


def invalid_condition(problems: Sequence[Problem], now: str) -> dict[str, Any] | None:
    """The PodGroup condition naming every annotation that was not understood (None: none)."""
    if not problems:
        return None
    return {
        "type": INVALID_ANNOTATION,
        "status": "True",
        "reason": INVALID_ANNOTATION,
        "message": "; ".join(p.message for p in problems),
        "lastTransitionTime": now,
    }


def with_condition(status: Mapping[str, Any] | None, cond: dict[str, Any] | None) -> dict[str, Any]:
    """``status`` with the InvalidAnnotation condition set to ``cond`` (removed when None); an
    unchanged condition keeps its transition time. Other conditions are the scheduler's."""
    out = dict(status or {})
    conds = [c for c in out.get("conditions") or [] if isinstance(c, Mapping)]
    old = next((c for c in conds if c.get("type") == INVALID_ANNOTATION), None)
    rest = [dict(c) for c in conds if c.get("type") != INVALID_ANNOTATION]
    if cond is not None:
        if old is not None and old.get("message") == cond["message"]:
            cond = dict(old)
        rest.append(cond)
    if rest:
        out["conditions"] = rest
    else:
        out.pop("conditions", None)
    out.setdefault("phase", "Pending")
    return out


def needs_update(existing: Mapping[str, Any], desired: Desired) -> bool:
    """Volcano's ``shouldUpdateExistingPodGroup``: spec, labels or annotations differ."""
    want = desired.podgroup
    em, wm = existing.get("metadata") or {}, want["metadata"]
    return bool(
        existing.get("spec") != want["spec"]
        or (em.get("labels") or {}) != wm["labels"]
        or (em.get("annotations") or {}) != wm["annotations"]
    )


def updated(existing: Mapping[str, Any], desired: Desired) -> dict[str, Any]:
    """``existing`` with the desired spec, labels and annotations (status and the rest kept)."""
    out = {k: v for k, v in existing.items()}
    meta = dict(existing.get("metadata") or {})
    meta["labels"] = desired.podgroup["metadata"]["labels"]
    meta["annotations"] = desired.podgroup["metadata"]["annotations"]
    out["metadata"] = meta
    out["spec"] = desired.podgroup["spec"]
    return out


# -- workloads recognised through their owner chain -----------------------------------------------

JOBSET_API_VERSION: Final = "jobset.x-k8s.io/v1alpha2"
LWS_API_VERSION: Final = "leaderworkerset.x-k8s.io/v1"


def job_pods_at_once(job: Mapping[str, Any]) -> int:
    """Pods a batch/v1 Job runs at once: parallelism (1 when unset), at most completions."""
    spec = job.get("spec") or {}
    par = spec.get("parallelism")
    n = 1 if par is None else int(par)
    return n if spec.get("completions") is None else min(n, int(spec["completions"]))


def _template_requests(job: Mapping[str, Any]) -> dict[str, int]:
    tspec = (((job.get("spec") or {}).get("template") or {}).get("spec")) or {}
    got = pod_requests({"spec": tspec}, skip_invalid=True)
    return {k: v for k, v in got.items() if k != PODS and v}


def _common_spec(
    pod: Mapping[str, Any], owner_ann: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, str], dict[str, str], list[Problem]]:
    """(spec fields, annotations, labels, problems) every PodGroup of a pod's workload takes from
    the pod and its owner: priority class, queue, topology, the copied annotations and labels."""
    meta = pod.get("metadata") or {}
    pod_ann = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    annotations = _copied(owner_ann, OWNER_ANNOTATION_PREFIXES)
    annotations.update(_copied(pod_ann, POD_ANNOTATION_PREFIXES))
    labels = _copied(meta.get("labels") or {}, POD_LABEL_PREFIXES)
    spec: dict[str, Any] = {}
    if (pod.get("spec") or {}).get("priorityClassName"):
        spec["priorityClassName"] = pod["spec"]["priorityClassName"]
    queue = pod_ann.get(QUEUE_ANNOTATION) or owner_ann.get(QUEUE_ANNOTATION)
    if queue:
        spec["queue"] = queue
    nt, problems = network_topology(pod_ann, owner_ann)
    if nt is not None:
        spec["networkTopology"] = nt
    return spec, annotations, labels, problems


def _body(
    name: str,
    namespace: str,
    owner_refs: list[dict[str, Any]],
    ann: dict[str, str],
    labels: dict[str, str],
    spec: dict[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": owner_refs,
            "annotations": ann,
            "labels": labels,
        },
        "spec": spec,
    }


def jobset_podgroup(pod: Mapping[str, Any], child_jobs: Sequence[Mapping[str, Any]]) -> Desired | None:
    """One PodGroup for a whole JobSet (KAI's and Kueue's gang of a JobSet): every pod of every
    child Job in one gang (``minMember`` their sum), one sub-group per child Job
    (``subGroupPolicy`` per replicatedJob, matched by the Job index, ``subGroupSize`` its pods),
    owned by the JobSet. None until all of the JobSet's Jobs exist (``global-replicas`` of them):
    a gang counted from some of them would start part of the JobSet."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    uid, js_name = labels.get(JOBSET_UID), labels.get(JOBSET_NAME)
    try:
        total_jobs = int(labels.get(JOBSET_GLOBAL_REPLICAS) or 0)
    except ValueError:
        total_jobs = 0
    jobs = [j for j in child_jobs if ((j.get("metadata") or {}).get("labels") or {}).get(JOBSET_UID) == uid]
    if not uid or not js_name or (total_jobs and len(jobs) < total_jobs) or not jobs:
        return None
    per_rj: dict[str, list[Mapping[str, Any]]] = {}
    for j in jobs:
        rj = str(((j.get("metadata") or {}).get("labels") or {}).get(JOBSET_REPLICATED_JOB) or "")
        per_rj.setdefault(rj, []).append(j)
    members = 0
    need: dict[str, int] = {}
    policies = []
    for rj, js in sorted(per_rj.items()):
        size = job_pods_at_once(js[0])
        for j in js:
            n = job_pods_at_once(j)
            members += n
            for k, v in _template_requests(j).items():
                need[k] = need.get(k, 0) + v * n
        policies.append(
            {
                "name": rj,
                "labelSelector": {"matchLabels": {JOBSET_REPLICATED_JOB: rj}},
                "matchLabelKeys": [JOBSET_JOB_INDEX],
                "subGroupSize": size,
                "minSubGroups": len(js),
            }
        )
    spec, ann, lab, problems = _common_spec(pod, {})
    spec = {
        "minMember": members,
        "minResources": {k: format_quantity(k, Fraction(v, 1000)) for k, v in sorted(need.items())},
        **spec,
        "subGroupPolicy": policies,
    }
    ref = {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "name": js_name,
        "uid": uid,
        "controller": True,
    }
    name = f"{PODGROUP_PREFIX}{uid}"
    return Desired(name, _body(name, meta.get("namespace") or "default", [ref], ann, lab, spec), problems)


@dataclass(frozen=True)
class LwsInfo:
    """What the controller knows of a LeaderWorkerSet: its identity, annotations and startup
    policy (None fields: the object is not readable, only its leader StatefulSet's reference)."""

    name: str
    uid: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    startup_policy: str | None = None


def lws_podgroup(
    pods: Sequence[Mapping[str, Any]],
    lws: LwsInfo,
    tier_of_label: Callable[[str], int | None] = lambda _k: None,
) -> Desired | None:
    """The PodGroup of one LeaderWorkerSet group, as Volcano's LeaderWorkerSet provider makes it
    (``<lws>-<group index>``, ``minMember`` the group's size, 1 with ``startupPolicy:
    LeaderReady``; ``minResources`` one leader and size-1 workers; the queue from the LWS), plus
    its topology: the group sits in one domain of its ``networkTopology``, and the LWS's
    ``leaderworkerset.sigs.k8s.io/exclusive-topology`` (a node label key) becomes an exclusive
    domain at the HyperNode tier whose nodes that label names (``tier_of_label``)."""
    if not pods:
        return None
    leader = next(
        (
            p
            for p in pods
            if str(
                ((p.get("metadata") or {}).get("labels") or {}).get(
                    "leaderworkerset.sigs.k8s.io/worker-index", "0"
                )
            )
            == "0"
        ),
        pods[0],
    )
    meta = leader.get("metadata") or {}
    group = lws_group(meta.get("labels") or {})
    if group is None:
        return None
    size_raw = (meta.get("annotations") or {}).get(LWS_SIZE)
    try:
        size = max(1, int(str(size_raw)))
    except ValueError:
        size = len(pods)
    worker = next((p for p in pods if p is not leader), leader)
    need: dict[str, int] = {}
    for p, n in ((leader, 1), (worker, size - 1)):
        for k, v in pod_requests(p, skip_invalid=True).items():
            if k != PODS and v:
                need[k] = need.get(k, 0) + v * n
    spec, ann, lab, problems = _common_spec(leader, lws.annotations)
    exclusive = lws.annotations.get(LWS_EXCLUSIVE_TOPOLOGY) or (meta.get("annotations") or {}).get(
        LWS_EXCLUSIVE_TOPOLOGY
    )
    if exclusive:
        tier = tier_of_label(str(exclusive))
        if tier is None:
            problems.append(
                Problem(
                    LWS_EXCLUSIVE_TOPOLOGY,
                    f"annotation {LWS_EXCLUSIVE_TOPOLOGY}={exclusive!r} names a node label no HyperNode tier "
                    "is discovered from (volcano-controller-configmap, label source); the group is not "
                    "given an exclusive domain",
                )
            )
        else:
            ann[EXCLUSIVE_TOPOLOGY_ANNOTATION] = "true"
            nt = spec.get("networkTopology") or {}
            limit = nt.get("highestTierAllowed")
            domain = tier if limit is None else min(tier, int(limit))
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": domain}
            if domain == tier:
                # Label discovery makes one HyperNode of this tier per value of the label, so
                # the exclusive domains are the label's domains: the pod affinity and
                # anti-affinity LWS's webhook injects for this key hold by placement.
                ann[EXCLUSIVE_LABEL_KEY_ANNOTATION] = str(exclusive)
            else:
                problems.append(
                    Problem(
                        LWS_EXCLUSIVE_TOPOLOGY,
                        f"annotation {LWS_EXCLUSIVE_TOPOLOGY}={exclusive!r}: the label's tier is {tier} but "
                        f"the highest tier allowed is {domain}; exclusive domains of tier {domain} do not "
                        "keep other groups out of the label's domain, so the pods' injected required pod "
                        "anti-affinity is not honoured and they stay unscheduled",
                    )
                )
    spec = {
        # LWS creates an exclusive group's workers only once its leader is bound (they follow
        # it by node selector), so that gang is its leader, as with LeaderReady.
        "minMember": 1
        if lws.startup_policy == "LeaderReady" or lws.annotations.get(LWS_EXCLUSIVE_TOPOLOGY)
        else size,
        "minResources": {k: format_quantity(k, Fraction(v, 1000)) for k, v in sorted(need.items())},
        **spec,
    }
    lab["leaderworkerset.sigs.k8s.io/name"] = lws.name
    ref = {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "name": lws.name,
        "uid": lws.uid,
        "controller": True,
    }
    name = f"{group[0]}-{group[1]}"
    return Desired(name, _body(name, meta.get("namespace") or "default", [ref], ann, lab, spec), problems)


def operator_topology(pg: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[Problem]]:
    """What a training operator's PodGroup without ``networkTopology`` reads from its
    annotations (:mod:`hyperplace.api.topology_annotations`), with what could not be used."""
    nt, problems = operator_podgroup_topology(pg)
    return nt, [Problem(a, m) for a, m in problems]
