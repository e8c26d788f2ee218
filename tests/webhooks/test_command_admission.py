"""Queue Commands are admitted only from those who may update the queue, and marked so the
controller can tell; PodGroup status is written only by the scheduler and the controller."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import jsonpatch
import kubernetes_asyncio.client

from hyperplace.pki import commandmark
from webhooks.authz import SubjectAccessReviewer, queue_access_review

from .builders import review

KEY = b"s" * 32
LEAD = {
    "username": "lead",
    "uid": "42",
    "groups": ["team-a", "system:authenticated"],
    "extra": {"scope": ["x"]},
}


def close_command(queue: str = "default", namespace: str = "team-a") -> dict[str, Any]:
    ref = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": queue, "uid": "q-uid"}
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": f"{queue}-closequeue-", "namespace": namespace},
        "target": ref,
        "action": "CloseQueue",
    }


class Reviewer:
    """Stands in for the apiserver's SubjectAccessReview: who may update which queue."""

    def __init__(self, allowed: dict[str, set[str]]):
        self.allowed = allowed
        self.asked: list[tuple[dict[str, Any], str]] = []

    async def authorize(self, user_info: Any, queue: str) -> tuple[bool, str]:
        self.asked.append((dict(user_info), queue))
        ok = queue in self.allowed.get(user_info.get("username"), set())
        return ok, "" if ok else "no RBAC policy matched"


async def post(client: Any, path: str, body: Any) -> dict[str, Any]:
    resp = await client.post(path, data=json.dumps(body))
    assert resp.status == 200
    return (await resp.json())["response"]


async def test_a_namespace_user_cannot_close_a_shared_queue(aiohttp_client, webhook_app):
    reviewer = Reviewer({"lead": {"team-a-queue"}})
    client = await aiohttp_client(webhook_app(authorize=reviewer.authorize, command_key=KEY))
    for path in ("/commands/validate", "/commands/mutate"):
        resp = await post(client, path, review(close_command("default"), namespace="team-a", userInfo=LEAD))
        assert resp["allowed"] is False
        message = resp["status"]["message"]
        assert message.startswith("target: CloseQueue on queue 'default' needs permission to update it")
        assert 'user \'lead\' cannot update resource "queues" in API group "scheduling.volcano.sh"' in message
        assert "no RBAC policy matched" in message
        assert "patch" not in resp  # never marked
    # The whole requester went into the review: user, uid, groups, extra.
    assert reviewer.asked[0] == (LEAD, "default")


async def test_a_queue_admins_command_is_admitted_and_marked(aiohttp_client, webhook_app):
    reviewer = Reviewer({"lead": {"team-a-queue"}})
    client = await aiohttp_client(webhook_app(authorize=reviewer.authorize, command_key=KEY))
    cmd = close_command("team-a-queue")
    assert (await post(client, "/commands/validate", review(cmd, namespace="team-a", userInfo=LEAD)))[
        "allowed"
    ]
    resp = await post(client, "/commands/mutate", review(cmd, namespace="team-a", userInfo=LEAD))
    assert resp["allowed"] is True
    marked = jsonpatch.apply_patch(cmd, json.loads(base64.b64decode(resp["patch"])))
    # As stored: the apiserver stamps creationTimestamp after admission.
    marked["metadata"]["creationTimestamp"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert commandmark.verify(KEY, marked) is None
    # A marker cannot be carried to another queue or made without the key.
    moved = json.loads(json.dumps(marked))
    moved["target"]["name"] = "default"
    assert "does not match" in (commandmark.verify(KEY, moved) or "")
    assert "does not match" in (commandmark.verify(b"other-key-of-16-bytes", marked) or "")


async def test_a_user_supplied_marker_is_replaced_not_trusted(aiohttp_client, webhook_app):
    reviewer = Reviewer({"lead": {"q"}})
    client = await aiohttp_client(webhook_app(authorize=reviewer.authorize, command_key=KEY))
    cmd = close_command("q")
    cmd["metadata"]["annotations"] = {commandmark.ANNOTATION: "v1.1.forged." + "0" * 64}
    resp = await post(client, "/commands/mutate", review(cmd, namespace="team-a", userInfo=LEAD))
    marked = jsonpatch.apply_patch(cmd, json.loads(base64.b64decode(resp["patch"])))
    assert marked["metadata"]["annotations"][commandmark.ANNOTATION] != "v1.1.forged." + "0" * 64


async def test_commands_for_jobs_are_not_judged_here(aiohttp_client, webhook_app):
    reviewer = Reviewer({})
    client = await aiohttp_client(webhook_app(authorize=reviewer.authorize, command_key=KEY))
    cmd = close_command()
    cmd["target"] = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "u"}
    cmd["action"] = "AbortJob"
    resp = await post(client, "/commands/validate", review(cmd, namespace="team-a", userInfo=LEAD))
    assert resp["allowed"] is True and reviewer.asked == []


def test_the_access_review_asks_for_update_on_the_named_queue() -> None:
    body = queue_access_review(LEAD, "default")
    assert body["kind"] == "SubjectAccessReview"
    assert body["spec"] == {
        "user": "lead",
        "uid": "42",
        "groups": ["team-a", "system:authenticated"],
        "extra": {"scope": ["x"]},
        "resourceAttributes": {
            "group": "scheduling.volcano.sh",
            "resource": "queues",
            "verb": "update",
            "name": "default",
        },
    }


