"""A Volcano Job's lifecycle: policies, actions and the phase state machine. Pure: no I/O.

This is Volcano v1.15's job controller (``pkg/controllers/job/state/*.go``,
``job_controller_actions.go`` ``killJob``/``killTarget``/``syncJob``, ``job_controller_util.go``
``applyPolicies``, ``job_controller_handler.go``), made level-driven: Volcano reacts to pod
*transitions* it sees in its informers; here each reconcile reads the Job's pods as they stand
and derives the events from them, so a controller that restarts finds the same events again.

**Events** (:func:`observe`), from the pods of the Job's current ``status.version`` only (an older
pod's events are outdated, as in Volcano):

* ``PodFailed``: a pod in phase Failed (its exit code: the first container's, as Volcano reads it);
* ``PodEvicted``: a pod deleted by someone else than this controller: one that is terminating
  without the controller's out-of-sync mark, or one the caller saw disappear (``evicted``); and
  a pod lost with its node (``PodView.lost``, :mod:`controller.job.node_failure`), which when no
  policy kills it is deleted all the same, then recreated as a missing pod;
* ``PodPending``: a pod still Pending; only a policy with a ``timeout`` acts on it, once the pod
  has waited that long since it was created;
* ``TaskCompleted``: every replica of a task Succeeded; ``TaskFailed``: the containers of a
  task's live pods restarted ``maxRetry`` times (3 when unset; Volcano's ``TaskFailed``);
* ``Unknown``: the PodGroup's phase is Unknown while a pod of the current version runs (the
  scheduler's word for a gang that lost members).

**Policies** (:func:`policy_action`): a task's own policies first, then the job's; an ``event``/
``events`` entry matches the event or ``*``, an ``exitCode`` entry the failed pod's exit code.
``timeout`` delays the action (for PodPending it is required). No match: ``SyncJob``.

**The state machine** (:func:`step`): what an action does in each phase, as Volcano's states
do. ``RestartJob`` kills every pod, bumps ``status.version`` and ``status.retryCount`` and moves
to Restarting; ``RestartTask``/``RestartPod``/``RestartPartition`` kill the target's pods only
(marked out-of-sync first, so their deletion is no eviction); Restarting moves to Pending once
enough pods are not terminating, or to Failed once ``retryCount`` reached ``maxRetry``;
``AbortJob``/``TerminateJob``/``CompleteJob`` kill the unfinished pods and move through
Aborting/Terminating/Completing to Aborted/Terminated/Completed; ``ResumeJob`` restarts an
aborted job. A kill of the whole job on the last retry keeps finished pods, for their logs.

Deliberate differences from Volcano, each for a level-driven, restart-safe controller:

* The version is bumped by a kill an action asked for, not by the re-kills of a finishing job.
* Pods of an older version are deleted while the job is Pending, Running or Restarting (so a
  controller that stopped between the status write and the deletes still clears them), and no
  pod of the new version is created while any pod of an older one exists: two versions never
  run side by side.
* A ``timeout`` is honoured for ``PodPending`` (from the pod's creation) and ``PodFailed`` (from
  its first container's finish); on other events the action runs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hyperplace.api import Job, LifecyclePolicy, TaskSpec
from hyperplace.api.constants import JOB_VERSION_KEY, PARTITION_ID_KEY
from hyperplace.api.job import (
    ABORT_JOB,
    ABORTED,
    ABORTING,
    ANY_EVENT,
    COMPLETE_JOB,
    COMPLETED,
    COMPLETING,
    FAILED,
    JOB_UNKNOWN,
    PENDING,
    POD_EVICTED,
    POD_FAILED,
    POD_PENDING,
    RESTART_JOB,
    RESTART_PARTITION,
    RESTART_POD,
    RESTART_TASK,
    RESTARTING,
    RESUME_JOB,
    RUNNING,
    SYNC_JOB,
    TASK_COMPLETED,
    TASK_FAILED,
    TERMINATE_JOB,
    TERMINATED,
    TERMINATING,
)
from hyperplace.api.times import parse_go_duration, parse_rfc3339
from hyperplace.kube.gang_damage import replacements_since, running_since

from .tasks import effective_min_available, task_name

# The pod annotation that says the controller itself killed the pod (Volcano's OutOfSyncKey):
# its deletion is no eviction, and its events are ignored.
OUT_OF_SYNC_ANNOTATION = "volcano.sh/controller-out-of-sync"

# Phases in which pods are created (Volcano's syncJob runs in these states only).
SYNCING_PHASES = frozenset({PENDING, RUNNING, RESTARTING})
FINISHED_PHASES = frozenset({COMPLETED, FAILED, TERMINATED})
# Pod phases a soft kill keeps (Volcano's PodRetainPhaseSoft).
RETAINED_POD_PHASES = frozenset({"Succeeded", "Failed"})
# Volcano's TaskFailed counts container restarts against a task's maxRetry, 3 when unset.
DEFAULT_TASK_MAX_RETRY = 3
_RESTARTS_OF_TARGET = (RESTART_TASK, RESTART_POD, RESTART_PARTITION)


# --- what a pod says ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PodView:
    """What the lifecycle reads of one pod of the Job."""

    name: str
    uid: str
    task: str
    index: int
    version: int | None
    phase: str
    terminating: bool
    out_of_sync: bool
    exit_code: int = 0
    partition: str | None = None
    created: float | None = None
    finished: float | None = None
    restarts: int = 0
    # Why the pod is lost with its node (controller.job.node_failure), None while it is not.
    lost: str | None = None
    running_since: float | None = None  # bound and running since (None: not Running)


def _first_terminated(status: Mapping[str, Any]) -> Mapping[str, Any]:
    statuses = status.get("containerStatuses") or []
    first = statuses[0] if statuses and isinstance(statuses[0], Mapping) else {}
    terminated = (first.get("state") or {}).get("terminated")
    return terminated if isinstance(terminated, Mapping) else {}


def view_pod(task: str, index: int, pod: Mapping[str, Any], lost: str | None = None) -> PodView:
    """The :class:`PodView` of a pod of the Job (task and index already known); ``lost``: why
    the pod is lost with its node, if it is."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    status = pod.get("status") or {}
    raw_version = annotations.get(JOB_VERSION_KEY, labels.get(JOB_VERSION_KEY))
    try:
        version = int(raw_version) if raw_version is not None else None
    except ValueError:
        version = None
    terminated = _first_terminated(status)
    restarts = sum(
        int(s.get("restartCount") or 0)
        for key in ("initContainerStatuses", "containerStatuses")
        for s in status.get(key) or []
        if isinstance(s, Mapping)
    )
    return PodView(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid") or ""),
        task=task,
        index=index,
        version=version,
        phase=str(status.get("phase") or "Pending"),
        terminating=bool(meta.get("deletionTimestamp")),
        out_of_sync=OUT_OF_SYNC_ANNOTATION in annotations,
        exit_code=int(terminated.get("exitCode") or 0),
        partition=labels.get(PARTITION_ID_KEY),
        created=parse_rfc3339(meta.get("creationTimestamp")),
        finished=parse_rfc3339(terminated.get("finishedAt")),
        restarts=restarts,
        lost=lost,
        running_since=running_since(pod),
    )


