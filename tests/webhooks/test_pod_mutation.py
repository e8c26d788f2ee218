"""Pods of a partitioned task learn their partition at admission, so they join the right SubJob."""

from __future__ import annotations

from hyperplace.api import Job
from webhooks.admission import AdmissionContext, admit
from webhooks.pod import mutate_pod

from .builders import job, task

PARTITION = "volcano.sh/partition-id"


def pod(index: int | str, task_name: str = "worker", job_name: str = "train", **annotations: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job_name}-{task_name}-{index}",
            "namespace": "default",
            "labels": {"volcano.sh/job-name": job_name, "volcano.sh/task-spec": task_name},
            "annotations": {"volcano.sh/task-index": str(index), **annotations},
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def jobs_with_partition_size(size: int) -> AdmissionContext:
    j = job(
        tasks=[
            task("worker", 8, partitionPolicy={"totalPartitions": 8 // size, "partitionSize": size}),
            task("ps", 1),
        ]
    )
    model = Job.model_validate(j)
    return AdmissionContext(jobs={model.key: model})


def test_pod_of_a_partitioned_task_gets_its_partition_id_from_the_job_cache():
    ctx = jobs_with_partition_size(4)
    ids = [admit(pod(i), ctx=ctx).object["metadata"]["labels"][PARTITION] for i in range(8)]
    assert ids == ["0", "0", "0", "0", "1", "1", "1", "1"]


def test_the_patch_adds_just_the_label():
    out = admit(pod(5), ctx=jobs_with_partition_size(2))
    assert out.patch == [{"op": "add", "path": "/metadata/labels/volcano.sh~1partition-id", "value": "2"}]


def test_partition_size_annotation_is_the_fallback_without_a_cache():
    out = admit(pod(7, **{"volcano.sh/partition-size": "3"}))
    assert out.object["metadata"]["labels"][PARTITION] == "2"


def test_pod_with_unknown_partition_size_passes_unchanged():
    p = pod(3)
    out = admit(p)
    assert out.allowed and out.patch == [] and out.object == p


def test_existing_partition_label_is_kept():
    p = pod(5)
    p["metadata"]["labels"][PARTITION] = "9"
    assert admit(p, ctx=jobs_with_partition_size(2)).patch == []


def test_task_without_partition_policy_gets_no_label_even_with_an_annotation():
    # The cached Job is authoritative: the ps task has no partitions.
    out = admit(pod(0, task_name="ps", **{"volcano.sh/partition-size": "2"}), ctx=jobs_with_partition_size(4))
    assert out.patch == []


def test_pod_without_labels_map_gets_one():
    p = pod(2, **{"volcano.sh/partition-size": "2"})
    p["metadata"]["annotations"]["volcano.sh/job-name"] = "train"
    p["metadata"]["annotations"]["volcano.sh/task-spec"] = "worker"
    del p["metadata"]["labels"]
    assert mutate_pod(p)["metadata"]["labels"] == {PARTITION: "1"}


def test_namespace_from_the_request_finds_the_job():
    p = pod(6)
    del p["metadata"]["namespace"]
    out = mutate_pod(p, "CREATE", jobs_with_partition_size(4), namespace="default")
    assert out["metadata"]["labels"][PARTITION] == "1"


def test_garbage_index_or_size_leaves_the_pod_alone():
    for idx, size in (("-1", "2"), ("x", "2"), ("1", "0"), ("1", "-2"), ("1", "two"), ("١", "2")):
        p = pod(idx, **{"volcano.sh/partition-size": size})
        assert mutate_pod(p) == p
    assert mutate_pod({"metadata": "x"}) == {"metadata": "x"}
