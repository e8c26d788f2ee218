"""The pieces on their own: assume cache, event deduplication across restarts, status
patches, and the binding request over kubernetes-asyncio."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as kclient

from hyperplace.runtime.api import EVENTS, PODS
from hyperplace.runtime.fakeapi import FakeApi, merge_patch
from hyperplace.runtime.kube import KubeApiClient
from scheduler_plugin.cycle import JobOutcome
from scheduler_plugin.model.explanation import Explanation
from scheduler_plugin.runtime.assume import AssumeCache
from scheduler_plugin.runtime.events import EventRecorder
from scheduler_plugin.runtime.status import (
    MAX_CONDITION_MESSAGE,
    pod_unschedulable_patch,
    podgroup_status_patch,
)
from tests.scheduler.builders import pod


def test_assumed_pods_show_bound_until_the_informer_confirms_them() -> None:
    cache = AssumeCache()
    p = pod("a", "g")
    cache.assume("default/a", p["metadata"]["uid"], "n1", "default/g")
    (shown,) = cache.overlay([p])
    assert shown["spec"]["nodeName"] == "n1" and "nodeName" not in p["spec"]  # a copy
    cache.observe(p, "default/a")  # still pending in the informer: keep assuming
    assert "default/a" in cache
    cache.observe({**p, "spec": {**p["spec"], "nodeName": "n1"}}, "default/a")
    assert "default/a" not in cache


def test_a_recreated_or_vanished_pod_ends_its_assumption() -> None:
    cache = AssumeCache()
    p = pod("a", "g")
    cache.assume("default/a", p["metadata"]["uid"], "n1", "default/g")
    cache.observe({**p, "metadata": {**p["metadata"], "uid": "other"}}, "default/a")
    assert "default/a" not in cache
    cache.assume("default/a", p["metadata"]["uid"], "n1", "default/g")
    assert cache.overlay([]) == [] and len(cache) == 0  # the pod is gone from the store


async def test_a_restarted_recorder_continues_the_count_of_its_predecessors_event() -> None:
    api = FakeApi()
    p = api.seed(PODS, pod("a", "g"))
    first = EventRecorder(api, "hyperplace-scheduler", "one", min_interval=0)
    first.record(p, "Warning", "FailedScheduling", "0/4 nodes are available")
    first.record(p, "Warning", "FailedScheduling", "0/4 nodes are available")
    await first.flush()
    (event,) = api.objects["events"].values()
    assert event["count"] == 2 and event["involvedObject"]["uid"] == p["metadata"]["uid"]
    second = EventRecorder(api, "hyperplace-scheduler", "two", min_interval=0)
    second.record(p, "Warning", "FailedScheduling", "0/4 nodes are available")
    await second.flush()
    (event,) = api.objects["events"].values()
    assert event["count"] == 3
    second.record(p, "Warning", "FailedScheduling", "something else")
    await second.flush()
    assert len(api.objects["events"]) == 2


async def test_repeats_within_the_interval_are_folded_into_one_write() -> None:
    api = FakeApi()
    p = api.seed(PODS, pod("a", "g"))
    rec = EventRecorder(api, "s", "i", min_interval=3600)
    for _ in range(5):
        rec.record(p, "Warning", "FailedScheduling", "no")
        await rec.flush()
    assert [c[0] for c in api.calls if c[1] == EVENTS.plural] == ["create"]


def test_the_pod_condition_is_patched_only_when_it_changes() -> None:
    p = pod("a", "g")
    p["metadata"]["resourceVersion"] = "7"
    patch = pod_unschedulable_patch(p, "why", "T1")
    assert patch is not None and patch["metadata"] == {"resourceVersion": "7"}  # a precondition
    p2 = merge_patch(p, {"status": patch["status"]})
    assert pod_unschedulable_patch(p2, "why", "T2") is None
    patch = pod_unschedulable_patch(p2, "another reason", "T3")
    assert patch is not None
    (cond,) = patch["status"]["conditions"]
    assert cond["lastTransitionTime"] == "T1"  # the status did not change, only the message
    long = pod_unschedulable_patch(p, "x" * 100_000, "T")
    assert long is not None and len(long["status"]["conditions"][0]["message"]) == MAX_CONDITION_MESSAGE


def _pg(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 2},
        "status": status or {},
    }


def test_podgroup_status_follows_the_outcome_and_stays_quiet_when_unchanged() -> None:
    expl = Explanation(summary="gang minimum not reached")
    outcome = JobOutcome(
        phase="Pending",
        allocated_hypernode=None,
        conditions=[
            {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "x"}
        ],
        explanation=expl,
    )
    pods = [pod("a", "g"), pod("b", "g")]
    patch = podgroup_status_patch(_pg(), outcome, pods, "T1")
    assert patch is not None and patch["status"]["phase"] == "Inqueue"
    pg = merge_patch(_pg(), patch)
    assert podgroup_status_patch(pg, outcome, pods, "T2") is None
    # Too few pods: Volcano never enqueues the job.
    expl.reason = "NotEnoughPods"
    patch = podgroup_status_patch(pg, outcome, pods[:1], "T3")
    assert patch is not None and patch["status"]["phase"] == "Pending"
    running = JobOutcome(
        phase="Running",
        allocated_hypernode="rack0",
        conditions=[{"type": "Scheduled", "status": "True", "reason": "GangReady", "message": "ok"}],
    )
    bound = [pod("a", "g", node_name="n1"), pod("b", "g", node_name="n2")]
    patch = podgroup_status_patch(pg, running, bound, "T4")
    assert patch is not None
    assert patch["status"]["phase"] == "Running" and patch["status"]["running"] == 2
    assert [c["type"] for c in patch["status"]["conditions"]] == ["Scheduled"]


def test_an_invalid_annotation_condition_goes_once_the_annotation_is_fixed() -> None:
    marked = JobOutcome(
        phase="Pending",
        allocated_hypernode=None,
        conditions=[
            {
                "type": "InvalidAnnotation",
                "status": "True",
                "reason": "InvalidPreemptable",
                "message": 'pod default/a: volcano.sh/preemptable "maybe" is not a boolean',
            }
        ],
    )
    pods = [pod("a", "g"), pod("b", "g")]
    pg = merge_patch(_pg(), podgroup_status_patch(_pg(), marked, pods, "T1") or {})
    assert [c["type"] for c in pg["status"]["conditions"]] == ["InvalidAnnotation"]
    fixed = JobOutcome(phase="Pending", allocated_hypernode=None, conditions=[])
    patch = podgroup_status_patch(pg, fixed, pods, "T2")
    assert patch is not None and patch["status"]["conditions"] == []


async def test_the_binding_goes_to_the_subresource_and_its_status_answer_is_accepted() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def binding(request: web.Request) -> web.Response:
        seen.append((request.path, await request.json()))
        return web.json_response(
            {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}, status=201
        )

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/ns/pods/{name}/binding", binding)
    server = TestServer(app)
    await server.start_server()
    raw = kclient.ApiClient(kclient.Configuration(host=str(server.make_url("")).rstrip("/")))
    try:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u-1"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
        }
        out = await KubeApiClient(raw).create(PODS, body, "ns", subresource="binding")
    finally:
        await raw.close()
        await server.close()
    assert out["kind"] == "Status" and out["code"] == 201
    assert seen == [("/api/v1/namespaces/ns/pods/a/binding", json.loads(json.dumps(body)))]


def test_a_running_gang_that_lost_a_pod_is_unknown_not_sent_back_to_enqueue() -> None:
    """Volcano's jobStatus: running tasks while unschedulable. Pending would make enqueue ask a
    full cluster for the whole gang again, and the replacement would never be placed."""
    waiting = JobOutcome(
        phase="Pending",
        allocated_hypernode=None,
        conditions=[
            {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "x"}
        ],
        explanation=Explanation(summary="gang minimum not reached"),
    )
    remainder = [pod("a", "g", node_name="n1"), pod("b", "g")]
    patch = podgroup_status_patch(_pg({"phase": "Running"}), waiting, remainder, "T1")
    assert patch is not None and patch["status"]["phase"] == "Unknown"
    # Whole again: Running. A half-bound gang that never ran stays Inqueue.
    assert (
        podgroup_status_patch(_pg({"phase": "Inqueue"}), waiting, remainder, "T2")["status"]["phase"]
        == "Inqueue"
    )  # type: ignore[index]