# --- events and policies -----------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One lifecycle event: what happened, to which task and pod, and since when (for a
    policy's ``timeout``)."""

    event: str
    task: str = ""
    pod: str = ""
    partition: str | None = None
    exit_code: int = 0
    since: float | None = None
    # What raised it when the pod itself does not say (a node failure names its node).
    cause: str = ""

    def describe(self) -> str:
        """How a status message names it."""
        where = f" of pod {self.pod}" if self.pod else (f" of task {self.task}" if self.task else "")
        code = f" (exit code {self.exit_code})" if self.exit_code else ""
        cause = f" ({self.cause})" if self.cause else ""
        return f"{self.event}{where}{code}{cause}"


def _tasks(job: Job) -> list[tuple[str, TaskSpec]]:
    return [(task_name(t, i), t) for i, t in enumerate(job.spec.tasks)]


def _current(job: Job) -> int:
    return (job.status.version if job.status else None) or 0


def _desired(job: Job, pod: PodView) -> bool:
    """Whether the pod is one the Job's spec still asks for (not one being scaled away)."""
    for name, task in _tasks(job):
        if name == pod.task:
            return 0 <= pod.index < task.replicas
    return False


def observe(
    job: Job,
    pods: Sequence[PodView],
    *,
    evicted: Iterable[PodView] = (),
    podgroup_phase: str | None = None,
) -> list[Event]:
    """The events the Job's pods stand for (see the module docstring), in task and index
    order, then the task events, then the Job's."""
    version = _current(job)

    def relevant(p: PodView) -> bool:
        # Outdated (an older version) or the controller's own kill: Volcano's OutOfSync.
        return p.version == version and not p.out_of_sync and _desired(job, p)

    order = {name: i for i, (name, _) in enumerate(_tasks(job))}
    events: list[tuple[tuple[int, int], Event]] = []
    for p in pods:
        if not relevant(p):
            continue
        ev: Event | None = None
        if p.terminating:
            ev = Event(POD_EVICTED, p.task, p.name, p.partition)
        elif p.lost:
            # What the taint eviction controller would do to it, later: see node_failure.
            ev = Event(POD_EVICTED, p.task, p.name, p.partition, cause=p.lost)
        elif p.phase == "Failed":
            ev = Event(POD_FAILED, p.task, p.name, p.partition, p.exit_code, p.finished)
        elif p.phase == "Pending":
            ev = Event(POD_PENDING, p.task, p.name, p.partition, since=p.created)
        if ev is not None:
            events.append(((order.get(p.task, 0), p.index), ev))
    live = {p.uid for p in pods if p.uid}
    for p in evicted:
        if relevant(p) and p.uid not in live:
            events.append(((order.get(p.task, 0), p.index), Event(POD_EVICTED, p.task, p.name, p.partition)))
    out = [e for _, e in sorted(events, key=lambda pair: pair[0])]

    by_task: dict[str, list[PodView]] = {}
    for p in pods:
        if p.version == version and not p.terminating:
            by_task.setdefault(p.task, []).append(p)
    for name, task in _tasks(job):
        mine = by_task.get(name, [])
        if task.replicas > 0 and sum(p.phase == "Succeeded" for p in mine) >= task.replicas:
            out.append(Event(TASK_COMPLETED, name))
        limit = task.max_retry or DEFAULT_TASK_MAX_RETRY
        if task.replicas > 0 and sum(p.restarts for p in mine if p.phase in ("Running", "Pending")) >= limit:
            out.append(Event(TASK_FAILED, name))
    if podgroup_phase == "Unknown" and any(
        p.phase == "Running" for p in pods if p.version == version and not p.terminating
    ):
        out.append(Event(JOB_UNKNOWN))
    return out


