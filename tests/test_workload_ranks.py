"""Rank order from the index each workload stamps on its pods (hyperplace.kube.workloads).

A collective ring is built in rank order; the scheduler places a gang, and ``ringCrossings``
counts, in the order these indices give, whichever controller made the pods.
"""

from __future__ import annotations

from hyperplace.kube.workloads import RANK_STRIDE, controlled_podgroup_name, pod_rank_index, rank_index
from scheduler_plugin.cache.records import parse_pod


def ranks(pods: list[tuple[dict[str, str], dict[str, str]]]) -> list[int | None]:
    return [rank_index(labels, ann) for labels, ann in pods]


def test_volcano_task_index_still_decides_a_volcano_job() -> None:
    assert rank_index({"volcano.sh/task-index": "7"}, {}) == 7
    assert rank_index({}, {"volcano.sh/task-index": "3"}) == 3


def test_an_indexed_job_ranks_by_completion_index_label_or_annotation() -> None:
    assert rank_index({"batch.kubernetes.io/job-completion-index": "5"}, {}) == 5
    assert rank_index({}, {"batch.kubernetes.io/job-completion-index": "2"}) == 2


def test_a_statefulset_ranks_by_its_ordinal() -> None:
    assert rank_index({"apps.kubernetes.io/pod-index": "11"}, {}) == 11


def test_a_pytorchjob_master_is_rank_zero_and_workers_follow_in_index_order() -> None:
    master = {"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"}
    workers = [
        {"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": str(i)}
        for i in (2, 0, 1)
    ]
    got = ranks([(master, {})] + [(w, {}) for w in workers])
    assert got[0] is not None and all(g is not None and got[0] < g for g in got[1:])
    assert sorted(got[1:], key=lambda x: x or 0) == [got[2], got[3], got[1]]


def test_a_jobset_ranks_by_child_job_then_completion_index() -> None:
    def p(job: int, idx: int) -> dict[str, str]:
        return {
            "jobset.sigs.k8s.io/job-index": str(job),
            "batch.kubernetes.io/job-completion-index": str(idx),
        }

    got = ranks([(p(1, 0), {}), (p(0, 3), {}), (p(0, 0), {})])
    assert got == [RANK_STRIDE, 3, 0]


def test_a_leaderworkerset_ranks_by_group_then_worker_leader_first() -> None:
    def p(group: int, worker: int) -> dict[str, str]:
        # A worker also carries its StatefulSet's ordinal; the LWS indices win.
        return {
            "leaderworkerset.sigs.k8s.io/group-index": str(group),
            "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
            "apps.kubernetes.io/pod-index": str(worker),
        }

    assert ranks([(p(1, 0), {}), (p(0, 2), {}), (p(0, 0), {})]) == [RANK_STRIDE, 2, 0]


def test_a_malformed_index_names_no_rank() -> None:
    assert rank_index({"batch.kubernetes.io/job-completion-index": "x"}, {}) is None
    assert rank_index({"apps.kubernetes.io/pod-index": "-1"}, {}) is None
    assert rank_index(None, None) is None


def test_the_scheduler_reads_the_same_rank() -> None:
    pod = {
        "metadata": {
            "name": "train-3",
            "namespace": "ns",
            "labels": {"batch.kubernetes.io/job-completion-index": "3"},
            "annotations": {"scheduling.k8s.io/group-name": "pg"},
        },
        "spec": {"schedulerName": "volcano", "containers": []},
    }
    rec = parse_pod(pod, ("volcano",))
    assert rec.task_fields().index == 3 == pod_rank_index(pod)


def test_a_controlled_pod_waits_for_its_owners_podgroup_not_a_shadow_gang() -> None:
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-1", "controller": True}
    pod = {
        "metadata": {"name": "j-0", "namespace": "ns", "ownerReferences": [ref]},
        "spec": {"schedulerName": "volcano", "containers": []},
    }
    assert controlled_podgroup_name(pod) == "podgroup-u-1"
    rec = parse_pod(pod, ("volcano",))
    assert rec.job == "ns/podgroup-u-1" and rec.group == "podgroup-u-1"
    bare = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"schedulerName": "volcano", "containers": []},
    }
    assert parse_pod(bare, ("volcano",)).job == "ns/podgroup-p"  # a bare pod keeps its one-pod gang
