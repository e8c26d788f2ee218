"""The Job controller turns a Volcano Job into the PodGroup and pods Volcano would create."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from controller.job.reconcile import (
    PARTITION_SIZE_ANNOTATION,
    min_resources,
    partition_id,
    reconcile_job,
)
from hyperplace.api import Job, JobStatus, PodGroup
from hyperplace.api.job import JobState

# The Job of Volcano's network-topology design (its "Volcano Job Controller" section), with a
# container so the pods have something to run.
DESIGN_DOC_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: network-topology-job
  namespace: default
  uid: 7d3c0b4e-0000-4000-8000-000000000001
spec:
  schedulerName: volcano
  minAvailable: 3
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  tasks:
    - name: "task0"
      replicas: 6
      partitionPolicy:
        totalPartitions: 2
        partitionSize: 3
        networkTopology:
          mode: hard
          highestTierAllowed: 1
      template:
        metadata:
          labels: {app: trainer}
        spec:
          containers:
            - name: c0
              image: nginx:latest
              resources: {requests: {cpu: "4", memory: 8Gi}}
    - name: "task1"
      replicas: 8
      partitionPolicy:
        totalPartitions: 4
        partitionSize: 2
        networkTopology:
          mode: hard
          highestTierAllowed: 1
      template:
        spec:
          containers:
            - name: c0
              image: nginx:latest
              resources: {requests: {cpu: "2"}}
"""

# The PodGroup the design doc says must be created, verbatim apart from <jobUID>.
DESIGN_DOC_PODGROUP = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: network-topology-job-7d3c0b4e-0000-4000-8000-000000000001
spec:
  minMember: 3
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  subGroupPolicy:
    - name: "task0"
      subGroupSize: 3
      labelSelector:
        matchLabels:
          volcano.sh/task-spec: task0
      matchLabelKeys:
        - volcano.sh/partition-id
      networkTopology:
        mode: hard
        highestTierAllowed: 1
    - name: "task1"
      subGroupSize: 2
      labelSelector:
        matchLabels:
          volcano.sh/task-spec: task1
      matchLabelKeys:
        - volcano.sh/partition-id
      networkTopology:
        mode: hard
        highestTierAllowed: 1
"""


def job_from(text: str = DESIGN_DOC_JOB, **spec_overrides: Any) -> Job:
    raw = yaml.safe_load(text)
    raw["spec"].update(spec_overrides)
    return Job.model_validate(raw)


def project(actual: Any, expected: Any) -> Any:
    """``actual`` restricted to the keys ``expected`` names (recursively)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return {k: project(actual.get(k), v) for k, v in expected.items()}
    if isinstance(expected, list) and isinstance(actual, list) and len(actual) == len(expected):
        return [project(a, e) for a, e in zip(actual, expected, strict=True)]
    return actual


