"""User stories: one gang per real workload, with sub-groups, where the owner chain shows it.

A JobSet is one PodGroup with one sub-group per child Job (all-or-nothing across its Jobs); a
LeaderWorkerSet group is one PodGroup that sits in one domain, exclusively when the LWS asks; a
PyTorchJob keeps the training operator's PodGroup and gets its networkTopology from the job's
topology annotations. Objects are what the real controllers write (labels, annotations, names).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from controller.manager import ControllerManager, ManagerConfig
from hyperplace.api import NetworkTopologySpec, PodGroup
from hyperplace.runtime.api import (
    BATCH_JOBS,
    CONFIGMAPS,
    LEADERWORKERSETS,
    PODGROUPS,
    PODS,
    STATEFULSETS,
    Resource,
)
from hyperplace.runtime.fakeapi import FakeApi

from .test_podgroup_controller import eventually, group_of, owner_ref, pod, podgroup, warnings

NS = "team"
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True)
PYTORCHJOBS = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True)


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakeApi, ControllerManager]]:
    api = FakeApi()
    mgr = ControllerManager(api, ManagerConfig(workers=2, seed=0), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    yield api, mgr
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def jobset(
    api: FakeApi, name: str, replicated: dict[str, tuple[int, int]]
) -> tuple[dict[str, Any], list[str]]:
    """A JobSet of ``{replicatedJob: (jobs, pods per job)}`` with the child Jobs and pods the JobSet
    and Job controllers make; returns the JobSet and its pod names."""
    js = await api.create(JOBSETS, {"metadata": {"name": name, "namespace": NS}, "spec": {}}, NS)
    uid = js["metadata"]["uid"]
    total = sum(n for n, _ in replicated.values())
    names: list[str] = []
    global_index = 0
    for rj, (jobs, per_job) in replicated.items():
        for j in range(jobs):
            labels = {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/jobset-uid": uid,
                "jobset.sigs.k8s.io/replicatedjob-name": rj,
                "jobset.sigs.k8s.io/replicatedjob-replicas": str(jobs),
                "jobset.sigs.k8s.io/global-replicas": str(total),
                "jobset.sigs.k8s.io/job-index": str(j),
                "jobset.sigs.k8s.io/job-global-index": str(global_index),
            }
            global_index += 1
            job = await api.create(
                BATCH_JOBS,
                {
                    "metadata": {
                        "name": f"{name}-{rj}-{j}",
                        "namespace": NS,
                        "labels": labels,
                        "ownerReferences": [owner_ref("JobSet", js, "jobset.x-k8s.io/v1alpha2")],
                    },
                    "spec": {
                        "completionMode": "Indexed",
                        "parallelism": per_job,
                        "completions": per_job,
                        "template": {
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
                        },
                    },
                },
                NS,
            )
            for i in range(per_job):
                pod_name = f"{name}-{rj}-{j}-{i}"
                lab = {**labels, "batch.kubernetes.io/job-completion-index": str(i)}
                await api.create(
                    PODS, pod(pod_name, owner_ref("Job", job, "batch/v1"), labels=lab, annotations=TOPO), NS
                )
                names.append(pod_name)
    return js, names


TOPO = {"volcano.sh/network-topology-mode": "hard", "volcano.sh/network-topology-highest-tier": "2"}


async def test_a_jobset_is_one_gang_with_one_sub_group_per_child_job(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    js, names = await jobset(api, "train", {"driver": (1, 1), "workers": (2, 4)})
    name = f"podgroup-{js['metadata']['uid']}"
    pg = await eventually(lambda: podgroup(api, name))
    assert pg["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "train",
            "uid": js["metadata"]["uid"],
            "controller": True,
        }
    ]
    spec = pg["spec"]
    assert spec["minMember"] == 9  # every pod of every Job: all or nothing
    assert spec["minResources"] == {"cpu": "18"}
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert spec["subGroupPolicy"] == [
        {
            "name": "driver",
            "labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/replicatedjob-name": "driver"}},
            "matchLabelKeys": ["jobset.sigs.k8s.io/job-index"],
            "subGroupSize": 1,
            "minSubGroups": 1,
        },
        {
            "name": "workers",
            "labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/replicatedjob-name": "workers"}},
            "matchLabelKeys": ["jobset.sigs.k8s.io/job-index"],
            "subGroupSize": 4,
            "minSubGroups": 2,
        },
    ]
    await eventually(lambda: all(group_of(api, n) == name for n in names))
    # No PodGroup per child Job: the JobSet is the gang.
    assert list(api.objects.get("podgroups", {})) == [f"{NS}/{name}"]


def lws_pods(
    lws: dict[str, Any], sts: dict[str, Any], group: int, size: int, cpu: str = "2"
) -> list[dict[str, Any]]:
    """The leader (of the LWS's StatefulSet) and the workers (of the leader's StatefulSet) of one
    group, labelled as LeaderWorkerSet's pod webhook labels them."""
    name = lws["metadata"]["name"]
    base = {"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": str(group)}
    ann = {"leaderworkerset.sigs.k8s.io/size": str(size)}
    out = [
        pod(
            f"{name}-{group}",
            owner_ref("StatefulSet", sts, "apps/v1"),
            labels={**base, "leaderworkerset.sigs.k8s.io/worker-index": "0"},
            annotations=ann,
            cpu=cpu,
        )
    ]
    worker_owner = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": f"{name}-{group}",
        "uid": f"wsts-{group}",
        "controller": True,
    }
    for w in range(1, size):
        out.append(
            pod(
                f"{name}-{group}-{w}",
                worker_owner,
                labels={**base, "leaderworkerset.sigs.k8s.io/worker-index": str(w)},
                annotations=ann,
                cpu=cpu,
            )
        )
    return out


