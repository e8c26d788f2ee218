"""Eviction and quota protections on a real apiserver, with the real ``hyperplace-scheduler``.

1. A pod annotated ``volcano.sh/preemptable: "false"`` and two pods under a PodDisruptionBudget
   survive a preemption; their unprotected neighbour (of higher priority than them, so the last
   one an unprotected choice would take) is evicted through the Eviction API instead.
2. A PodGroup whose minResources would go past its namespace's ResourceQuota stays Pending, and
   its condition names the quota.
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
from .kube import PODGROUPS, Kubectl, node, wait_for

pytestmark = pytest.mark.apiserver

CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: pdb
  - name: resourcequota
- plugins:
  - name: predicates
"""


def podgroup(
    name: str, ns: str, prio: str | None = None, min_resources: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 1, "queue": "default"}
    if prio:
        spec["priorityClassName"] = prio
    if min_resources:
        spec["minResources"] = min_resources
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def pod(
    name: str,
    ns: str,
    group: str,
    prio: str | None,
    scheduler: str,
    tag: str,
    cpu: str,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "nodeSelector": {"hyperplace.io/protect-test": tag},
        "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu}}}],
    }
    if prio:
        spec["priorityClassName"] = prio
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels or {},
            "annotations": {GROUP_NAME_ANNOTATION: group, **(annotations or {})},
        },
        "spec": spec,
    }


def start(kubectl: Kubectl, p: dict[str, Any]) -> None:
    """What a kubelet reports once the pod runs."""
    kubectl.run(
        "patch", "pod", "-n", p["metadata"]["namespace"], p["metadata"]["name"], "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": running_status(p)}),
    )  # fmt: skip


def run_scheduler(cluster: Cluster, tmp_path: Path, tag: str) -> tuple[Any, str]:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    name = f"protect-{tag}"
    sch = components.scheduler(
        cluster.kubeconfig, tmp_path / "scheduler.log", "default", f"--scheduler-name={name}",
        f"--lease-name={name}", f"--scheduler-conf={conf}", name=f"protect-scheduler-{tag}",
    )  # fmt: skip
    return sch, name


def test_a_protected_pod_and_a_budget_survive_a_preemption_that_takes_their_neighbour(
    cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    tag = f"p{uuid.uuid4().hex[:6]}"
    low, mid, high = f"low-{tag}", f"mid-{tag}", f"high-{tag}"
    kubectl.create(
        [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": n},
                "value": v,
            }
            for n, v in ((low, 10), (mid, 500), (high, 1000))
        ]
    )
    nodes = [f"{tag}-n{i}" for i in range(3)]
    kubectl.create([node(n, {"hyperplace.io/protect-test": tag}, cpu="4") for n in nodes])
    sch, scheduler_name = run_scheduler(cluster, tmp_path, tag)
    try:
        app = f"web-{tag}"
        running = [
            (podgroup("guarded", namespace, low), [
                pod("guarded-0", namespace, "guarded", low, scheduler_name, tag, "4", nodes[0],
                    annotations={"volcano.sh/preemptable": "false"}),
            ]),
            (podgroup("web", namespace, low), [
                pod(f"web-{i}", namespace, "web", low, scheduler_name, tag, "2", nodes[1], labels={"app": app})
                for i in range(2)
            ]),
            (podgroup("plain", namespace, mid), [
                pod("plain-0", namespace, "plain", mid, scheduler_name, tag, "4", nodes[2]),
            ]),
        ]  # fmt: skip
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}},
        }
        kubectl.create([budget])
        for pg, pods in running:
            kubectl.create([pg, *pods])
            for p in pods:
                start(kubectl, p)
        kubectl.create(
            [
                podgroup("urgent", namespace, high),
                pod("urgent-0", namespace, "urgent", high, scheduler_name, tag, "4"),
            ]
        )

        def current() -> dict[str, dict[str, Any]]:
            return {p["metadata"]["name"]: p for p in kubectl.items("pods", "-n", namespace)}

        def plain_leaving() -> dict[str, dict[str, Any]] | None:
            now = current()
            gone = now.get("plain-0")
            return now if gone is None or gone["metadata"].get("deletionTimestamp") else None

        now = wait_for(plain_leaving, "the unprotected neighbour to be evicted", describe=sch.tail)
        for name in ("guarded-0", "web-0", "web-1"):
            assert now[name]["metadata"].get("deletionTimestamp") is None, name
        if "plain-0" in now:  # the kubelet finishes the termination
            kubectl.run(
                "delete", "pod", "-n", namespace, "plain-0", "--grace-period=0", "--force", check=False
            )

        def bound() -> str | None:
            return current()["urgent-0"].get("spec", {}).get("nodeName") or None

        assert wait_for(bound, "the preemptor to be bound", describe=sch.tail) == nodes[2]
        now = current()
        for name in ("guarded-0", "web-0", "web-1"):
            assert now[name]["metadata"].get("deletionTimestamp") is None, name
    finally:
        sch.stop()


def test_a_resource_quota_keeps_a_podgroup_pending_naming_the_quota(
    cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    tag = f"q{uuid.uuid4().hex[:6]}"
    kubectl.create([node(f"{tag}-n0", {"hyperplace.io/protect-test": tag}, cpu="8")])
    hard = {"requests.cpu": "2"}
    kubectl.create(
        [{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team", "namespace": namespace},
          "spec": {"hard": hard}}]
    )  # fmt: skip
    # No quota controller runs here: write the status it would (the apiserver's quota admission
    # refuses pods while a quota has none).
    kubectl.run(
        "patch", "resourcequota", "-n", namespace, "team", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"hard": hard, "used": {"requests.cpu": "0"}}}),
    )  # fmt: skip
    sch, scheduler_name = run_scheduler(cluster, tmp_path, tag)
    try:
        kubectl.create(
            [
                podgroup("big", namespace, min_resources={"cpu": "4"}),
                pod("big-0", namespace, "big", None, scheduler_name, tag, "1"),
                podgroup("small", namespace, min_resources={"cpu": "1"}),
                pod("small-0", namespace, "small", None, scheduler_name, tag, "1"),
            ]
        )

        def small_bound() -> str | None:
            p = kubectl.get("pod", "-n", namespace, "small-0")
            return p.get("spec", {}).get("nodeName") or None

        wait_for(small_bound, "the PodGroup within the quota to run", describe=sch.tail)

        def refused() -> dict[str, Any] | None:
            pg = kubectl.get(PODGROUPS, "-n", namespace, "big")
            conds = (pg.get("status") or {}).get("conditions") or []
            hit = [c for c in conds if "resource quota" in str(c.get("message"))]
            return pg if hit else None

        pg = wait_for(refused, "the PodGroup over the quota to say why", describe=sch.tail)
        assert (pg.get("status") or {}).get("phase") in (None, "", "Pending")
        message = " ".join(str(c.get("message")) for c in pg["status"]["conditions"])
        assert f"resource quota {namespace}/team insufficient" in message
        assert kubectl.get("pod", "-n", namespace, "big-0").get("spec", {}).get("nodeName") is None
    finally:
        sch.stop()
