"""Head-of-queue reservation and time-bounded relaxation end to end on a real apiserver, with the
real ``hyperplace-scheduler`` (its session clock is the wall clock).

Reservation: rack 1 is full and rack 0 has one pod running, so a four-pod gang bound to one rack
waits. Its queue says a gang may wait one second (``hyperplace.io/reservation-wait``); then
rack 0, where it would fit soonest, is held and the PodGroup says so. A one-pod job that
arrives later would fit in rack 0, but only in room the gang needs: it stays out, and its
PodGroup says which rack is held for whom. When rack 0's
pod is gone the gang starts there and the hold ends.

Relaxation: each rack has room for one pod. A two-pod gang asks for one rack for six seconds,
then its own limit, the spine (``hyperplace.io/relax-topology: "1@6s"``). It waits with tier 1
and the deadline on its PodGroup, then is bound across the two racks.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hyperplace.api.times import parse_rfc3339

from . import components
from .conftest import Cluster
from .kube import PODGROUPS, Kubectl, pod_node, two_racks, wait_for
from .test_preemption import pod, podgroup, start

pytestmark = pytest.mark.apiserver


def _fill(kubectl: Kubectl, ns: str, tag: str, prio: str, scheduler: str, where: list[str]) -> None:
    """One running one-pod job (4 cpu, half a node) on each node of ``where``."""
    for i, n in enumerate(where):
        p = pod(f"fill{i}-0", ns, f"fill{i}", prio, scheduler, tag, n)
        kubectl.create([podgroup(f"fill{i}", ns, 1, prio), p])
        start(kubectl, p)


def _conditions(kubectl: Kubectl, ns: str, name: str) -> dict[str, dict[str, Any]]:
    pgs = {g["metadata"]["name"]: g for g in kubectl.items(PODGROUPS, "-n", ns)}
    conds = (pgs.get(name, {}).get("status") or {}).get("conditions") or []
    return {c.get("type"): c for c in conds}


def test_a_gang_that_waited_gets_a_rack_held_and_a_later_job_stays_out_of_it(
    cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    tag = f"r{uuid.uuid4().hex[:6]}"
    scheduler_name, queue = f"resv-{tag}", f"q-{tag}"
    racks, prio = two_racks(kubectl, tag)
    rack0, rack1 = list(racks.values())
    kubectl.create(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": queue, "annotations": {"hyperplace.io/reservation-wait": "1s"}},
                "spec": {"weight": 1},
            }
        ]
    )
    # Rack 1 full (two half-node pods on each node), rack 0 with one pod: 3 of its 4 slots free.
    _fill(kubectl, namespace, tag, prio, scheduler_name, [rack1[0], rack1[0], rack1[1], rack1[1], rack0[0]])
    train = [pod(f"train-{i}", namespace, "train", prio, scheduler_name, tag, None) for i in range(4)]
    pg = podgroup("train", namespace, 4, prio, {"mode": "hard", "highestTierAllowed": 1})
    pg["spec"]["queue"] = queue
    kubectl.create([pg, *train])

    sch = components.scheduler(
        cluster.kubeconfig, tmp_path / "scheduler.log", "default", f"--scheduler-name={scheduler_name}",
        f"--lease-name=resv-{tag}", name=f"resv-scheduler-{tag}",
    )  # fmt: skip
    try:

        def pods() -> dict[str, dict[str, Any]]:
            return {p["metadata"]["name"]: p for p in kubectl.items("pods", "-n", namespace)}

        def reserved() -> str | None:
            c = _conditions(kubectl, namespace, "train").get("HyperNodeReserved")
            return str(c["message"]) if c and c.get("status") == "True" else None

        message = wait_for(reserved, "the waiting gang to get a rack held", describe=sch.tail)
        assert f"HyperNode {tag}-rack0 is held" in message
        assert all(pod_node(p) is None for n, p in pods().items() if n.startswith("train-"))

        small = pod("small-0", namespace, "small", prio, scheduler_name, tag, None)
        small_pg = podgroup("small", namespace, 1, prio)
        small_pg["spec"]["queue"] = queue
        kubectl.create([small_pg, small])

        def small_told() -> str | None:
            c = _conditions(kubectl, namespace, "small").get("Unschedulable")
            return str(c["message"]) if c else None

        told = wait_for(small_told, "the later job to say why it waits", describe=sch.tail)
        assert f"held for the head of the queue: {tag}-rack0 for {namespace}/train" in told, told
        time.sleep(2)  # a few more cycles: it stays out of the held rack
        assert pod_node(pods()["small-0"]) is None

        # Rack 0's pod finishes: the gang takes the whole rack and its hold ends.
        kubectl.run("delete", "pod", "-n", namespace, "fill4-0", "--grace-period=0", "--force")  # no kubelet

        def gang_bound() -> list[str] | None:
            where = [pod_node(pods()[f"train-{i}"]) for i in range(4)]
            return [w for w in where if w] if all(where) else None

        where = wait_for(gang_bound, "the gang to be bound in the held rack", describe=sch.tail)
        assert set(where) == set(rack0)
        wait_for(lambda: reserved() is None or None, "the hold to end", describe=sch.tail)
    finally:
        sch.stop()


def test_a_gang_waits_for_one_rack_until_its_deadline_then_spans_two(
    cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    tag = f"t{uuid.uuid4().hex[:6]}"
    scheduler_name = f"relax-{tag}"
    racks, prio = two_racks(kubectl, tag)
    rack0, rack1 = list(racks.values())
    # Three of each rack's four slots taken: one free slot per rack, none with two.
    _fill(
        kubectl,
        namespace,
        tag,
        prio,
        scheduler_name,
        [rack0[0], rack0[0], rack0[1], rack1[0], rack1[0], rack1[1]],
    )
    sch = components.scheduler(
        cluster.kubeconfig, tmp_path / "scheduler.log", "default", f"--scheduler-name={scheduler_name}",
        f"--lease-name=relax-{tag}", name=f"relax-scheduler-{tag}",
    )  # fmt: skip
    try:

        def leading() -> str | None:
            got = kubectl.run("get", "lease", "-n", "default", f"relax-{tag}", "-o",
                              "jsonpath={.spec.holderIdentity}", check=False)  # fmt: skip
            return got.stdout.strip() or None

        wait_for(leading, "the scheduler to lead", describe=sch.tail)
        wide = [pod(f"wide-{i}", namespace, "wide", prio, scheduler_name, tag, None) for i in range(2)]
        pg = podgroup("wide", namespace, 2, prio, {"mode": "hard", "highestTierAllowed": 2})
        pg["metadata"]["annotations"] = {"hyperplace.io/relax-topology": "1@6s"}
        kubectl.create([pg, *wide])

        def pods() -> dict[str, dict[str, Any]]:
            return {p["metadata"]["name"]: p for p in kubectl.items("pods", "-n", namespace)}

        def bound() -> list[str] | None:
            where = [pod_node(pods()[f"wide-{i}"]) for i in range(2)]
            return [w for w in where if w] if all(where) else None

        def tier1() -> dict[str, Any] | None:
            c = _conditions(kubectl, namespace, "wide").get("TopologyRelaxation")
            return c if c and c.get("reason") == "Tier1" else None

        c = wait_for(tier1, "the gang to wait with tier 1 and its deadline", describe=sch.tail)
        found = re.search(r"relaxed to tier 1 until (\S+),", c["message"])
        assert found, c
        deadline = parse_rfc3339(found.group(1))
        assert deadline is not None
        # Said while tier 1 was in force (the apiserver's clock, whole seconds: the same machine).
        assert (parse_rfc3339(c["lastTransitionTime"]) or 0) <= deadline, c
        where = wait_for(bound, "the gang to span both racks after its deadline", describe=sch.tail)
        # Not before the deadline: the apiserver stamps each binding (condition PodScheduled,
        # whole seconds), so a bind before it would read at least a second earlier.
        for i in range(2):
            (scheduled,) = [
                x for x in pods()[f"wide-{i}"]["status"]["conditions"] if x["type"] == "PodScheduled"
            ]
            assert (parse_rfc3339(scheduled["lastTransitionTime"]) or 0) >= deadline, (
                scheduled,
                found.group(1),
            )
        assert {w in rack0 for w in where} == {True, False}, where

        def own_limit() -> dict[str, Any] | None:
            # The PodGroup of a gang just placed is written once its pods run (at most the
            # reporter's settle later), so the relaxation's new reason follows the binds.
            c = _conditions(kubectl, namespace, "wide").get("TopologyRelaxation")
            return c if c and c.get("reason") == "OwnLimit" else None

        wait_for(own_limit, "the relaxation to say the job's own limit is in force", describe=sch.tail)
    finally:
        sch.stop()
