"""Stories of the structured allocator: a pod's claims get their devices on a node as
kube-scheduler v1.37 allocates them, or the node is refused in its words."""

from __future__ import annotations

from typing import Any

from scheduler_plugin.filters.dra import AllocationInfo, ResultInfo
from scheduler_plugin.filters.dra_allocator import (
    Allocated,
    allocate,
    allocation_fits,
    allocation_to_wire,
)

from .builders import (
    DRIVER,
    dev,
    device_class,
    exactly,
    gpus,
    labels_selector,
    node,
    rslice,
    spec,
    world,
)

N1 = node("n1", rack="r1")
N2 = node("n2", rack="r2")
GPU = device_class("gpu", f"device.driver == '{DRIVER}'")


def ok(got: Allocated | str) -> Allocated:
    assert not isinstance(got, str), got
    return got


def devices_of(got: Allocated, i: int = 0) -> list[str]:
    return [r.device for r in got.claims[i].allocation.results]


def test_a_claim_for_two_gpus_takes_the_first_two_free_ones_of_its_node() -> None:
    objs = world([GPU], [rslice("n1-gpus", gpus(4), node_name="n1")])
    got = ok(allocate([("default/c", spec(exactly(count=2)))], N1, objs, set()))
    assert devices_of(got) == ["gpu-0", "gpu-1"]
    assert got.devices == {(DRIVER, "n1", "gpu-0"), (DRIVER, "n1", "gpu-1")}
    alloc = got.claims[0].allocation
    assert allocation_to_wire(alloc) == {
        "devices": {
            "results": [
                {"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "gpu-0"},
                {"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "gpu-1"},
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]
        },
    }
    assert allocation_fits(alloc, N1) and not allocation_fits(alloc, N2)


def test_a_node_without_enough_free_gpus_cannot_allocate_all_claims() -> None:
    objs = world([GPU], [rslice("n1-gpus", gpus(4), node_name="n1")])
    held = {(DRIVER, "n1", "gpu-0"), (DRIVER, "n1", "gpu-3")}
    assert allocate([("c", spec(exactly(count=3)))], N1, objs, held) == "cannot allocate all claims"
    got = ok(allocate([("c", spec(exactly(count=2)))], N1, objs, held))
    assert devices_of(got) == ["gpu-1", "gpu-2"]
    assert allocate([("c", spec(exactly(count=1)))], N2, objs, set()) == "cannot allocate all claims"


def test_devices_allocated_to_other_claims_are_in_use() -> None:
    other = {
        "metadata": {"namespace": "default", "name": "other"},
        "spec": {"devices": {"requests": [exactly()]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
                }
            }
        },
    }
    objs = world([GPU], [rslice("n1-gpus", gpus(2), node_name="n1")], [other])
    assert objs.allocated() == {(DRIVER, "n1", "gpu-0")}
    got = ok(allocate([("c", spec(exactly()))], N1, objs, objs.allocated()))
    assert devices_of(got) == ["gpu-1"]


def test_a_pods_claims_on_one_node_do_not_share_devices() -> None:
    objs = world([GPU], [rslice("n1-gpus", gpus(3), node_name="n1")])
    a, b = spec(exactly(count=2)), spec(exactly(count=1))
    got = ok(allocate([("a", a), ("b", b)], N1, objs, set()))
    assert devices_of(got, 0) == ["gpu-0", "gpu-1"] and devices_of(got, 1) == ["gpu-2"]
    assert len(got.devices) == 3
    assert allocate([("a", a), ("b", a)], N1, objs, set()) == "cannot allocate all claims"


def test_all_mode_takes_every_matching_device_and_needs_one() -> None:
    objs = world([GPU], [rslice("n1-gpus", [*gpus(3), dev("nic", {"kind": "nic"})], node_name="n1")])
    want = spec(
        exactly(mode="All"),
        exactly("x", 1, "gpu", "device.attributes['gpu.example.com'].index == 99"),
    )
    assert allocate([("c", want)], N1, objs, set()) == "cannot allocate all claims"
    got = ok(allocate([("c", spec(exactly(mode="All")))], N1, objs, set()))
    assert devices_of(got) == ["gpu-0", "gpu-1", "gpu-2", "nic"]
    only_gpus = spec(exactly("g", 0, "gpu", "has(device.attributes['gpu.example.com'].index)", mode="All"))
    assert devices_of(ok(allocate([("c", only_gpus)], N1, objs, set()))) == ["gpu-0", "gpu-1", "gpu-2"]
    # A device of the class in use makes "All" impossible on this node.
    assert allocate([("c", only_gpus)], N1, objs, {(DRIVER, "n1", "gpu-1")}) == "cannot allocate all claims"


def test_admin_access_takes_a_device_in_use_and_holds_none() -> None:
    objs = world([GPU], [rslice("n1-gpus", gpus(1), node_name="n1")])
    held = {(DRIVER, "n1", "gpu-0")}
    got = ok(allocate([("monitor", spec(exactly(admin=True)))], N1, objs, held))
    assert got.claims[0].allocation.results == (ResultInfo("gpus", DRIVER, "n1", "gpu-0", admin_access=True),)
    assert got.devices == frozenset()
    wire = allocation_to_wire(got.claims[0].allocation)
    assert wire["devices"]["results"][0]["adminAccess"] is True
    # An allocated admin claim holds nothing either.
    claim = {
        "metadata": {"namespace": "default", "name": "m"},
        "spec": {"devices": {"requests": [exactly(admin=True)]}},
        "status": {"allocation": wire},
    }
    assert world([GPU], [], [claim]).allocated() == frozenset()


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    objs = world(
        [GPU],
        [
            rslice(
                "n1-gpus",
                [dev("big", {"mem": 80}), dev("small-0", {"mem": 40}), dev("small-1", {"mem": 40})],
                node_name="n1",
            )
        ],
    )
    big = {
        "name": "big",
        "deviceClassName": "gpu",
        "count": 2,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].mem == 80"}}],
    }
    small = {
        "name": "small",
        "deviceClassName": "gpu",
        "count": 2,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].mem == 40"}}],
    }
    want = spec({"name": "gpu", "firstAvailable": [big, small]})
    got = ok(allocate([("c", want)], N1, objs, set()))
    assert [(r.request, r.device) for r in got.claims[0].allocation.results] == [
        ("gpu/small", "small-0"),
        ("gpu/small", "small-1"),
    ]
    assert allocate([("c", want)], N1, objs, {(DRIVER, "n1", "small-0")}) == "cannot allocate all claims"


