"""Whatever arrives, the webhooks answer: never a 5xx, never a crash, and every refusal
says what is wrong and where."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import jsonpatch
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhooks.admission import admit
from webhooks.review import WEBHOOKS, handle_review
from webhooks.server import create_app

from .builders import context_of, hypernode, job, task

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
SMALL_INT = st.integers(-3, 12)


def MAYBE(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes null or arbitrary JSON."""
    return st.one_of(s, s, s, s, st.just(None), JSON)


REGEX_TEXT = st.text(alphabet="ab()[]{}?*+|\\^$.:=!<>P-1d", max_size=10) | st.sampled_from(
    ["^n[0-9]+$", "gpu"]
)

selector = st.fixed_dictionaries(
    {},
    optional={
        "exactMatch": MAYBE(
            st.fixed_dictionaries({"name": MAYBE(st.sampled_from(["s0", "s1", "n0", "Bad_Name", ""]))})
        ),
        "regexMatch": MAYBE(st.fixed_dictionaries({"pattern": MAYBE(REGEX_TEXT)})),
        "labelMatch": MAYBE(
            st.fixed_dictionaries(
                {"matchLabels": MAYBE(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2))}
            )
        ),
    },
)
hypernodes = st.fixed_dictionaries(
    {
        "apiVersion": st.just("topology.volcano.sh/v1alpha1"),
        "kind": st.just("HyperNode"),
        "metadata": st.fixed_dictionaries({"name": st.sampled_from(["s0", "s1", "s2", "s9", "Bad"])}),
        "spec": MAYBE(
            st.fixed_dictionaries(
                {"tier": MAYBE(SMALL_INT)},
                optional={
                    "tierName": MAYBE(st.sampled_from(["leaf", "spine"])),
                    "members": MAYBE(
                        st.lists(
                            MAYBE(
                                st.fixed_dictionaries(
                                    {
                                        "type": MAYBE(st.sampled_from(["Node", "HyperNode"])),
                                        "selector": MAYBE(selector),
                                    }
                                )
                            ),
                            max_size=4,
                        )
                    ),
                },
            )
        ),
    }
)
network_topology = st.fixed_dictionaries(
    {},
    optional={
        "mode": MAYBE(st.sampled_from(["hard", "soft"])),
        "highestTierAllowed": MAYBE(SMALL_INT),
        "highestTierName": MAYBE(st.sampled_from(["leaf", "spine", "nope"])),
    },
)
tasks = st.lists(
    MAYBE(
        st.fixed_dictionaries(
            {"replicas": MAYBE(SMALL_INT)},
            optional={
                "name": MAYBE(st.sampled_from(["w", "ps", "W_1", ""])),
                "minAvailable": MAYBE(SMALL_INT),
                "partitionPolicy": MAYBE(
                    st.fixed_dictionaries(
                        {"totalPartitions": MAYBE(SMALL_INT), "partitionSize": MAYBE(SMALL_INT)},
                        optional={
                            "minPartitions": MAYBE(SMALL_INT),
                            "networkTopology": MAYBE(network_topology),
                        },
                    )
                ),
                "template": MAYBE(st.just({"spec": {"containers": [{"name": "c", "image": "x"}]}})),
            },
        )
    ),
    max_size=3,
)
jobs = st.fixed_dictionaries(
    {
        "apiVersion": st.just("batch.volcano.sh/v1alpha1"),
        "kind": st.just("Job"),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["train", "Bad_Job", ""]), "namespace": st.just("default")}
        ),
        "spec": MAYBE(
            st.fixed_dictionaries(
                {"tasks": MAYBE(tasks)},
                optional={
                    "minAvailable": MAYBE(SMALL_INT),
                    "networkTopology": MAYBE(network_topology),
                    "queue": MAYBE(st.text(max_size=4)),
                },
            )
        ),
    }
)
pods = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Pod"),
        "metadata": MAYBE(
            st.fixed_dictionaries(
                {},
                optional={
                    "labels": MAYBE(
                        st.dictionaries(
                            st.sampled_from(
                                ["volcano.sh/job-name", "volcano.sh/task-spec", "volcano.sh/partition-id"]
                            ),
                            st.text(max_size=4),
                        )
                    ),
                    "annotations": MAYBE(
                        st.dictionaries(
                            st.sampled_from(["volcano.sh/task-index", "volcano.sh/partition-size"]),
                            st.text(alphabet="0123-x", max_size=3),
                        )
                    ),
                },
            )
        ),
    }
)


