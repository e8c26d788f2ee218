"""What the scheduler writes back: pod ``PodScheduled`` conditions and PodGroup status.

Pure functions from (current object, session outcome) to a merge patch, or None when the
object already says it: the process only writes what changed, so a cluster that stays
unschedulable costs no API writes per cycle.

* **Pods** (Volcano ``taskUnschedulable``): ``PodScheduled=False``, reason ``Unschedulable``,
  message = why. A merge patch replaces a whole list, so the patch carries every condition
  of the pod and the pod's ``resourceVersion`` as a precondition: a concurrent writer makes
  it fail with 409 instead of being overwritten.
* **PodGroups**: ``phase`` (Pending / Inqueue / Running / Completed), the ``Scheduled`` or
  ``Unschedulable`` condition, ``PodsPending`` while a placed gang still has pods that wait
  (why, removed once they are placed; messages bounded to :data:`MAX_CONDITION_MESSAGE`) and
  the ``running`` / ``succeeded`` / ``failed`` pod counts, through the status subresource.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hyperplace.runtime.api import Obj, meta
from scheduler_plugin.cycle.result import (
    INVALID_MARK,
    NETWORK_TOPOLOGY_WARNING,
    PODS_PENDING,
    JobOutcome,
)
from scheduler_plugin.model.reservation import RESERVED_CONDITION

from .events import truncate

MAX_CONDITION_MESSAGE = 4096
POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE = "Unschedulable"
SCHEDULING_GATED = "SchedulingGated"
PG_SCHEDULED = "Scheduled"
PG_UNSCHEDULABLE = "Unschedulable"
SCHEDULING_GATED = "SchedulingGated"
# Explanations that mean the job was never admitted (Volcano leaves such PodGroups Pending);
# any other unplaced job has passed enqueue and is Inqueue.
NOT_ENOUGH_PODS = "NotEnoughPods"
NOT_ENQUEUED_REASONS = frozenset(
    {"QueueNotFound", "QueueClosed", NOT_ENOUGH_PODS, "InvalidNetworkTopology", "NotEnqueued"}
)


def _conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    conds = (obj.get("status") or {}).get("conditions") or []
    return [dict(c) for c in conds if isinstance(c, Mapping)]


def pod_unschedulable_patch(
    pod: Mapping[str, Any], message: str, now: str, reason: str = UNSCHEDULABLE
) -> Obj | None:
    """Merge patch setting ``PodScheduled=False`` with ``reason`` (``Unschedulable``, or
    ``SchedulingGated`` for a gated pod) and ``message``; None if unchanged."""
    message = truncate(message, MAX_CONDITION_MESSAGE)
    conds = _conditions(pod)
    old = next((c for c in conds if c.get("type") == POD_SCHEDULED), None)
    if (
        old is not None
        and old.get("status") == "False"
        and old.get("reason") == reason
        and old.get("message") == message
    ):
        return None
    # lastTransitionTime moves only when the status does (apimachinery's convention).
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == "False" else now
    new = {
        "type": POD_SCHEDULED,
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": since or now,
    }
    rest = [c for c in conds if c.get("type") != POD_SCHEDULED]
    return {
        "metadata": {"resourceVersion": meta(pod).get("resourceVersion")},
        "status": {"conditions": [*rest, {k: v for k, v in new.items() if v is not None}]},
    }


def pod_counts(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``running`` / ``succeeded`` / ``failed`` / ``pending`` by pod phase."""
    out = {"running": 0, "succeeded": 0, "failed": 0, "pending": 0}
    for p in pods:
        phase = (p.get("status") or {}).get("phase") or "Pending"
        if phase == "Running":
            out["running"] += 1
        elif phase == "Succeeded":
            out["succeeded"] += 1
        elif phase == "Failed":
            out["failed"] += 1
        elif not meta(p).get("deletionTimestamp"):
            out["pending"] += 1
    return out


