"""Pods with ResourceClaims where kube-scheduler v1.37's DynamicResources filter and ours once
differed (found by the oracle, tests/oracle flag ``dra``, and the allocator's property test): the
words a pod is told when no node takes it, node by node, and the pools a node reaches."""

from __future__ import annotations

from typing import Any

from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.storage import StorageListing
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG
from scheduler_plugin.cycle import run_session
from tests.scheduler.builders import node, pod

from .builders import (
    DRIVER,
    claim,
    claim_spec,
    device_class,
    dra_listing,
    gpu_slice,
    node_allocation,
    uses_claim,
)


def why_not(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], listing: StorageListing, key: str
) -> str:
    """The text our scheduler gives the pod ``key`` that it could not place."""
    snap = build_snapshot(nodes=nodes, pods=pods, scheduler_names=("volcano",), storage=listing)
    result = run_session(snap, DEFAULT_CONFIG)
    assert key not in result.bindings, result.bindings
    return result.unschedulable[key]


def test_a_claim_that_cannot_be_allocated_is_the_reason_even_where_another_claim_is_not_available() -> None:
    # The pod's claim "kept" is allocated on n1; its claim "more" asks for 4 GPUs, which no node
    # has. kube-scheduler runs the allocator before it looks at the allocated claim's node, so
    # both nodes say "cannot allocate all claims", not n0 "resourceclaim not available".
    nodes = [node("n0", cpu=4), node("n1", cpu=4)]
    slices = [gpu_slice("n0", 2), gpu_slice("n1", 2)]
    kept = claim("kept", claim_spec(1), allocation=node_allocation("n1", ["gpu-0"]))
    more = claim("more", claim_spec(4))
    p = pod("both", None, cpu=1)
    uses_claim(p, "kept")
    p["spec"]["resourceClaims"].append({"name": "more", "resourceClaimName": "more"})
    text = why_not(nodes, [p], dra_listing(device_class(), *slices, kept, more), "default/both")
    assert "0/2 nodes are available: 2 cannot allocate all claims." in text, text
    assert "resourceclaim not available" not in text


def test_an_allocator_error_names_the_claim_by_namespace_and_name() -> None:
    # n0's pool says it has 2 slices and only 1 is published: a request for all GPUs cannot be
    # judged there. kube-scheduler's error names the claim "default/all-gpus" (klog.KObj), as
    # ours must (ours judged it under its position in the pod's claims).
    nodes = [node("n0", cpu=4)]
    incomplete = gpu_slice("n0", 2)
    incomplete["spec"]["pool"]["resourceSliceCount"] = 2
    spec = claim_spec(1)
    spec["devices"]["requests"][0]["exactly"] = {"deviceClassName": DRIVER, "allocationMode": "All"}
    every = claim("all-gpus", spec)
    p = pod("greedy", None, cpu=1)
    uses_claim(p, "all-gpus")
    text = why_not(nodes, [p], dra_listing(device_class(), incomplete, every), "default/greedy")
    assert (
        "claim default/all-gpus, request gpus: asks for all devices, but resource pool "
        "gpu.nvidia.com/n0 is currently being updated"
    ) in text, text


def test_a_node_keeps_the_devices_of_an_older_generation_that_no_newer_slice_replaces_there() -> None:
    # The driver is moving pool "shared" from zone a to zone b: generation 2's slice serves zone
    # b, generation 1's still serves zone a. kube-scheduler's GatherPools keeps the slices that
    # reach a node at the newest generation among them, complete as they are: n0 in zone a
    # still gets generation 1's GPU (ours dropped the pool there as obsolete).
    zone = "topology.kubernetes.io/zone"
    nodes = [node("n0", cpu=4, labels={zone: "a"}), node("n1", cpu=4, labels={zone: "b"})]
    slices = []
    for generation, z in ((1, "a"), (2, "b")):
        s = gpu_slice("n0", 1)
        s["metadata"]["name"] = f"shared-gen{generation}"
        del s["spec"]["nodeName"]
        s["spec"]["nodeSelector"] = {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": zone, "operator": "In", "values": [z]}]}]
        }
        s["spec"]["pool"] = {"name": "shared", "generation": generation, "resourceSliceCount": 1}
        slices.append(s)
    p = pod("old-zone", None, cpu=1)
    p["spec"]["nodeSelector"] = {zone: "a"}
    uses_claim(p, "one")
    listing = dra_listing(device_class(), *slices, claim("one", claim_spec(1)))
    snap = build_snapshot(nodes=nodes, pods=[p], scheduler_names=("volcano",), storage=listing)
    result = run_session(snap, DEFAULT_CONFIG)
    assert result.bindings == {"default/old-zone": "n0"}, result.unschedulable
    [r] = result.claims["default/one"].allocation.results
    assert (r.pool, r.device) == ("shared", "gpu-0")