def _valid_job(
    total: int, size: int, min_partitions: int, job_tier: int, part_tier: int, named: bool
) -> dict[str, Any]:
    pp: dict[str, Any] = {"totalPartitions": total, "partitionSize": size, "minPartitions": min_partitions}
    pp["networkTopology"] = {"highestTierName": "leaf"} if named else {"highestTierAllowed": part_tier}
    return job(
        tasks=[task("w", total * size, partitionPolicy=pp)], network_topology={"highestTierAllowed": job_tier}
    )


# Plausible objects, so the allowed path (and its patches) is exercised as much as refusals.
valid_hypernodes = st.builds(
    lambda name, tier, nodes: hypernode(name, tier, nodes=tuple(nodes)),
    st.sampled_from(["s0", "s2", "rack-a"]),
    st.integers(1, 4),
    st.lists(st.sampled_from(["n0", "n1", "n2"]), min_size=1, max_size=3, unique=True),
)
valid_jobs = st.builds(
    _valid_job,
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 1),
    st.integers(1, 3),
    st.integers(1, 3),
    st.booleans(),
)
objects = st.one_of(hypernodes, jobs, pods, JSON, valid_hypernodes, valid_jobs)
CTX = context_of(
    hypernode("s0", 1, nodes=("n0",), tier_name="leaf"),
    hypernode("s1", 2, children=("s0",), tier_name="spine"),
)


def _check_outcome(obj: Any, operation: str, old: Any) -> None:
    out = admit(obj, operation, old, CTX) if isinstance(obj, dict) else None
    if out is None:
        return
    assert out.allowed == (not out.messages)
    for m in out.messages + out.warnings:
        field, _, text = m.partition(": ")
        assert field and text.strip(), m
    assert jsonpatch.apply_patch(obj, out.patch) == out.object
    if out.allowed:
        # Defaults are stable: admitting the admitted object again changes nothing.
        again = admit(out.object, operation, old, CTX)
        assert again.allowed and again.object == out.object


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=objects, operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]), old=objects)
def test_admit_never_raises_and_every_refusal_names_a_field(obj, operation, old):
    _check_outcome(obj, operation, old if isinstance(old, dict) else None)


def _body_for(obj: Any, op: Any, uid: Any, old: Any) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": op, "object": obj, "oldObject": old},
        }
    ).encode()


bodies = st.one_of(
    st.binary(max_size=64),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.builds(
        _body_for,
        objects,
        st.sampled_from(["CREATE", "CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH", None]),
        st.one_of(st.just("uid-1"), st.just("uid-1"), st.just("uid-1"), JSON),
        st.one_of(st.none(), objects),
    ),
)


def _sent_uid(body: bytes) -> Any:
    try:
        return json.loads(body)["request"]["uid"]
    except (ValueError, TypeError, KeyError):
        return None


def _check_result(status: int, body: Any, request: bytes) -> None:
    assert status in (200, 400), status
    if status == 400:
        assert isinstance(body, str) and body
        return
    resp = body["response"]
    assert resp["uid"] == _sent_uid(request)
    if not resp["allowed"]:
        assert resp["status"]["message"] and resp["status"]["code"] == 403
    if "patch" in resp:
        assert isinstance(json.loads(base64.b64decode(resp["patch"])), list)


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(sorted(WEBHOOKS)), body=bodies)
def test_any_body_gets_200_or_400_from_the_review_handler(path, body):
    result = handle_review(path, body, CTX)
    _check_result(result.status, result.body, body)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(st.tuples(st.sampled_from(sorted(WEBHOOKS)), bodies), min_size=5, max_size=20))
def test_the_http_server_never_answers_5xx(batch):
    async def run() -> None:
        client = TestClient(TestServer(create_app(CTX)))
        await client.start_server()
        try:
            for path, body in batch:
                resp = await client.post(path, data=body)
                payload = await resp.json() if resp.content_type == "application/json" else await resp.text()
                _check_result(resp.status, payload, body)
        finally:
            await client.close()

    asyncio.run(run())
