"""A gang's minimum is made of pods the cluster can take: one that no node accepts is passed
over for another pod of the job, as Volcano's allocate does."""

from __future__ import annotations

from tests.scheduler.builders import node, pod, podgroup, schedule


def test_a_worker_runs_when_the_master_fits_no_node_and_one_pod_is_enough():
    # minMember 1 of a master and a worker: the master asks for a node role no node has.
    master = pod("job-master", "job", task="master", cpu=1, extra_spec={"nodeSelector": {"role": "master"}})
    worker = pod("job-worker", "job", task="worker", cpu=1, extra_spec={"nodeSelector": {"role": "worker"}})
    result, _ = schedule(
        [node("n1", labels={"role": "worker"})], [master, worker], podgroups=[podgroup("job", 1)]
    )
    assert result.bindings == {"default/job-worker": "n1"}
    assert result.jobs["default/job"].phase == "Running"


def test_a_gang_that_needs_the_pod_no_node_takes_still_waits():
    master = pod("job-master", "job", task="master", cpu=1, extra_spec={"nodeSelector": {"role": "master"}})
    worker = pod("job-worker", "job", task="worker", cpu=1, extra_spec={"nodeSelector": {"role": "worker"}})
    result, _ = schedule(
        [node("n1", labels={"role": "worker"})], [master, worker], podgroups=[podgroup("job", 2)]
    )
    assert result.bindings == {}
