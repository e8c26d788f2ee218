"""Nodes that die under running Volcano Job gangs, on a real control plane where nothing plays
the node lifecycle controller but kube-controller-manager itself.

kube-controller-manager runs with a short ``--node-monitor-grace-period`` (8 s, checked every
second; the fake kubelet renews the Leases every 2 s, four renewals within the grace, as the
grace should allow several). Two gangs run, each hard-bound to one rack: one whose policy
restarts the lost pod alone (``RestartPod``), one that restarts the whole Job (``RestartJob``).
Then the fake kubelet of one node under each stops (``hack/local-up.sh node stop``: its Lease is
no longer renewed, its pods no longer reported). kube-controller-manager marks the two Nodes
``Ready=Unknown`` and taints them ``node.kubernetes.io/unreachable:NoExecute`` (the pods' default
300 s toleration keeps its taint eviction away); hyperplace-controller (``--node-not-ready-grace
2s``) counts the pods lost and replaces them per each Job's policy, force-deleting the pods stuck
Terminating on the silent nodes (``--force-delete-unreachable-after 1s``); hyperplace-scheduler
binds the replacement inside the rack its gang's remainder runs in, and the restarted Job whole
inside one rack. Started again, the nodes are Ready and untainted."""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Iterator
from typing import Any

import pytest

from hyperplace.localup.fakekubelet import STOP_ANNOTATION, STOPPED

from . import components
from .kube import Kubectl, exact, hypernode, node, pod_node, wait_for

pytestmark = pytest.mark.apiserver

SELECT = "hyperplace.io/node-lifecycle-test"
GRACE = "8s"  # kube-controller-manager's --node-monitor-grace-period (50 s by default)
UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[components.Plane]:
    with components.plane_with_kcm(
        tmp_path_factory.mktemp("node-lifecycle"),
        kcm_args=[f"--node-monitor-grace-period={GRACE}", "--node-monitor-period=1s"],
        kubelet_args=["--renew-interval=2s"],
        controller_args=["--node-not-ready-grace=2s", "--force-delete-unreachable-after=1s"],
    ) as p:
        yield p


def gang(name: str, ns: str, label: str, policy: str, job_level: bool) -> dict[str, Any]:
    """A 2-pod Volcano Job, one pod per node (4 cpu), hard-bound to one rack, whose lost pods
    are handled by ``policy`` (on the Job or on its task)."""
    rule = [{"event": "PodEvicted", "action": policy}]
    task: dict[str, Any] = {
        "name": "worker",
        "replicas": 2,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "nodeSelector": {SELECT: label},
                "containers": [{"name": "c", "image": "trainer", "resources": {"requests": {"cpu": "4"}}}],
            }
        },
    }
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": "default",
        "minAvailable": 2,
        "maxRetry": 3,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        "tasks": [task],
    }
    if job_level:
        spec["policies"] = rule
    else:
        task["policies"] = rule
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def pods_of(kubectl: Kubectl, ns: str, job: str) -> list[dict[str, Any]]:
    return kubectl.items("pods", "-n", ns, "-l", f"volcano.sh/job-name={job}")


