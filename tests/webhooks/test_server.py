"""The kube-apiserver talks AdmissionReview v1 to the webhook server."""

from __future__ import annotations

import base64
import json

import jsonpatch
import pytest
from prometheus_client import CollectorRegistry

from webhooks import review as review_mod
from webhooks.review import MAX_BODY_BYTES, handle_review
from webhooks.server import create_app, create_probe_app

from .builders import context_of, hypernode, job, member, review, task


def decode_patch(response: dict) -> list[dict]:
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


async def post(client, path, body):
    resp = await client.post(path, data=json.dumps(body) if not isinstance(body, bytes | str) else body)
    return resp.status, (await resp.json() if resp.content_type == "application/json" else await resp.text())


async def test_apiserver_gets_a_patch_that_applies_volcanos_job_defaults(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    obj = job(tasks=[{"replicas": 2, "template": {}}])
    status, body = await post(client, "/jobs/mutate", review(obj, uid="abc-123"))
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    resp = body["response"]
    assert resp["uid"] == "abc-123" and resp["allowed"] is True
    mutated = jsonpatch.apply_patch(obj, decode_patch(resp))
    assert mutated["spec"]["tasks"][0]["name"] == "default0"
    assert mutated["spec"]["minAvailable"] == 2


async def test_mutation_with_nothing_to_add_sends_no_patch(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    obj = job(
        tasks=[task("w", 1, minAvailable=1, maxRetry=3)],
        queue="q",
        schedulerName="volcano",
        maxRetry=3,
        minAvailable=1,
    )
    _, body = await post(client, "/jobs/mutate", review(obj))
    assert "patch" not in body["response"] and "patchType" not in body["response"]


async def test_refusal_carries_code_and_every_message(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    hn = hypernode("rack", 1)
    hn["spec"]["members"] = [member("Node", {"regexMatch": {"pattern": "(?!x)"}}), member("Node", {})]
    _, body = await post(client, "/hypernodes/validate", review(hn))
    resp = body["response"]
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 403
    assert resp["status"]["message"] == (
        "spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid: "
        "error parsing regexp: invalid or unsupported Perl syntax: `(?!`; "
        "spec.members[1].selector: Either ExactMatch or RegexMatch or LabelMatch must be specified"
    )


async def test_warnings_reach_the_apiserver(aiohttp_client, webhook_app):
    ctx = context_of(hypernode("leaf", 1, nodes=("n0",), tier_name="leaf"))
    client = await aiohttp_client(webhook_app(ctx))
    _, body = await post(client, "/jobs/validate", review(job(network_topology={"highestTierName": "rack"})))
    assert body["response"]["allowed"] is True
    assert body["response"]["warnings"][0].startswith(
        'spec.networkTopology.highestTierName: no HyperNode has tierName "rack"'
    )


async def test_context_can_be_a_callable_read_per_request(aiohttp_client):
    state = {"ctx": context_of()}
    client = await aiohttp_client(create_app(lambda: state["ctx"]))
    claim = review(hypernode("s9", 2, children=("s0",)))
    assert (await post(client, "/hypernodes/validate", claim))[1]["response"]["allowed"] is True
    state["ctx"] = context_of(hypernode("s0", 1, nodes=("n",)), hypernode("s1", 2, children=("s0",)))
    assert (await post(client, "/hypernodes/validate", claim))[1]["response"]["allowed"] is False


async def test_update_is_checked_against_the_old_object(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    old = job()
    new = job(queue="elsewhere")
    _, body = await post(client, "/jobs/validate", review(new, "UPDATE", old=old))
    assert body["response"]["status"]["message"].startswith("spec.queue: job updates may not change fields")


async def test_dry_run_gets_the_same_answer(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    obj = job(tasks=[{"replicas": 1}])
    _, real = await post(client, "/jobs/mutate", review(obj))
    _, dry = await post(client, "/jobs/mutate", review(obj, dryRun=True))
    assert dry == real


async def test_pod_webhook_uses_the_request_namespace(aiohttp_client, webhook_app):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "train-worker-",
            "labels": {
                "volcano.sh/job-name": "train",
                "volcano.sh/task-spec": "worker",
                "volcano.sh/task-index": "3",
            },
            "annotations": {"volcano.sh/partition-size": "2"},
        },
    }
    client = await aiohttp_client(webhook_app())
    _, body = await post(client, "/pods/mutate", review(pod, namespace="default"))
    assert decode_patch(body["response"]) == [
        {"op": "add", "path": "/metadata/labels/volcano.sh~1partition-id", "value": "1"}
    ]


async def test_delete_is_allowed_without_an_object(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    req = review(None, "DELETE", old=hypernode("s0", 1, nodes=("n",)))
    _, body = await post(client, "/hypernodes/validate", req)
    assert body["response"] == {"uid": req["request"]["uid"], "allowed": True}


async def test_a_misrouted_object_is_let_through_with_a_warning(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    _, body = await post(client, "/jobs/validate", review(hypernode("s0", 1, nodes=("n",))))
    assert body["response"]["allowed"] is True
    assert "received topology.volcano.sh/v1alpha1/HyperNode" in body["response"]["warnings"][0]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (
            json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1", "request": {}}),
            "apiVersion must be",
        ),
        (json.dumps({"kind": "Review", "apiVersion": "admission.k8s.io/v1"}), "kind must be AdmissionReview"),
        (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}), "request is missing"),
        (json.dumps(review(job(), uid="")), "uid is missing"),
        (json.dumps(review(None)), "request.object is required for CREATE"),
        (json.dumps(review(job(), "PATCH")), "request.operation must be"),
    ],
)
async def test_malformed_requests_are_400_with_a_reason(aiohttp_client, webhook_app, body, reason):
    client = await aiohttp_client(webhook_app())
    status, text = await post(client, "/jobs/validate", body)
    assert status == 400
    assert reason in text


async def test_body_over_3_mib_is_400_without_reading_it_all(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())
    big = review(job(annotations_padding="x" * (MAX_BODY_BYTES + 10)))
    status, text = await post(client, "/jobs/validate", big)
    assert status == 400 and "exceeds" in text


async def test_chunked_body_over_the_limit_is_also_400(aiohttp_client, webhook_app):
    client = await aiohttp_client(webhook_app())

    async def chunks():
        for _ in range(4):
            yield b"x" * (1024 * 1024)

    resp = await client.post("/jobs/validate", data=chunks())
    assert resp.status == 400


async def test_a_webhook_bug_denies_with_an_internal_error_but_answers_200(
    aiohttp_client, monkeypatch, caplog
):
    def broken(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setitem(review_mod.WEBHOOKS, "/jobs/validate", broken)
    registry = CollectorRegistry()
    client = await aiohttp_client(create_app(registry=registry))
    status, body = await post(client, "/jobs/validate", review(job(), uid="u-9"))
    assert status == 200
    resp = body["response"]
    assert resp["uid"] == "u-9" and resp["allowed"] is False
    assert resp["status"]["code"] == 500
    assert "internal error in webhook /jobs/validate" in resp["status"]["message"]
    assert "boom" in caplog.text
    assert (
        registry.get_sample_value(
            "hyperplace_webhook_requests_total",
            {"endpoint": "/jobs/validate", "verdict": "error", "code": "500"},
        )
        == 1
    )


async def test_metrics_count_requests_by_endpoint_and_verdict(aiohttp_client):
    registry = CollectorRegistry()
    client = await aiohttp_client(create_app(registry=registry))
    await post(client, "/jobs/validate", review(job()))
    await post(client, "/jobs/validate", review(job(tasks=[])))
    await post(client, "/jobs/validate", b"nope")
    for verdict, code in (("allowed", "200"), ("denied", "403"), ("bad_request", "400")):
        labels = {"endpoint": "/jobs/validate", "verdict": verdict}
        assert registry.get_sample_value("hyperplace_webhook_requests_total", {**labels, "code": code}) == 1
        assert registry.get_sample_value("hyperplace_webhook_request_duration_seconds_count", labels) == 1
    text = await (await client.get("/metrics")).text()
    assert (
        'hyperplace_webhook_requests_total{code="403",endpoint="/jobs/validate",verdict="denied"} 1.0' in text
    )


async def test_two_apps_keep_separate_metrics(aiohttp_client):
    a, b = CollectorRegistry(), CollectorRegistry()
    ca = await aiohttp_client(create_app(registry=a))
    await aiohttp_client(create_app(registry=b))
    await post(ca, "/jobs/mutate", review(job()))
    labels = {"endpoint": "/jobs/mutate", "verdict": "allowed", "code": "200"}
    assert a.get_sample_value("hyperplace_webhook_requests_total", labels) == 1
    assert b.get_sample_value("hyperplace_webhook_requests_total", labels) is None


async def test_probes_report_health_and_certificate_readiness(aiohttp_client):
    loaded = {"yes": False}
    app = create_app(ready=lambda: loaded["yes"])
    probes = await aiohttp_client(create_probe_app(app))
    assert (await probes.get("/healthz")).status == 200
    resp = await probes.get("/readyz")
    assert resp.status == 503 and "certificate" in await resp.text()
    loaded["yes"] = True
    assert (await probes.get("/readyz")).status == 200
    # The probe port serves no webhooks.
    assert (await probes.post("/jobs/validate", data=b"{}")).status in (404, 405)


def test_handlers_work_without_any_http_server():
    result = handle_review("/jobs/mutate", json.dumps(review(job(tasks=[{"replicas": 1}]))).encode())
    assert result.status == 200 and result.verdict == "allowed"
    assert handle_review("/nowhere", b"{}").status == 404
