"""Pods that claim GPUs through Dynamic Resource Allocation are placed where their claims can be
allocated, a gang gets its nodes and its devices in one decision, and a pod that cannot go
anywhere is told why in kube-scheduler's words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from hyperplace.api import HyperNode, PodGroup
from scheduler_plugin.cycle import SessionResult
from simulator.cli import app
from tests.scheduler.builders import hypernode, job_pods, node, pod, podgroup
from tests.scheduler.builders import schedule_verified as schedule

from .builders import (
    CLIQUE_LABEL,
    DRIVER,
    channel_class,
    channel_slice,
    channel_template,
    claim,
    claim_spec,
    device_class,
    dra_listing,
    gpu_slice,
    node_allocation,
    template,
    template_claims,
    uses_claim,
    uses_template,
)

RACK = "example.com/rack"


def gpu_racks(
    racks: int = 2, per_rack: int = 2, gpus: int = 4, clique_of_rack: bool = True
) -> tuple[list[dict[str, Any]], list[HyperNode], list[dict[str, Any]]]:
    """Nodes ``r<r>n<i>`` with ``gpus`` DRA GPUs each (one NVLink clique per rack), in tier-1
    HyperNodes under a tier-2 root; returns the nodes, the HyperNodes and the slices."""
    nodes, hns, slices = [], [], []
    for r in range(racks):
        members = [f"r{r}n{i}" for i in range(per_rack)]
        clique = f"clique-{r}" if clique_of_rack else None
        for m in members:
            nodes.append(
                node(m, cpu=16, labels={RACK: f"rack{r}", **({CLIQUE_LABEL: clique} if clique else {})})
            )
            slices.append(gpu_slice(m, gpus, clique=clique))
        hns.append(hypernode(f"rack{r}", 1, nodes=members))
    hns.append(hypernode("root", 2, children=[f"rack{r}" for r in range(racks)]))
    return nodes, hns, slices


def devices_of(result: SessionResult, claim_key: str) -> list[tuple[str, str]]:
    a = result.claims[claim_key].allocation
    return [(r.pool, r.device) for r in a.results]


def test_a_pod_claiming_a_gpu_gets_one_on_the_node_it_is_bound_to() -> None:
    nodes, hns, slices = gpu_racks(1, 2)
    p = pod("solo", None, cpu=1)
    spec = claim_spec(1)
    objs = template_claims([p], "one-gpu", spec)
    result = schedule(nodes, [p], dra_listing(device_class(), template("one-gpu", spec), *slices, *objs), hns)
    node_name = result.bindings["default/solo"]
    key = f"default/{objs[0]['metadata']['name']}"
    [(pool, device)] = devices_of(result, key)
    assert pool == node_name and device.startswith("gpu-")
    a = result.claims[key].allocation
    assert a.node_selector is not None  # the allocation pins the claim to the node, as Go writes it


def test_a_gang_gets_its_nodes_and_its_devices_in_one_decision_inside_one_clique() -> None:
    # Two racks, each an NVLink clique of 2 nodes x 4 GPUs; a gang of 4 pods of 2 GPUs each must
    # sit in one rack (tier 1): 8 GPUs, exactly one clique's.
    nodes, hns, slices = gpu_racks(2, 2, gpus=4)
    pods = job_pods("train", 4, cpu=1)
    spec = claim_spec(2, same=f"{DRIVER}/cliqueId")
    objs = template_claims(pods, "two-gpus", spec)
    pg = podgroup("train", 4, topology={"mode": "hard", "highestTierAllowed": 1})
    result = schedule(
        nodes, pods, dra_listing(device_class(), template("two-gpus", spec), *slices, *objs), hns, [pg]
    )
    assert len(result.bindings) == 4
    assert len({n[:2] for n in result.bindings.values()}) == 1  # one rack, one clique
    taken = [d for o in objs for d in devices_of(result, f"default/{o['metadata']['name']}")]
    assert len(taken) == len(set(taken)) == 8  # no device given twice
    for o, p in zip(objs, pods, strict=True):
        pools = {pool for pool, _ in devices_of(result, f"default/{o['metadata']['name']}")}
        assert pools == {result.bindings[f"default/{p['metadata']['name']}"]}


def test_devices_other_claims_hold_are_not_given_again() -> None:
    # r0n0's 4 GPUs are held by a running pod's claim: a 4-GPU pod must go to r0n1.
    nodes, hns, slices = gpu_racks(1, 2, gpus=4)
    running = pod("busy", None, cpu=1, node_name="r0n0")
    uses_claim(running, "held")
    held = claim(
        "held",
        claim_spec(4),
        allocation=node_allocation("r0n0", [f"gpu-{i}" for i in range(4)]),
        reserved_for=[{"resource": "pods", "name": "busy", "uid": running["metadata"]["uid"]}],
    )
    p = pod("new", None, cpu=1)
    spec = claim_spec(4)
    objs = template_claims([p], "four", spec)
    listing = dra_listing(device_class(), template("four", spec), *slices, held, *objs)
    result = schedule(nodes, [running, p], listing, hns)
    assert result.bindings == {"default/new": "r0n1"}


def test_two_pods_of_one_cycle_never_get_the_same_devices() -> None:
    # One node of 4 GPUs, two pods of 4 GPUs each, both admitted already: only one of them fits.
    nodes, hns, slices = gpu_racks(1, 1, gpus=4)
    a, b = pod("a", "a", cpu=1), pod("b", "b", cpu=1)
    groups = [
        PodGroup.model_validate({**podgroup(g, 1).model_dump(by_alias=True), "status": {"phase": "Inqueue"}})
        for g in ("a", "b")
    ]
    spec = claim_spec(4)
    objs = template_claims([a, b], "four", spec)
    listing = dra_listing(device_class(), template("four", spec), *slices, *objs)
    result = schedule(nodes, [a, b], listing, hns, groups)
    assert len(result.bindings) == 1
    left = "default/b" if "default/a" in result.bindings else "default/a"
    assert result.unschedulable[left].endswith("0/1 nodes are available: 1 cannot allocate all claims.")


def test_a_gang_that_cannot_have_all_its_devices_gets_none() -> None:
    # 3 pods of 4 GPUs, 2 nodes of 4 GPUs: all or nothing, so nothing is bound or allocated.
    nodes, hns, slices = gpu_racks(1, 2, gpus=4)
    pods = job_pods("big", 3, cpu=1)
    spec = claim_spec(4)
    objs = template_claims(pods, "four", spec)
    pg = podgroup("big", 3)
    result = schedule(
        nodes, pods, dra_listing(device_class(), template("four", spec), *slices, *objs), hns, [pg]
    )
    assert result.bindings == {}
    assert result.claims == {}


def test_a_pod_whose_claim_is_not_made_yet_waits_in_kube_schedulers_words() -> None:
    nodes, hns, slices = gpu_racks(1, 2)
    p = pod("early", None, cpu=1)
    uses_template(p, "one-gpu", made=False)
    result = schedule(
        nodes, [p], dra_listing(device_class(), template("one-gpu", claim_spec(1)), *slices), hns
    )
    assert result.bindings == {}
    assert result.unschedulable["default/early"].endswith(
        '0/2 nodes are available: pod "default/early": ResourceClaim not created yet.'
    )


def test_a_claim_made_for_another_pod_is_refused() -> None:
    nodes, hns, slices = gpu_racks(1, 1)
    p, other = pod("mine", None, cpu=1), pod("other", None, cpu=1, node_name="r0n0")
    name = uses_template(p, "one-gpu")
    stolen = claim(name, claim_spec(1), owner_pod=other)
    result = schedule(
        nodes, [p], dra_listing(device_class(), template("one-gpu", claim_spec(1)), *slices, stolen), hns
    )
    assert "(Pod is not owner)" in result.unschedulable["default/mine"]


def test_pods_sharing_one_claim_follow_the_devices_the_first_one_got() -> None:
    nodes, hns, slices = gpu_racks(1, 2)
    pods = job_pods("infer", 3, cpu=1)
    for p in pods:
        uses_claim(p, "shared-gpu")
    shared = claim("shared-gpu", claim_spec(1))
    pg = podgroup("infer", 3)
    result = schedule(nodes, pods, dra_listing(device_class(), *slices, shared), hns, [pg])
    assert len(result.bindings) == 3
    assert len(set(result.bindings.values())) == 1  # the claim's device is on one node
    [(pool, _)] = devices_of(result, "default/shared-gpu")
    assert set(result.bindings.values()) == {pool}


def test_an_allocated_claim_takes_its_pod_to_the_node_of_its_devices() -> None:
    nodes, hns, slices = gpu_racks(1, 2)
    p = pod("back", None, cpu=1)
    uses_claim(p, "kept")
    kept = claim("kept", claim_spec(1), allocation=node_allocation("r0n1", ["gpu-0"]))
    result = schedule(nodes, [p], dra_listing(device_class(), *slices, kept), hns)
    assert result.bindings == {"default/back": "r0n1"}
    assert result.claims == {}  # nothing to allocate: the binder only reserves it


def test_a_selector_no_device_matches_names_the_reason() -> None:
    nodes, hns, slices = gpu_racks(1, 2)
    p = pod("picky", None, cpu=1)
    spec = claim_spec(1, selectors=[f"device.attributes['{DRIVER}'].productName == 'NVIDIA H100'"])
    objs = template_claims([p], "h100", spec)
    result = schedule(nodes, [p], dra_listing(device_class(), template("h100", spec), *slices, *objs), hns)
    assert result.bindings == {}
    assert result.unschedulable["default/picky"].endswith(
        "0/2 nodes are available: 2 cannot allocate all claims."
    )


def test_a_missing_device_class_keeps_the_pod_waiting() -> None:
    nodes, hns, slices = gpu_racks(1, 1)
    p = pod("classless", None, cpu=1)
    spec = claim_spec(1, cls="no-such-class")
    objs = template_claims([p], "t", spec)
    result = schedule(nodes, [p], dra_listing(template("t", spec), *slices, *objs), hns)
    assert result.bindings == {}
    assert "device class no-such-class does not exist" in result.unschedulable["default/classless"]


def compute_domain_cluster(
    sizes: list[int], hypernodes: bool
) -> tuple[list[dict[str, Any]], list[HyperNode], list[dict[str, Any]]]:
    """NVLink cliques of ``sizes`` nodes (4 GPUs and an IMEX channel each), labelled with their
    clique; with ``hypernodes`` the cliques are tier-1 HyperNodes (the nvidia-clique preset)."""
    nodes, hns, slices = [], [], []
    for c, size in enumerate(sizes):
        members = [f"c{c}n{i}" for i in range(size)]
        for m in members:
            nodes.append(node(m, cpu=16, labels={CLIQUE_LABEL: f"clique-{c}"}))
            slices += [gpu_slice(m, 4, clique=f"clique-{c}"), channel_slice(m)]
        if hypernodes:
            hns.append(hypernode(f"nvl-{c}", 1, nodes=members))
    if hypernodes:
        hns.append(hypernode("root", 2, children=[f"nvl-{c}" for c in range(len(sizes))]))
    return nodes, hns, slices


def compute_domain_gang(
    name: str, replicas: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], PodGroup]:
    """A gang whose pods claim 4 GPUs and their ComputeDomain's channel (as NVIDIA's examples
    write them), with no network topology of its own; the claims made for each pod."""
    pods = job_pods(name, replicas, cpu=1)
    gpus, chan = claim_spec(4), channel_template(f"{name}-channel", f"uid-cd-{name}")
    objs: list[dict[str, Any]] = [template("four", gpus), chan]
    for p in pods:
        pn = p["metadata"]["name"]
        p["spec"]["resourceClaims"] = [
            {"name": "gpus", "resourceClaimTemplateName": "four"},
            {"name": "channel", "resourceClaimTemplateName": f"{name}-channel"},
        ]
        p["status"]["resourceClaimStatuses"] = [
            {"name": "gpus", "resourceClaimName": f"{pn}-gpus"},
            {"name": "channel", "resourceClaimName": f"{pn}-channel"},
        ]
        objs += [
            claim(f"{pn}-gpus", gpus, owner_pod=p),
            claim(f"{pn}-channel", chan["spec"]["spec"], owner_pod=p),
        ]
    return pods, objs, podgroup(name, replicas)


def test_a_compute_domains_pods_and_channels_land_in_one_nvlink_clique_all_or_nothing() -> None:
    for with_hypernodes in (True, False):
        # Cliques of 2 and 3 nodes: a 3-pod ComputeDomain fits only the second, whole.
        nodes, hns, slices = compute_domain_cluster([2, 3], with_hypernodes)
        pods, objs, pg = compute_domain_gang("imex", 3)
        listing = dra_listing(device_class(), channel_class(), *slices, *objs)
        result = schedule(nodes, pods, listing, hns, [pg])
        assert sorted(result.bindings.values()) == ["c1n0", "c1n1", "c1n2"], with_hypernodes
        channels = [devices_of(result, f"default/{p['metadata']['name']}-channel") for p in pods]
        assert sorted(pool for [(pool, _)] in channels) == ["c1n0", "c1n1", "c1n2"]


def test_a_compute_domain_no_clique_holds_waits_whole() -> None:
    nodes, hns, slices = compute_domain_cluster([2, 2], True)
    pods, objs, pg = compute_domain_gang("imex", 3)
    listing = dra_listing(device_class(), channel_class(), *slices, *objs)
    result = schedule(nodes, pods, listing, hns, [pg])
    assert result.bindings == {} and result.claims == {}


def test_two_compute_domains_share_a_clique_only_when_it_has_room() -> None:
    # One clique of 4 nodes: each node has one IMEX channel, so two 2-pod domains fit side by
    # side, and a third waits.
    nodes, hns, slices = compute_domain_cluster([4], True)
    objs_all: list[dict[str, Any]] = []
    pods_all: list[dict[str, Any]] = []
    pgs = []
    for name in ("a", "b", "c"):
        pods, objs, pg = compute_domain_gang(name, 2)
        pods_all += pods
        objs_all += [
            o
            for o in objs
            if o["metadata"]["name"] != "four" or not any(x["metadata"]["name"] == "four" for x in objs_all)
        ]
        pgs.append(pg)
    result = schedule(
        nodes, pods_all, dra_listing(device_class(), channel_class(), *slices, *objs_all), hns, pgs
    )
    placed = {k.split("/")[1].split("-")[0] for k in result.bindings}
    assert len(result.bindings) == 4 and len(placed) == 2


def test_the_compute_domain_example_runs_whole_in_the_clique_that_holds_it() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "compute-domain"
    res = CliRunner().invoke(app, ["simulate", str(example), "--output", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    nodes = {p["node"] for k, p in out["pods"].items() if k.startswith("default/mnnvl-")}
    assert nodes == {f"gb200-1-{i}" for i in range(4)}  # the 4-node clique, not split over both
    # The job view names the constraint the ComputeDomain gives the gang.
    table = CliRunner().invoke(app, ["simulate", str(example)], catch_exceptions=False).stdout
    assert "constraint: networkTopology hard, highest tier nvidia.com/gpu.clique" in table, table


def test_a_shared_claim_given_back_and_allocated_again_elsewhere_is_judged_by_its_new_devices() -> None:
    from scheduler_plugin.cache.storage import StorageState
    from scheduler_plugin.filters.dynamic_resources import DraState
    from scheduler_plugin.filters.nodes import node_static_from_dict
    from scheduler_plugin.filters.pod_constraints import compile_pod_constraints

    nodes, _hns, slices = gpu_racks(1, 2, gpus=1)
    st = StorageState()
    st.replace(dra_listing(device_class(), *slices, claim("shared-gpu", claim_spec(1))))
    statics = [node_static_from_dict(n) for n in nodes]
    state = DraState(st.dra_view(), statics, {"default/shared-gpu": 2})
    a, b = pod("a", None, cpu=1), pod("b", None, cpu=1)
    for p in (a, b):
        uses_claim(p, "shared-gpu")
    pa, pb = state.pod(compile_pod_constraints(a)), state.pod(compile_pod_constraints(b))
    state.take(pa, 0)  # the claim gets r0n0's GPU; b must follow it there
    assert state.reasons(pb, 1) == ("resourceclaim not available on the node",)
    state.give_back(pa, 0)
    state.take(pa, 1)  # undone, then allocated on r0n1: b follows it there now
    assert state.reasons(pb, 1) == ()
    assert state.reasons(pb, 0) == ("resourceclaim not available on the node",)


def test_a_selector_judges_each_generation_of_a_pool_by_its_own_device() -> None:
    # A pool moving to zone a publishes generation 2 (an 80 GiB gpu-0) there while its complete
    # generation 1 (a 16 GiB gpu-0 of the same name) still serves zone b. A claim for a 40 GiB
    # GPU fits only in zone a, whichever node is judged first.
    def pool_slice(name: str, zone: str, generation: int, memory: str) -> dict[str, Any]:
        s = gpu_slice("x", 1, memory=memory)
        s["metadata"]["name"] = name
        del s["spec"]["nodeName"]
        s["spec"]["pool"] = {"name": "moving", "generation": generation, "resourceSliceCount": 1}
        s["spec"]["nodeSelector"] = {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
                    ]
                }
            ]
        }
        return s

    zone = "topology.kubernetes.io/zone"
    nodes = [node("n0", cpu=4, labels={zone: "b"}), node("n1", cpu=4, labels={zone: "a"})]
    spec = claim_spec(
        1, selectors=["device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"]
    )
    p = pod("big", None, cpu=1)
    objs = template_claims([p], "big", spec)
    slices = [pool_slice("old", "b", 1, "16Gi"), pool_slice("new", "a", 2, "80Gi")]
    result = schedule(nodes, [p], dra_listing(device_class(), template("big", spec), *slices, *objs))
    assert result.bindings == {"default/big": "n1"}


def test_a_pod_asking_an_extended_resource_a_device_class_backs_is_told_to_claim_the_devices() -> None:
    # NVIDIA's chart gives its DeviceClass extendedResourceName nvidia.com/gpu (Kubernetes 1.37's
    # DRAExtendedResource). Here such a pod goes only where a device plugin publishes
    # nvidia.com/gpu, and the session's notes say so, naming the class.
    cls = device_class()
    cls["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    plugin_node = node("plugin", cpu=8, gpu=8)
    dra_node = node("dra", cpu=8)
    p = pod("asks-gpus", None, cpu=1, gpu=8)
    result = schedule([plugin_node, dra_node], [p], dra_listing(cls, gpu_slice("dra", 8)))
    assert result.bindings == {"default/asks-gpus": "plugin"}
    [note] = [n for n in result.notes if "extendedResourceName" in n]
    assert "DeviceClass gpu.nvidia.com" in note and "nvidia.com/gpu" in note
    # Without a pod asking it, no note.
    quiet = schedule(
        [plugin_node, dra_node], [pod("cpu-only", None, cpu=1)], dra_listing(cls, gpu_slice("dra", 8))
    )
    assert not [n for n in quiet.notes if "extendedResourceName" in n]
