"""The pod webhook and the Job controller put every pod in the same partition."""

from __future__ import annotations

import copy

from controller.job.reconcile import reconcile_job
from hyperplace.api import Job
from webhooks.admission import AdmissionContext, admit
from webhooks.pod import pod_patch

from .builders import job, load_fixture, task

PARTITION = "volcano.sh/partition-id"


def _created_pods(raw: dict) -> tuple[Job, list[dict]]:
    raw = copy.deepcopy(raw)
    raw["metadata"]["uid"] = "0b0e6f5c-uid"
    model = Job.model_validate(admit(raw).object)
    return model, reconcile_job(model, None, []).create_pods


def _agree(raw: dict) -> int:
    model, pods = _created_pods(raw)
    ctx = AdmissionContext(jobs={model.key: model})
    checked = 0
    for pod in pods:
        want = pod["metadata"]["labels"].get(PARTITION)
        stripped = copy.deepcopy(pod)
        stripped["metadata"]["labels"].pop(PARTITION, None)
        for context in (ctx, None):  # from the Job cache, and from the annotation alone
            ops = pod_patch(stripped, "CREATE", context, model.namespace)
            got = ops[0]["value"] if ops else None
            assert got == want, (pod["metadata"]["name"], context is not None)
        checked += want is not None
    return checked


def test_user_guide_partition_job():
    assert _agree(load_fixture("user_guide_jobs.yaml")[1]) == 8


def test_uneven_tasks_and_a_task_without_partitions():
    raw = job(
        tasks=[
            task("w", 12, partitionPolicy={"totalPartitions": 4, "partitionSize": 3, "minPartitions": 2}),
            task("ps", 2),
        ]
    )
    assert _agree(raw) == 12
