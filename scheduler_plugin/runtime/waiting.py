"""What a waiting pod's ``PodScheduled`` condition and ``FailedScheduling`` Event say: the kind
of reason and the scope that blocks it, never the numbers that move from cycle to cycle.

A session explains a waiting gang in full (per tier, the best domain and what it lacks; queue
shares; the per-node predicate summary). Those numbers change whenever any other job starts or
ends, so writing them onto every pod of the gang rewrote the pods and added Events every cycle.
kube-scheduler's pod condition says why in kind (``0/N nodes are available: Insufficient
nvidia.com/gpu``) and Volcano's says the gang is not ready; what a user acts on is the kind
(resources, queue limit, gang incomplete, held, nominated) and where it blocks (tier N, queue
Q). This module turns an outcome into that text; the numbers stay on the PodGroup's condition
(rate-limited, :mod:`.reporter`) and in ``hyperplace explain`` / ``simulate``.

Pure: same inputs, same text, so the reporter writes only when the kind or scope changes.
"""

from __future__ import annotations

import re

from hyperplace.kube.objects import podgroup_key_of
from hyperplace.runtime.api import Obj
from scheduler_plugin.cycle.result import PODS_PENDING, JobOutcome
from scheduler_plugin.model.jobs import JobInfo
from scheduler_plugin.model.reservation import RESERVED_CONDITION, held_hypernode

# kube-scheduler's per-node summary, as model.explanation.predicate_summary_of_counts writes it.
# "pod ns/name: 0/N nodes are available: ..." names the pod of a gang that fits nowhere.
_PREDICATES = re.compile(r"(?:^|; |: )\d+/\d+ nodes are available: (?P<kinds>[^;]*?)\.?(?:;|$)")
_COUNT = re.compile(r"^\d+ ")
_MORE_KINDS = re.compile(r"^\d+ more kinds$")


def predicate_kinds(text: str) -> str | None:
    """The kinds of a ``0/N nodes are available: 3 Insufficient cpu, 2 node(s) had taint`` text,
    without counts and in name order (the counts reorder them), or None when there is none."""
    m = _PREDICATES.search(text)
    if m is None:
        return None
    kinds = {_COUNT.sub("", part.strip()) for part in m.group("kinds").split(", ") if part.strip()}
    kinds = {k for k in kinds if not _MORE_KINDS.match(k)}
    return "no node fits the pod: " + ", ".join(sorted(kinds)) if kinds else "no node fits the pod"


def pod_reason_kind(reason: str) -> str:
    """The stable part of one pod's own reason (a pod without a PodGroup, or one beyond its
    gang's minimum): the predicate kinds, a nomination, or the text itself when it holds no
    moving numbers."""
    if reason.startswith("nominated"):
        return "nominated to a node; waiting for the preemption victims to terminate"
    kinds = predicate_kinds(reason)
    if kinds is not None:
        return kinds
    return reason.split("; ")[0]


def _refusals(predicates: str) -> str | None:
    """The kinds of a predicate summary when some are not room (a claim, a volume, a taint):
    what the user must change, which "no room" alone would hide; None otherwise."""
    m = _PREDICATES.search(predicates)
    if m is None:
        return None
    kinds = {_COUNT.sub("", part.strip()) for part in m.group("kinds").split(", ") if part.strip()}
    kinds = {k for k in kinds if not _MORE_KINDS.match(k)}
    if all(k.startswith("Insufficient ") or k == "Too many pods" for k in kinds):
        return None
    return "no node fits the pod: " + ", ".join(sorted(kinds))


def _kind(reason: str, summary: str, job: JobInfo | None) -> str:
    """A reason code of an explanation in words, with the scope that blocks it."""
    queue = job.queue if job is not None else "?"
    if reason == "NotEnoughPods":
        return "gang incomplete: fewer valid pods than the PodGroup's minMember"
    if reason == "QueueOverused":
        return f"queue {queue} is at its limit"
    if reason == "NotEnqueued":
        return f"not admitted to queue {queue} yet (PodGroup Pending)"
    if reason in ("QueueNotFound", "QueueClosed", "InvalidNetworkTopology"):
        return summary  # names only, no counts
    if reason == "HyperNodeTreeNotReady":
        return "the HyperNode tree is not ready"
    topo = job.topology if job is not None else None
    if topo is not None and topo.mode == "hard" and topo.limit is not None:
        scope = f"no domain within tier <= {topo.limit} has room (hard network topology)"
    else:
        scope = "no room in the cluster"
    return scope if reason == "NotEnoughResources" else f"{reason}: {scope}"


def not_admitted(outcome: JobOutcome | None) -> bool:
    """Whether the gang waits for its queue to admit it (enqueue), not for room."""
    return (
        outcome is not None
        and outcome.explanation is not None
        and outcome.explanation.reason == "NotEnqueued"
    )


def gang_wait_kind(outcome: JobOutcome, job: JobInfo | None) -> str | None:
    """The kind and scope of a waiting gang, or None when the gang minimum is placed."""
    expl = outcome.explanation
    if outcome.phase == "Running" or expl is None:
        return None
    text = _kind(expl.reason, expl.summary, job)
    if expl.reason not in ("NotEnoughPods",) and job is not None:
        text = f"gang of {job.min_member} pods: {text}"
    refused = _refusals(expl.predicates or "")
    if refused:
        text += f"; {refused}"
    for c in outcome.conditions:
        if c.get("type") == RESERVED_CONDITION:
            held = held_hypernode(str(c.get("message") or ""))
            if held:
                text += f"; HyperNode {held} is held for it"
    return text


def pod_wait_message(pod: Obj, reason: str, outcome: JobOutcome | None, job: JobInfo | None) -> str:
    """The ``PodScheduled=False`` message (and ``FailedScheduling`` Event text) of a waiting pod:
    its kind and scope, and where the numbers are."""
    if reason.startswith("nominated"):
        return pod_reason_kind(reason)
    kind = gang_wait_kind(outcome, job) if outcome is not None else None
    if kind is None and outcome is not None:
        beyond = next((c for c in outcome.conditions if c.get("type") == PODS_PENDING), None)
        if beyond is not None:
            why = _kind(str(beyond.get("reason") or ""), "", job)
            kind = f"gang minimum placed; this pod waits beyond it: {why}"
        else:
            kind = pod_reason_kind(reason)
    if kind is None:
        return pod_reason_kind(reason)
    pg = podgroup_key_of(pod)
    if pg:
        ns, name = pg.split("/", 1)
        kind += f" (details: kubectl describe podgroup -n {ns} {name}, or hyperplace explain {pg})"
    return kind