def gang_started(counts: Mapping[str, int], min_member: int) -> bool:
    """Whether the gang has started: at least ``minMember`` of its pods ran (running, or ended
    successfully), as Volcano's ``getPodGroupPhase`` counts its scheduled tasks."""
    return counts["running"] + counts["succeeded"] >= max(min_member, 1)


def podgroup_phase(outcome: JobOutcome, counts: Mapping[str, int], min_member: int, written: str = "") -> str:
    """Volcano's PodGroup phase from this session's outcome and the pods' phases. A gang that
    started stays Running while some of its pods end (a session no longer finds it ready, but
    it is not waiting again), and Completed once none runs or waits; ``written``, the phase the
    object carries, keeps a Completed PodGroup Completed when its ended pods are deleted. A
    Running gang that lost pods and waits for their replacements is Unknown, as on Volcano."""
    idle = counts["running"] == 0 and counts["pending"] == 0
    if idle and (counts["succeeded"] >= max(min_member, 1) or written == "Completed"):
        return "Completed"
    if outcome.phase == "Running" or gang_started(counts, min_member):
        return "Running"
    if counts["running"] and written in ("Running", "Unknown"):
        # A gang that ran and lost pods, its replacements not placed (Volcano's jobStatus:
        # running tasks while unschedulable). Still admitted: never sent back to enqueue,
        # which would ask a full cluster for its whole minimum again.
        return "Unknown"
    if outcome.pg_phase:
        # With enqueue configured the session knows: Inqueue once admitted, Pending until then.
        return outcome.pg_phase
    if outcome.explanation is not None and outcome.explanation.reason in NOT_ENQUEUED_REASONS:
        return "Pending"
    return "Inqueue"


