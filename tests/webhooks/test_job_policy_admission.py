"""A researcher writes lifecycle policies on a Volcano Job; admission refuses the ones Volcano
refuses, with Volcano's words, each prefixed with the policy's field."""

from __future__ import annotations

from typing import Any

import pytest

from webhooks.admission import admit

from .builders import job, task


def with_policies(
    job_level: list[dict[str, Any]] | None = None, task_level: list[dict[str, Any]] | None = None
):
    tasks = [task("worker", 4, policies=task_level)] if task_level is not None else None
    return job(tasks=tasks, policies=job_level) if job_level is not None else job(tasks=tasks)


def test_a_training_jobs_usual_policies_are_admitted():
    out = admit(
        with_policies(
            [
                {"event": "PodEvicted", "action": "RestartJob"},
                {"events": ["PodFailed", "Unknown"], "action": "AbortJob"},
                {"event": "PodPending", "action": "RestartJob", "timeout": "10m"},
                {"exitCode": 3, "action": "RestartTask"},
            ],
            [{"exitCode": 137, "action": "RestartPod"}, {"event": "TaskCompleted", "action": "CompleteJob"}],
        )
    )
    assert out.allowed, out.messages
    assert out.warnings == []


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        (
            [{"event": "PodCrashed", "action": "RestartJob"}],
            'spec.policies[0].event: Invalid value: "PodCrashed": invalid policy event; valid events are [*',
        ),
        (
            [{"event": "OutOfSync", "action": "RestartJob"}],  # the controller's own event
            'spec.policies[0].event: Invalid value: "OutOfSync": invalid policy event',
        ),
        (
            [{"events": ["PodFailed"], "action": "Reboot"}],
            'spec.policies[0].action: Invalid value: "Reboot": invalid policy action; valid events are',
        ),
        (
            [{"event": "PodFailed", "action": "SyncJob"}],  # the controller's own action
            'spec.policies[0].action: Invalid value: "SyncJob": invalid policy action',
        ),
        (
            [{"event": "PodFailed", "exitCode": 1, "action": "RestartJob"}],
            "spec.policies[0].exitCode: must not specify event and exitCode simultaneously",
        ),
        ([{"action": "RestartJob"}], "spec.policies[0].event: either event and exitCode should be specified"),
        ([{"exitCode": 0, "action": "RestartJob"}], "spec.policies[0].exitCode: 0 is not a valid error code"),
        (
            [{"event": "PodFailed", "action": "RestartJob"}, {"events": ["PodFailed"], "action": "AbortJob"}],
            "spec.policies[1].events: duplicate event PodFailed  across different policy",
        ),
        (
            [{"exitCode": 2, "action": "RestartJob"}, {"exitCode": 2, "action": "AbortJob"}],
            "spec.policies[1].exitCode: duplicate exitCode 2",
        ),
        (
            [{"event": "*", "action": "RestartJob"}, {"event": "PodFailed", "action": "AbortJob"}],
            "spec.policies: if there's * here, no other policy should be here",
        ),
        (
            [{"exitCode": 1, "action": "Reboot"}],  # ours: Volcano admits it and then ignores it
            'spec.policies[0].action: Invalid value: "Reboot": invalid policy action',
        ),
        (
            [{"event": "PodPending", "action": "AbortJob", "timeout": "ten minutes"}],
            'spec.policies[0].timeout: Invalid value: "ten minutes": not a duration',
        ),
    ],
)
def test_an_invalid_job_policy_is_refused_naming_its_field(policies: list[dict[str, Any]], message: str):
    out = admit(with_policies(policies))
    assert not out.allowed
    assert any(m.startswith(message) for m in out.messages), out.messages


def test_an_invalid_task_policy_is_refused_naming_the_task_field():
    out = admit(with_policies(task_level=[{"exitCode": 0, "action": "RestartTask"}]))
    assert not out.allowed
    assert "spec.tasks[0].policies[0].exitCode: 0 is not a valid error code" in out.messages


def test_the_same_event_on_a_task_and_on_the_job_is_allowed():
    # A task's policy overrides the job's for that task's pods: that is no duplicate.
    out = admit(
        with_policies(
            [{"event": "PodFailed", "action": "AbortJob"}], [{"event": "PodFailed", "action": "RestartTask"}]
        )
    )
    assert out.allowed, out.messages


def test_a_pod_pending_policy_without_a_timeout_is_admitted_with_a_warning():
    out = admit(with_policies([{"event": "PodPending", "action": "RestartJob"}]))
    assert out.allowed
    assert out.warnings == [
        "spec.policies[0].timeout: a PodPending policy acts only after its timeout; without one it never acts"
    ]
