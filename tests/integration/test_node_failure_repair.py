"""A node fails under a running one-leaf gang, against a real apiserver, with the real
``hyperplace-controller`` and ``hyperplace-scheduler``: the controller counts the pod on it as lost
(an untolerated ``NoExecute`` taint, as GPU health tools set), deletes it (the node's kubelet,
alive, finishes it), and makes it again naming the node it replaces; the scheduler puts the replacement back
into the gang's leaf, on the leaf's hot spare (``hyperplace.io/spare-nodes``) or, with no spare,
through the repair step that evicts a preemptable pod there, with Volcano's default actions only.

No kubelet runs: the test starts bound pods as a kubelet would, and finishes the victim's
termination on its live node."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperplace.api.constants import GROUP_NAME_ANNOTATION
from hyperplace.localup.fakekubelet import running_status

from . import components
from .conftest import Cluster
from .kube import Kubectl, exact, hypernode, node, pod_node, wait_for
from .test_job_lifecycle import leading_controller

pytestmark = pytest.mark.apiserver

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
"""
GPU_HEALTH = {"key": "nvidia.com/gpu-health", "value": "unhealthy", "effect": "NoExecute"}


@pytest.fixture(scope="module")
def controller(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[components.Component]:
    yield from leading_controller(
        cluster,
        tmp_path_factory.mktemp("node-failure-repair"),
        "--node-not-ready-grace=1s",
        "--force-delete-unreachable-after=1s",
    )


def gang_job(name: str, ns: str, scheduler: str, tag: str, prio: str) -> dict[str, Any]:
    """A two-pod training Job, one leaf (hard tier 1), a whole 4-CPU node a pod."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "schedulerName": scheduler,
            "queue": "default",
            "minAvailable": 2,
            "priorityClassName": prio,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "terminationGracePeriodSeconds": 1,
                            "nodeSelector": {"hyperplace.io/repair-test": tag},
                            "containers": [
                                {"name": "c", "image": "trainer", "resources": {"requests": {"cpu": "4"}}}
                            ],
                        }
                    },
                }
            ],
        },
    }


class World:
    """Two leaves of three 4-CPU nodes under a spine, tagged for this test, and its scheduler."""

    def __init__(self, cluster: Cluster, kubectl: Kubectl, ns: str, tmp: Path, spares: bool) -> None:
        self.kubectl, self.ns = kubectl, ns
        self.tag = tag = f"r{uuid.uuid4().hex[:6]}"
        self.scheduler_name = f"repair-{tag}"
        self.leaves = {f"{tag}-leaf{r}": [f"{tag}-n{r}{i}" for i in range(3)] for r in range(2)}
        self.prio, self.low = f"train-{tag}", f"batch-{tag}"
        objs: list[dict[str, Any]] = [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": self.prio},
                "value": 1000,
            },
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": self.low},
                "value": 10,
            },
        ]
        objs += [
            node(n, {"hyperplace.io/repair-test": tag}, cpu="4") for ns_ in self.leaves.values() for n in ns_
        ]
        objs += [hypernode(r, 1, [exact("Node", n) for n in ns_]) for r, ns_ in self.leaves.items()]
        spine = hypernode(f"{tag}-spine", 2, [exact("HyperNode", r) for r in self.leaves])
        if spares:
            spine["metadata"]["annotations"] = {"hyperplace.io/spare-nodes": "1"}
        objs.append(spine)
        kubectl.create(objs)
        conf = tmp / "volcano-scheduler.conf"
        conf.write_text(CONF)
        self.sch = components.scheduler(
            cluster.kubeconfig, tmp / "scheduler.log", "default", f"--scheduler-name={self.scheduler_name}",
            f"--lease-name={self.scheduler_name}", f"--scheduler-conf={conf}", name=f"scheduler-{tag}",
        )  # fmt: skip

    def nodes(self) -> list[str]:
        return [n for ns_ in self.leaves.values() for n in ns_]

    def leaf_of(self, n: str) -> str:
        return next(r for r, ns_ in self.leaves.items() if n in ns_)

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.kubectl.items("pods", "-n", self.ns)}

    def start(self, p: dict[str, Any]) -> None:
        """What a kubelet reports once the pod runs."""
        self.kubectl.run(
            "patch", "pod", "-n", self.ns, p["metadata"]["name"], "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": running_status(p)}),
        )  # fmt: skip

    def start_bound(self, names: list[str]) -> dict[str, str]:
        """Wait until ``names`` are bound, start them; their nodes."""

        def bound() -> dict[str, str] | None:
            now = self.pods()
            where = {n: pod_node(now[n]) for n in names if n in now}
            return where if len(where) == len(names) and all(where.values()) else None  # type: ignore[return-value]

        where = wait_for(bound, f"{names} bound", describe=self.describe)
        now = self.pods()
        for n in names:
            if (now[n].get("status") or {}).get("phase") != "Running":
                self.start(now[n])
        return where

    def podgroups(self) -> str:
        return json.dumps(
            [
                (
                    g["metadata"]["name"],
                    (g.get("status") or {}).get("phase"),
                    [
                        (c.get("type"), c.get("reason"), c.get("message"))
                        for c in (g.get("status") or {}).get("conditions") or []
                    ],
                )
                for g in self.kubectl.items("podgroups.scheduling.volcano.sh", "-n", self.ns)
            ]
        )

    def describe(self) -> str:
        pods = {n: (pod_node(p), p.get("status", {}).get("phase")) for n, p in self.pods().items()}
        return f"{json.dumps(pods)}\n{self.podgroups()}\n{self.sch.tail()}"

    def fail(self, n: str, pod: str) -> None:
        """A GPU health tool taints the node; the controller deletes the gang's ``pod`` there, and
        the node's kubelet, still alive, finishes it. The gang has run a while first: a
        replacement is told from the gang's own pods by being made after they were bound and
        started, and timestamps are whole seconds."""
        time.sleep(2)
        self.kubectl.run(
            "patch", "node", n, "--type=merge", "-p", json.dumps({"spec": {"taints": [GPU_HEALTH]}})
        )

        def deleted() -> bool:
            p = self.pods().get(pod)
            return p is None or bool(p["metadata"].get("deletionTimestamp"))

        wait_for(deleted, f"{pod} deleted by the controller", describe=self.describe)
        self.kubectl.run("delete", "pod", "-n", self.ns, pod, "--grace-period=0", "--force", check=False)

    def stop(self) -> None:
        self.sch.stop()
        self.kubectl.run("delete", "node", *self.nodes(), "--wait=false", check=False)


@pytest.fixture
def world_factory(cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path) -> Iterator[Any]:
    made: list[World] = []

    def make(spares: bool) -> World:
        w = World(cluster, kubectl, namespace, tmp_path, spares)
        made.append(w)
        return w

    yield make
    for w in made:
        w.stop()


def test_the_replacement_takes_the_spare_of_its_own_leaf_and_nobody_is_evicted(
    controller: components.Component, world_factory: Any
) -> None:
    w: World = world_factory(spares=True)
    w.kubectl.apply([gang_job("train", w.ns, w.scheduler_name, w.tag, w.prio)])
    where = w.start_bound(["train-worker-0", "train-worker-1"])
    leaf = w.leaf_of(where["train-worker-0"])
    assert w.leaf_of(where["train-worker-1"]) == leaf  # one leaf; its third node is the spare
    spare = next(n for n in w.leaves[leaf] if n not in where.values())

    w.fail(where["train-worker-1"], "train-worker-1")

    def replaced() -> dict[str, Any] | None:
        p = w.pods().get("train-worker-1")
        return p if p is not None and pod_node(p) and pod_node(p) != where["train-worker-1"] else None

    made = wait_for(
        replaced, "the replacement bound", describe=lambda: w.describe() + "\n" + controller.tail()
    )
    assert pod_node(made) == spare
    assert made["metadata"]["annotations"]["hyperplace.io/replaces-node"] == where["train-worker-1"]
    assert pod_node(w.pods()["train-worker-0"]) == where["train-worker-0"]  # the remainder never moved


def test_without_a_spare_the_repair_step_evicts_a_preemptable_pod_in_the_leaf(
    controller: components.Component, world_factory: Any
) -> None:
    w: World = world_factory(spares=False)
    w.kubectl.apply([gang_job("train", w.ns, w.scheduler_name, w.tag, w.prio)])
    where = w.start_bound(["train-worker-0", "train-worker-1"])
    leaf = w.leaf_of(where["train-worker-0"])
    third = next(n for n in w.leaves[leaf] if n not in where.values())
    # A preemptable batch job's pod fills the leaf's third node (and the other leaf is full too).
    others = [third] + [n for r, ns_ in w.leaves.items() if r != leaf for n in ns_]
    fillers: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    for i, n in enumerate(others):
        groups.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"spot-{i}", "namespace": w.ns},
                "spec": {"minMember": 1, "priorityClassName": w.low, "queue": "default"},
            }
        )
        fillers.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"spot-{i}",
                    "namespace": w.ns,
                    "annotations": {"volcano.sh/preemptable": "true", GROUP_NAME_ANNOTATION: f"spot-{i}"},
                },
                "spec": {
                    "schedulerName": w.scheduler_name,
                    "priorityClassName": w.low,
                    "nodeName": n,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": "batch", "resources": {"requests": {"cpu": "4"}}}],
                },
            }
        )
    w.kubectl.create([*groups, *fillers])
    for p in fillers:
        w.start(p)

    w.fail(where["train-worker-1"], "train-worker-1")

    def evicted() -> dict[str, Any] | None:
        p = w.pods().get("spot-0")
        return p if p is None or p["metadata"].get("deletionTimestamp") else None

    wait_for(evicted, "the spot pod in the gang's leaf evicted", describe=w.describe)
    # Only the pod in the gang's leaf; the kubelet of its live node finishes it.
    assert all(not w.pods()[f"spot-{i}"]["metadata"].get("deletionTimestamp") for i in range(1, len(fillers)))
    w.kubectl.run("delete", "pod", "-n", w.ns, "spot-0", "--grace-period=0", "--force", check=False)

    def replaced() -> str | None:
        p = w.pods().get("train-worker-1")
        n = pod_node(p) if p is not None else None
        return n if n and n != where["train-worker-1"] else None

    assert wait_for(replaced, "the replacement bound", describe=w.describe) == third