def _timeout(policy_timeout: str | None) -> float | None:
    if not policy_timeout:
        return None
    try:
        return parse_go_duration(policy_timeout)
    except ValueError:
        return None  # admission refuses it; a controller must not stop on one bad object


def policy_action(job: Job, event: Event) -> tuple[str, float | None]:
    """The action the Job's policies give ``event`` and its delay in seconds (Volcano's
    ``applyPolicies``): the event's task's policies first, then the job's; ``SyncJob`` when
    none matches. A ``PodPending`` matches only a policy with a ``timeout``."""
    for name, task in _tasks(job):
        if event.task and name == event.task:
            found = _match(task.policies or [], event)
            if found is not None:
                return found
            break
    return _match(job.spec.policies or [], event) or (SYNC_JOB, None)


def _match(policies: Iterable[LifecyclePolicy], event: Event) -> tuple[str, float | None] | None:
    for policy in policies:
        names = [*(policy.events or []), *([policy.event] if policy.event else [])]
        delay = _timeout(policy.timeout)
        matches = bool(names) and (event.event in names or ANY_EVENT in names)
        if matches and (event.event != POD_PENDING or delay is not None):
            return str(policy.action or SYNC_JOB), delay
        # exit code 0 is no error code (admission refuses it), so only failed pods match here
        if policy.exit_code is not None and policy.exit_code == event.exit_code and event.exit_code:
            return str(policy.action or SYNC_JOB), delay
    return None