SCHEDULER = "system:serviceaccount:hyperplace-system:hyperplace-scheduler"


def podgroup(status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "team-a"},
        "spec": {"minMember": 2, "queue": "default"},
    }
    if status is not None:
        obj["status"] = status
    return obj


async def test_podgroup_status_is_written_only_by_the_suite(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app(status_writers=frozenset({SCHEDULER})))
    old = podgroup({"phase": "Pending"})
    forged = podgroup({"phase": "Inqueue", "running": 5})
    user = {"username": "alice", "groups": ["system:authenticated"]}
    resp = await post(client, "/podgroups/validate", review(forged, "UPDATE", old, userInfo=user))
    assert resp["allowed"] is False
    assert resp["status"]["message"] == (
        f"status: a PodGroup's status is written only by the scheduler and the controller ({SCHEDULER}); "
        "user 'alice' may not set it"
    )
    # The scheduler may; the user may still change the spec, leaving status alone.
    assert (
        await post(
            client, "/podgroups/validate", review(forged, "UPDATE", old, userInfo={"username": SCHEDULER})
        )
    )["allowed"]
    respec = podgroup({"phase": "Pending"})
    respec["spec"]["minMember"] = 3
    assert (await post(client, "/podgroups/validate", review(respec, "UPDATE", old, userInfo=user)))[
        "allowed"
    ]
    # Created with a status: only an empty one or Pending.
    assert (await post(client, "/podgroups/validate", review(podgroup({"phase": "Pending"}), userInfo=user)))[
        "allowed"
    ]
    assert not (await post(client, "/podgroups/validate", review(forged, userInfo=user)))["allowed"]


async def test_an_operator_that_sends_the_status_back_through_an_older_api_type_is_admitted(
    aiohttp_client, webhook_app
):
    # The training operator reads its PodGroup, fills the spec and updates the whole object: the
    # status goes back as its Volcano API type knows it, without fields that type lacks.
    client = await aiohttp_client(webhook_app(status_writers=frozenset({SCHEDULER})))
    cond = {"type": "Unschedulable", "status": "True", "reason": "x", "message": "m"}
    stored = podgroup({"phase": "Inqueue", "conditions": [{**cond, "newerField": "v"}], "running": 0})
    operator = {"username": "system:serviceaccount:kubeflow:training-operator"}
    sent = podgroup({"phase": "Inqueue", "conditions": [cond]})
    sent["spec"]["minMember"] = 3
    assert (await post(client, "/podgroups/validate", review(sent, "UPDATE", stored, userInfo=operator)))[
        "allowed"
    ]
    # Changing a value, or adding one, is still a status write.
    for forged in (
        podgroup({"phase": "Running", "conditions": [cond]}),
        podgroup({"phase": "Inqueue", "conditions": [cond], "running": 5}),
        podgroup({"phase": "Inqueue", "conditions": [{**cond, "status": "False"}]}),
        podgroup({"phase": "Inqueue", "conditions": []}),
    ):
        resp = await post(client, "/podgroups/validate", review(forged, "UPDATE", stored, userInfo=operator))
        assert resp["allowed"] is False, forged


async def test_without_a_writer_list_podgroup_status_is_anyones_as_in_volcano(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    resp = await post(
        client,
        "/podgroups/validate",
        review(podgroup({"phase": "Running"}), "UPDATE", podgroup({}), userInfo={"username": "alice"}),
    )
    assert resp["allowed"] is True


async def test_an_apiserver_error_refuses_the_command_saying_so(monkeypatch):
    asked = []

    class Failing:
        def __init__(self, _client: object) -> None:
            pass

        async def create_subject_access_review(self, body: Any) -> Any:
            asked.append(body)
            raise kubernetes_asyncio.client.ApiException(status=503, reason="Service Unavailable")

    monkeypatch.setattr(kubernetes_asyncio.client, "AuthorizationV1Api", Failing)
    allowed, reason = await SubjectAccessReviewer(object()).authorize(LEAD, "default")
    assert allowed is False
    assert reason.startswith("the permission could not be checked: ApiException")
    assert asked[0]["spec"]["resourceAttributes"]["name"] == "default"


async def test_a_metadata_update_keeps_the_marker_and_needs_no_permission(aiohttp_client, webhook_app):
    """The garbage collector or a label change: action and target unchanged."""
    reviewer = Reviewer({})
    client = await aiohttp_client(webhook_app(authorize=reviewer.authorize, command_key=KEY))
    old = close_command("q")
    old["metadata"]["annotations"] = {commandmark.ANNOTATION: "v1.1.n." + "0" * 64}
    new = json.loads(json.dumps(old))
    new["metadata"]["labels"] = {"x": "y"}
    gc = {"username": "system:serviceaccount:kube-system:generic-garbage-collector"}
    for path in ("/commands/validate", "/commands/mutate"):
        resp = await post(client, path, review(new, "UPDATE", old, namespace="team-a", userInfo=gc))
        assert resp["allowed"] is True and "patch" not in resp
    assert reviewer.asked == []
    # Pointing it at another queue is a new order: asked, and refused here.
    moved = json.loads(json.dumps(new))
    moved["target"]["name"] = "default"
    resp = await post(
        client, "/commands/validate", review(moved, "UPDATE", old, namespace="team-a", userInfo=gc)
    )
    assert resp["allowed"] is False and reviewer.asked