def test_match_attribute_keeps_a_claims_gpus_in_one_clique() -> None:
    devs = [dev(f"gpu-{i}", {"clique": c}) for i, c in enumerate("aabbb")]
    objs = world([GPU], [rslice("n1-gpus", devs, node_name="n1")])
    same = [{"matchAttribute": f"{DRIVER}/clique"}]
    got = ok(allocate([("c", spec(exactly(count=3), constraints=same))], N1, objs, set()))
    assert devices_of(got) == ["gpu-2", "gpu-3", "gpu-4"]  # backtracked off clique a
    got = ok(allocate([("c", spec(exactly(count=2), constraints=same))], N1, objs, {(DRIVER, "n1", "gpu-0")}))
    assert devices_of(got) == ["gpu-2", "gpu-3"]
    assert (
        allocate([("c", spec(exactly(count=4), constraints=same))], N1, objs, set())
        == "cannot allocate all claims"
    )


def test_match_attribute_over_named_requests_only_binds_those() -> None:
    devs = [dev("a0", {"clique": "a"}), dev("b0", {"clique": "b"}), dev("b1", {"clique": "b"})]
    objs = world([GPU], [rslice("n1-gpus", devs, node_name="n1")])
    want = spec(
        exactly("x"),
        exactly("y"),
        exactly("z"),
        constraints=[{"requests": ["y", "z"], "matchAttribute": f"{DRIVER}/clique"}],
    )
    got = ok(allocate([("c", want)], N1, objs, set()))
    assert devices_of(got) == ["a0", "b0", "b1"]


