"""What a queue's scheduler learned about its run times outlives the scheduler: the leader keeps
the run times of the queues that opt in (``hyperplace.io/runtime-estimate: history``) in a
ConfigMap, and a restarted scheduler, or the replica that takes over the Lease, goes on from it."""

from __future__ import annotations

import json
import time

import aiohttp
import pytest

from hyperplace.api import Queue
from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import CONFIGMAPS, PODGROUPS, PODS
from hyperplace.runtime.fakeapi import FakeApi
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.model.runtime_history import ANNOTATION, RuntimeHistory, size_class
from scheduler_plugin.runtime.events import EventRecorder
from scheduler_plugin.runtime.history_store import KEY, MAX_BYTES, HistoryStore
from scheduler_plugin.runtime.options import DEFAULT_HISTORY_CONFIGMAP as DEFAULT_NAME
from tests.scheduler.builders import job_pods, podgroup

from .helpers import NS, ClusterApi, cycles_pass, eventually, running, seed_racks

SYSTEM = "hyperplace-system"


def learning_queue(api: FakeApi, name: str = "default") -> None:
    api.objects["queues"][name]["metadata"]["annotations"] = {ANNOTATION: "history"}


def seed_running(api: FakeApi, name: str, nodes: list[str], minutes: float) -> list[str]:
    """A gang of one pod per node, running for ``minutes`` already."""
    started = rfc3339(time.time() - minutes * 60)
    api.seed(PODGROUPS, podgroup(name, len(nodes)).to_dict())
    keys = []
    for p, n in zip(job_pods(name, len(nodes), cpu=4), nodes, strict=True):
        p["spec"]["nodeName"] = n
        p["status"].update(phase="Running", startTime=started)
        api.seed(PODS, p)
        keys.append(p["metadata"]["name"])
    return keys


def stored(api: FakeApi) -> dict[str, object] | None:
    cm = api.peek(CONFIGMAPS, f"{SYSTEM}/{DEFAULT_NAME}")
    return None if cm is None else json.loads(cm["data"][KEY])


async def test_a_new_leader_goes_on_from_the_run_times_the_last_one_learned() -> None:
    api = ClusterApi()
    seed_racks(api)
    learning_queue(api)
    pods = seed_running(api, "train", ["n0-0", "n0-1"], 42)
    async with running(api) as (sched, _):
        await cycles_pass(sched, 2)
        for name in pods:  # the gang ends; its PodGroup stays
            await api.delete(PODS, name, NS)
        await eventually(lambda: sched._history.changes == 1, what="the run learned")
    # The scheduler stopped (restart, lost Lease): what it learned is in the ConfigMap.
    doc = stored(api)
    assert doc is not None and doc["version"] == 1
    (ran,) = doc["queues"]["default"][str(size_class(2))]  # type: ignore[index]
    assert 42 * 60 <= ran < 43 * 60
    async with running(api) as (successor, _):
        await cycles_pass(successor, 1)
        assert list(successor._history.runs[("default", size_class(2))]) == [ran]


async def test_a_cluster_whose_queues_do_not_learn_gets_no_configmap() -> None:
    api = ClusterApi()
    seed_racks(api)  # the default queue without the annotation
    pods = seed_running(api, "train", ["n0-0"], 42)
    async with running(api) as (sched, _):
        await cycles_pass(sched, 2)
        await api.delete(PODS, pods[0], NS)
        await eventually(lambda: sched._history.changes == 1, what="the run seen")
    assert stored(api) is None
    assert not any(c[0] in ("create", "replace") and c[1] == "configmaps" for c in api.calls)


async def test_a_configmap_that_cannot_be_read_is_named_in_an_event_and_then_rewritten() -> None:
    api = FakeApi()
    api.seed(
        CONFIGMAPS,
        {
            "metadata": {"name": DEFAULT_NAME, "namespace": SYSTEM},
            "data": {KEY: json.dumps({"version": 1, "queues": {"default": {"1": [60.0, "soon", -5]}}})},
        },
    )
    events = EventRecorder(api, "hyperplace-scheduler", "test")
    store = HistoryStore(api, SYSTEM, DEFAULT_NAME, events)
    history = RuntimeHistory()
    await store.load(history)
    # What could be read is kept; what could not is named, field by field.
    assert list(history.runs[("default", 1)]) == [60.0]
    await events.flush()
    (ev,) = api.objects["events"].values()
    assert ev["reason"] == "InvalidRuntimeHistory" and ev["type"] == "Warning"
    assert "queues.default.1: 2 entries are not seconds >= 0; skipped" in ev["message"]
    # Not JSON at all: nothing is loaded, and the next write replaces it.
    cm = api.peek(CONFIGMAPS, f"{SYSTEM}/{DEFAULT_NAME}")
    assert cm is not None
    await api.replace(CONFIGMAPS, {**cm, "data": {KEY: "{not json"}}, SYSTEM)
    history = RuntimeHistory()
    store = HistoryStore(api, SYSTEM, DEFAULT_NAME, events)
    await store.load(history)
    assert not history.runs
    history.record("default", 4, 300.0)
    await store.save(history, {"default"})
    assert stored(api) == {"version": 1, "queues": {"default": {str(size_class(4)): [300.0]}}}