def running(pod: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["status"] = {"phase": phase}
    return pod


def test_partitioned_job_yields_volcano_podgroup_from_design_doc() -> None:
    out = reconcile_job(job_from(), None, [])
    want = yaml.safe_load(DESIGN_DOC_PODGROUP)
    got = out.podgroup.to_dict()
    assert project(got, want) == want
    assert out.podgroup_changed
    # What Volcano adds beyond the doc's excerpt.
    assert got["metadata"]["namespace"] == "default"
    assert got["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "network-topology-job",
            "uid": "7d3c0b4e-0000-4000-8000-000000000001",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert got["spec"]["minTaskMember"] == {"task0": 6, "task1": 8}
    assert got["spec"]["queue"] == "default"
    assert [p["minSubGroups"] for p in got["spec"]["subGroupPolicy"]] == [0, 0]


def test_first_reconcile_creates_every_replica_in_task_then_index_order() -> None:
    out = reconcile_job(job_from(), None, [])
    names = [p["metadata"]["name"] for p in out.create_pods]
    assert names == [f"network-topology-job-task0-{i}" for i in range(6)] + [
        f"network-topology-job-task1-{i}" for i in range(8)
    ]
    assert out.delete_pods == []


def test_pods_of_partition_one_get_partition_id_1() -> None:
    pods = {p["metadata"]["name"]: p for p in reconcile_job(job_from(), None, []).create_pods}
    for i in (3, 4, 5):
        pod = pods[f"network-topology-job-task0-{i}"]
        assert pod["metadata"]["labels"]["volcano.sh/partition-id"] == "1"
        assert pod["metadata"]["annotations"][PARTITION_SIZE_ANNOTATION] == "3"
    for i in (0, 1, 2):
        assert pods[f"network-topology-job-task0-{i}"]["metadata"]["labels"]["volcano.sh/partition-id"] == "0"
    # task1 has partitions of 2: index 7 is partition 3.
    assert pods["network-topology-job-task1-7"]["metadata"]["labels"]["volcano.sh/partition-id"] == "3"


def test_pod_carries_volcano_labels_annotations_owner_and_keeps_template() -> None:
    job = job_from()
    pod = reconcile_job(job, None, []).create_pods[4]
    meta = pod["metadata"]
    stamp = {
        "volcano.sh/job-name": "network-topology-job",
        "volcano.sh/job-namespace": "default",
        "volcano.sh/queue-name": "default",
        "volcano.sh/task-spec": "task0",
        "volcano.sh/task-index": "4",
        "volcano.sh/job-version": "0",
        "volcano.sh/partition-id": "1",
    }
    assert meta["labels"] == {"app": "trainer", **stamp}
    assert meta["annotations"]["scheduling.k8s.io/group-name"] == (
        "network-topology-job-7d3c0b4e-0000-4000-8000-000000000001"
    )
    assert stamp.items() <= meta["annotations"].items()
    assert meta["namespace"] == "default"
    assert meta["ownerReferences"][0]["uid"] == job.metadata.uid
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["spec"]["containers"] == job.spec.tasks[0].template["spec"]["containers"]  # type: ignore[index]
    # The Job's own template is not mutated by building pods.
    assert "schedulerName" not in job.spec.tasks[0].template["spec"]  # type: ignore[index]


def test_template_scheduler_name_wins_and_job_default_is_volcano() -> None:
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    raw["spec"].pop("schedulerName")
    raw["spec"]["tasks"][1]["template"]["spec"]["schedulerName"] = "other"
    out = reconcile_job(Job.model_validate(raw), None, [])
    by_task = {p["metadata"]["labels"]["volcano.sh/task-spec"]: p for p in out.create_pods}
    assert by_task["task0"]["spec"]["schedulerName"] == "volcano"
    assert by_task["task1"]["spec"]["schedulerName"] == "other"


def test_task_without_partition_policy_gets_no_partition_label_or_subgroup() -> None:
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    del raw["spec"]["tasks"][1]["partitionPolicy"]
    out = reconcile_job(Job.model_validate(raw), None, [])
    assert [p.name for p in out.podgroup.spec.sub_group_policy or []] == ["task0"]
    t1 = [p for p in out.create_pods if p["metadata"]["labels"]["volcano.sh/task-spec"] == "task1"]
    assert all("volcano.sh/partition-id" not in p["metadata"]["labels"] for p in t1)


def test_min_task_member_prefers_min_available_then_min_partitions_then_replicas() -> None:
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    raw["spec"]["tasks"][0]["minAvailable"] = 2
    raw["spec"]["tasks"][1]["partitionPolicy"]["minPartitions"] = 3
    out = reconcile_job(Job.model_validate(raw), None, [])
    assert out.podgroup.spec.min_task_member == {"task0": 2, "task1": 6}
    assert out.podgroup.spec.sub_group_policy[1].min_sub_groups == 3  # type: ignore[index]


def test_highest_tier_name_is_copied_only_without_tier_number() -> None:
    by_name = reconcile_job(job_from(networkTopology={"mode": "soft", "highestTierName": "spine"}), None, [])
    assert by_name.podgroup.to_dict()["spec"]["networkTopology"] == {
        "mode": "soft",
        "highestTierName": "spine",
    }
    both = reconcile_job(
        job_from(networkTopology={"mode": "hard", "highestTierAllowed": 2, "highestTierName": "spine"}),
        None,
        [],
    )
    assert both.podgroup.to_dict()["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}


def test_subgroup_topology_is_copied_as_is_even_with_both_fields() -> None:
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    raw["spec"]["tasks"][0]["partitionPolicy"]["networkTopology"] = {
        "mode": "hard",
        "highestTierAllowed": 1,
        "highestTierName": "leaf",
    }
    out = reconcile_job(Job.model_validate(raw), None, [])
    assert out.podgroup.to_dict()["spec"]["subGroupPolicy"][0]["networkTopology"] == {
        "mode": "hard",
        "highestTierAllowed": 1,
        "highestTierName": "leaf",
    }


def test_min_resources_sum_the_first_min_available_pods_of_the_templates() -> None:
    # minAvailable 3 < sum of task minimums (14): the first 3 pods, all from task0.
    assert min_resources(job_from()) == {"cpu": "12", "memory": "24Gi"}
    # minAvailable 8 spills into task1 (6 x task0 + 2 x task1).
    assert min_resources(job_from(minAvailable=8)) == {"cpu": "28", "memory": "48Gi"}


def test_min_resources_take_each_task_minimum_first_when_job_min_covers_them() -> None:
    # Volcano's design doc table, row "3 | 1 | - | 3/250m": master.minAvailable=1,
    # worker unset (its replicas count) -> master + 2*worker.
    job = Job.model_validate(
        {
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": {
                "minAvailable": 3,
                "tasks": [
                    {
                        "name": "master",
                        "replicas": 2,
                        "minAvailable": 1,
                        "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "50m"}}}]}},
                    },
                    {
                        "name": "work",
                        "replicas": 2,
                        "minAvailable": 2,
                        "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "100m"}}}]}},
                    },
                ],
            },
        }
    )
    assert min_resources(job) == {"cpu": "250m"}


def test_min_resources_follow_task_priority_and_use_limits_without_requests() -> None:
    job = Job.model_validate(
        {
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": {
                "minAvailable": 1,
                "tasks": [
                    {"name": "low", "replicas": 1, "template": {"spec": {"containers": [{"resources": {}}]}}},
                    {
                        "name": "high",
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "priorityClassName": "urgent",
                                "containers": [{"resources": {"limits": {"nvidia.com/gpu": 8}}}],
                            }
                        },
                    },
                ],
            },
        }
    )
    assert min_resources(job, {"urgent": 1000}) == {"nvidia.com/gpu": "8"}
    assert min_resources(job) == {}


