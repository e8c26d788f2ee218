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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from controller.job.reconcile import format_quantity
from hyperplace.kube.requests import PODS, pod_requests
from hyperplace.kube.workloads import controlled_podgroup_name

PODGROUP_PREFIX: Final = "podgroup-"
MIN_MEMBER_ANNOTATION: Final = "scheduling.volcano.sh/group-min-member"
QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
TOPOLOGY_MODE_ANNOTATION: Final = "volcano.sh/network-topology-mode"
TOPOLOGY_TIER_ANNOTATION: Final = "volcano.sh/network-topology-highest-tier"
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
    if TOPOLOGY_MODE_ANNOTATION not in src and TOPOLOGY_TIER_ANNOTATION not in src:
        return None, []
    problems: list[Problem] = []
    nt: dict[str, Any] = {"mode": "hard"}
    if TOPOLOGY_MODE_ANNOTATION in src:
        mode = str(src[TOPOLOGY_MODE_ANNOTATION]).strip().lower()
        if mode in ("hard", "soft"):
            nt["mode"] = mode
        else:
            problems.append(
                Problem(
                    TOPOLOGY_MODE_ANNOTATION,
                    f"annotation {TOPOLOGY_MODE_ANNOTATION}={src[TOPOLOGY_MODE_ANNOTATION]!r} is "
                    'neither "hard" nor "soft"; mode hard is used',
                )
            )
    if TOPOLOGY_TIER_ANNOTATION in src:
        raw = str(src[TOPOLOGY_TIER_ANNOTATION])
        try:
            tier = int(raw.strip())
        except ValueError:
            tier = -1
        if tier >= 0:
            nt["highestTierAllowed"] = tier
        else:
            problems.append(
                Problem(
                    TOPOLOGY_TIER_ANNOTATION,
                    f"annotation {TOPOLOGY_TIER_ANNOTATION}={raw!r} is not a tier (a non-negative "
                    "integer); no tier limit is set",
                )
            )
    return nt, problems


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