def test_a_device_without_the_matched_attribute_is_not_taken() -> None:
    objs = world([GPU], [rslice("n1-gpus", [dev("plain"), dev("tagged", {"clique": "a"})], node_name="n1")])
    want = spec(exactly(), constraints=[{"matchAttribute": f"{DRIVER}/clique"}])
    assert devices_of(ok(allocate([("c", want)], N1, objs, set()))) == ["tagged"]


def test_configuration_comes_from_the_class_then_the_claim() -> None:
    opaque = {"opaque": {"driver": DRIVER, "parameters": {"sharing": "timeSlicing"}}}
    cls = device_class("gpu", f"device.driver == '{DRIVER}'", config=[opaque])
    objs = world([cls], [rslice("n1-gpus", gpus(2), node_name="n1")])
    claim_conf = {"requests": ["a"], "opaque": {"driver": DRIVER, "parameters": {"mps": True}}}
    got = ok(allocate([("c", spec(exactly("a"), exactly("b"), config=[claim_conf]))], N1, objs, set()))
    assert allocation_to_wire(got.claims[0].allocation)["devices"]["config"] == [
        {"source": "FromClass", **opaque},  # every request: no requests named
        {"source": "FromClaim", "requests": ["a"], **{"opaque": claim_conf["opaque"]}},
    ]


def slice_world(**where: Any) -> Any:
    return world([GPU], [rslice("shared", gpus(2), pool="shared", **where)])


def test_a_slice_for_all_nodes_serves_every_node_with_no_node_selector() -> None:
    got = ok(allocate([("c", spec(exactly()))], N2, slice_world(all_nodes=True), set()))
    assert got.claims[0].allocation.node_selector is None
    assert allocation_fits(got.claims[0].allocation, N1)


def test_a_slice_with_a_node_selector_serves_its_nodes_and_pins_the_claim_to_them() -> None:
    objs = slice_world(selector=labels_selector("rack", "r1"))
    assert allocate([("c", spec(exactly()))], N2, objs, set()) == "cannot allocate all claims"
    got = ok(allocate([("c", spec(exactly()))], N1, objs, set()))
    assert allocation_to_wire(got.claims[0].allocation)["nodeSelector"] == labels_selector("rack", "r1")
    assert allocation_fits(got.claims[0].allocation, node("n3", rack="r1"))
    assert not allocation_fits(got.claims[0].allocation, N2)


def test_a_node_selector_by_field_serves_the_named_node() -> None:
    sel = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]
    }
    objs = slice_world(selector=sel)
    assert allocate([("c", spec(exactly()))], N1, objs, set()) == "cannot allocate all claims"
    ok(allocate([("c", spec(exactly()))], N2, objs, set()))


def test_a_node_selector_of_two_terms_cannot_be_written_into_the_allocation() -> None:
    sel = {
        "nodeSelectorTerms": [
            labels_selector("rack", "r1")["nodeSelectorTerms"][0],
            labels_selector("rack", "r2")["nodeSelectorTerms"][0],
        ]
    }
    got = allocate([("c", spec(exactly()))], N1, slice_world(selector=sel), set())
    assert got == "create NodeSelector for claim c: unsupported ResourceSlice.NodeSelector with 2 terms"


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = rslice("old", [dev("gpu-old")], node_name="n1", pool="p", generation=1)
    new = rslice("new", [dev("gpu-new")], node_name="n1", pool="p", generation=2)
    objs = world([GPU], [old, new])
    assert devices_of(ok(allocate([("c", spec(exactly()))], N1, objs, set()))) == ["gpu-new"]


def test_an_incomplete_pool_is_not_allocated_from() -> None:
    part = rslice("part-1", gpus(2), node_name="n1", pool="p", count=2)
    objs = world([GPU], [part])
    assert allocate([("c", spec(exactly()))], N1, objs, set()) == "cannot allocate all claims"
    got = allocate([("c", spec(exactly(mode="All")))], N1, objs, set())
    assert (
        got
        == f"claim c, request gpus: asks for all devices, but resource pool {DRIVER}/p is currently being updated"
    )
    whole = world([GPU], [part, rslice("part-2", [dev("gpu-9")], node_name="n1", pool="p", count=2)])
    assert devices_of(ok(allocate([("c", spec(exactly(count=3)))], N1, whole, set()))) == [
        "gpu-0",
        "gpu-1",
        "gpu-9",
    ]