@dataclass(frozen=True)
class Decision:
    """The action to take now (``event`` None: a Command's, or no event's ``SyncJob``) and how
    long until a delayed action falls due (None: none waits)."""

    action: str = SYNC_JOB
    event: Event | None = None
    wait: float | None = None


def damaged_gang(job: Job, pods: Sequence[PodView], min_available: int) -> Event | None:
    """The ``PodPending`` of a gang that ran and lost pods, now short of its minimum: its first
    replacement (:func:`hyperplace.kube.gang_damage.replacements_since`), with since when it
    waits; None for any other gang."""
    version = _current(job)
    mine = [p for p in pods if p.version == version and not p.terminating and _desired(job, p)]
    running = [p for p in mine if p.phase == "Running"]
    pending = [p for p in mine if p.phase == "Pending"]
    if not running or not pending or len(running) >= min_available:
        return None
    since = replacements_since(((p.running_since, p.created) for p in running), (p.created for p in pending))
    if since is None:
        return None
    first = min(
        (p for p in pending if p.created is not None and p.created >= since), key=lambda p: p.created or 0.0
    )
    return Event(
        POD_PENDING,
        first.task,
        first.name,
        first.partition,
        since=since,
        cause=f"the gang is short of its minimum ({len(running)} of {min_available} running) since it lost pods",
    )


def restart_damaged(job: Job, event: Event, after: float, now: float | None) -> Decision:
    """RestartJob for a damaged gang that waited ``after`` seconds for its replacements (the
    controller's ``--damaged-gang-restart-after``), unless the Job's own policies say what a
    pending pod does: the gang starts again whole, wherever it fits."""
    if policy_action(job, event)[0] != SYNC_JOB or event.since is None or now is None:
        return Decision(SYNC_JOB)
    left = after - (now - event.since)
    if left > 0:
        return Decision(SYNC_JOB, None, left)
    return Decision(RESTART_JOB, event)


def decide(job: Job, events: Iterable[Event], now: float | None) -> Decision:
    """The first event whose policy acts now; events whose delay has not passed yet give the
    time to look again."""
    wait: float | None = None
    for ev in events:
        action, delay = policy_action(job, ev)
        if action == SYNC_JOB:
            continue
        if delay and ev.since is not None and now is not None and now - ev.since < delay:
            left = delay - (now - ev.since)
            wait = left if wait is None else min(wait, left)
            continue
        if ev.event == POD_PENDING and (ev.since is None or now is None):
            continue  # a pending pod whose wait cannot be measured never times out
        return Decision(action, ev, wait)
    return Decision(SYNC_JOB, None, wait)


# --- the state machine -------------------------------------------------------------------------


@dataclass
class Draft:
    """The Job's status as a step rewrites it: phase, retries, version and the pod counts."""

    phase: str
    retry_count: int
    version: int
    min_available: int
    counts: dict[str, int] = field(default_factory=dict)
    per_task: dict[str, dict[str, int]] = field(default_factory=dict)
    # Why the phase last moved: the action (and its event) or the rule that ended the job.
    reason: str | None = None
    message: str | None = None


# A phase's rule on the counts a step left: it may move the phase (and the retries, the reason).
Update = Callable[[Job, Draft], None]