def test_scale_down_deletes_pods_with_index_beyond_replicas() -> None:
    job = job_from()
    pods = reconcile_job(job, None, []).create_pods
    raw = job.to_dict()
    raw["spec"]["tasks"][1]["replicas"] = 6
    out = reconcile_job(Job.model_validate(raw), None, pods)
    assert out.delete_pods == ["network-topology-job-task1-6", "network-topology-job-task1-7"]
    assert out.create_pods == []


def test_scale_up_creates_only_missing_indexes() -> None:
    job = job_from()
    pods = reconcile_job(job, None, []).create_pods
    del pods[2]
    out = reconcile_job(job, None, pods)
    assert [p["metadata"]["name"] for p in out.create_pods] == ["network-topology-job-task0-2"]


def test_pods_of_other_jobs_or_an_older_job_with_the_same_name_are_ignored() -> None:
    job = job_from()
    pods = reconcile_job(job, None, []).create_pods
    stale = copy.deepcopy(pods[0])
    stale["metadata"]["ownerReferences"][0]["uid"] = "old-uid"
    other = copy.deepcopy(pods[1])
    other["metadata"]["ownerReferences"][0]["name"] = "another-job"
    out = reconcile_job(job, None, [stale, other])
    assert len(out.create_pods) == 14
    assert out.delete_pods == []


def test_existing_podgroup_unchanged_is_not_rewritten() -> None:
    job = job_from()
    first = reconcile_job(job, None, [])
    stored = PodGroup.model_validate(
        {
            **first.podgroup.to_dict(),
            "status": {"phase": "Inqueue"},
            "metadata": {**first.podgroup.to_dict()["metadata"], "resourceVersion": "42"},
        }
    )
    again = reconcile_job(job, stored, [])
    assert not again.podgroup_changed
    assert again.podgroup.metadata.resource_version == "42"
    assert again.podgroup.status is not None and again.podgroup.status.phase == "Inqueue"


def test_changed_subgroup_policy_replaces_the_whole_list() -> None:
    job = job_from()
    stored = reconcile_job(job, None, []).podgroup
    raw = job.to_dict()
    del raw["spec"]["tasks"][0]["partitionPolicy"]
    raw["spec"]["minAvailable"] = 4
    out = reconcile_job(Job.model_validate(raw), stored, [])
    assert out.podgroup_changed
    assert [p.name for p in out.podgroup.spec.sub_group_policy or []] == ["task1"]
    assert out.podgroup.spec.min_member == 4


