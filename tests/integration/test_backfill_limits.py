"""Time-aware backfill end to end on a real apiserver, with the real ``hyperplace-scheduler``.

Rack 1 is full and rack 0 runs one pod with a one-hour limit (``activeDeadlineSeconds``), so a
four-pod gang bound to one rack waits, gets rack 0 held after a second (its queue's
``hyperplace.io/reservation-wait``) and its PodGroup gives its estimated start: when that pod's
limit runs out. A one-pod job with a one-minute limit then runs in the held rack (it is gone
before the gang starts), while one with a two-hour limit stays out. When rack 0's pods are gone
(the kubelet would end them at their limits; here they are deleted) the gang starts there.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hyperplace.api.times import parse_rfc3339, rfc3339

from . import components
from .conftest import Cluster
from .kube import PODGROUPS, Kubectl, pod_node, two_racks, wait_for
from .test_preemption import pod, podgroup, start

pytestmark = pytest.mark.apiserver


def _conditions(kubectl: Kubectl, ns: str, name: str) -> dict[str, dict[str, Any]]:
    pgs = {g["metadata"]["name"]: g for g in kubectl.items(PODGROUPS, "-n", ns)}
    conds = (pgs.get(name, {}).get("status") or {}).get("conditions") or []
    return {c.get("type"): c for c in conds}


def _job(
    kubectl: Kubectl, name: str, ns: str, prio: str, scheduler: str, tag: str, queue: str, **kw: Any
) -> None:
    """A one-pod job of 4 cpu (half a node) in ``queue``; ``limit``: its activeDeadlineSeconds,
    ``node``: already running there."""
    p = pod(f"{name}-0", ns, name, prio, scheduler, tag, kw.get("node"))
    if kw.get("limit") is not None:
        p["spec"]["activeDeadlineSeconds"] = kw["limit"]
    g = podgroup(name, ns, 1, prio)
    g["spec"]["queue"] = queue
    kubectl.create([g, p])
    if kw.get("node"):
        start(kubectl, p)


def test_a_short_job_backfills_into_the_held_rack_and_a_long_one_does_not(
    cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    tag = f"b{uuid.uuid4().hex[:6]}"
    scheduler_name, queue = f"bkfl-{tag}", f"q-{tag}"
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
    ns, sched = namespace, scheduler_name
    for i, n in enumerate([rack1[0], rack1[0], rack1[1], rack1[1]]):
        _job(kubectl, f"fill{i}", ns, prio, sched, tag, queue, node=n)  # no limit: rack 1 busy for ever
    began = time.time()
    _job(kubectl, "old", ns, prio, sched, tag, queue, node=rack0[0], limit=3600)
    train = [pod(f"train-{i}", ns, "train", prio, sched, tag, None) for i in range(4)]
    pg = podgroup("train", ns, 4, prio, {"mode": "hard", "highestTierAllowed": 1})
    pg["spec"]["queue"] = queue
    kubectl.create([pg, *train])

    sch = components.scheduler(
        cluster.kubeconfig, tmp_path / "scheduler.log", "default", f"--scheduler-name={sched}",
        f"--lease-name=bkfl-{tag}", name=f"bkfl-scheduler-{tag}",
    )  # fmt: skip
    try:

        def pods() -> dict[str, dict[str, Any]]:
            return {p["metadata"]["name"]: p for p in kubectl.items("pods", "-n", ns)}

        def reserved() -> str | None:
            c = _conditions(kubectl, ns, "train").get("HyperNodeReserved")
            return (
                str(c["message"])
                if c and c.get("status") == "True" and "estimated start" in c["message"]
                else None
            )

        message = wait_for(
            reserved, "the waiting gang to get rack 0 held with an estimate", describe=sch.tail
        )
        assert f"HyperNode {tag}-rack0 is held" in message
        # The estimate is the old pod's start plus its hour (its start: when the test started it).
        est = parse_rfc3339(message.split("estimated start ")[1].split(" ")[0])
        assert est is not None and abs(est - (began + 3600)) < 30, (message, rfc3339(began))

        _job(kubectl, "long", ns, prio, sched, tag, queue, limit=7200)
        _job(kubectl, "short", ns, prio, sched, tag, queue, limit=60)

        def short_node() -> str | None:
            return pod_node(pods()["short-0"])

        where = wait_for(short_node, "the short job to backfill into the held rack", describe=sch.tail)
        assert where in rack0

        def short_told() -> str | None:
            c = _conditions(kubectl, ns, "short").get("Scheduled")
            return str(c["message"]) if c and "backfilled" in str(c.get("message")) else None

        said = wait_for(short_told, "the short job's PodGroup to say it was backfilled", describe=sch.tail)
        assert f"backfilled into HyperNode {tag}-rack0, held for {ns}/train" in said, said

        def long_told() -> str | None:
            c = _conditions(kubectl, ns, "long").get("Unschedulable")
            return str(c["message"]) if c else None

        told = wait_for(long_told, "the long job to say why it waits", describe=sch.tail)
        assert f"held for the head of the queue: {tag}-rack0 for {ns}/train" in told, told
        time.sleep(2)  # a few more cycles: the long job stays out, the gang still waits
        assert pod_node(pods()["long-0"]) is None
        assert all(pod_node(p) is None for n, p in pods().items() if n.startswith("train-"))

        # Rack 0's pods reach their limits (no kubelet here: deleted): the gang takes the rack.
        for name in ("old-0", "short-0"):
            kubectl.run("delete", "pod", "-n", ns, name, "--grace-period=0", "--force")

        def gang_bound() -> list[str] | None:
            found = [pod_node(pods()[f"train-{i}"]) for i in range(4)]
            return [w for w in found if w] if all(found) else None

        assert set(wait_for(gang_bound, "the gang to be bound in the held rack", describe=sch.tail)) == set(
            rack0
        )
    finally:
        sch.stop()


def _queue(kubectl: Kubectl, name: str, **annotations: str) -> None:
    kubectl.create(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name, "annotations": annotations},
                "spec": {"weight": 1},
            }
        ]
    )


def _phase(kubectl: Kubectl, ns: str, name: str) -> str:
    pgs = {g["metadata"]["name"]: g for g in kubectl.items(PODGROUPS, "-n", ns)}
    return str((pgs.get(name, {}).get("status") or {}).get("phase") or "")


def test_a_queue_that_learns_run_times_gets_the_rack_its_short_jobs_run_in_held(
    cluster: Cluster, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    """Each rack runs one pod without a limit, so either is one pod short for a four-pod gang
    and neither has an estimated start. Rack 1's pod is of a queue whose one-pod jobs the
    scheduler has seen finish in seconds (``hyperplace.io/runtime-estimate: history``); rack 0's
    of a queue that learns nothing. The gang's hold takes rack 1, not rack 0 (which name order
    would give), and says why, also after the scheduler that learned the runs has restarted: it
    kept them in its ConfigMap."""
    tag = f"r{uuid.uuid4().hex[:6]}"
    sched, learns, plain = f"learn-{tag}", f"q-{tag}", f"plain-{tag}"
    racks, prio = two_racks(kubectl, tag)
    rack0, rack1 = list(racks.values())
    _queue(
        kubectl,
        learns,
        **{"hyperplace.io/reservation-wait": "1s", "hyperplace.io/runtime-estimate": "history"},
    )
    _queue(kubectl, plain)
    ns = namespace
    kept = f"history-{tag}"

    def start() -> components.Component:
        return components.scheduler(
            cluster.kubeconfig, tmp_path / "scheduler.log", "default", f"--scheduler-name={sched}",
            f"--lease-name=learn-{tag}", f"--runtime-history-configmap={kept}", name=f"learn-scheduler-{tag}",
        )  # fmt: skip

    sch = start()
    try:
        # Three short runs of the learning queue: each seen running (its PodGroup Running, so a
        # cycle saw its pod started), then ended (Completed, so a cycle saw it end).
        for i in range(3):
            name = f"quick{i}"
            _job(kubectl, name, ns, prio, sched, tag, learns, node=rack1[1])
            wait_for(
                lambda n=name: _phase(kubectl, ns, n) == "Running" or None,
                f"{name} to run",
                describe=sch.tail,
            )
            done = {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]}
            kubectl.run(
                "patch", "pod", "-n", ns, f"{name}-0", "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": done}),
            )  # fmt: skip
            wait_for(
                lambda n=name: _phase(kubectl, ns, n) == "Completed" or None,
                f"{name} to end",
                describe=sch.tail,
            )

        # A restart (an upgrade, a new leader): the runs were written on the way out and are
        # read back by the next scheduler.
        sch.stop()
        doc = json.loads(kubectl.get("configmap", kept, "-n", "default")["data"]["history.json"])
        assert sum(len(r) for r in doc["queues"][learns].values()) == 3, doc
        assert plain not in doc["queues"]  # a queue that does not learn is not kept
        sch = start()
        _job(kubectl, "other", ns, prio, sched, tag, plain, node=rack0[0])
        _job(kubectl, "next", ns, prio, sched, tag, learns, node=rack1[0])
        train = [pod(f"train-{i}", ns, "train", prio, sched, tag, None) for i in range(4)]
        pg = podgroup("train", ns, 4, prio, {"mode": "hard", "highestTierAllowed": 1})
        pg["spec"]["queue"] = learns
        kubectl.create([pg, *train])

        def held() -> str | None:
            c = _conditions(kubectl, ns, "train").get("HyperNodeReserved")
            return str(c["message"]) if c and c.get("status") == "True" else None

        message = wait_for(held, "the waiting gang to get a rack held", describe=sch.tail)
        assert f"HyperNode {tag}-rack1 is held" in message, message
        assert "expected to free soonest (learned run times)" in message, message
        assert "estimated start" not in message  # a guess is not a bound
    finally:
        sch.stop()
