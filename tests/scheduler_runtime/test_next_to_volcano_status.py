"""Next to Volcano's scheduler, which writes its own wording of Scheduled=True on every PodGroup
it sees placed, ours keeps that condition rather than rewriting it, so the two never overwrite
each other's status cycle after cycle (tests/integration/test_next_to_volcano.py shows it live)."""

from __future__ import annotations

from scheduler_plugin.cycle.result import JobOutcome
from scheduler_plugin.runtime.status import podgroup_status_patch


def pod(phase: str) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"nodeName": "n0"}, "status": {"phase": phase}}


def ours() -> JobOutcome:
    return JobOutcome(
        phase="Running",
        allocated_hypernode=None,
        conditions=[
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "GangReady",
                "message": "gang minimum is placed",
            }
        ],
    )


def test_volcanos_scheduled_condition_is_kept_as_it_is():
    volcano = {
        "type": "Scheduled",
        "status": "True",
        "reason": "tasks in gang are ready to be scheduled",
        "transitionID": "8d6c",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    pg = {
        "spec": {"minMember": 2},
        "status": {"phase": "Running", "conditions": [volcano], "running": 2, "succeeded": 0, "failed": 0},
    }
    assert podgroup_status_patch(pg, ours(), [pod("Running"), pod("Running")], "T") is None


def test_an_unschedulable_condition_is_still_replaced():
    pg = {
        "spec": {"minMember": 1},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "Unschedulable", "status": "True", "reason": "x"}],
        },
    }
    patch = podgroup_status_patch(pg, ours(), [pod("Running")], "T")
    assert patch is not None
    assert [c["type"] for c in patch["status"]["conditions"]] == ["Scheduled"]
    assert patch["status"]["conditions"][0]["reason"] == "GangReady"
