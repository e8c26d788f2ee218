"""GPUs as DRA devices on a real control plane: ``examples/dra-gpus`` applied as a user would,
kube-controller-manager's resourceclaim controller making each worker's ResourceClaim from the
template, hyperplace-scheduler allocating the gang's GPUs in one NVLink domain and writing every
claim's allocation and reservation before any pod is bound, and the resourceclaim controller
releasing and deleting the claims when the Job is gone.

A fake kubelet keeps the Nodes Ready and marks bound pods Running (it plays the kubelet: it
checks nothing of the claims, the test does, at the moment of each bind). This module runs its
own control plane with kube-controller-manager (the session's has none)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from . import components
from .kube import REPO, pod_node, wait_for

pytestmark = [pytest.mark.apiserver, pytest.mark.gobuilt]

EXAMPLE = REPO / "examples" / "dra-gpus"
FINALIZER = "resource.kubernetes.io/delete-protection"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[components.Plane]:
    with components.plane_with_kcm(tmp_path_factory.mktemp("dra-components")) as p:
        yield p


def test_a_gangs_gpus_come_from_the_controllers_claims_in_one_nvlink_domain_and_go_back_with_the_job(
    plane: components.Plane,
) -> None:
    kubectl = plane.kubectl
    out = kubectl.run("apply", "-f", f"{EXAMPLE}/", check=False)
    assert out.returncode == 0, out.stderr  # kubectl apply accepts the example as it is

    pods = wait_for(
        lambda: _bound(plane, "mnnvl"), "the mnnvl gang bound", timeout=120, describe=plane.describe
    )
    nodes = {pod_node(p) for p in pods}
    assert len({n.rsplit("-", 1)[0] for n in nodes}) == 1, nodes  # one NVLink domain
    claims = {
        (c["metadata"]["ownerReferences"][0]["uid"]): c
        for c in kubectl.items("resourceclaims", "-n", "default")
    }
    taken: set[tuple[str, str]] = set()
    for p in pods:
        c = claims[p["metadata"]["uid"]]  # made by kube-controller-manager for this pod
        status = c["status"]
        assert FINALIZER in c["metadata"]["finalizers"]
        assert [r["uid"] for r in status["reservedFor"]] == [p["metadata"]["uid"]]
        results = status["allocation"]["devices"]["results"]
        assert len(results) == 4 and {r["pool"] for r in results} == {pod_node(p)}
        taken |= {(r["pool"], r["device"]) for r in results}
        term = status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]
        assert term["matchFields"][0]["values"] == [pod_node(p)]
        # The claim was written before the pod was bound (kube-scheduler's PreBind order).
        scheduled = next(
            x["lastTransitionTime"] for x in p["status"]["conditions"] if x["type"] == "PodScheduled"
        )
        written = max(
            f["time"]
            for f in kubectl.get(
                "resourceclaim", "-n", "default", c["metadata"]["name"], "--show-managed-fields"
            )["metadata"]["managedFields"]
            if f.get("subresource") == "status"
        )
        assert written <= scheduled, (written, scheduled)
    assert len(taken) == 16  # 16 distinct GPUs

    # The Job goes: the resourceclaim controller releases and deletes the claims.
    kubectl.run("delete", "jobs.batch.volcano.sh", "-n", "default", "mnnvl", "--wait=false")
    wait_for(
        lambda: not kubectl.items("resourceclaims", "-n", "default"),
        "the claims released and deleted",
        timeout=120,
        describe=plane.describe,
    )


def _bound(plane: components.Plane, job: str) -> list[dict[str, Any]] | None:
    """The 4 workers of the Volcano Job ``job``, once every one is bound."""
    pods = plane.kubectl.items("pods", "-n", "default", "-l", f"volcano.sh/job-name={job}")
    return pods if len(pods) == 4 and all(pod_node(p) for p in pods) else None


def _gpu_job(name: str, queue: str) -> dict[str, Any]:
    """The example's gang (4 workers x 4 GPUs from the template ``four-gb200``), in ``queue``,
    without a topology."""
    import yaml

    docs = list(yaml.safe_load_all((EXAMPLE / "20-job.yaml").read_text()))
    job = next(d for d in docs if d and d["kind"] == "Job")
    job["metadata"]["name"] = name
    job["spec"]["queue"] = queue
    job["spec"].pop("networkTopology", None)
    return dict(job)


def test_a_queue_limit_on_a_device_class_holds_gpus_that_come_as_claims(plane: components.Plane) -> None:
    # 32 GPUs in the cluster, a queue that may hold 16: the first gang of 16 runs; the second
    # waits, its PodGroup saying which limit, and the queue's status shows the 16 it holds.
    kubectl = plane.kubectl
    kubectl.run("apply", "-f", f"{EXAMPLE}/", check=False)  # nodes, slices, class and template
    kubectl.run("delete", "jobs.batch.volcano.sh", "-n", "default", "mnnvl", "--wait=false", check=False)
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "gpu-team"},
        "spec": {"weight": 1, "capability": {"cpu": "1000", "deviceclass/gpu.nvidia.com": "16"}},
    }
    kubectl.apply([queue])
    wait_for(
        lambda: (kubectl.get("queue", "gpu-team").get("status") or {}).get("state") == "Open" or None,
        "the queue open",
        timeout=60,
        describe=plane.describe,
    )
    kubectl.create([_gpu_job("first", "gpu-team")])

    wait_for(lambda: _bound(plane, "first"), "the first gang bound", timeout=120, describe=plane.describe)
    kubectl.create([_gpu_job("second", "gpu-team")])

    def refused() -> str | None:
        for pg in kubectl.items("podgroups.scheduling.volcano.sh", "-n", "default"):
            if pg["metadata"]["name"].startswith("second-"):
                text = " ".join(
                    c.get("message", "") for c in (pg.get("status") or {}).get("conditions") or []
                )
                if "deviceclass/gpu.nvidia.com" in text:
                    return text
        return None

    why = wait_for(
        refused,
        "the second gang held by its queue's GPU limit",
        timeout=60,
        describe=lambda: (
            plane.describe()
            + "\n"
            + kubectl.run("get", "podgroups.scheduling.volcano.sh", "-A", "-o", "yaml").stdout[-6000:]
        ),
    )
    assert "gpu-team" in why or "quota" in why, why
    pods = kubectl.items("pods", "-n", "default", "-l", "volcano.sh/job-name=second")
    assert not any(pod_node(p) for p in pods)

    def allocated() -> str | None:
        st = kubectl.get("queue", "gpu-team").get("status") or {}
        return (st.get("allocated") or {}).get("deviceclass/gpu.nvidia.com")

    assert wait_for(allocated, "the queue's allocated GPUs", timeout=60, describe=plane.describe) == "16"
    kubectl.run("delete", "jobs.batch.volcano.sh", "-n", "default", "first", "second", "--wait=false")


def test_a_device_taint_rule_keeps_the_gang_off_the_faulty_gpu(plane: components.Plane) -> None:
    # An administrator marks one GPU of NVLink domain 0 faulty with a DeviceTaintRule: the
    # 16-GPU gang, which needs a whole domain, goes to domain 1 (kube-scheduler's rule too).
    kubectl = plane.kubectl
    kubectl.run("apply", "-f", f"{EXAMPLE}/", check=False)
    kubectl.run("delete", "jobs.batch.volcano.sh", "-n", "default", "--all", "--wait=false", check=False)
    wait_for(
        lambda: not kubectl.items("resourceclaims", "-n", "default") or None,
        "the earlier jobs' claims released",
        timeout=120,
        describe=plane.describe,
    )
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "faulty-gpu"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "gb200-0-2", "device": "gpu-3"},
            "taint": {"key": "example.com/faulty", "value": "xid-79", "effect": "NoSchedule"},
        },
    }
    kubectl.apply([rule])
    job = _gpu_job("avoids-faulty", "default")
    job["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    kubectl.create([job])

    pods = wait_for(
        lambda: _bound(plane, "avoids-faulty"), "the gang bound", timeout=120, describe=plane.describe
    )
    assert {pod_node(p).rsplit("-", 1)[0] for p in pods} == {"gb200-1"}
    kubectl.run("delete", "jobs.batch.volcano.sh", "-n", "default", "avoids-faulty", "--wait=false")
    kubectl.run("delete", "devicetaintrule", "faulty-gpu")
