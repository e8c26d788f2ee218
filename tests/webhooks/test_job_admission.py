"""A researcher submits Volcano Jobs; admission defaults them as Volcano does and refuses
mistakes with Volcano's own words, each prefixed with the field it is about."""

from __future__ import annotations

import jsonpatch

from webhooks.admission import AdmissionContext, admit
from webhooks.job import mutate_job, validate_job

from .builders import context_of, hypernode, job, task

SIMULTANEOUS = "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"


def partitioned(replicas=8, total=2, size=4, min_partitions=None, min_available=None, nt=None):
    pp = {"totalPartitions": total, "partitionSize": size}
    if min_partitions is not None:
        pp["minPartitions"] = min_partitions
    if nt is not None:
        pp["networkTopology"] = nt
    extra = {} if min_available is None else {"minAvailable": min_available}
    return task("worker", replicas, partitionPolicy=pp, **extra)


# --------------------------------------------------------------------------- defaults


def test_researcher_gets_volcanos_defaults_on_a_bare_job():
    bare = job(tasks=[{"replicas": 3, "template": {}}, {"replicas": 2, "minAvailable": 1, "template": {}}])
    out = admit(bare)
    assert out.allowed, out.messages
    spec = out.object["spec"]
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert spec["maxRetry"] == 3
    assert [t["name"] for t in spec["tasks"]] == ["default0", "default1"]
    assert [t["minAvailable"] for t in spec["tasks"]] == [3, 1]
    assert [t["maxRetry"] for t in spec["tasks"]] == [3, 3]
    # Volcano sums the task minAvailable after defaulting them.
    assert spec["minAvailable"] == 4
    assert jsonpatch.apply_patch(bare, out.patch) == out.object


def test_partitioned_task_min_available_defaults_to_min_partitions_times_size():
    out = admit(job(tasks=[partitioned(min_partitions=1)]))
    assert out.allowed, out.messages
    assert out.object["spec"]["tasks"][0]["minAvailable"] == 4
    assert out.object["spec"]["minAvailable"] == 4


def test_partitioned_task_without_min_partitions_defaults_to_replicas():
    out = admit(job(tasks=[partitioned()]))
    assert out.object["spec"]["tasks"][0]["minAvailable"] == 8


def test_network_topology_mode_defaults_to_hard_for_job_and_partitions():
    j = job(tasks=[partitioned(nt={"highestTierAllowed": 1})], network_topology={"highestTierAllowed": 2})
    out = admit(j)
    assert out.object["spec"]["networkTopology"]["mode"] == "hard"
    assert out.object["spec"]["tasks"][0]["partitionPolicy"]["networkTopology"]["mode"] == "hard"


def test_user_values_are_never_overwritten():
    j = job(
        queue="research", schedulerName="other", maxRetry=7, minAvailable=2, network_topology={"mode": "soft"}
    )
    out = admit(j)
    spec = out.object["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"], spec["minAvailable"]) == (
        "research",
        "other",
        7,
        2,
    )
    assert spec["networkTopology"]["mode"] == "soft"


def test_host_network_pods_get_cluster_first_with_host_net_dns():
    t = task("w", 1)
    t["template"]["spec"]["hostNetwork"] = True
    assert (
        mutate_job(job(tasks=[t]))["spec"]["tasks"][0]["template"]["spec"]["dnsPolicy"]
        == "ClusterFirstWithHostNet"
    )


def test_mpi_plugin_gets_svc_and_ssh():
    out = mutate_job(job(plugins={"mpi": ["--master=m"]}))
    assert out["spec"]["plugins"] == {"mpi": ["--master=m"], "svc": [], "ssh": []}


def test_mutation_does_not_touch_the_input():
    j = job(tasks=[{"replicas": 1}])
    before = repr(j)
    mutate_job(j)
    assert repr(j) == before


# --------------------------------------------------------------------------- Volcano's partition chain


def test_zero_total_partitions_reports_volcanos_message_not_the_schema_minimum():
    out = admit(job(tasks=[partitioned(total=0)]))
    assert out.messages == [
        "spec.tasks[0].partitionPolicy.totalPartitions: 'TotalPartitions' must be greater than 0 "
        "in task: worker, job: train"
    ]


