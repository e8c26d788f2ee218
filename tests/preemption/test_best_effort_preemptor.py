"""A best-effort pod (no requests) still needs a pod slot: on a node whose slots are all taken,
a high-priority one preempts a lower-priority pod, as Volcano's preempt does."""

from __future__ import annotations

from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, running_gang
from tests.scheduler.builders import node, schedule


def test_a_high_priority_best_effort_pod_takes_the_slot_of_a_low_priority_one():
    # One node with room for a single pod, held by a low-priority best-effort pod.
    low_pg, low_pods = running_gang("batch", ["n1"], priority="low", cpu=0)
    high_pg, high_pods = pending_gang("urgent", 1, tier=None, priority="high", cpu=0)
    result, _ = schedule(
        [node("n1", cpu=8, pods=1)],
        low_pods + high_pods,
        podgroups=[low_pg, high_pg],
        priority_classes=PRIORITY_CLASSES,
        config=PREEMPT_CONF,
    )
    assert [e.victim for e in result.evictions] == ["default/batch-t0-0"]
    assert result.nominations["default/urgent"].pods == {"default/urgent-t0-0": "n1"}


def test_a_best_effort_pod_with_a_free_slot_evicts_nobody():
    low_pg, low_pods = running_gang("batch", ["n1"], priority="low", cpu=0)
    high_pg, high_pods = pending_gang("urgent", 1, tier=None, priority="high", cpu=0)
    result, _ = schedule(
        [node("n1", cpu=8, pods=2)],
        low_pods + high_pods,
        podgroups=[low_pg, high_pg],
        priority_classes=PRIORITY_CLASSES,
        config=PREEMPT_CONF,
    )
    assert result.evictions == []
    assert result.bindings == {"default/urgent-t0-0": "n1"}