@dataclass(frozen=True)
class Step:
    """What one action does in one phase: kill nothing (``sync``), every pod (``job``, keeping
    finished ones when ``soft``) or the event's target, then update the phase."""

    kill: Literal["sync", "job", "target"]
    update: Update | None = None
    soft: bool = False
    bump: bool = False


def _to(phase: str, *, retry: bool = False) -> Update:
    def update(_job: Job, d: Draft) -> None:
        d.phase = phase
        if retry:
            d.retry_count += 1

    return update


def _alive(d: Draft) -> int:
    return d.counts.get("Terminating", 0) + d.counts.get("Pending", 0) + d.counts.get("Running", 0)


def _drain_to(phase: str) -> Update:
    """Aborting, Terminating, Completing: done once no pod is alive."""

    def update(_job: Job, d: Draft) -> None:
        if not _alive(d):
            d.phase = phase

    return update


def replicas(job: Job) -> int:
    """Volcano's TotalTasks."""
    return sum(t.replicas for t in job.spec.tasks)


def _pending_sync(job: Job, d: Draft) -> None:
    """Volcano's pending state on SyncJob: Running once minAvailable pods run or finished."""
    c = d.counts
    if effective_min_available(job) <= c.get("Running", 0) + c.get("Succeeded", 0) + c.get("Failed", 0):
        d.phase = RUNNING


def _running_sync(job: Job, d: Draft) -> None:
    """Volcano's running state on SyncJob: completion or failure once every pod finished,
    minSuccess reached, or back to Pending when too many pods wait."""
    total = replicas(job)
    if total == 0:
        return  # scaled to zero: the phase stays
    c = d.counts
    succeeded, failed = c.get("Succeeded", 0), c.get("Failed", 0)
    min_success = job.spec.min_success
    min_available = effective_min_available(job)
    if min_success is not None and succeeded >= min_success:
        d.phase, d.reason = COMPLETED, "MinSuccessReached"
        return
    if succeeded + failed == total:
        task_min_total = sum(
            t.min_available if t.min_available is not None else t.replicas for t in job.spec.tasks
        )
        if min_available >= task_min_total:
            for name, task in _tasks(job):
                if task.min_available is None or name not in d.per_task:
                    continue
                if d.per_task[name].get("Succeeded", 0) < task.min_available:
                    d.phase, d.reason = FAILED, "NotEnoughSucceeded"
                    return
        if min_success is not None and succeeded < min_success:
            d.phase, d.reason = FAILED, "NotEnoughSucceeded"
        elif succeeded >= min_available:
            d.phase, d.reason = COMPLETED, "AllPodsFinished"
        else:
            d.phase, d.reason = FAILED, "NotEnoughSucceeded"
        return
    if c.get("Pending", 0) > total - min_available:
        d.phase = PENDING


def _restarting_sync(job: Job, d: Draft) -> None:
    """Restarting ends in Failed once the retries are used up, else in Pending once enough pods
    are not terminating."""
    if d.retry_count >= max_retry(job):
        d.phase, d.reason = FAILED, "MaxRetryReached"
    elif replicas(job) - d.counts.get("Terminating", 0) >= d.min_available:
        d.phase = PENDING


def max_retry(job: Job) -> int:
    """``spec.maxRetry`` (0 when unset, as Go reads a missing int; admission defaults it to 3)."""
    return job.spec.max_retry or 0


