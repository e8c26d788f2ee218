"""Quiet on the control plane: a waiting gang costs the apiserver a write when what a user acts
on changes, not one per cycle.

* A frozen cluster: however many cycles, each waiting pod's condition is written once, its
  FailedScheduling Event created once, the PodGroup's status written once, and the explanation
  names the same "best" rack every cycle (ties broken by name, whatever order the objects came in).
* Numbers move (other jobs start): the pod's condition does not change; the PodGroup's condition
  and ``hyperplace explain`` carry the new numbers, the PodGroup at most once per interval.
* ``--no-status-writes`` (a benchmark's floor) writes binds only.
* A job that never waits costs two PodGroup writes, Running and Completed: its pods ending one
  by one do not send it back to Pending or Inqueue, its moving counts are not written (a
  failed pod is), and an admission placed within the settle is never written Inqueue (kept
  in process meanwhile; a PodGroup of no pod yet is written Inqueue at once).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from hyperplace.runtime.api import EVENTS, HYPERNODES, NODES, PODGROUPS, PODS, QUEUES
from scheduler_plugin.cycle import JobOutcome
from scheduler_plugin.model.explanation import Explanation
from scheduler_plugin.runtime.events import EventRecorder
from scheduler_plugin.runtime.metrics import Metrics, Throttle
from scheduler_plugin.runtime.waiting import gang_wait_kind, pod_reason_kind, predicate_kinds
from scheduler_plugin.runtime.write_queue import StatusWriteQueue
from simulator.cli import app
from tests.scheduler.builders import hypernode, node, podgroup
from tests.scheduler.builders import pod as make_pod

from .helpers import (
    NS,
    ClusterApi,
    condition,
    cycles_pass,
    events_for,
    eventually,
    node_of,
    pod,
    running,
    seed_gang,
    seed_racks,
)


def seed_racks_in_order(api: ClusterApi, racks: list[int], per_rack: int = 4) -> None:
    """Racks rack<r> of ``per_rack`` 4-cpu nodes under one root, seeded in the order given."""
    for r in racks:
        members = [f"n{r}-{i}" for i in range(per_rack)]
        for m in reversed(members):
            api.seed(NODES, node(m, cpu=4))
        api.seed(HYPERNODES, hypernode(f"rack{r}", 1, nodes=members).to_dict())
    api.seed(HYPERNODES, hypernode("root", 2, children=[f"rack{r}" for r in sorted(racks)]).to_dict())
    api.seed(
        QUEUES,
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}},
    )


def writes(api: ClusterApi, verb: str, resource: str, name: str) -> int:
    return sum(1 for c in api.calls if c == (verb, resource, name))


def busy(api: ClusterApi, name: str, node_name: str) -> dict[str, Any]:
    """A one-pod job of a whole node, running there."""
    return make_pod(name, None, cpu=4, node_name=node_name)


async def frozen_run(racks: list[int], cycles: int) -> tuple[ClusterApi, list[str], set[str]]:
    api = ClusterApi()
    seed_racks_in_order(api, racks)
    keys = seed_gang(api, "big", 5, cpu=4, tier=1)  # 5 whole nodes: no rack of 4 holds it
    seen: set[str] = set()
    async with running(api) as (sched, _):
        await eventually(
            lambda: all(condition(pod(api, k), "PodScheduled") for k in keys), what="conditions written"
        )
        for _ in range(cycles):
            await cycles_pass(sched, 1)
            assert sched.last_result is not None
            expl = sched.last_result.jobs[f"{NS}/big"].explanation
            assert expl is not None
            seen.add(expl.message())
        await sched.events.flush()
    return api, keys, seen


async def test_a_frozen_cluster_is_written_once_and_explained_the_same_way_every_cycle() -> None:
    api, keys, seen = await frozen_run([0, 1, 2, 3], cycles=40)
    # Four equally empty racks: the "best" one is the first by name, every cycle.
    (message,) = seen
    assert "best rack0 fits 4 of 5 pods" in message, message
    for k in keys:
        name = k.split("/")[1]
        assert writes(api, "patch/status", "pods", name) == 1
        (event,) = events_for(api, name, "FailedScheduling")
        assert event["count"] >= 1
    assert [c[0] for c in api.calls if c[1] == EVENTS.plural and c[2].startswith("big.")].count("create") == 1
    assert writes(api, "patch/status", "podgroups", "big") == 1
    # The same cluster listed in another order says the same thing.
    _, _, seen_reversed = await frozen_run([3, 1, 0, 2], cycles=5)
    assert seen_reversed == seen


def test_the_kinds_of_a_predicate_summary_do_not_depend_on_its_counts() -> None:
    a = "0/8 nodes are available: 5 Insufficient cpu, 3 node(s) were unschedulable."
    b = "0/8 nodes are available: 6 node(s) were unschedulable, 2 Insufficient cpu."
    assert (
        predicate_kinds(a)
        == predicate_kinds(b)
        == ("no node fits the pod: Insufficient cpu, node(s) were unschedulable")
    )
    assert pod_reason_kind("nominated to n1 by preempt; waiting for 3 victim pod(s) to terminate") == (
        pod_reason_kind("nominated to n2 by reclaim; waiting for 1 victim pod(s) to terminate")
    )


def explain_json(api: ClusterApi, tmp_path: Path, job: str) -> dict[str, Any]:
    """``hyperplace explain`` over what the fake API server holds (as a live cluster would)."""
    docs: list[dict[str, Any]] = []
    for kind in (NODES, HYPERNODES, QUEUES, PODGROUPS, PODS):
        for obj in api.objects.get(kind.plural, {}).values():
            o = {k: v for k, v in obj.items() if k != "status" or kind in (NODES, PODS)}
            o.setdefault("apiVersion", kind.api_version)
            o.setdefault("kind", kind.kind)
            docs.append(o)
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    res = CliRunner().invoke(app, ["explain", job, str(tmp_path / "cluster.yaml"), "--output", "json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


async def test_a_pending_pods_condition_stays_while_only_the_numbers_move(tmp_path: Path) -> None:
    """The user story: other jobs start around a waiting gang. Its pods' condition says the
    same thing throughout (written once); the PodGroup's condition and ``hyperplace explain``
    follow the numbers, the PodGroup at most once per interval."""
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])
    api.seed(PODS, busy(api, "old0", "n0-0"))
    api.seed(PODS, busy(api, "old1", "n0-1"))
    api.seed(PODS, busy(api, "old2", "n1-0"))
    keys = seed_gang(api, "big", 4, cpu=4, tier=1)  # needs a whole empty rack

    def pg_message() -> str:
        cond = condition(api.peek(PODGROUPS, f"{NS}/big") or {}, "Unschedulable")
        return str(cond["message"]) if cond else ""

    async with running(api, podgroup_status_interval=0.5, event_interval=0.0) as (sched, _):
        await eventually(lambda: "best rack1 fits 3 of 4 pods" in pg_message(), what="first numbers")
        before = {k: condition(pod(api, k), "PodScheduled") for k in keys}
        for c in before.values():
            assert c is not None and c["reason"] == "Unschedulable"
            assert c["message"].startswith("gang of 4 pods: no domain within tier <= 1 has room"), c[
                "message"
            ]
            assert "hyperplace explain default/big" in c["message"]
        # Another job starts in rack1: the best rack now fits 2 of 4.
        await api.create(PODS, busy(api, "new1", "n1-1"), NS)
        await eventually(lambda: "fits 2 of 4 pods" in pg_message(), what="the PodGroup's numbers to move")
        await cycles_pass(sched, 5)
        await sched.events.flush()
    for k in keys:
        first = before[k]
        assert first is not None and condition(pod(api, k), "PodScheduled") == first
        assert writes(api, "patch/status", "pods", k.split("/")[1]) == 1
        # One FailedScheduling per pod and kind of reason, written once: the PodGroup's
        # series counts the gang's repeats.
        (event,) = events_for(api, k.split("/")[1], "FailedScheduling")
        assert event["message"] == first["message"] and event["count"] == 1
        assert [c[0] for c in api.calls if c[1] == EVENTS.plural and c[2] == event["metadata"]["name"]] == [
            "create"
        ]
    # The PodGroup's Event series is one object carrying the latest numbers.
    (pg_event,) = events_for(api, "big", "Unschedulable")
    assert "fits 2 of 4 pods" in pg_event["message"] and pg_event["count"] > 1
    assert writes(api, "patch/status", "podgroups", "big") >= 2
    doc = explain_json(api, tmp_path, "default/big")
    assert any("fits 2 of 4 pods" in str(c.get("reason")) for c in doc["candidates"]), doc["candidates"]


async def test_a_podgroup_is_rewritten_at_once_for_a_change_of_kind_but_not_for_numbers() -> None:
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])
    api.seed(PODS, busy(api, "old0", "n0-0"))
    api.seed(PODS, busy(api, "old1", "n1-0"))
    keys = seed_gang(api, "big", 4, cpu=4, tier=1)
    async with running(api, podgroup_status_interval=3600.0) as (sched, _):
        await eventually(lambda: writes(api, "patch/status", "podgroups", "big") == 1, what="first write")
        # Only numbers move: the best rack fits 2 of 4 instead of 3.
        await api.create(PODS, busy(api, "new0", "n0-1"), NS)
        await api.create(PODS, busy(api, "new1", "n1-1"), NS)
        await cycles_pass(sched, 10)
        assert writes(api, "patch/status", "podgroups", "big") == 1
        assert sched.metrics.status_deferred._value.get() > 0
        for name in ("old0", "new0"):  # rack0 drains: the gang starts, a change of kind
            await api.delete(PODS, name, NS)
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        await eventually(
            lambda: (api.peek(PODGROUPS, f"{NS}/big") or {}).get("status", {}).get("phase") == "Running",
            what="Running written at once",
        )
    assert writes(api, "patch/status", "podgroups", "big") == 2


async def test_the_floor_writes_binds_only() -> None:
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])
    placed = seed_gang(api, "fits", 4, cpu=4, tier=1)
    waiting = seed_gang(api, "big", 5, cpu=4, tier=1)
    async with running(api, status_writes=False) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in placed), what="gang bound")
        await cycles_pass(sched, 5)
        await sched.events.flush()
    assert not any(node_of(api, k) for k in waiting)
    assert {c[0] for c in api.calls if c[0] not in ("list", "watch", "get")} == {"create/binding"}


async def test_a_newer_status_for_a_queued_object_rides_on_its_entry() -> None:
    metrics = Metrics(CollectorRegistry())
    q = StatusWriteQueue(Throttle(0, 1), metrics)
    q.add(("pod", "ns/a"))
    q.add(("pod", "ns/a"))
    q.add(("pg", "ns/g"))
    assert len(q) == 2
    assert metrics.status_coalesced.labels("pod")._value.get() == 1
    item = await asyncio.wait_for(q.get(), 1)
    assert item is not None
    q.dropped(item)
    q.done(item)
    assert metrics.status_dropped.labels("pod")._value.get() == 1


async def test_a_started_gang_is_written_once_with_its_pods_running() -> None:
    """The PodGroup goes Running once its pods are reported running (within the settle), so the
    phase and the pod counts are one write, not one per kubelet report."""
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])
    keys = seed_gang(api, "fits", 4, cpu=4, tier=1)
    async with running(api, podgroup_settle=3.0) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        for k in keys:  # the kubelets report the containers running, one by one
            await cycles_pass(sched, 1)
            await api.patch(PODS, k.split("/")[1], {"status": {"phase": "Running"}}, NS, subresource="status")
        await eventually(
            lambda: (api.peek(PODGROUPS, f"{NS}/fits") or {}).get("status", {}).get("phase") == "Running",
            what="Running written",
        )
        await cycles_pass(sched, 3)
    pg = api.peek(PODGROUPS, f"{NS}/fits")
    assert pg is not None and pg["status"]["running"] == 4
    assert writes(api, "patch/status", "podgroups", "fits") == 1


async def test_an_event_series_carries_its_latest_message_and_a_burst_waits_its_turn() -> None:
    api = ClusterApi()
    pg = api.seed(
        PODGROUPS,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": NS, "uid": "u-g"},
        },
    )
    rec = EventRecorder(api, "s", "i", min_interval=0, qps=50, burst=1)
    rec.record(pg, "Warning", "Unschedulable", "tier 1: best rack0 fits 3 of 4", series="NotEnoughResources")
    await rec.flush()
    rec.record(pg, "Warning", "Unschedulable", "tier 1: best rack1 fits 2 of 4", series="NotEnoughResources")
    rec.record(pg, "Warning", "Unschedulable", "queue q is overused", series="QueueOverused")
    await rec.flush()
    events = sorted(api.objects[EVENTS.plural].values(), key=lambda e: e["message"])
    assert [(e["message"], e["count"]) for e in events] == [
        ("queue q is overused", 1),
        ("tier 1: best rack1 fits 2 of 4", 2),  # one object: the latest numbers, count 2
    ]


async def test_a_gang_that_waits_only_a_moment_is_written_once_running_and_its_pods_not_at_all() -> None:
    api = ClusterApi()
    seed_racks_in_order(api, [0])
    api.seed(PODS, busy(api, "old0", "n0-0"))
    keys = seed_gang(api, "quick", 4, cpu=4, tier=1)
    async with running(api, podgroup_settle=3.0) as (sched, _):
        await cycles_pass(sched, 3)
        await api.delete(PODS, "old0", NS)  # room comes within the settle
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        await eventually(
            lambda: (api.peek(PODGROUPS, f"{NS}/quick") or {}).get("status", {}).get("phase") == "Running",
            what="Running written",
        )
        await sched.events.flush()
    # Admitted, then placed within the settle: one write, Running (no Inqueue before it).
    assert writes(api, "patch/status", "podgroups", "quick") == 1
    # Its pods were placed within the settle of their first miss: nothing was said about them.
    assert not [c for c in api.calls if c[0] == "patch/status" and c[1] == "pods"]
    assert not [e for e in api.objects.get(EVENTS.plural, {}).values() if e["reason"] == "FailedScheduling"]


async def test_a_queues_allocated_sums_are_written_at_most_once_per_interval() -> None:
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])

    def allocated_cpu() -> str | None:
        return ((api.peek(QUEUES, "default") or {}).get("status") or {}).get("allocated", {}).get("cpu")

    async with running(api, queue_status_interval=1.0) as (sched, _):
        seed_gang(api, "a", 1, cpu=4, tier=None)
        await eventually(lambda: allocated_cpu() == "4", what="first sums")
        for name in ("b", "c", "d"):  # three more jobs start within the interval
            pg = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"minMember": 1},
            }
            await api.create(PODGROUPS, pg, NS)
            await api.create(PODS, make_pod(f"{name}-0", name, cpu=4), NS)
        await eventually(lambda: allocated_cpu() == "16", what="the latest sums")
        await cycles_pass(sched, 3)
    assert writes(api, "patch/status", "queues", "default") == 2


def test_each_kind_of_wait_reads_without_numbers() -> None:
    def kind(reason: str, summary: str = "x") -> str | None:
        return gang_wait_kind(JobOutcome("Pending", None, explanation=Explanation(summary, reason)), None)

    assert kind("NotEnoughPods", "not enough valid tasks: 2 pods, minMember 4") == (
        "gang incomplete: fewer valid pods than the PodGroup's minMember"
    )
    assert kind("QueueOverused") == "queue ? is at its limit"
    assert kind("NotEnqueued", "PodGroup is Pending, not admitted to Inqueue: 3 cpu short") == (
        "not admitted to queue ? yet (PodGroup Pending)"
    )
    assert kind("QueueNotFound", "queue 'q' not found") == "queue 'q' not found"
    assert kind("NotEnoughResources", "cannot place 7 pods") == "no room in the cluster"
    assert gang_wait_kind(JobOutcome("Running", None), None) is None


async def test_a_gang_its_queue_has_not_admitted_is_reported_on_its_podgroup_only() -> None:
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])
    api.seed(
        QUEUES,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "team"},
            "spec": {"weight": 1, "capability": {"cpu": "8"}},
            "status": {"state": "Open"},
        },
    )
    names = []
    for name in ("first", "second"):
        pg = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"minMember": 2, "queue": "team", "minResources": {"cpu": "8"}},
        }
        api.seed(PODGROUPS, pg)
        for i in range(2):
            api.seed(PODS, make_pod(f"{name}-{i}", name, cpu=4))
            names.append(f"{name}-{i}")
    async with running(api) as (sched, _):
        await eventually(
            lambda: condition(api.peek(PODGROUPS, f"{NS}/second") or {}, "Unschedulable"),
            what="PodGroup says",
        )
        await cycles_pass(sched, 5)
        await sched.events.flush()
    second = api.peek(PODGROUPS, f"{NS}/second")
    assert second is not None and second["status"]["phase"] == "Pending"
    assert (condition(second, "Unschedulable") or {}).get("reason") == "NotEnqueued"
    assert events_for(api, "second", "Unschedulable")
    for name in ("second-0", "second-1"):
        assert condition(pod(api, f"{NS}/{name}"), "PodScheduled") is None
        assert not events_for(api, name, "FailedScheduling")


def pg_status(api: ClusterApi, name: str) -> dict[str, Any]:
    return (api.peek(PODGROUPS, f"{NS}/{name}") or {}).get("status") or {}


def record_pg_writes(api: ClusterApi) -> list[tuple[str, dict[str, Any]]]:
    """Every PodGroup status body written from now on, as (name, status), in order."""
    sent: list[tuple[str, dict[str, Any]]] = []
    patch = api.patch

    async def recording(res: Any, name: str, body: Any, *args: Any, **kw: Any) -> Any:
        if res is PODGROUPS and isinstance(body, dict) and "status" in body:
            sent.append((name, body["status"]))
        return await patch(res, name, body, *args, **kw)

    api.patch = recording  # type: ignore[method-assign,assignment]
    return sent


async def set_phase(api: ClusterApi, key: str, phase: str) -> None:
    await api.patch(PODS, key.split("/")[1], {"status": {"phase": phase}}, NS, subresource="status")


async def test_a_gang_that_ends_pod_by_pod_is_written_running_then_completed_and_nothing_between() -> None:
    """A started gang whose pods end one by one is not waiting again: its PodGroup is not sent
    back to Pending or Inqueue, gets no Unschedulable condition or Event for having too few pods
    left, and stays Completed when the ended pods are deleted: two writes in all, Running and
    Completed (which carries the final counts)."""
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])
    keys = seed_gang(api, "done", 4, cpu=4, tier=1)
    sent = record_pg_writes(api)
    async with running(api, podgroup_status_interval=0.0, podgroup_settle=5.0) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        for k in keys:
            await set_phase(api, k, "Running")
        await eventually(lambda: pg_status(api, "done").get("running") == 4, what="Running written")
        for k in keys:  # the pods end one by one; sessions meanwhile find the gang incomplete
            await set_phase(api, k, "Succeeded")
            await cycles_pass(sched, 3)
        await eventually(lambda: pg_status(api, "done").get("phase") == "Completed", what="Completed")
        for k in keys:  # the Job controller cleans the ended pods up
            await api.delete(PODS, k.split("/")[1], NS)
        await cycles_pass(sched, 5)
        await sched.events.flush()
    status = pg_status(api, "done")
    assert status["phase"] == "Completed" and status["succeeded"] == 4
    assert not [c for c in status["conditions"] if c["type"] == "Unschedulable"]
    assert [st["phase"] for name, st in sent if name == "done"] == ["Running", "Completed"]
    assert not [e for e in api.objects.get(EVENTS.plural, {}).values() if e["reason"] == "Unschedulable"]


async def test_a_running_gangs_moving_counts_are_not_written_but_a_failed_pod_is() -> None:
    """Once the gang started, pods coming and going change only numbers (kubectl shows them on
    the pods), even long after the last write: not written. A pod that failed is news."""
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])
    keys = seed_gang(api, "elastic", 4, cpu=4, min_member=2, tier=1)
    sent = record_pg_writes(api)
    async with running(api, podgroup_status_interval=0.0, podgroup_settle=5.0) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        for k in keys[:2]:
            await set_phase(api, k, "Running")
        await eventually(lambda: pg_status(api, "elastic").get("phase") == "Running", what="Running written")
        first = len(sent)
        for k in keys[2:]:  # more pods report running: numbers only
            await set_phase(api, k, "Running")
            await cycles_pass(sched, 3)
        await cycles_pass(sched, 5)
        assert len(sent) == first
        await set_phase(api, keys[3], "Failed")
        await eventually(lambda: pg_status(api, "elastic").get("failed") == 1, what="failed written")
    assert pg_status(api, "elastic")["running"] == 3
    assert len(sent) == first + 1


async def test_an_admitted_gang_is_kept_inqueue_in_process_and_written_inqueue_if_it_still_waits() -> None:
    """Enqueue's decision is not lost while its write is held: later sessions read the gang
    Inqueue (so its queue counts it admitted), and a gang still waiting when the settle ends
    is written Inqueue, then Running when it starts."""
    api = ClusterApi()
    seed_racks_in_order(api, [0])
    api.seed(PODS, busy(api, "old0", "n0-0"))
    keys = seed_gang(api, "slow", 4, cpu=4, tier=1)
    sent = record_pg_writes(api)
    async with running(api, podgroup_settle=2.0) as (sched, _):
        await cycles_pass(sched, 3)
        assert pg_status(api, "slow").get("phase") in (None, "Pending")  # held, not written yet
        assert sched.last_result is not None and sched.last_result.jobs[f"{NS}/slow"].pg_phase == "Inqueue"
        # What the next session reads: the admission, though the object still says Pending.
        held = sched.state.snapshot().jobs[f"{NS}/slow"].podgroup.status
        assert held is not None and held.phase == "Inqueue"
        await eventually(lambda: pg_status(api, "slow").get("phase") == "Inqueue", what="Inqueue written")
        await api.delete(PODS, "old0", NS)
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        await eventually(lambda: pg_status(api, "slow").get("phase") == "Running", what="Running written")
    assert [st["phase"] for name, st in sent if name == "slow"] == ["Inqueue", "Running"]


async def test_a_podgroup_of_no_pod_yet_is_written_inqueue_at_once() -> None:
    """A training operator creates the pods once the PodGroup is Inqueue: nothing is held."""
    api = ClusterApi()
    seed_racks(api)
    pg = podgroup("early", 2).to_dict()
    pg["spec"]["minResources"] = {"cpu": "8"}
    pg["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "early",
            "uid": "u1",
            "controller": True,
        }
    ]
    api.seed(PODGROUPS, pg)
    async with running(api, podgroup_settle=60.0):
        await eventually(lambda: pg_status(api, "early").get("phase") == "Inqueue", what="Inqueue")


async def test_a_running_gang_another_scheduler_marked_unschedulable_is_written_back_once() -> None:
    """Volcano's scheduler next to ours reads our PodGroup too: a session of it that fell between
    two of our binds writes "1 Bound, 2 minAvailable" onto our running gang, replacing our
    status. Only numbers differ from what we last wrote, but the object no longer says it: our
    status is written back (Scheduled, no Unschedulable, the counts), once, and left alone."""
    api = ClusterApi()
    seed_racks_in_order(api, [0, 1])
    keys = seed_gang(api, "ours", 2, cpu=4, tier=1)
    sent = record_pg_writes(api)
    async with running(api, podgroup_status_interval=3600.0, podgroup_settle=1.0) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
        for k in keys:
            await set_phase(api, k, "Running")
        await eventually(lambda: pg_status(api, "ours").get("running") == 2, what="Running written")
        volcanos = {
            "phase": "Running",
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "reason": "NotEnoughResources",
                    "message": "1/1 tasks in gang unschedulable: pod group is not ready, 1 Bound, 2 minAvailable",
                    "transitionID": "from-volcano",
                    "lastTransitionTime": "2026-11-27T03:18:20Z",
                }
            ],
            "running": None,
            "succeeded": None,
            "failed": None,
        }
        await api.patch(PODGROUPS, "ours", {"status": volcanos}, NS, subresource="status")
        first = len(sent)  # ours, then Volcano's
        await eventually(
            lambda: (
                not [c for c in pg_status(api, "ours").get("conditions", []) if c["type"] == "Unschedulable"]
            ),
            what="the stale Unschedulable taken back",
        )
        await cycles_pass(sched, 5)
    status = pg_status(api, "ours")
    assert status["running"] == 2
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Scheduled", "True")]
    assert len(sent) == first + 1