def test_chain_reports_its_first_failure_and_the_schema_the_other_field():
    # Both totalPartitions and partitionSize are wrong. Volcano's else-if chain stops at the
    # first; the CRD minimum on partitionSize still names the second field.
    out = admit(job(tasks=[partitioned(total=-1, size=0)]))
    assert out.messages == [
        "spec.tasks[0].partitionPolicy.totalPartitions: 'TotalPartitions' must be greater than 0 "
        "in task: worker, job: train",
        # The apiserver's own words for the CRD minimum (kube-openapi via field.Invalid).
        "spec.tasks[0].partitionPolicy.partitionSize: Invalid value: 0: "
        "spec.tasks[0].partitionPolicy.partitionSize in body should be greater than or equal to 1",
    ]
    # The webhook alone (as the apiserver calls it) says only what Volcano says.
    assert validate_job(job(tasks=[partitioned(total=-1, size=0)])).messages == out.messages[:1]


def test_zero_partition_size_reports_volcanos_message():
    out = admit(job(tasks=[partitioned(size=0)]))
    assert out.messages == [
        "spec.tasks[0].partitionPolicy.partitionSize: 'PartitionSize' must be greater than 0 in task: worker, job: train"
    ]


def test_replicas_must_equal_partitions_times_size():
    out = admit(job(tasks=[partitioned(replicas=7)]))
    assert out.messages == [
        "spec.tasks[0].replicas: 'Replicas' are not equal to TotalPartitions*PartitionSize in task: worker, job: train"
    ]


def test_min_available_must_equal_min_partitions_times_size():
    out = admit(job(tasks=[partitioned(min_partitions=1, min_available=5)]))
    assert out.messages == [
        "spec.tasks[0].minAvailable: 'MinAvailable' is not equal to MinPartitions*PartitionSize "
        "in task: worker, job: train"
    ]


def test_min_available_is_free_when_min_partitions_is_zero():
    assert admit(job(tasks=[partitioned(min_partitions=0, min_available=5)])).allowed


def test_both_tier_fields_on_the_job_are_refused():
    out = admit(job(network_topology={"highestTierAllowed": 2, "highestTierName": "spine"}))
    assert out.messages == [f"spec.networkTopology: {SIMULTANEOUS}"]


def test_both_tier_fields_on_a_partition_are_refused_after_the_chain():
    nt = {"highestTierAllowed": 1, "highestTierName": "leaf"}
    out = admit(job(tasks=[partitioned(replicas=7, nt=nt)]))
    assert out.messages == [
        "spec.tasks[0].replicas: 'Replicas' are not equal to TotalPartitions*PartitionSize in task: worker, job: train",
        f"spec.tasks[0].partitionPolicy.networkTopology: {SIMULTANEOUS}",
    ]


# --------------------------------------------------------------------------- other Volcano rules


def test_job_without_tasks_is_refused():
    assert admit(job(tasks=[])).messages == ["spec.tasks: No task specified in job spec"]


def test_duplicate_task_names_are_refused():
    out = admit(job(tasks=[task("w", 1), task("w", 1)]))
    assert out.messages == ["spec.tasks[1].name: duplicated task name w"]


def test_task_name_must_be_a_dns_label():
    out = admit(job(tasks=[task("Worker_1", 1)]))
    assert len(out.messages) == 1
    assert out.messages[0].startswith("spec.tasks[0].name: [a lowercase RFC 1123 label must consist of")


def test_task_min_available_above_replicas_is_refused():
    out = admit(job(tasks=[task("w", 2, minAvailable=3)]))
    assert (
        "spec.tasks[0].minAvailable: 'minAvailable' is greater than 'replicas' in task: w, job: train"
        in out.messages
    )


def test_job_min_available_above_total_replicas_is_refused():
    out = admit(job(minAvailable=9))
    assert out.messages == [
        "spec.minAvailable: job 'minAvailable' should not be greater than total replicas in tasks"
    ]


def test_too_long_pod_name_is_refused():
    out = admit(job(name="j" * 60, tasks=[task("worker", 1)]))
    assert any(
        m.startswith(f"spec.tasks[0].name: create pod with name {'j' * 60}-worker-0 validate failed")
        for m in out.messages
    )


# --------------------------------------------------------------------------- our topology rules


def test_partition_tier_above_job_tier_is_refused():
    j = job(tasks=[partitioned(nt={"highestTierAllowed": 3})], network_topology={"highestTierAllowed": 2})
    out = admit(j)
    assert out.messages == [
        "spec.tasks[0].partitionPolicy.networkTopology.highestTierAllowed: partition tier 3 exceeds the job's "
        "tier 2 (spec.networkTopology.highestTierAllowed) in task: worker, job: train; "
        "a partition is placed inside the job's HyperNode"
    ]