def step(phase: str, action: str) -> Step:
    """What ``action`` does in ``phase`` (Volcano's ``state.NewState(job).Execute(action)``)."""
    if phase in (PENDING, RUNNING) or phase not in _KNOWN_PHASES:
        if action == RESTART_JOB:
            return Step("job", _to(RESTARTING, retry=True), bump=True)
        if action in _RESTARTS_OF_TARGET:
            return Step("target", _to(RESTARTING, retry=True))
        if action == ABORT_JOB:
            return Step("job", _to(ABORTING), soft=True, bump=True)
        if action == COMPLETE_JOB:
            return Step("job", _to(COMPLETING), soft=True, bump=True)
        if action == TERMINATE_JOB:
            return Step("job", _to(TERMINATING), soft=True, bump=True)
        return Step("sync", _running_sync if phase == RUNNING else _pending_sync)
    if phase == RESTARTING:
        if action == SYNC_JOB:
            return Step("sync", _restarting_sync)
        if action in _RESTARTS_OF_TARGET:
            return Step("target", _restarting_sync)
        return Step("job", _restarting_sync, bump=True)
    if phase in (ABORTING, ABORTED):
        if action == RESUME_JOB:
            return Step("job", _to(RESTARTING, retry=True), soft=True, bump=True)
        return Step("job", _drain_to(ABORTED) if phase == ABORTING else None, soft=True)
    if phase == COMPLETING:
        return Step("job", _drain_to(COMPLETED), soft=True)
    if phase == TERMINATING:
        return Step("job", _drain_to(TERMINATED), soft=True)
    return Step("job", None, soft=True)  # Completed, Failed, Terminated: finished


_KNOWN_PHASES = frozenset(
    {PENDING, RUNNING, RESTARTING, ABORTING, ABORTED, COMPLETING, COMPLETED, TERMINATING, TERMINATED, FAILED}
)


# --- one pass ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one pass decided: the status fields, the phases entered (in order), the pods to mark
    out-of-sync and to delete, whether missing pods may be created, and when to look again."""

    draft: Draft
    entered: list[str]
    action: str
    event: Event | None
    deletes: set[str]
    marks: set[str]
    create: bool
    wait: float | None


def _targets(pods: Sequence[PodView], action: str, event: Event | None) -> list[PodView]:
    if event is None or not event.task:
        return []  # a Command or a job event names no task: nothing to restart
    if action == RESTART_TASK:
        return [p for p in pods if p.task == event.task]
    if action == RESTART_POD:
        return [p for p in pods if p.task == event.task and p.name == event.pod]
    return [
        p for p in pods if p.task == event.task and p.partition is not None and p.partition == event.partition
    ]


def count(pods: Iterable[PodView], deleting: set[str]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """The Job's pod counts by phase (a pod being deleted counts as Terminating) and per task."""
    counts = dict.fromkeys(("Pending", "Running", "Succeeded", "Failed", "Terminating", "Unknown"), 0)
    per_task: dict[str, dict[str, int]] = {}
    for p in pods:
        phase = "Terminating" if p.terminating or p.name in deleting else p.phase
        counts[phase if phase in counts else "Unknown"] += 1
        task = per_task.setdefault(p.task, {})
        task[phase] = task.get(phase, 0) + 1
    return counts, per_task


def _kills(
    job: Job, pods: Sequence[PodView], act: Step, decision: Decision, draft: Draft
) -> tuple[set[str], set[str]]:
    """The pods ``act`` deletes and those it marks out-of-sync first."""
    if act.kill == "job":
        # Volcano's killJob: on the last retry the finished pods stay, whatever the action.
        soft = act.soft or draft.retry_count >= max_retry(job) - 1
        return {
            p.name for p in pods if not p.terminating and not (soft and p.phase in RETAINED_POD_PHASES)
        }, set()
    if act.kill == "target":
        targets = _targets(pods, decision.action, decision.event)
        return {p.name for p in targets if not p.terminating}, {p.name for p in targets if not p.out_of_sync}
    clear_old = draft.phase in SYNCING_PHASES and not (
        draft.phase == RESTARTING and draft.retry_count >= max_retry(job)
    )
    deletes: set[str] = set()
    for p in pods:
        if p.terminating:
            continue
        if not _desired(job, p) or p.out_of_sync:
            deletes.add(p.name)  # scaled away, or killed by a pass that stopped half-way
        elif p.lost:
            deletes.add(p.name)  # lost with its node and no policy acted: replaced as missing
        elif clear_old and p.version is not None and p.version < draft.version:
            deletes.add(p.name)  # a restart's old pod, left by a controller that stopped
    return deletes, set()


