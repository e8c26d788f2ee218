"""Exclusive topology domains end to end on a real apiserver, with the real ``hyperplace-scheduler``.

Rack 1 is full. An exclusive two-pod gang (``hyperplace.io/exclusive-topology: "true"``, one
rack) lands in rack 0; a one-pod job that arrives after it would fit beside it, but rack 0 is
held: the job stays pending and its PodGroup says who holds the rack.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from . import components
from .conftest import Cluster
from .kube import PODGROUPS, Kubectl, pod_node, two_racks, wait_for
from .test_preemption import pod, podgroup, start

pytestmark = pytest.mark.apiserver


def test_a_later_job_stays_out_of_the_rack_an_exclusive_gang_holds(
    cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    tag = f"x{uuid.uuid4().hex[:6]}"
    scheduler_name, lease = f"excl-{tag}", f"excl-{tag}"
    racks, prio = two_racks(kubectl, tag)
    rack0, rack1 = list(racks.values())
    for i, n in enumerate(rack1):  # rack 1 full: two 4-cpu pods on each 8-cpu node
        fill = [pod(f"fill{i}-{k}", namespace, f"fill{i}", prio, scheduler_name, tag, n) for k in range(2)]
        kubectl.create([podgroup(f"fill{i}", namespace, 2, prio), *fill])
        for p in fill:
            start(kubectl, p)
    train = [pod(f"train-{i}", namespace, "train", prio, scheduler_name, tag, None) for i in range(2)]
    pg = podgroup("train", namespace, 2, prio, {"mode": "hard", "highestTierAllowed": 1})
    pg["metadata"]["annotations"] = {"hyperplace.io/exclusive-topology": "true"}
    kubectl.create([pg, *train])

    log = tmp_path / "scheduler.log"
    sch = components.scheduler(
        cluster.kubeconfig, log, "default", f"--scheduler-name={scheduler_name}", f"--lease-name={lease}",
        name=f"excl-scheduler-{tag}",
    )  # fmt: skip
    try:

        def pods() -> dict[str, dict[str, Any]]:
            return {p["metadata"]["name"]: p for p in kubectl.items("pods", "-n", namespace)}

        def placed() -> list[str] | None:
            where = [pod_node(pods()[f"train-{i}"]) for i in range(2)]
            return [w for w in where if w] if all(where) else None

        where = wait_for(placed, "the exclusive gang to be bound", describe=sch.tail)
        assert set(where) <= set(rack0)
        for i in range(2):
            start(kubectl, pods()[f"train-{i}"])
        small = pod("small-0", namespace, "small", prio, scheduler_name, tag, None)
        kubectl.create([podgroup("small", namespace, 1, prio), small])

        def held() -> str | None:
            pgs = {g["metadata"]["name"]: g for g in kubectl.items(PODGROUPS, "-n", namespace)}
            for c in (pgs.get("small", {}).get("status") or {}).get("conditions") or []:
                if c.get("type") == "Unschedulable" and "held exclusively" in (c.get("message") or ""):
                    return str(c["message"])
            return None

        message = wait_for(held, "the later job to say the rack is held", describe=sch.tail)
        assert f"{tag}-rack0 by {namespace}/train" in message
        assert pod_node(pods()["small-0"]) is None
    finally:
        sch.stop()
