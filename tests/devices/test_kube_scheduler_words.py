"""What a pod with ResourceClaims is told when no node takes it, node by node as kube-scheduler
v1.37's DynamicResources filter says it: differences the oracle (tests/oracle, flag ``dra``)
found between its words and ours."""

from __future__ import annotations

from typing import Any

from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.storage import StorageListing
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG
from scheduler_plugin.cycle import run_session
from tests.scheduler.builders import node, pod

from .builders import DRIVER, claim, claim_spec, device_class, dra_listing, gpu_slice, node_allocation, uses_claim


def why_not(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], listing: StorageListing, key: str) -> str:
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
    assert text.endswith("0/2 nodes are available: 2 cannot allocate all claims."), text


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