def running(kubectl: Kubectl, ns: str, job: str, avoid: Collection[str] = ()) -> list[dict[str, Any]] | None:
    """The Job's 2 pods, when both are bound outside ``avoid``, Running and not being deleted."""
    pods = pods_of(kubectl, ns, job)
    ok = len(pods) == 2 and all(
        pod_node(p) not in avoid
        and pod_node(p)
        and p.get("status", {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
        for p in pods
    )
    return pods if ok else None


def node_state(kubectl: Kubectl, name: str) -> tuple[str, bool]:
    """The Node's Ready status and whether it carries the unreachable NoExecute taint."""
    n = kubectl.get("node", name)
    ready = next((c["status"] for c in n["status"].get("conditions", []) if c["type"] == "Ready"), "")
    tainted = any(
        t["key"] == UNREACHABLE and t["effect"] == "NoExecute" for t in n.get("spec", {}).get("taints") or []
    )
    return ready, tainted


def test_nodes_dead_under_two_gangs_are_replaced_per_policy_inside_each_gangs_rack(
    plane: components.Plane,
) -> None:
    kubectl = plane.kubectl
    label = f"nl{uuid.uuid4().hex[:6]}"
    racks = {f"{label}-rack{r}": [f"{label}-r{r}-n{i}" for i in range(3)] for r in range(2)}
    rack_of = {n: r for r, ns in racks.items() for n in ns}
    objs: list[dict[str, Any]] = [node(n, {SELECT: label}, cpu="4") for ns in racks.values() for n in ns]
    objs += [hypernode(r, 1, [exact("Node", n) for n in ns]) for r, ns in racks.items()]
    objs.append(hypernode(f"{label}-spine", 2, [exact("HyperNode", r) for r in racks]))
    kubectl.create(objs)
    ns = f"nl-{uuid.uuid4().hex[:8]}"
    kubectl.run("create", "namespace", ns)

    # The RestartPod gang first, so it has a rack to itself; the other then goes to the rack
    # with two free nodes, the other one.
    kubectl.apply([gang("one", ns, label, "RestartPod", job_level=False)])
    one = wait_for(lambda: running(kubectl, ns, "one"), "gang one running", describe=plane.describe)
    kubectl.apply([gang("whole", ns, label, "RestartJob", job_level=True)])
    whole = wait_for(lambda: running(kubectl, ns, "whole"), "gang whole running", describe=plane.describe)
    one_rack = {rack_of[str(pod_node(p))] for p in one}
    whole_rack = {rack_of[str(pod_node(p))] for p in whole}
    assert len(one_rack) == len(whole_rack) == 1 and one_rack != whole_rack, (one_rack, whole_rack)

    # One node under each gang dies: its kubelet stops (hack/local-up.sh node stop).
    lost, kept = sorted(one, key=lambda p: str(pod_node(p)))
    dead = {str(pod_node(lost)), str(pod_node(whole[0]))}
    kubectl.run("annotate", "node", *sorted(dead), f"{STOP_ANNOTATION}={STOPPED}")

    def describe() -> str:
        out = kubectl.run("get", "pods,nodes", "-A", "-o", "wide", check=False).stdout
        return out + "\n" + plane.describe()

    # kube-controller-manager's node lifecycle controller notices within its grace.
    wait_for(
        lambda: all(node_state(kubectl, n) == ("Unknown", True) for n in dead),
        f"{sorted(dead)} Ready=Unknown and tainted {UNREACHABLE}:NoExecute by kube-controller-manager",
        describe=describe,
    )
    # RestartPod: the lost pod alone is replaced, on the free node of its gang's rack.
    after_one = wait_for(lambda: running(kubectl, ns, "one", dead), "gang one whole again", describe=describe)
    by_name = {p["metadata"]["name"]: p for p in after_one}
    replacement = by_name[lost["metadata"]["name"]]
    assert replacement["metadata"]["uid"] != lost["metadata"]["uid"]
    assert by_name[kept["metadata"]["name"]]["metadata"]["uid"] == kept["metadata"]["uid"], "the rest runs on"
    assert rack_of[str(pod_node(replacement))] in one_rack, "the replacement stays in its gang's rack"
    # RestartJob: a new version of the whole gang, whole inside one rack.
    after_whole = wait_for(
        lambda: running(kubectl, ns, "whole", dead), "gang whole running again", describe=describe
    )
    assert not {p["metadata"]["uid"] for p in after_whole} & {p["metadata"]["uid"] for p in whole}
    assert len({rack_of[str(pod_node(p))] for p in after_whole}) == 1
    status = kubectl.get("jobs.batch.volcano.sh", "whole", "-n", ns)["status"]
    assert (status.get("retryCount"), status.get("version")) == (1, 1), json.dumps(status)
    controller_log = plane.procs[1].log.read_text()
    for pod in (lost, whole[0]):
        assert (
            f"pod {pod['metadata']['name']} lost with its node: node {pod_node(pod)} Ready=Unknown"
            in controller_log
        )
    for p in [*after_one, *after_whole]:
        tolerated = {t.get("key") for t in p["spec"].get("tolerations") or []}
        assert UNREACHABLE in tolerated, "DefaultTolerationSeconds gave the pods 300 s: no taint eviction"

    # The machines come back (hack/local-up.sh node start): Ready and untainted.
    kubectl.run("annotate", "node", *sorted(dead), f"{STOP_ANNOTATION}-")
    wait_for(
        lambda: all(node_state(kubectl, n) == ("True", False) for n in dead),
        f"{sorted(dead)} Ready and untainted again",
        describe=describe,
    )
