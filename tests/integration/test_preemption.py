"""Priority preemption end to end on a real apiserver, with the real ``hyperplace-scheduler``.

Two racks of two nodes are full of low-priority gangs (two one-pod gangs in the first rack, one
two-pod gang in the second). A high-priority two-pod gang limited to one rack arrives: the
scheduler evicts the second rack's gang (one gang broken rather than two) through the Eviction
API, after marking its pods ``DisruptionTarget``, and binds the preemptor there once the victims
are gone. There is no kubelet: the test finishes the victims' termination as a kubelet would.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from hyperplace.api.constants import GROUP_NAME_ANNOTATION
from hyperplace.localup.fakekubelet import running_status

from . import components
from .conftest import Cluster
from .kube import Kubectl, exact, hypernode, node, pod_node, wait_for

pytestmark = pytest.mark.apiserver

CONF = """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: network-topology-aware
"""


def podgroup(
    name: str, ns: str, min_member: int, prio: str, topology: dict[str, Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "priorityClassName": prio, "queue": "default"}
    if topology:
        spec["networkTopology"] = topology
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def pod(
    name: str, ns: str, group: str, prio: str, scheduler: str, label: str, node_name: str | None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "priorityClassName": prio,
        "nodeSelector": {"hyperplace.io/preempt-test": label},
        "containers": [{"name": "c", "image": "trainer", "resources": {"requests": {"cpu": "4"}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": {GROUP_NAME_ANNOTATION: group}},
        "spec": spec,
    }


def start(kubectl: Kubectl, p: dict[str, Any]) -> None:
    """What a kubelet reports once the pod runs."""
    kubectl.run(
        "patch", "pod", "-n", p["metadata"]["namespace"], p["metadata"]["name"], "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": running_status(p)}),
    )  # fmt: skip


def test_a_high_priority_gang_preempts_the_rack_where_fewest_gangs_break(
    cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    tag = f"p{uuid.uuid4().hex[:6]}"  # a letter first: an all-digit label value would be read as a number
    scheduler_name, lease = f"preempt-{tag}", f"preempt-{tag}"
    low, high = f"low-{tag}", f"high-{tag}"
    racks = {f"{tag}-rack{r}": [f"{tag}-n{r}{i}" for i in range(2)] for r in range(2)}
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": low},
            "value": 10,
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": high},
            "value": 1000,
        },
    ]
    objs += [node(n, {"hyperplace.io/preempt-test": tag}, cpu="4") for ns in racks.values() for n in ns]
    objs += [hypernode(r, 1, [exact("Node", n) for n in ns]) for r, ns in racks.items()]
    objs.append(hypernode(f"{tag}-spine", 2, [exact("HyperNode", r) for r in racks]))
    kubectl.create(objs)
    rack0, rack1 = list(racks.values())
    victims: list[dict[str, Any]] = []
    bound = [("a1", [rack0[0]]), ("a2", [rack0[1]]), ("b1", rack1)]
    for group, nodes in bound:
        pods = [
            pod(f"{group}-{i}", namespace, group, low, scheduler_name, tag, n) for i, n in enumerate(nodes)
        ]
        kubectl.create([podgroup(group, namespace, len(nodes), low), *pods])
        for p in pods:
            start(kubectl, p)
        victims += pods if group == "b1" else []
    urgent = [pod(f"urgent-{i}", namespace, "urgent", high, scheduler_name, tag, None) for i in range(2)]
    kubectl.create(
        [podgroup("urgent", namespace, 2, high, {"mode": "hard", "highestTierAllowed": 1}), *urgent]
    )

    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    log = tmp_path / "scheduler.log"
    sch = components.scheduler(
        cluster.kubeconfig, log, "default", f"--scheduler-name={scheduler_name}", f"--lease-name={lease}",
        f"--scheduler-conf={conf}", name=f"preempt-scheduler-{tag}",
    )  # fmt: skip
    try:

        def pods() -> dict[str, dict[str, Any]]:
            return {p["metadata"]["name"]: p for p in kubectl.items("pods", "-n", namespace)}

        def terminating() -> list[dict[str, Any]] | None:
            now = pods()
            gone = [now.get(v["metadata"]["name"]) for v in victims]
            return (
                [p for p in gone if p is not None]
                if all(p is None or p["metadata"].get("deletionTimestamp") for p in gone)
                else None
            )

        leaving = wait_for(terminating, "the rack-1 gang to be evicted", describe=sch.tail)
        for p in leaving:
            conds = {c["type"]: c for c in p.get("status", {}).get("conditions", [])}
            # kube-apiserver's eviction sets the same condition (EvictionByEvictionAPI) over ours.
            assert conds.get("DisruptionTarget", {}).get("status") == "True", p["status"]
        # The rack-0 gangs are untouched.
        assert all(pods()[f"{g}-0"]["metadata"].get("deletionTimestamp") is None for g in ("a1", "a2"))

        def events() -> list[dict[str, Any]] | None:
            evs = kubectl.items("events", "-n", namespace)
            preempted = {e["involvedObject"]["name"] for e in evs if e.get("reason") == "Preempted"}
            preempting = [
                e for e in evs if e.get("reason") == "Preempting" and e["involvedObject"]["name"] == "urgent"
            ]
            return evs if preempted >= {"b1-0", "b1-1"} and preempting else None

        evs = wait_for(
            events, "Preempted events on the victims, Preempting on the preemptor", describe=sch.tail
        )
        assert all("urgent" in e["message"] for e in evs if e.get("reason") == "Preempted")
        # While the victims terminate the preemptor waits on its nominated nodes, unbound.
        assert all(pod_node(pods()[f"urgent-{i}"]) is None for i in range(2))
        # The kubelet finishes the victims' termination.
        for p in leaving:
            kubectl.run(
                "delete", "pod", "-n", namespace, p["metadata"]["name"], "--grace-period=0", "--force",
                check=False,
            )  # fmt: skip

        def placed() -> list[str] | None:
            now = pods()
            where = [pod_node(now[f"urgent-{i}"]) for i in range(2)]
            return [w for w in where if w] if all(where) else None

        where = wait_for(placed, "the preemptor to be bound", describe=sch.tail)
        assert sorted(where) == sorted(rack1)
    finally:
        sch.stop()