def test_partition_tier_above_a_soft_jobs_tier_is_only_a_warning():
    j = job(
        tasks=[partitioned(nt={"highestTierAllowed": 3})],
        network_topology={"mode": "soft", "highestTierAllowed": 2},
    )
    out = admit(j)
    assert out.allowed
    assert out.warnings[0].startswith(
        "spec.tasks[0].partitionPolicy.networkTopology.highestTierAllowed: partition tier 3"
    )


def test_partition_tier_compared_through_tier_names_when_hypernodes_are_known():
    ctx = context_of(
        hypernode("leaf-0", 1, nodes=("n0",), tier_name="leaf"),
        hypernode("spine-0", 2, children=("leaf-0",), tier_name="spine"),
    )
    ok = job(
        tasks=[partitioned(nt={"highestTierName": "leaf"})], network_topology={"highestTierName": "spine"}
    )
    bad = job(
        tasks=[partitioned(nt={"highestTierName": "spine"})], network_topology={"highestTierName": "leaf"}
    )
    assert admit(ok, ctx=ctx).allowed
    out = admit(bad, ctx=ctx)
    assert len(out.messages) == 1
    assert out.messages[0].startswith(
        "spec.tasks[0].partitionPolicy.networkTopology.highestTierName: partition tier 2 exceeds the job's tier 1"
    )


def test_unknown_tier_name_is_a_warning_not_a_refusal():
    ctx = context_of(hypernode("leaf-0", 1, nodes=("n0",), tier_name="leaf"))
    out = admit(job(network_topology={"highestTierName": "spine"}), ctx=ctx)
    assert out.allowed
    assert out.warnings == [
        'spec.networkTopology.highestTierName: no HyperNode has tierName "spine" (known: leaf); '
        "the job cannot be placed until one does"
    ]


def test_tier_names_known_from_discovery_count_as_known():
    ctx = AdmissionContext(known_tier_names={"spine": 2})
    assert admit(job(network_topology={"highestTierName": "spine"}), ctx=ctx).warnings == []


def test_without_hypernodes_tier_names_are_not_judged():
    assert admit(job(network_topology={"highestTierName": "anything"})).warnings == []


# --------------------------------------------------------------------------- updates


def _stored(j):
    return admit(j).object


def test_scaling_replicas_and_min_available_is_allowed():
    old = _stored(job(tasks=[task("w", 4)]))
    new = _stored(job(tasks=[task("w", 4)]))
    new["spec"]["tasks"][0]["replicas"] = 6
    new["spec"]["tasks"][0]["minAvailable"] = 5
    new["spec"]["minAvailable"] = 5
    new["spec"]["priorityClassName"] = "high"
    assert admit(new, "UPDATE", old).allowed


def test_changing_the_queue_is_refused_naming_the_field():
    old = _stored(job())
    new = _stored(job())
    new["spec"]["queue"] = "other"
    assert admit(new, "UPDATE", old).messages == [
        "spec.queue: job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec`"
    ]


def test_adding_a_task_is_refused():
    old = _stored(job(tasks=[task("a", 1)]))
    new = _stored(job(tasks=[task("a", 1), task("b", 1)]))
    assert admit(new, "UPDATE", old).messages == ["spec.tasks: job updates may not add or remove tasks"]


def test_update_reports_only_the_first_volcano_problem():
    old = _stored(job(tasks=[task("a", 2)]))
    new = _stored(job(tasks=[task("a", 2)]))
    new["spec"]["tasks"][0]["minAvailable"] = 3
    new["spec"]["queue"] = "other"
    assert admit(new, "UPDATE", old).messages == [
        "spec.tasks[0].minAvailable: 'minAvailable' must be <= 'replicas' in task: a"
    ]


def test_update_is_not_defaulted_again_by_the_mutating_webhook():
    old = _stored(job())
    new = _stored(job())
    del new["spec"]["maxRetry"]
    out = admit(new, "UPDATE", old)
    assert "maxRetry" not in out.object["spec"]
    assert not out.allowed  # maxRetry 3 -> unset is a change Volcano refuses


def test_validate_without_old_on_update_is_checked_like_a_create():
    assert validate_job(job(tasks=[]), "UPDATE").messages == ["spec.tasks: No task specified in job spec"]


def test_validation_never_raises_on_garbage():
    for garbage in (
        {},
        {"spec": []},
        {"spec": {"tasks": "x"}},
        {"spec": {"tasks": [None, 3, {"partitionPolicy": 1}]}},
    ):
        v = validate_job(garbage)
        assert all(": " in m for m in v.messages)
        mutate_job(garbage)