async def test_a_write_that_lost_a_race_is_made_again_from_the_current_version() -> None:
    api = FakeApi()
    store = HistoryStore(api, SYSTEM, DEFAULT_NAME, EventRecorder(api, "hyperplace-scheduler", "test"))
    history = RuntimeHistory()
    await store.load(history)  # not there yet
    history.record("default", 1, 60.0)
    await store.save(history, {"default"})
    # Someone else changed it meanwhile (an old leader's last write): ours conflicts once,
    # then is made again on the version now stored.
    cm = api.peek(CONFIGMAPS, f"{SYSTEM}/{DEFAULT_NAME}")
    assert cm is not None
    await api.replace(CONFIGMAPS, {**cm, "data": {KEY: "{}"}}, SYSTEM)
    history.record("default", 1, 120.0)
    await store.save(history, {"default"})
    assert stored(api) == {}
    await store.save(history, {"default"})
    assert stored(api) == {"version": 1, "queues": {"default": {"0": [60.0, 120.0]}}}


def test_a_history_document_reads_back_what_it_kept_and_names_what_it_cannot() -> None:
    h = RuntimeHistory()
    for s in (600.0, 660.0, 720.0):
        h.record("team-a", 8, s)
    h.record("team-b", 1, 30.0)
    doc = h.document({"team-a"})  # team-b does not learn: not kept
    again = RuntimeHistory()
    assert again.load(json.loads(json.dumps(doc))) == []
    assert again.remaining("team-a", 8, 0.0) == h.remaining("team-a", 8, 0.0) == 660.0
    assert again.remaining("team-b", 1, 0.0) is None
    assert again.load({"version": 2}) == ["version: expected 1, got 2; nothing loaded"]
    assert again.remaining("team-a", 8, 0.0) == 660.0  # a document not understood changes nothing
    assert again.load({"version": 1, "queues": {"q": {"x": [1.0]}, "r": []}}) == [
        "queues.q.x: a size class is a whole number",
        "queues.r: expected an object of size class to run times",
    ]


def test_runs_stored_for_a_queue_replaced_while_the_scheduler_was_down_are_not_used() -> None:
    h = RuntimeHistory()
    for s in (600.0, 660.0, 720.0):
        h.record("team-a", 8, s)
        h.record("team-b", 8, s)
    h.uids.update({"team-a": "uid-a1", "team-b": "uid-b1"})
    doc = json.loads(json.dumps(h.document({"team-a", "team-b"})))
    assert doc["uids"] == {"team-a": "uid-a1", "team-b": "uid-b1"}
    restarted = RuntimeHistory()
    assert restarted.load(doc) == []
    # While no scheduler ran, team-a's Queue was deleted and made again; team-b's stayed.
    queues = [
        Queue.model_validate({"metadata": {"name": "team-a", "uid": "uid-a2"}}),
        Queue.model_validate({"metadata": {"name": "team-b", "uid": "uid-b1"}}),
    ]
    restarted.observe(build_snapshot(nodes=[], pods=[], hypernodes=[], podgroups=[], queues=queues), 0.0)
    assert restarted.remaining("team-a", 8, 0.0) is None
    assert restarted.remaining("team-b", 8, 0.0) == 660.0
    assert restarted.load({"version": 1, "queues": {}, "uids": {"q": 7}}) == [
        "uids: 1 entries are not a queue's uid; skipped"
    ]


def test_two_schedulers_with_leases_of_their_own_keep_their_run_times_apart() -> None:
    from scheduler_plugin.__main__ import history_configmap, parse_args

    assert history_configmap(parse_args([])) == DEFAULT_NAME == "hyperplace-scheduler-runtime-history"
    assert history_configmap(parse_args(["--lease-name", "team-a"])) == "team-a-runtime-history"
    assert history_configmap(parse_args(["--runtime-history-configmap", "mine"])) == "mine"
    assert history_configmap(parse_args(["--runtime-history-configmap", ""])) is None  # memory only


async def test_many_learning_queues_keep_fewer_runs_each_rather_than_outgrow_the_configmap() -> None:
    api = FakeApi()
    store = HistoryStore(api, SYSTEM, DEFAULT_NAME, EventRecorder(api, "hyperplace-scheduler", "test"))
    history = RuntimeHistory()
    queues = {f"team-{i:03d}" for i in range(300)}
    for q in sorted(queues):
        for cls in range(10):
            for k in range(64):
                history.record(q, 2**cls, 1000.0 + k)
    await store.save(history, queues)
    cm = api.peek(CONFIGMAPS, f"{SYSTEM}/{DEFAULT_NAME}")
    assert cm is not None and len(cm["data"][KEY]) <= MAX_BYTES
    doc = json.loads(cm["data"][KEY])
    assert len(doc["queues"]) == 300  # every queue keeps some runs
    runs = doc["queues"]["team-000"]["0"]
    assert 1 <= len(runs) < 64 and runs[-1] == 1063.0  # the latest ones


async def test_a_connection_lost_while_reading_or_writing_never_stops_the_scheduler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi()
    store = HistoryStore(api, SYSTEM, DEFAULT_NAME, EventRecorder(api, "hyperplace-scheduler", "test"))

    async def unreachable(*_: object, **__: object) -> object:
        raise aiohttp.ClientConnectionError("connection refused")

    history = RuntimeHistory()
    history.record("default", 1, 60.0)
    with monkeypatch.context() as m:
        m.setattr(api, "get", unreachable)
        m.setattr(api, "create", unreachable)
        await store.load(history)  # starts from what memory holds
        assert list(history.runs[("default", size_class(1))]) == [60.0]
        history.record("default", 1, 90.0)
        await store.save(history, {"default"})  # logged; still due
        assert store.due(history)
    await store.save(history, {"default"})
    assert stored(api) == {"version": 1, "queues": {"default": {"0": [60.0, 90.0]}}}
