"""Stories of reading DRA objects: slices, claims, templates and a pod's claims are read once
into records, and what cannot be read is named by its field."""

from __future__ import annotations

from typing import Any

from scheduler_plugin.filters.dra import (
    NO_CLAIMS,
    PodClaimRef,
    Version,
    compile_pod_claims,
    parse_claim,
    parse_claim_spec,
    parse_claim_template,
    parse_slice,
)

from .builders import DRIVER, dev, exactly, rslice


def pod(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None, name: str = "p"
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}"},
        "spec": {"resourceClaims": claims},
        "status": {"resourceClaimStatuses": statuses or []},
    }


def test_a_slice_is_read_with_typed_attributes_and_capacity_in_milli_units() -> None:
    s = parse_slice(
        rslice(
            "n1-gpus",
            [dev("gpu-0", {"model": "A100", "index": 0, "ok": True, "fw": "v1.2.3"}, {"memory": "1Gi"})],
            node_name="n1",
        )
    )
    assert s.bad is None and (s.driver, s.pool, s.node_name, s.slice_count) == (DRIVER, "n1", "n1", 1)
    d = s.devices[0]
    assert d.id == (DRIVER, "n1", "gpu-0")
    assert d.attributes[f"{DRIVER}/model"] == "A100" and d.attributes[f"{DRIVER}/ok"] is True
    assert d.attributes[f"{DRIVER}/fw"] == Version("1.2.3")
    assert d.capacity == {f"{DRIVER}/memory": 1024**3 * 1000}


def test_a_slice_with_a_bad_version_names_the_attribute() -> None:
    bad = rslice("s", [{"name": "d", "attributes": {"fw": {"version": "1.2"}}}], node_name="n1")
    assert (
        parse_slice(bad).bad
        == "resourceslice s: spec.devices[0].attributes[fw]: version: '1.2' is not a semantic version"
    )


def test_a_slice_with_a_bad_quantity_names_the_capacity() -> None:
    bad = rslice("s", [{"name": "d", "capacity": {"memory": {"value": "lots"}}}], node_name="n1")
    got = parse_slice(bad).bad
    assert got is not None and got.startswith("resourceslice s: spec.devices[0].capacity[memory].value: ")


def test_claims_of_one_template_have_equal_hashable_specs() -> None:
    a = parse_claim_spec({"devices": {"requests": [exactly(count=2)]}}, "a")
    b = parse_claim_spec({"devices": {"requests": [exactly(count=2)]}}, "b")
    assert a == b and hash(a.signature) == hash(b.signature)
    assert a != parse_claim_spec({"devices": {"requests": [exactly(count=3)]}}, "a")


def test_a_request_of_no_known_kind_is_bad() -> None:
    got = parse_claim_spec({"devices": {"requests": [{"name": "x"}]}}, "resourceclaim ml/c")
    assert got.bad is not None and "request x" in got.bad


def test_a_zero_count_is_bad_and_names_the_field() -> None:
    got = parse_claim_spec({"devices": {"requests": [exactly(count=0)]}}, "resourceclaim ml/c")
    assert got.bad == "resourceclaim ml/c: spec.devices.requests[0].exactly.count: must be a positive integer"


def test_first_available_subrequests_are_named_request_slash_subrequest() -> None:
    got = parse_claim_spec(
        {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "g"},
                            {"name": "small", "deviceClassName": "g", "count": 2},
                        ],
                    }
                ]
            }
        },
        "c",
    )
    assert [a.name for a in got.requests[0].alternatives] == ["gpu/big", "gpu/small"]
    assert got.requests[0].alternatives[1].count == 2


def test_a_claim_is_read_with_its_allocation_consumers_and_owning_pod() -> None:
    claim = parse_claim(
        {
            "metadata": {
                "namespace": "ml",
                "name": "p-gpus",
                "uid": "u1",
                "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}],
            },
            "spec": {"devices": {"requests": [exactly()]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                        ]
                    },
                },
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}],
            },
        }
    )
    assert claim.key == "ml/p-gpus" and claim.owner_pod_uid == "uid-p" and not claim.deleting
    assert claim.allocation is not None and claim.allocation.results[0].device == "gpu-0"
    assert claim.reserved_for == (("pods", "p", "uid-p"),)


def test_a_template_carries_the_spec_of_its_claims() -> None:
    t = parse_claim_template(
        {
            "metadata": {"namespace": "ml", "name": "gpus"},
            "spec": {"spec": {"devices": {"requests": [exactly(count=8)]}}},
        }
    )
    assert t.bad is None and t.spec.requests[0].alternatives[0].count == 8


def test_a_pod_names_its_claims_directly_or_through_templates() -> None:
    claims = compile_pod_claims(
        pod(
            [
                {"name": "shared", "resourceClaimName": "team-gpus"},
                {"name": "mine", "resourceClaimTemplateName": "gpus"},
                {"name": "later", "resourceClaimTemplateName": "gpus"},
                {"name": "none", "resourceClaimTemplateName": "gpus"},
            ],
            [{"name": "mine", "resourceClaimName": "p-mine-x7"}, {"name": "none"}],
        )
    )
    assert claims.bad is None
    assert claims.refs == (
        PodClaimRef("shared", "team-gpus"),
        PodClaimRef("mine", "p-mine-x7", "gpus"),
        PodClaimRef("later", None, "gpus"),
        PodClaimRef("none", None, "gpus", no_claim=True),
    )
    assert claims.key(claims.refs[1]) == "ml/p-mine-x7"


def test_pods_of_one_template_share_a_signature() -> None:
    def made(name: str) -> Any:
        return compile_pod_claims(
            pod(
                [{"name": "g", "resourceClaimTemplateName": "gpus"}],
                [{"name": "g", "resourceClaimName": f"{name}-g"}],
                name,
            )
        )

    assert made("a").signature == made("b").signature
    waiting = compile_pod_claims(pod([{"name": "g", "resourceClaimTemplateName": "gpus"}], name="c"))
    assert waiting.signature != made("a").signature


def test_a_pod_claim_naming_both_or_neither_source_is_bad() -> None:
    both = compile_pod_claims(
        pod([{"name": "g", "resourceClaimName": "x", "resourceClaimTemplateName": "t"}])
    )
    assert both.bad is not None and "spec.resourceClaims[0]" in both.bad
    neither = compile_pod_claims(pod([{"name": "ok", "resourceClaimName": "x"}, {"name": "g"}]))
    assert neither.bad is not None and "spec.resourceClaims[1]" in neither.bad


def test_a_pod_without_claims_has_none() -> None:
    assert compile_pod_claims({"metadata": {"name": "p"}, "spec": {}}) is NO_CLAIMS
