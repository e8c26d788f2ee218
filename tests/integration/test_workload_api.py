"""The control plane the suite runs is Kubernetes 1.37 with its Workload API on (issue 36).

A user of that cluster creates a gang Workload whose PodGroup template keeps its pods in one rack,
a PodGroup made from that template, a pod of that group and a Job asking for gang scheduling, and
reads each back as written. Each part needs what ``hyperplace.localup.controlplane`` turns on:
without ``--runtime-config=scheduling.k8s.io/v1beta1=true`` or the GenericWorkload gate the
apiserver serves no Workloads or PodGroups; without TopologyAwareWorkloadScheduling it drops the
topology constraint, without GenericWorkload the pod's ``schedulingGroup``, without WorkloadWithJob
the Job's ``scheduling``. Volcano's PodGroups, which hyperplace schedules, stay reachable by their
full name (plain ``podgroups`` is now Kubernetes' own).
"""

from __future__ import annotations

from typing import Any

import pytest

from hyperplace.localup import controlplane

from .conftest import Cluster
from .kube import Kubectl

pytestmark = pytest.mark.apiserver

V1BETA1 = "scheduling.k8s.io/v1beta1"
RACK = "topology.kubernetes.io/rack"


@pytest.fixture(autouse=True)
def _needs_1_37(cluster: Cluster) -> None:
    # Only an older release by hand (K8S_VERSION=v1.34.10 bash hack/kube-bin.sh) has no Workload API.
    if not controlplane.has_workload_api(cluster.cp.bin_dir):
        pytest.skip(f"the Workload API needs Kubernetes 1.{controlplane.WORKLOAD_API_MINOR} or newer")


def gang_template() -> dict[str, Any]:
    return {
        "name": "workers",
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": RACK}]},
    }


def test_kubectl_lists_workloads_and_podgroups_of_scheduling_k8s_io_v1beta1(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources", "--api-group=scheduling.k8s.io", "--no-headers").stdout
    # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND: the short names column may be empty.
    served = {
        (words[0], next(w for w in words if w.startswith("scheduling.k8s.io/")))
        for words in map(str.split, out.splitlines())
        if words
    }
    assert ("workloads", V1BETA1) in served, out
    assert ("podgroups", V1BETA1) in served, out
    assert "scheduling.k8s.io/v1alpha3" in kubectl.run("api-versions").stdout.split()


def test_a_gang_workload_its_podgroup_a_pod_and_a_gang_job_read_back_as_written(
    kubectl: Kubectl, namespace: str
) -> None:
    workload = {
        "apiVersion": V1BETA1,
        "kind": "Workload",
        "metadata": {"name": "training", "namespace": namespace},
        "spec": {"podGroupTemplates": [gang_template()]},
    }
    podgroup = {
        "apiVersion": V1BETA1,
        "kind": "PodGroup",
        "metadata": {"name": "training-workers", "namespace": namespace},
        "spec": {
            "workloadRef": {"workloadName": "training", "templateName": "workers"},
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "schedulingConstraints": {"topology": [{"key": RACK}]},
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worker-0", "namespace": namespace},
        "spec": {
            "schedulingGroup": {"podGroupName": "training-workers"},
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "gang-job", "namespace": namespace},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "scheduling": {"schedulingPolicy": {"gang": {"minCount": 2}}},
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }
    kubectl.create([workload, podgroup, pod, job])

    stored = kubectl.get("workloads.scheduling.k8s.io", "-n", namespace, "training")
    assert stored["apiVersion"] == V1BETA1
    assert stored["spec"]["podGroupTemplates"] == [gang_template()]

    group = kubectl.get("podgroups.scheduling.k8s.io", "-n", namespace, "training-workers")
    assert group["spec"]["workloadRef"] == {"workloadName": "training", "templateName": "workers"}
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}

    assert kubectl.get("pod", "-n", namespace, "worker-0")["spec"].get("schedulingGroup") == {
        "podGroupName": "training-workers"
    }
    assert kubectl.get("job", "-n", namespace, "gang-job")["spec"].get("scheduling") == {
        "schedulingPolicy": {"gang": {"minCount": 2}}
    }

    # The two PodGroup kinds side by side: the full names keep them apart.
    assert [g["metadata"]["name"] for g in kubectl.items("podgroups.scheduling.k8s.io", "-n", namespace)] == [
        "training-workers"
    ]
    assert kubectl.items("podgroups.scheduling.volcano.sh", "-n", namespace) == []
