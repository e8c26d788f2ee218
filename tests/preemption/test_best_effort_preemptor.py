"""A best-effort pod (no requests) still needs a pod slot: on a node whose slots are all taken,
a high-priority one preempts a lower-priority pod, as Volcano's preempt does."""

from __future__ import annotations

from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, running_gang
from tests.scheduler.builders import node, schedule


def _session(pod_slots: int):
    """A node with ``pod_slots`` pod slots, a low-priority best-effort pod running on it and a
    high-priority best-effort one pending."""
    low_pg, low_pods = running_gang("batch", ["n1"], priority="low", cpu=0)
    high_pg, high_pods = pending_gang("urgent", 1, tier=None, priority="high", cpu=0)
    result, _ = schedule(
        [node("n1", cpu=8, pods=pod_slots)],
        low_pods + high_pods,
        podgroups=[low_pg, high_pg],
        priority_classes=PRIORITY_CLASSES,
        config=PREEMPT_CONF,
    )
    return result


def test_a_high_priority_best_effort_pod_takes_the_slot_of_a_low_priority_one():
    result = _session(pod_slots=1)
    assert [e.victim for e in result.evictions] == ["default/batch-t0-0"]
    assert result.nominations["default/urgent"].pods == {"default/urgent-t0-0": "n1"}


def test_a_best_effort_pod_with_a_free_slot_evicts_nobody():
    result = _session(pod_slots=2)
    assert result.evictions == []
    assert result.bindings == {"default/urgent-t0-0": "n1"}
