"""Volcano's lifecycle rules one pass at a time (controller.job.reconcile over
controller.job.lifecycle): the actions, events and phases the user stories do not reach."""

from __future__ import annotations

import copy
from typing import Any

from controller.job.lifecycle import OUT_OF_SYNC_ANNOTATION
from controller.job.reconcile import JobReconcile, reconcile_job
from hyperplace.api import Job, PodGroup

from .test_job_reconcile import job_from

T0 = "2026-01-01T00:00:00Z"


def spec_with(**overrides: Any) -> Job:
    """The design doc's job (task0: 6 pods in partitions of 3; task1: 8 pods in partitions of 2;
    minAvailable 3) with a uid and maxRetry 3 unless overridden."""
    job = job_from(**{"maxRetry": 3, **overrides})
    job.metadata.uid = "u-1"
    return job


def with_task_policies(job: Job, task: int, policies: list[dict[str, Any]], **fields: Any) -> Job:
    raw = job.to_dict()
    raw["spec"]["tasks"][task]["policies"] = policies
    raw["spec"]["tasks"][task].update(fields)
    return Job.model_validate(raw)


class Cluster:
    """A Job and its pods, applying each pass's writes the way the API server would."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.pods: dict[str, dict[str, Any]] = {}
        self.uids = 0
        self.podgroup: PodGroup | None = None

    def reconcile(self, **kw: Any) -> JobReconcile:
        out = reconcile_job(self.job, self.podgroup, list(self.pods.values()), **{"now": T0, **kw})
        self.podgroup = out.podgroup
        self.job = self.job.model_copy(update={"status": out.status})
        for name in out.mark_pods:
            if name in self.pods:
                self.pods[name]["metadata"]["annotations"][OUT_OF_SYNC_ANNOTATION] = "true"
        for name in out.delete_pods:
            self.pods.pop(name, None)
        for pod in out.create_pods:
            pod = copy.deepcopy(pod)
            self.uids += 1
            pod["metadata"].update(uid=f"pod-{self.uids}", creationTimestamp=T0)
            pod["status"] = {"phase": "Pending"}
            self.pods[pod["metadata"]["name"]] = pod
        return out

    def set(self, name: str, phase: str, exit_code: int | None = None, restarts: int = 0) -> None:
        status: dict[str, Any] = {"phase": phase}
        if exit_code is not None or restarts:
            state = {"terminated": {"exitCode": exit_code}} if exit_code is not None else {"running": {}}
            status["containerStatuses"] = [{"name": "c0", "restartCount": restarts, "state": state}]
        self.pods[name]["status"] = status

    def run_all(self) -> None:
        for name in self.pods:
            self.set(name, "Running")
        self.reconcile()

    @property
    def phase(self) -> str | None:
        return self.job.status.state.phase if self.job.status and self.job.status.state else None


def started(job: Job) -> Cluster:
    c = Cluster(job)
    c.reconcile()
    c.run_all()
    assert c.phase == "Running" and len(c.pods) == 14
    return c


def test_a_partition_restart_kills_only_the_failed_pods_partition() -> None:
    c = started(with_task_policies(spec_with(), 0, [{"exitCode": 2, "action": "RestartPartition"}]))
    c.set("network-topology-job-task0-4", "Failed", exit_code=2)
    out = c.reconcile()
    partition1 = [f"network-topology-job-task0-{i}" for i in (3, 4, 5)]
    assert out.delete_pods == partition1 and out.mark_pods == partition1
    assert (c.phase, c.job.status.retry_count, c.job.status.version) == ("Restarting", 1, 0)  # type: ignore[union-attr]
    # Once its pods are gone the partition comes back, of the same version, and the job runs again.
    c.reconcile()
    assert c.phase == "Running"  # Restarting -> Pending -> Running: 11 pods still run
    assert sorted(n for n, p in c.pods.items() if p["status"]["phase"] == "Pending") == partition1
    assert {p["metadata"]["labels"]["volcano.sh/job-version"] for p in c.pods.values()} == {"0"}
    c.run_all()
    assert c.phase == "Running"


def test_a_terminate_command_stops_the_unfinished_pods_and_ends_terminated() -> None:
    c = started(spec_with())
    c.set("network-topology-job-task1-0", "Succeeded")
    out = c.reconcile(command="TerminateJob")
    assert c.phase == "Terminating" and len(out.delete_pods) == 13
    assert "network-topology-job-task1-0" not in out.delete_pods
    c.reconcile()
    assert c.phase == "Terminated" and list(c.pods) == ["network-topology-job-task1-0"]
    assert c.job.status.state.message == "TerminateJob by Command"  # type: ignore[union-attr]
    # Finished: nothing is recreated, whatever happens next.
    assert c.reconcile(command="RestartJob").create_pods == [] and c.phase == "Terminated"


def test_containers_restarting_past_the_tasks_max_retry_raise_task_failed() -> None:
    job = with_task_policies(spec_with(), 1, [{"event": "TaskFailed", "action": "AbortJob"}], maxRetry=2)
    c = started(job)
    c.set("network-topology-job-task1-2", "Running", restarts=1)
    c.reconcile()
    assert c.phase == "Running"
    c.set("network-topology-job-task1-5", "Running", restarts=1)
    c.reconcile()
    assert c.phase == "Aborting" and c.job.status.state.message == "AbortJob on TaskFailed of task task1"  # type: ignore[union-attr]


def test_an_unknown_podgroup_restarts_the_job_only_while_pods_of_it_run() -> None:
    c = started(spec_with(policies=[{"event": "Unknown", "action": "RestartJob"}]))
    assert c.podgroup is not None
    c.podgroup = c.podgroup.model_copy(update={"status": c.podgroup.status or None})
    raw = c.podgroup.to_dict()
    raw["status"] = {"phase": "Unknown"}
    c.podgroup = PodGroup.model_validate(raw)
    c.reconcile()
    assert (c.phase, c.job.status.version) == ("Restarting", 1)  # type: ignore[union-attr]
    # The scheduler has not rewritten the phase yet, but no pod of version 1 runs: no second restart.
    for _ in range(3):
        c.reconcile()
    assert (c.job.status.retry_count, c.job.status.version) == (1, 1)  # type: ignore[union-attr]
    assert {p["metadata"]["labels"]["volcano.sh/job-version"] for p in c.pods.values()} == {"1"}


def test_a_pod_pending_policy_acts_once_its_timeout_passed_and_says_when_to_look_again() -> None:
    c = Cluster(spec_with(policies=[{"event": "PodPending", "action": "AbortJob", "timeout": "10m"}]))
    c.reconcile()
    out = c.reconcile(now="2026-01-01T00:04:00Z")
    assert c.phase == "Pending" and out.requeue_after == 360.0
    c.reconcile(now="2026-01-01T00:10:00Z")
    assert c.phase == "Aborting"


def test_the_last_retry_fails_the_job_and_keeps_its_finished_pods() -> None:
    c = started(spec_with(maxRetry=2, policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    c.set("network-topology-job-task0-0", "Failed", exit_code=1)
    c.reconcile()
    c.reconcile()
    c.run_all()
    assert (c.phase, c.job.status.retry_count) == ("Running", 1)  # type: ignore[union-attr]
    c.set("network-topology-job-task0-1", "Failed", exit_code=1)
    c.set("network-topology-job-task0-2", "Succeeded")
    out = c.reconcile()
    assert (c.phase, c.job.status.retry_count) == ("Restarting", 2)  # type: ignore[union-attr]
    c.reconcile()
    assert (c.phase, c.job.status.retry_count, c.job.status.state.reason) == ("Failed", 2, "MaxRetryReached")  # type: ignore[union-attr]
    assert sorted(c.pods) == ["network-topology-job-task0-1", "network-topology-job-task0-2"]
    assert out.create_pods == [] and c.reconcile().create_pods == []


def test_a_task_policy_that_does_not_match_leaves_the_event_to_the_job_policies() -> None:
    job = with_task_policies(
        spec_with(policies=[{"event": "*", "action": "RestartJob"}]),
        1,
        [{"exitCode": 3, "action": "RestartTask"}],
    )
    c = started(job)
    c.set("network-topology-job-task1-1", "Failed", exit_code=1)
    c.reconcile()
    assert (c.phase, c.job.status.version) == ("Restarting", 1)  # type: ignore[union-attr]
    assert (
        c.job.status.state.message
        == "RestartJob on PodFailed of pod network-topology-job-task1-1 (exit code 1)"
    )  # type: ignore[union-attr]


def test_a_pending_pod_is_no_event_for_a_star_policy_without_a_timeout() -> None:
    c = Cluster(spec_with(policies=[{"event": "*", "action": "AbortJob"}]))
    c.reconcile()
    c.reconcile(now="2026-01-02T00:00:00Z")
    assert c.phase == "Pending"


def test_a_pod_restart_interrupted_before_its_delete_is_not_counted_twice() -> None:
    c = started(with_task_policies(spec_with(), 1, [{"event": "PodFailed", "action": "RestartPod"}]))
    failed = "network-topology-job-task1-3"
    c.set(failed, "Failed", exit_code=1)
    first = reconcile_job(c.job, c.podgroup, list(c.pods.values()), now=T0)
    assert first.delete_pods == first.mark_pods == [failed] and first.status.retry_count == 1
    # The pod was marked and the status written (in that order), then the controller stopped
    # before the delete: the next pass deletes the marked pod and counts nothing again.
    c.pods[failed]["metadata"]["annotations"][OUT_OF_SYNC_ANNOTATION] = "true"
    c.job = c.job.model_copy(update={"status": first.status})
    again = c.reconcile()
    assert again.delete_pods == [failed] and again.mark_pods == []
    # Restarting -> Pending -> Running: the other 13 pods still run; the pod comes back next.
    assert (c.phase, c.job.status.retry_count) == ("Running", 1)  # type: ignore[union-attr]
    assert [p["metadata"]["name"] for p in c.reconcile().create_pods] == [failed]
    assert c.job.status.retry_count == 1  # type: ignore[union-attr]