def gang_finishing(pg: Mapping[str, Any], outcome: JobOutcome, pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a gang this session did not find ready has in fact started and its pods are
    ending (or all ended): it is not waiting, so nothing the session says about it (too few
    pods left to be a gang) is news to write or to send as an Event."""
    if outcome.phase == "Running":
        return False
    counts = pod_counts(pods)
    min_member = int((pg.get("spec") or {}).get("minMember") or 0)
    written = str((pg.get("status") or {}).get("phase") or "")
    return podgroup_phase(outcome, counts, min_member, written) in ("Running", "Completed")


def _same_condition(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> bool:
    if a is None:
        return False
    return all(a.get(k) == b.get(k) for k in ("type", "status", "reason", "message"))


def podgroup_status_patch(
    pg: Mapping[str, Any], outcome: JobOutcome, pods: Iterable[Mapping[str, Any]], now: str
) -> Obj | None:
    """Merge patch for the PodGroup's status subresource; None when nothing changes."""
    status = dict(pg.get("status") or {})
    counts = pod_counts(pods)
    min_member = int((pg.get("spec") or {}).get("minMember") or 0)
    phase = podgroup_phase(outcome, counts, min_member, str(status.get("phase") or ""))
    conds = _conditions(pg)
    wanted: dict[str, dict[str, Any]] = {}
    dropped: set[str] = set()
    # What a session finds wanting in a finishing gang is no news: its conditions stay.
    finishing = outcome.phase != "Running" and phase in ("Running", "Completed")
    for c in () if finishing else outcome.conditions:
        c = {**c, "message": truncate(str(c.get("message") or ""), MAX_CONDITION_MESSAGE)}
        wanted[str(c["type"])] = c
    if PG_SCHEDULED in wanted:
        dropped.add(PG_UNSCHEDULABLE)  # a placed gang is no longer unschedulable
    elif PG_UNSCHEDULABLE in wanted:
        dropped.add(PG_SCHEDULED)
    if PODS_PENDING not in wanted:
        dropped.add(PODS_PENDING)  # every pod placed (or the gang itself waits): nothing to say
    if NETWORK_TOPOLOGY_WARNING not in wanted:
        dropped.add(NETWORK_TOPOLOGY_WARNING)  # the tier name resolves now
    if INVALID_MARK not in wanted:
        dropped.add(INVALID_MARK)  # the annotation was fixed (or its pods are gone)
    if RESERVED_CONDITION not in wanted:
        dropped.add(RESERVED_CONDITION)  # the gang started, or its hold was given up
    new_conds: list[dict[str, Any]] = []
    for c in conds:
        t = str(c.get("type"))
        if t in dropped:
            continue
        if t in wanted:
            w = wanted.pop(t)
            # A Scheduled=True another scheduler wrote (Volcano's, next to us: "tasks in gang are
            # ready to be scheduled") says what ours says; rewriting its wording would make the
            # two schedulers overwrite each other every cycle.
            if _same_condition(c, w) or (t == PG_SCHEDULED and c.get("status") == w.get("status") == "True"):
                new_conds.append(c)
            else:
                since = c.get("lastTransitionTime") if c.get("status") == w.get("status") else now
                new_conds.append({**w, "lastTransitionTime": since or now})
        else:
            new_conds.append(c)
    for w in wanted.values():
        new_conds.append({**w, "lastTransitionTime": now})
    if finishing:
        new_conds = conds
    desired = {
        "phase": phase,
        "conditions": new_conds,
        "running": counts["running"],
        "succeeded": counts["succeeded"],
        "failed": counts["failed"],
    }
    if all(status.get(k) == v for k, v in desired.items()):
        return None
    return {"status": desired}


def allocated_hypernode_patch(pg: Mapping[str, Any], annotation: str, hypernode: str | None) -> Obj | None:
    """Metadata merge patch recording the job's HyperNode for humans; None if already there."""
    if not hypernode:
        return None
    current = (meta(pg).get("annotations") or {}).get(annotation)
    if current == hypernode:
        return None
    return {"metadata": {"annotations": {annotation: hypernode}}}


class GangFormation:
    """Which gangs are still being created, so their "not enough pods" is not reported yet.

    A Job controller creates a gang's pods one request at a time; until it is done every
    session finds "not enough valid tasks: 1 pods, minMember 4" (then 2, then 3). That is
    not news: a gang that lacks pods (reason ``NotEnoughPods``) counts as forming while its
    pod count changed within the last ``grace`` seconds (the first sighting counts as a
    change). Once the pods exist the gang is valid and the question is gone; a gang whose
    pod count stands still for ``grace`` seconds is reported as before.
    """

    def __init__(self, grace: float, clock: Callable[[], float]) -> None:
        self.grace = grace
        self._clock = clock
        self._seen: dict[str, tuple[int, float]] = {}  # job -> (pod count, when it last changed)

    def forming(self, job: str, outcome: JobOutcome, pod_count: Callable[[], int]) -> bool:
        """Whether ``job``'s lack of pods is to be kept quiet this cycle. ``pod_count`` is asked
        only for a gang that lacks pods, so settled jobs cost nothing per cycle."""
        expl = outcome.explanation
        if self.grace <= 0 or expl is None or expl.reason != NOT_ENOUGH_PODS:
            self._seen.pop(job, None)
            return False
        now = self._clock()
        count = pod_count()
        seen = self._seen.get(job)
        if seen is None or seen[0] != count:
            seen = self._seen[job] = (count, now)
        return now - seen[1] < self.grace

    def forget(self, keep: Iterable[str]) -> None:
        """Drop what is known about jobs not in ``keep`` (deleted, or no longer reported)."""
        alive = set(keep)
        for job in [j for j in self._seen if j not in alive]:
            del self._seen[job]


def status_kind(status: Mapping[str, Any]) -> str:
    """What a PodGroup status says in kind: its phase and each condition's type, status and
    reason, without messages or pod counts (the numbers, written at most once per interval)."""
    conds = sorted(
        (str(c.get("type")), str(c.get("status")), str(c.get("reason")))
        for c in status.get("conditions") or []
        if isinstance(c, Mapping)
    )
    return repr((status.get("phase"), conds))