def test_job_is_pending_until_min_available_pods_run_then_running() -> None:
    job = job_from()
    pods = reconcile_job(job, None, []).create_pods
    pending = reconcile_job(job, None, [running(p, "Pending") for p in pods], now="t1")
    assert pending.status.state is not None and pending.status.state.phase == "Pending"
    assert pending.status.pending == 14
    job.status = pending.status
    mixed = [running(p) if i < 3 else running(p, "Pending") for i, p in enumerate(pods)]
    out = reconcile_job(job, None, mixed, now="t2")
    assert out.status.state is not None
    assert (out.status.state.phase, out.status.state.last_transition_time) == ("Running", "t2")
    assert out.status.running == 3 and out.status.pending == 11
    assert out.status.task_status_count is not None
    assert out.status.task_status_count["task0"].phase == {"Pending": 3, "Running": 3}
    assert out.status.min_available == 3


def test_last_transition_time_moves_only_when_the_phase_changes() -> None:
    job = job_from()
    job.status = JobStatus(state=JobState(phase="Running", last_transition_time="t0"))
    pods = [running(p) for p in reconcile_job(job, None, []).create_pods]
    out = reconcile_job(job, None, pods, now="t9")
    assert out.status.state is not None and out.status.state.last_transition_time == "t0"


def test_job_completes_when_all_pods_succeed_and_stops_creating_pods() -> None:
    job = job_from()
    pods = [running(p, "Succeeded") for p in reconcile_job(job, None, []).create_pods]
    out = reconcile_job(job, None, pods[1:], now="t")
    # One pod is missing but the job is not finished: it gets recreated.
    assert [p["metadata"]["name"] for p in out.create_pods] == ["network-topology-job-task0-0"]
    done = reconcile_job(job, None, pods, now="t")
    assert done.status.state is not None and done.status.state.phase == "Completed"
    assert done.status.succeeded == 14
    job.status = done.status
    assert reconcile_job(job, None, pods[1:]).create_pods == []


def test_min_success_completes_early_and_kills_the_rest() -> None:
    job = job_from(minSuccess=2)
    pods = reconcile_job(job, None, []).create_pods
    state = [running(p, "Succeeded") if i < 2 else running(p) for i, p in enumerate(pods)]
    out = reconcile_job(job, None, state)
    assert out.status.state is not None and out.status.state.phase == "Completed"
    assert len(out.delete_pods) == 12 and "network-topology-job-task0-0" not in out.delete_pods


def test_failed_pods_without_a_policy_leave_the_job_running_as_on_volcano() -> None:
    # Volcano fails a job only once every pod finished (or through a policy): the other pods
    # keep running and the failed ones stay, for their logs.
    job = job_from(minAvailable=12)
    pods = reconcile_job(job, None, []).create_pods
    state = [running(p, "Failed") if i < 3 else running(p) for i, p in enumerate(pods)]
    out = reconcile_job(job, None, state)
    assert out.status.state is not None
    assert (out.status.state.phase, out.status.failed) == ("Running", 3)
    assert out.delete_pods == [] and out.create_pods == []


def test_job_fails_when_all_finished_without_enough_successes() -> None:
    job = job_from(minAvailable=12)
    pods = reconcile_job(job, None, []).create_pods
    # Volcano's rule: once every pod finished, fewer than minAvailable successes fail the job.
    state = [running(p, "Failed") if i < 3 else running(p, "Succeeded") for i, p in enumerate(pods)]
    out = reconcile_job(job, None, state)
    assert out.status.state is not None
    assert (out.status.state.phase, out.status.state.reason) == ("Failed", "NotEnoughSucceeded")
    # 12 of 14 is enough: the tasks' own minimums count only when the job's minAvailable covers
    # them all (job.minAvailable >= the sum of the tasks'), as in Volcano's running state.
    state = [running(p, "Failed") if i < 2 else running(p, "Succeeded") for i, p in enumerate(pods)]
    out = reconcile_job(job, None, state)
    assert out.status.state is not None and out.status.state.phase == "Completed"