async def make_lws(
    api: FakeApi, annotations: dict[str, str], spec: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    lws = await api.create(
        LEADERWORKERSETS,
        {"metadata": {"name": "infer", "namespace": NS, "annotations": annotations}, "spec": spec or {}},
        NS,
    )
    sts = await api.create(
        STATEFULSETS,
        {
            "metadata": {
                "name": "infer",
                "namespace": NS,
                "ownerReferences": [owner_ref("LeaderWorkerSet", lws, "leaderworkerset.x-k8s.io/v1")],
            },
            "spec": {"replicas": 2},
        },
        NS,
    )
    return lws, sts


async def test_each_leaderworkerset_group_is_one_gang_in_one_exclusive_domain(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, mgr = cluster
    # Label discovery builds tier 1 from the rack label: the exclusive key names that tier.
    conf = {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "config": {
                    "networkTopologyTypes": {
                        "rack-spine": [
                            {"nodeLabel": "example.com/spine"},
                            {"nodeLabel": "example.com/rack"},
                            {"nodeLabel": "kubernetes.io/hostname"},
                        ]
                    }
                },
            }
        ]
    }
    await api.create(
        CONFIGMAPS,
        {
            "metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
            "data": {"volcano-controller.conf": yaml.safe_dump(conf)},
        },
        "volcano-system",
    )
    await eventually(lambda: mgr.discovery_ctl.tier_of_label("example.com/rack") is not None)
    lws, sts = await make_lws(
        api,
        {
            "leaderworkerset.sigs.k8s.io/exclusive-topology": "example.com/rack",
            "scheduling.volcano.sh/queue-name": "serving",
        },
    )
    for g in range(2):
        for p in lws_pods(lws, sts, g, 3):
            await api.create(PODS, p, NS)
    for g in range(2):
        pg = await eventually(lambda g=g: podgroup(api, f"infer-{g}"))
        assert pg["metadata"]["ownerReferences"][0]["uid"] == lws["metadata"]["uid"]
        assert pg["metadata"]["annotations"]["hyperplace.io/exclusive-topology"] == "true"
        assert pg["spec"] == {
            # LWS creates an exclusive group's workers once its leader is bound: the leader is the gang.
            "minMember": 1,
            "minResources": {"cpu": "6", "memory": "3Gi"},
            "queue": "serving",
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
        await eventually(lambda g=g: group_of(api, f"infer-{g}-2") == f"infer-{g}")


async def test_a_leader_ready_lws_gang_is_its_leader_and_an_unknown_exclusive_key_is_reported(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    lws, sts = await make_lws(
        api,
        {"leaderworkerset.sigs.k8s.io/exclusive-topology": "no.such/label"},
        {"startupPolicy": "LeaderReady"},
    )
    for p in lws_pods(lws, sts, 0, 2):
        await api.create(PODS, p, NS)
    pg = await eventually(
        lambda: (got := podgroup(api, "infer-0")) and (got.get("status") or {}).get("conditions") and got
    )
    assert pg["spec"]["minMember"] == 1  # Volcano: the leader alone, workers follow once it is ready
    assert "hyperplace.io/exclusive-topology" not in pg["metadata"]["annotations"]
    (cond,) = [c for c in pg["status"]["conditions"] if c["type"] == "InvalidAnnotation"]
    assert "leaderworkerset.sigs.k8s.io/exclusive-topology" in cond["message"]
    assert await eventually(lambda: warnings(api, "infer-0"))


async def test_a_pytorchjob_keeps_the_operators_podgroup_and_gets_its_topology(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, mgr = cluster
    job = await api.create(PYTORCHJOBS, {"metadata": {"name": "bert", "namespace": NS}, "spec": {}}, NS)
    # What the training operator creates with --gang-scheduler-name=volcano: a PodGroup named
    # after the job carrying the job's annotations, and pods already in it.
    await api.create(
        PODGROUPS,
        {
            "metadata": {
                "name": "bert",
                "namespace": NS,
                "annotations": TOPO,
                "ownerReferences": [owner_ref("PyTorchJob", job, "kubeflow.org/v1")],
            },
            "spec": {"minMember": 3, "queue": "default"},
        },
        NS,
    )
    labels = {"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"}
    await api.create(
        PODS,
        pod(
            "bert-master-0",
            owner_ref("PyTorchJob", job, "kubeflow.org/v1"),
            labels=labels,
            annotations={"scheduling.k8s.io/group-name": "bert"},
        ),
        NS,
    )
    assert await mgr.wait_idle()
    # The operator rewrites its PodGroup without networkTopology on every reconcile, so the field
    # is not written: the annotations stand for it wherever the PodGroup is read.
    stored = podgroup(api, "bert") or {}
    assert "networkTopology" not in stored["spec"]
    assert PodGroup.model_validate(stored).spec.network_topology == NetworkTopologySpec(
        mode="hard", highest_tier_allowed=2
    )
    assert stored["spec"]["minMember"] == 3  # the operator's gang, untouched
    assert list(api.objects.get("podgroups", {})) == [f"{NS}/bert"]  # no second PodGroup
    assert group_of(api, "bert-master-0") == "bert"
