"""Wire objects follow Volcano's Job-controller conventions."""

from __future__ import annotations

import numpy as np

from bench.quality.model import JobSpec, NetTopology, Task, uniform_tree
from bench.quality.wire import background_pods, hypernodes, node_dicts, pod_dicts, podgroup, quantities


def _job() -> JobSpec:
    return JobSpec(
        "train",
        (
            Task("worker", (8_000, 1024, 2), 4, partition_size=2, partition_topology=NetTopology("hard", 1)),
            Task("launcher", (1_000, 512, 0), 1),
        ),
        NetTopology("hard", 2),
    )


def test_podgroup_mirrors_the_job_controller() -> None:
    pg = podgroup(_job(), created=60.0).to_dict()
    spec = pg["spec"]
    assert spec["minMember"] == 5
    assert spec["minTaskMember"] == {"worker": 4, "launcher": 1}
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert spec["minResources"] == {"cpu": "33000m", "memory": "4608Mi", "nvidia.com/gpu": "8"}
    (policy,) = spec["subGroupPolicy"]
    assert policy["subGroupSize"] == 2 and policy["minSubGroups"] == 2
    assert policy["matchLabelKeys"] == ["volcano.sh/partition-id"]
    assert policy["labelSelector"] == {"matchLabels": {"volcano.sh/task-spec": "worker"}}
    assert policy["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert pg["metadata"]["creationTimestamp"] == "2026-01-01T00:01:00Z"


def test_pods_carry_partition_labels_and_placement() -> None:
    topo = uniform_tree([2, 2])
    job = _job()
    pending = pod_dicts(job)
    assert [p["metadata"]["labels"].get("volcano.sh/partition-id") for p in pending] == [
        "0",
        "0",
        "1",
        "1",
        None,
    ]
    assert all(p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "train" for p in pending)
    assert "nodeName" not in pending[0]["spec"]
    running = pod_dicts(job, placement=np.asarray([0, 1, 2, 3, 0]), topo=topo)
    assert [p["spec"]["nodeName"] for p in running] == ["node-0", "node-1", "node-2", "node-3", "node-0"]
    assert running[0]["status"]["phase"] == "Running"


def test_tree_and_nodes() -> None:
    topo = uniform_tree([2, 2, 1])
    hns = {h.name: h for h in hypernodes(topo)}
    assert set(hns) == {"leaf-0", "leaf-1", "spine-0"}
    assert [m.selector.exact_match.name for m in hns["leaf-1"].spec.members if m.selector.exact_match] == [
        "node-2",
        "node-3",
    ]
    assert hns["spine-0"].spec.tier == 2
    assert {m.type for m in hns["spine-0"].spec.members} == {"HyperNode"}
    alloc = np.tile(np.asarray([64_000, 1024, 8], dtype=np.int64), (4, 1))
    nodes = node_dicts(topo, alloc)
    assert nodes[0]["status"]["allocatable"] == {
        "cpu": "64000m",
        "memory": "1024Mi",
        "nvidia.com/gpu": "8",
        "pods": "110",
    }
    used = np.zeros_like(alloc)
    used[3] = [1_000, 10, 1]
    (bg,) = background_pods(topo, used)
    assert bg["spec"]["nodeName"] == "node-3"
    assert bg["spec"]["containers"][0]["resources"]["requests"] == quantities(used[3])


def test_a_declared_limit_becomes_the_pods_active_deadline_and_a_running_pod_its_start() -> None:
    topo = uniform_tree([2, 2])
    job = JobSpec("short", (Task("worker", (8_000, 1024, 1), 2),), meta={"limit_s": 599.5})
    assert all(p["spec"]["activeDeadlineSeconds"] == 600 for p in pod_dicts(job))
    running = pod_dicts(job, 0.0, np.asarray([0, 1]), topo, started=120.0)
    assert running[0]["status"] == {"phase": "Running", "startTime": "2026-01-01T00:02:00Z"}
    assert "activeDeadlineSeconds" not in pod_dicts(_job())[0]["spec"]