def test_terminating_pods_are_counted_and_never_deleted_twice() -> None:
    job = job_from()
    pods = reconcile_job(job, None, []).create_pods
    raw = job.to_dict()
    raw["spec"]["tasks"][1]["replicas"] = 7
    pods[-1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    out = reconcile_job(Job.model_validate(raw), None, pods)
    assert out.delete_pods == []
    assert out.status.terminating == 1


def test_reconcile_is_deterministic() -> None:
    a = reconcile_job(job_from(), None, [], now="t")
    b = reconcile_job(job_from(), None, [], now="t")
    assert a.podgroup.to_dict() == b.podgroup.to_dict()
    assert a.create_pods == b.create_pods
    assert a.status.to_dict() == b.status.to_dict()


def test_partition_id_uses_go_integer_division() -> None:
    assert [partition_id(i, 4) for i in range(9)] == [0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert partition_id(5, 0) == 0
    assert partition_id(5, -1) == 0


def test_job_that_bypassed_admission_without_min_available_uses_the_webhook_default() -> None:
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    del raw["spec"]["minAvailable"]
    raw["spec"]["tasks"][0]["minAvailable"] = 1
    out = reconcile_job(Job.model_validate(raw), None, [])
    assert out.podgroup.spec.min_member == 1 + 8
    # task0's one minimum pod plus all 8 of task1 (its replicas are its minimum).
    assert out.podgroup.spec.min_resources == {"cpu": "20", "memory": "8Gi"}
    assert out.status.min_available == 9


def test_unnamed_task_is_called_default_index_like_volcanos_webhook() -> None:
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    del raw["spec"]["tasks"][1]["name"]
    out = reconcile_job(Job.model_validate(raw), None, [])
    assert "network-topology-job-default1-0" in [p["metadata"]["name"] for p in out.create_pods]
    assert out.podgroup.spec.min_task_member == {"task0": 6, "default1": 8}


def _topology_job(tier: int) -> Job:
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    raw["spec"]["networkTopology"]["highestTierAllowed"] = tier
    return Job.model_validate(raw)


def test_a_changed_network_topology_reaches_a_gang_that_has_not_started_only() -> None:
    pg = reconcile_job(_topology_job(2), None, []).podgroup
    waiting = reconcile_job(_topology_job(1), pg, [])
    assert waiting.podgroup_changed
    assert waiting.podgroup.spec.network_topology is not None
    assert waiting.podgroup.spec.network_topology.highest_tier_allowed == 1
    running = PodGroup.model_validate({**pg.to_dict(), "status": {"phase": "Running"}})
    kept = reconcile_job(_topology_job(1), running, [])
    assert kept.podgroup.spec.network_topology is not None
    assert kept.podgroup.spec.network_topology.highest_tier_allowed == 2  # placed under tier 2


def test_the_legacy_podgroup_is_found_unless_another_object_controls_it() -> None:
    from controller.job.reconcile import find_podgroup

    job = Job.model_validate(yaml.safe_load(DESIGN_DOC_JOB))
    legacy = {"metadata": {"name": job.name, "namespace": "default"}}
    assert find_podgroup(job, {job.name: legacy}.get) is legacy
    current = {"metadata": {"name": f"{job.name}-{job.metadata.uid}"}}
    assert find_podgroup(job, {job.name: legacy, current["metadata"]["name"]: current}.get) is current
    foreign = {
        "metadata": {
            "name": job.name,
            "ownerReferences": [{"kind": "Job", "name": job.name, "uid": "someone-else", "controller": True}],
        }
    }
    assert find_podgroup(job, {job.name: foreign}.get) is None


def test_a_task_templates_time_limit_reaches_its_pods() -> None:
    # activeDeadlineSeconds in a task template is the time limit the scheduler backfills with.
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    raw["spec"]["tasks"][0]["template"]["spec"]["activeDeadlineSeconds"] = 3600
    out = reconcile_job(Job.model_validate(raw), None, [])
    by_task: dict[str, list[dict[str, Any]]] = {}
    for p in out.create_pods:
        by_task.setdefault(p["metadata"]["labels"]["volcano.sh/task-spec"], []).append(p)
    assert all(p["spec"]["activeDeadlineSeconds"] == 3600 for p in by_task["task0"])
    assert all("activeDeadlineSeconds" not in p["spec"] for p in by_task["task1"])
