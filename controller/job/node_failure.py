"""When a Job's pod is lost with its node, and when a pod stuck on an unreachable node may be
force-deleted. Pure: no I/O; the job controller and the simulator both ask it.

Kubernetes alone evicts the pods of a node that stops late: its taint eviction controller waits
out the pods' default 300 s toleration of ``node.kubernetes.io/not-ready`` and
``node.kubernetes.io/unreachable``, then the deleted pods stay Terminating while the kubelet is
unreachable. A gang cannot run without the pod, so the job controller counts the pod as lost as
soon as its node is known to have failed (:func:`node_failure`):

* the Node is **gone** (the caller says so: see ``controller.job.sync`` for when absence counts);
* the Node is **not Ready** (its ``Ready`` condition False or Unknown) for at least the grace,
  measured from the condition's ``lastTransitionTime``; a pod that tolerates the matching
  NoExecute taint (``not-ready`` for False, ``unreachable`` for Unknown) without
  ``tolerationSeconds`` stays, as the taint eviction controller would leave it (the default
  300 s toleration every pod gets does not keep it: the grace replaces it);
* the Node has a **NoExecute taint** the pod does not tolerate (GPU health tools taint nodes so),
  or tolerates only for ``tolerationSeconds`` that passed since the taint's ``timeAdded``.

Only a pod bound to the node and not finished counts. What cannot be read (a Node without a
Ready condition or without its transition time, a taint with another effect, a malformed
toleration) counts as healthy: a controller must not kill a running gang on a guess.

The lost pod is a ``PodEvicted`` event for the lifecycle: it is what Kubernetes' taint eviction
controller would produce for the same node, later, so a Job written for Volcano
(``event: PodEvicted, action: RestartJob``) reacts as it would there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperplace.api.times import parse_rfc3339
from hyperplace.kube.tolerations import toleration_seconds

# The taints the node lifecycle controller puts on a node whose Ready condition is False or
# Unknown (Kubernetes' v1.TaintNodeNotReady and v1.TaintNodeUnreachable).
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NO_EXECUTE = "NoExecute"
# How long a NotReady node is given before its pods count as lost, unless the controller is
# told otherwise: longer than a kubelet restart, far shorter than the 300 s default toleration.
DEFAULT_NOT_READY_GRACE = 30.0
# How long a gang that lost pods waits for its replacements in its own domain (the scheduler's
# repair step and spares work there first) before the Job restarts whole, wherever it fits.
DEFAULT_DAMAGED_RESTART_AFTER = 600.0

FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Verdict:
    """Whether the pod is lost with its node (``reason`` names the node and why; None: not
    lost) and, when it is not lost yet but will be unless the node changes, in how many
    seconds to look again (``wait``)."""

    reason: str | None = None
    wait: float | None = None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def ready_condition(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Node's ``Ready`` condition, or None when it has none."""
    for c in _list(_mapping(node.get("status")).get("conditions")):
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return c
    return None


def unreachable(node: Mapping[str, Any] | None) -> bool:
    """Whether the kubelet cannot be expected to finish a pod's deletion: the Node is gone, or
    its Ready condition is there and not True."""
    if node is None:
        return True
    ready = ready_condition(node)
    return ready is not None and ready.get("status") != "True"


def _not_ready(pod_tolerations: list[Any], node: Mapping[str, Any], now: float, grace: float) -> Verdict:
    ready = ready_condition(node)
    if ready is None or ready.get("status") == "True":
        return Verdict()
    status = str(ready.get("status") or "Unknown")
    taint = {"key": NOT_READY_TAINT if status == "False" else UNREACHABLE_TAINT, "effect": NO_EXECUTE}
    if toleration_seconds(pod_tolerations, taint) == math.inf:
        return Verdict()
    since = parse_rfc3339(ready.get("lastTransitionTime"))
    if since is None:
        return Verdict()
    left = grace - (now - since)
    if left > 0:
        return Verdict(wait=left)
    return Verdict(f"node {_name(node)} Ready={status} for {now - since:.0f}s")


def _tainted(pod_tolerations: list[Any], node: Mapping[str, Any], now: float) -> Verdict:
    wait: float | None = None
    for taint in _list(_mapping(node.get("spec")).get("taints")):
        if not isinstance(taint, Mapping) or taint.get("effect") != NO_EXECUTE:
            continue
        seconds = toleration_seconds(pod_tolerations, taint)
        what = f"{taint.get('key') or ''}" + (f"={taint.get('value')}" if taint.get("value") else "")
        if seconds is None:
            return Verdict(f"node {_name(node)} tainted {what}:{NO_EXECUTE}")
        if seconds == math.inf:
            continue
        added = parse_rfc3339(taint.get("timeAdded"))
        if added is None:
            continue  # tolerated for a while, from a time nobody wrote down: not measurable
        left = seconds - (now - added)
        if left <= 0:
            return Verdict(
                f"node {_name(node)} tainted {what}:{NO_EXECUTE} past the pod's {seconds:g}s toleration"
            )
        wait = left if wait is None else min(wait, left)
    return Verdict(wait=wait)


def _name(node: Mapping[str, Any]) -> str:
    return str(_mapping(node.get("metadata")).get("name") or "?")


def node_failure(
    pod: Mapping[str, Any],
    node: Mapping[str, Any] | None,
    *,
    now: float,
    not_ready_grace: float = DEFAULT_NOT_READY_GRACE,
) -> Verdict:
    """Whether ``pod`` is lost with its node (see the module docstring). ``node``: the Node the
    pod is bound to, None when it is gone; a pod bound to no node is never lost."""
    spec = _mapping(pod.get("spec"))
    node_name = spec.get("nodeName")
    if not node_name or _mapping(pod.get("status")).get("phase") in FINISHED_POD_PHASES:
        return Verdict()
    if node is None:
        return Verdict(f"node {node_name} is gone")
    tolerations = _list(spec.get("tolerations"))
    tainted = _tainted(tolerations, node, now)
    if tainted.reason is not None:
        return tainted
    not_ready = _not_ready(tolerations, node, now, not_ready_grace)
    if not_ready.reason is not None:
        return not_ready
    waits = [w for w in (tainted.wait, not_ready.wait) if w is not None]
    return Verdict(wait=min(waits) if waits else None)


def force_delete_due(
    pod: Mapping[str, Any], node: Mapping[str, Any] | None, *, now: float, after: float
) -> Verdict:
    """Whether ``pod``, terminating on an unreachable node (:func:`unreachable`), has been
    stuck for ``after`` seconds past its ``deletionTimestamp`` (the time its grace period
    ended), so it may be force-deleted: ``reason`` says so, ``wait`` when to look again."""
    meta = _mapping(pod.get("metadata"))
    due = parse_rfc3339(meta.get("deletionTimestamp"))
    node_name = _mapping(pod.get("spec")).get("nodeName")
    if due is None or not node_name or not unreachable(node):
        return Verdict()
    left = due + after - now
    if left > 0:
        return Verdict(wait=left)
    state = "gone" if node is None else "unreachable"
    return Verdict(f"terminating for {now - due:.0f}s past its grace period on node {node_name} ({state})")