# A pass follows the phases a SyncJob moves the Job through at once (Pending, Running, Completed)
# rather than waiting for the next event, as far as a kill (whose phase stands until its pods are
# seen going); this bounds the walk.
_MAX_STEPS = 4


def run(
    job: Job,
    pods: Sequence[PodView],
    *,
    command: str | None = None,
    evicted: Iterable[PodView] = (),
    podgroup_phase: str | None = None,
    now: float | None = None,
    damaged_restart_after: float | None = None,
) -> Outcome:
    """One pass of the lifecycle over the Job's pods: a Command's action (``command``) or the
    first event a policy acts on, executed in the Job's phase, then SyncJob in each phase it
    enters; see the module docstring. ``damaged_restart_after`` (seconds; None: never): a gang
    that lost pods and has waited that long for its replacements restarts whole
    (:func:`restart_damaged`)."""
    status = job.status
    old_phase = (status.state.phase if status and status.state else None) or PENDING
    draft = Draft(
        phase=old_phase,
        retry_count=(status.retry_count if status else None) or 0,
        version=_current(job),
        min_available=effective_min_available(job),
        reason=status.state.reason if status and status.state else None,
        message=status.state.message if status and status.state else None,
    )
    if command is not None:
        decision = Decision(command)
    else:
        decision = decide(job, observe(job, pods, evicted=evicted, podgroup_phase=podgroup_phase), now)
    if decision.action == SYNC_JOB and damaged_restart_after is not None and old_phase in (PENDING, RUNNING):
        damaged = damaged_gang(job, pods, draft.min_available)
        if damaged is not None:
            restart = restart_damaged(job, damaged, damaged_restart_after, now)
            waits = [w for w in (decision.wait, restart.wait) if w is not None]
            decision = Decision(restart.action, restart.event, min(waits) if waits else None)
    if decision.action == RESTART_PARTITION and (decision.event is None or decision.event.partition is None):
        # Volcano skips a partition restart of a pod in no partition: nothing is killed or counted.
        decision = Decision(SYNC_JOB, None, decision.wait)

    deletes: set[str] = set()
    marks: set[str] = set()
    # A new Job enters Pending (Volcano's initJobStatus writes that condition).
    entered: list[str] = [] if status and status.state and status.state.phase else [PENDING]
    current = decision
    for _ in range(_MAX_STEPS):
        before = draft.phase
        act = step(before, current.action)
        killed, marked = _kills(job, pods, act, current, draft)
        deletes |= killed
        marks |= marked
        if act.bump:
            draft.version += 1
        draft.counts, draft.per_task = count(pods, deletes)
        if act.update is not None:
            act.update(job, draft)
        if draft.phase == before:
            break
        entered.append(draft.phase)
        if current.action != SYNC_JOB:
            draft.reason = current.action
            draft.message = (
                f"{current.action} on {current.event.describe()}"
                if current.event
                else f"{current.action} by Command"
            )
        if act.kill != "sync":
            break  # a kill's phase (Restarting, Aborting, ...) stands until the next pass sees its pods go
        current = Decision(SYNC_JOB)

    if decision.action == SYNC_JOB:
        # No policy acted on a pod lost with its node, yet it is replaced: the message says so.
        # Only the current version's: an older version's pod lost with its node is a restart's
        # leftover being cleared, and the restart's message stands.
        lost = [p for p in pods if p.lost and p.name in deletes and p.version == draft.version]
        if lost:
            more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
            first = Event(POD_EVICTED, lost[0].task, lost[0].name, cause=lost[0].lost or "")
            draft.message = f"{first.describe()}{more}: deleted, to be created again"
    older_left = any(p.version is not None and p.version < draft.version for p in pods)
    return Outcome(
        draft=draft,
        entered=entered,
        action=decision.action,
        event=decision.event,
        deletes=deletes,
        marks=marks,
        create=draft.phase in SYNCING_PHASES and not older_left,
        wait=decision.wait,
    )
