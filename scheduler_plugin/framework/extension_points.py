"""What a plugin may register with a session, each with the switch that turns it off.

Volcano's ``framework/interface.go`` and the switches of ``session_plugins.go`` in one table.
A plugin registers every function it has (:meth:`~.session.Session.register`); the session,
walking the configuration tiers, keeps the ones whose plugin entry has the point's switch on
(``enableJobOrder: false`` drops that plugin's job order), so no plugin asks whether it is on
and none asks another. Points marked ``tiered`` keep one list per configuration tier, as
Volcano's tiered votes and victim selection need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from ..model.jobs import JobInfo, SubJobInfo, TaskInfo, TopologyConstraint
from ..model.resources import Res

F = TypeVar("F")
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

# Votes of JobEnqueueable: a REJECT refuses, a tier with a PERMIT admits without asking later
# tiers, all abstaining admits.
PERMIT, ABSTAIN, REJECT = 1, 0, -1

# Order functions are sort keys: Volcano chains comparators and the first non-equal one wins,
# which is exactly lexicographic order on the tuple of per-plugin keys (and far cheaper).
OrderKey = Callable[[Any], Any]
NodeOrderFn = Callable[[TaskInfo, SubJobInfo, I64], F64]
HyperNodeOrderFn = Callable[[SubJobInfo | None, I64, I64], F64]
# (topology, allocated hypernode or -1, input hypernode) -> tiers of candidates, or an error text.
GradientFn = Callable[[TopologyConstraint | None, int, int], "list[list[int]] | str"]
# Queues are named by their name; the plugin that registers a function keeps its own
# per-queue attributes.
QueueOrderKey = Callable[[str], Any]
OverusedFn = Callable[[str], bool]
# (queue, task) -> may the task be allocated while its queue stays within its limits.
AllocatableFn = Callable[[str, TaskInfo], bool]
# (queue, tasks) -> why the queue may not take these tasks together, or None when it may.
AllocatableReasonFn = Callable[[str, list[TaskInfo]], "str | None"]
# (queue, tasks) -> what the queue (and its ancestors) must give back before it may take these
# tasks together, or None when it may (ours: the victims preempt must find inside the queue).
QueueExcessFn = Callable[[str, list[TaskInfo]], "Res | None"]
# job -> PERMIT, ABSTAIN or REJECT (Volcano's JobEnqueueable vote).
EnqueueableFn = Callable[[JobInfo], int]
# (preemptor or reclaimer task, candidate victims) -> the victims this plugin allows, or None
# to abstain.
VictimFn = Callable[[TaskInfo, list[TaskInfo]], "list[TaskInfo] | None"]
# A protection (cdp's cooldown, pdb's budgets): (what protects, the filter). The filter takes
# (preemptor or reclaimer task, candidate victims) and returns those it lets go. Unlike the
# tiered victim functions, every guard applies, whatever the tiers decided.
GuardFn = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
VictimGuard = tuple[str, GuardFn]
# job -> (nodes it may not use, why) or None: a predicate of the job's queue rather than of its
# pods (Volcano's nodegroup), applied as a fence around each try of the job.
NodeFenceFn = Callable[[JobInfo], "tuple[I64, str] | None"]
# (queue, preemptor task) -> may this queue's task take room by preemption.
PreemptiveFn = Callable[[str, TaskInfo], bool]
JobFn = Callable[[JobInfo], None]
TaskEventFn = Callable[[list[TaskInfo]], None]
# () -> per queue, the deserved share and the capability a queue plugin computed.
QueueLimitsFn = Callable[[], Mapping[str, "tuple[Res, Res | None]"]]
# job -> seconds it may wait before room is held for it, or None.
WaitingTimeFn = Callable[[JobInfo], "float | None"]


@dataclass(frozen=True, eq=False)
class ExtensionPoint(Generic[F]):
    """One kind of function a plugin may register."""

    name: str
    flag: str | None  # the plugin option switch that turns it off; None: always on
    tiered: bool = False


JOB_ORDER: ExtensionPoint[OrderKey] = ExtensionPoint("jobOrder", "enableJobOrder")
SUBJOB_ORDER: ExtensionPoint[OrderKey] = ExtensionPoint("subJobOrder", "enabledSubJobOrder")
TASK_ORDER: ExtensionPoint[OrderKey] = ExtensionPoint("taskOrder", "enableTaskOrder")
JOB_VALID: ExtensionPoint[Callable[[JobInfo], str | None]] = ExtensionPoint("jobValid", None)
JOB_READY: ExtensionPoint[Callable[[JobInfo], bool]] = ExtensionPoint("jobReady", "enableJobReady")
SUBJOB_READY: ExtensionPoint[Callable[[SubJobInfo], bool]] = ExtensionPoint(
    "subJobReady", "enabledSubJobReady"
)
NODE_ORDER: ExtensionPoint[NodeOrderFn] = ExtensionPoint("nodeOrder", "enableNodeOrder")
HYPERNODE_ORDER: ExtensionPoint[HyperNodeOrderFn] = ExtensionPoint("hyperNodeOrder", "enabledHyperNodeOrder")
HYPERNODE_GRADIENT: ExtensionPoint[GradientFn] = ExtensionPoint(
    "hyperNodeGradient", "enabledHyperNodeGradient"
)
QUEUE_ORDER: ExtensionPoint[QueueOrderKey] = ExtensionPoint("queueOrder", "enableQueueOrder")
OVERUSED: ExtensionPoint[OverusedFn] = ExtensionPoint("overused", "enabledOverused")
ALLOCATABLE: ExtensionPoint[AllocatableFn] = ExtensionPoint("allocatable", "enabledAllocatable")
ALLOCATABLE_REASON: ExtensionPoint[AllocatableReasonFn] = ExtensionPoint(
    "allocatableReason", "enabledAllocatable"
)
QUEUE_EXCESS: ExtensionPoint[QueueExcessFn] = ExtensionPoint("queueExcess", "enabledAllocatable")
JOB_ENQUEUEABLE: ExtensionPoint[EnqueueableFn] = ExtensionPoint(
    "jobEnqueueable", "enableJobEnqueued", tiered=True
)
JOB_ENQUEUED: ExtensionPoint[JobFn] = ExtensionPoint("jobEnqueued", "enableJobEnqueued")
# An admitted job allocate could not place gives its admission back (ours; see actions/allocate).
JOB_RELEASED: ExtensionPoint[JobFn] = ExtensionPoint("jobReleased", "enableJobEnqueued")
PREEMPTABLE: ExtensionPoint[VictimFn] = ExtensionPoint("preemptable", "enablePreemptable", tiered=True)
RECLAIMABLE: ExtensionPoint[VictimFn] = ExtensionPoint("reclaimable", "enableReclaimable", tiered=True)
VICTIM_GUARD: ExtensionPoint[VictimGuard] = ExtensionPoint("victimGuard", None)
NODE_FENCE: ExtensionPoint[NodeFenceFn] = ExtensionPoint("nodeFence", "enablePredicate")
PREEMPTIVE: ExtensionPoint[PreemptiveFn] = ExtensionPoint("preemptive", "enablePreemptive")
# Volcano's AllocateFunc / DeallocateFunc event handlers: never switched off.
ON_ALLOCATE: ExtensionPoint[TaskEventFn] = ExtensionPoint("allocateEvent", None)
ON_DEALLOCATE: ExtensionPoint[TaskEventFn] = ExtensionPoint("deallocateEvent", None)
# What queue status reports as deserved and capability (ours).
QUEUE_LIMITS: ExtensionPoint[QueueLimitsFn] = ExtensionPoint("queueLimits", None)
# How long a job may wait before the head-of-queue reservation holds room for it (ours: sla).
JOB_WAITING_TIME: ExtensionPoint[WaitingTimeFn] = ExtensionPoint("jobWaitingTime", None)