def test_a_pool_with_a_device_named_twice_is_invalid() -> None:
    objs = world(
        [GPU],
        [
            rslice("a", gpus(1), node_name="n1", pool="p", count=2),
            rslice("b", gpus(1), node_name="n1", pool="p", count=2),
        ],
    )
    assert allocate([("c", spec(exactly()))], N1, objs, set()) == "invalid resource pools were encountered"


def test_a_missing_device_class_refuses_in_kube_schedulers_words() -> None:
    objs = world([], [rslice("n1-gpus", gpus(1), node_name="n1")])
    assert allocate([("default/c", spec(exactly()))], N1, objs, set()) == (
        'claim default/c, request gpus: could not retrieve device class gpu: deviceclass.resource.k8s.io "gpu" not found'
    )


def test_a_selector_failing_on_a_device_fails_the_allocation_with_the_runtime_error() -> None:
    cls = device_class("gpu", f"device.attributes['{DRIVER}'].model == 'A100'")
    objs = world([cls], [rslice("n1-gpus", gpus(1), node_name="n1")])
    got = allocate([("c", spec(exactly()))], N1, objs, set())
    assert isinstance(got, str)
    assert got.startswith(
        f"class gpu: selector #0 on device {DRIVER}/n1/gpu-0: CEL runtime error: no such key: model"
    )


def test_more_than_32_devices_for_a_claim_exceed_the_limit() -> None:
    objs = world([GPU], [rslice("n1-gpus", gpus(40), node_name="n1")])
    got = allocate([("c", spec(exactly(count=33)))], N1, objs, set())
    assert (
        got
        == "claim c, request gpus: adding 33 devices exceeds the claim limit of 32, with 0 already accounted for"
    )


def test_an_allocation_without_a_node_selector_fits_everywhere() -> None:
    assert allocation_fits(AllocationInfo(()), N1)


def test_a_pool_spread_over_nodes_is_whole_when_all_its_slices_are_published() -> None:
    a = rslice("a", [dev("on-n1")], node_name="n1", pool="p", count=2)
    b = rslice("b", [dev("on-n2")], node_name="n2", pool="p", count=2)
    assert devices_of(ok(allocate([("c", spec(exactly()))], N1, world([GPU], [a, b]), set()))) == ["on-n1"]
    # While a newer generation is being published elsewhere, the older one is not used.
    newer = rslice("b", [dev("on-n2")], node_name="n2", pool="p", count=2, generation=2)
    assert (
        allocate([("c", spec(exactly()))], N1, world([GPU], [a, newer]), set())
        == "cannot allocate all claims"
    )


def test_a_tainted_device_is_given_only_to_a_request_that_tolerates_it() -> None:
    tainted = dev("gpu-0")
    tainted["taints"] = [{"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}]
    ignored = dev("gpu-1")
    ignored["taints"] = [{"key": "example.com/note", "effect": "None"}]
    objs = world([GPU], [rslice("n1-gpus", [tainted, ignored], node_name="n1")])
    assert devices_of(ok(allocate([("c", spec(exactly()))], N1, objs, set()))) == ["gpu-1"]
    assert allocate([("c", spec(exactly(count=2)))], N1, objs, set()) == "cannot allocate all claims"
    assert allocate([("c", spec(exactly(mode="All")))], N1, objs, set()) == "cannot allocate all claims"
    tolerant = exactly(count=2)
    tolerant["exactly"]["tolerations"] = [{"key": "example.com/unhealthy", "operator": "Exists"}]
    got = ok(allocate([("c", spec(tolerant))], N1, objs, set()))
    assert devices_of(got) == ["gpu-0", "gpu-1"]
    # Go copies the request's tolerations into each result.
    result = allocation_to_wire(got.claims[0].allocation)["devices"]["results"][0]
    assert result["tolerations"] == [{"key": "example.com/unhealthy", "operator": "Exists"}]
    wrong_value = exactly()
    wrong_value["exactly"]["tolerations"] = [{"key": "example.com/unhealthy", "value": "other"}]
    assert allocate([("c", spec(wrong_value, exactly("b")))], N1, objs, set()) == "cannot allocate all claims"
