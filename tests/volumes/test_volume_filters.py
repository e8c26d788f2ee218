"""Pods with claims are placed where kube-scheduler's volume filters would let them go
(VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone), and a pod that cannot go
anywhere is told why in kube-scheduler's words."""

from __future__ import annotations

from typing import Any

from hyperplace.api import HyperNode, PodGroup
from scheduler_plugin.filters.volume_binding import Decision
from tests.scheduler.builders import hypernode, job_pods, node, pod, podgroup
from tests.scheduler.builders import schedule_verified as schedule

from .builders import (
    capacity,
    claim,
    csidriver,
    csinode,
    listing,
    mounts,
    storage_class,
    volume,
)

RACK = "example.com/rack"


def racks(n_racks: int = 2, per_rack: int = 2, cpu: int = 4) -> tuple[list[dict[str, Any]], list[HyperNode]]:
    """Nodes ``r<r>n<i>`` labelled with their rack, in tier-1 HyperNodes under a tier-2 root."""
    nodes, hns = [], []
    for r in range(n_racks):
        members = [f"r{r}n{i}" for i in range(per_rack)]
        nodes += [node(m, cpu=cpu, labels={RACK: f"rack{r}"}) for m in members]
        hns.append(hypernode(f"rack{r}", 1, nodes=members))
    hns.append(hypernode("root", 2, children=[f"rack{r}" for r in range(n_racks)]))
    return nodes, hns


def gang(
    name: str, replicas: int, spec: dict[str, Any] | None = None, tier: int | None = None, cpu: int = 1
) -> tuple[list[dict[str, Any]], PodGroup]:
    topology = {"mode": "hard", "highestTierAllowed": tier} if tier else None
    return job_pods(name, replicas, cpu=cpu, extra_spec=spec or {}), podgroup(
        name, replicas, topology=topology
    )


def test_a_gang_sharing_a_bound_dataset_goes_where_its_volume_is() -> None:
    nodes, hns = racks()
    pods, pg = gang("train", 4, mounts("dataset"))
    storage = listing(
        storage_class("local"),
        claim("dataset", modes=("ReadOnlyMany",), volume="ds-rack1", bound=True),
        volume("ds-rack1", modes=("ReadOnlyMany",), on={RACK: ["rack1"]}, claim_ref=("default", "dataset")),
    )
    result = schedule(nodes, pods, storage, hns, [pg])
    assert len(result.bindings) == 4
    assert {n[:2] for n in result.bindings.values()} == {"r1"}
    assert result.volumes == {}  # a bound claim needs no write


def test_a_bound_volume_no_node_can_reach_keeps_the_gang_waiting_in_kube_schedulers_words() -> None:
    nodes, hns = racks()
    pods, pg = gang("train", 2, mounts("dataset"))
    storage = listing(
        storage_class("local"),
        claim("dataset", volume="ds-gone-rack", bound=True),
        volume("ds-gone-rack", on={RACK: ["rack9"]}, claim_ref=("default", "dataset")),
    )
    result = schedule(nodes, pods, storage, hns, [pg])
    assert result.bindings == {}
    why = result.unschedulable["default/train-t0-0"]
    assert "0/4 nodes are available: 4 node(s) didn't match PersistentVolume's node affinity." in why


def test_each_claim_of_a_statefulset_style_gang_gets_its_own_smallest_fitting_local_volume() -> None:
    nodes, hns = racks(1, 2)
    pods = [pod(f"w-{i}", "w", cpu=1, extra_spec=mounts(f"data-w-{i}"), index=i) for i in range(3)]
    pg = podgroup("w", 3)
    storage = listing(
        storage_class("local"),
        *(claim(f"data-w-{i}", size="10Gi") for i in range(3)),
        # r0n0: a volume too small, a snug one and a roomy one; r0n1: one roomy volume.
        volume("small-r0n0", size="5Gi", on={"kubernetes.io/hostname": ["r0n0"]}),
        volume("snug-r0n0", size="10Gi", on={"kubernetes.io/hostname": ["r0n0"]}),
        volume("big-r0n0", size="100Gi", on={"kubernetes.io/hostname": ["r0n0"]}),
        volume("big-r0n1", size="100Gi", on={"kubernetes.io/hostname": ["r0n1"]}),
    )
    result = schedule(nodes, pods, storage, hns, [pg])
    assert len(result.bindings) == 3
    chosen = {d.claim: d.volume for d in result.volumes.values()}
    assert sorted(chosen.values()) == ["big-r0n0", "big-r0n1", "snug-r0n0"]  # never the 5Gi one
    for i in range(3):
        vol = chosen[f"default/data-w-{i}"]
        assert vol is not None and vol.endswith(result.bindings[f"default/w-{i}"])  # on its pod's node
    # Three volumes of 10Gi or more on two nodes: a fourth claim would have nowhere to go.
    first = next(i for i in range(3) if chosen[f"default/data-w-{i}"] == "snug-r0n0")
    assert chosen[f"default/data-w-{first}"] == "snug-r0n0"  # the smallest that fits comes first


def test_a_claim_with_no_volume_left_waits_with_kube_schedulers_reason() -> None:
    nodes, _ = racks(1, 2)
    pods = [pod("solo", None, extra_spec=mounts("data"))]
    storage = listing(
        storage_class("local"),
        claim("data", size="50Gi"),
        volume("small", size="10Gi", on={"kubernetes.io/hostname": ["r0n0"]}),
    )
    result = schedule(nodes, pods, storage)
    assert result.bindings == {}
    assert (
        "2 node(s) didn't find available persistent volumes to bind" in result.unschedulable["default/solo"]
    )


def test_pods_sharing_an_unbound_claim_follow_the_volume_the_first_one_took() -> None:
    nodes, hns = racks()
    pods, pg = gang("train", 3, mounts("dataset"), tier=2)
    storage = listing(
        storage_class("local"),
        claim("dataset", modes=("ReadWriteMany",)),
        # A dataset cache in each rack; the pods must all use the one the claim gets.
        volume("cache-rack0", modes=("ReadWriteMany",), on={RACK: ["rack0"]}),
        volume("cache-rack1", modes=("ReadWriteMany",), on={RACK: ["rack1"]}),
    )
    result = schedule(nodes, pods, storage, hns, [pg])
    assert len(result.bindings) == 3
    took = result.volumes["default/dataset"].volume
    assert took in ("cache-rack0", "cache-rack1")
    assert {n[:2] for n in result.bindings.values()} == {"r" + took[-1]}  # the rack of that volume


def test_an_unbound_immediate_claim_keeps_the_pod_waiting() -> None:
    nodes, _ = racks(1, 2)
    pods = [pod("solo", None, extra_spec=mounts("data"))]
    storage = listing(
        storage_class("fast", mode="Immediate", provisioner="csi.example.com"), claim("data", cls="fast")
    )
    result = schedule(nodes, pods, storage)
    assert result.bindings == {}
    why = result.unschedulable["default/solo"]
    assert why.endswith("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
    # The tier's shortfall names the PreFilter's refusal too, not room.
    assert "fits 0 of 1 pods, pod has unbound immediate PersistentVolumeClaims" in why


def test_a_missing_claim_is_named() -> None:
    nodes, _ = racks(1, 2)
    pods = [pod("solo", None, extra_spec=mounts("nope"))]
    result = schedule(nodes, pods, listing(storage_class("local")))
    assert result.bindings == {}
    assert (
        '0/2 nodes are available: persistentvolumeclaim "nope" not found.'
        in result.unschedulable["default/solo"]
    )


def test_an_ephemeral_volume_waits_for_its_claim_to_be_made() -> None:
    nodes, _ = racks(1, 2)
    pods = [pod("solo", None, extra_spec=mounts(ephemeral=("scratch",)))]
    result = schedule(nodes, pods, listing(storage_class("local")))
    assert (
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "solo-scratch"'
        in result.unschedulable["default/solo"]
    )


def test_a_read_write_once_pod_claim_in_use_keeps_another_pod_off_every_node() -> None:
    nodes, _ = racks(1, 2)
    running = pod("holder", None, node_name="r0n0", extra_spec=mounts("exclusive"))
    waiting = pod("second", None, extra_spec=mounts("exclusive"))
    storage = listing(
        storage_class("local"),
        claim("exclusive", modes=("ReadWriteOncePod",), volume="ex", bound=True),
        volume("ex", modes=("ReadWriteOncePod",), claim_ref=("default", "exclusive")),
    )
    result = schedule(nodes, [running, waiting], storage)
    assert "default/second" not in result.bindings
    assert (
        "2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
        "already in-use by another pod" in result.unschedulable["default/second"]
    )


def test_two_waiting_pods_of_one_read_write_once_pod_claim_start_one_at_a_time() -> None:
    nodes, _ = racks(1, 2)
    pods = [pod(f"p{i}", None, extra_spec=mounts("exclusive")) for i in range(2)]
    storage = listing(
        storage_class("local"),
        claim("exclusive", modes=("ReadWriteOncePod",), volume="ex", bound=True),
        volume("ex", modes=("ReadWriteOncePod",), claim_ref=("default", "exclusive")),
    )
    result = schedule(nodes, pods, storage)
    assert len(result.bindings) == 1


def test_a_node_at_its_csi_attach_limit_takes_no_new_volume() -> None:
    nodes, _ = racks(1, 2)
    drv = "ebs.csi.example.com"
    running = pod("old", None, node_name="r0n0", extra_spec=mounts("old-data"))
    newcomer = pod("new", None, extra_spec=mounts("new-data"))
    storage = listing(
        storage_class("local"),
        csinode("r0n0", {drv: 1}),
        csinode("r0n1", {drv: 1}),
        claim("old-data", volume="vol-old", bound=True),
        volume("vol-old", claim_ref=("default", "old-data"), csi=(drv, "h-old")),
        claim("new-data", volume="vol-new", bound=True),
        volume("vol-new", claim_ref=("default", "new-data"), csi=(drv, "h-new")),
    )
    result = schedule(nodes, [running, newcomer], storage)
    assert result.bindings == {"default/new": "r0n1"}
    # With the other node full too, the pod waits, saying so.
    third = pod("third", None, node_name="r0n1", extra_spec=mounts("third-data"))
    storage = listing(
        *(storage_class("local"), csinode("r0n0", {drv: 1}), csinode("r0n1", {drv: 1})),
        claim("old-data", volume="vol-old", bound=True),
        volume("vol-old", claim_ref=("default", "old-data"), csi=(drv, "h-old")),
        claim("new-data", volume="vol-new", bound=True),
        volume("vol-new", claim_ref=("default", "new-data"), csi=(drv, "h-new")),
        claim("third-data", volume="vol-3", bound=True),
        volume("vol-3", claim_ref=("default", "third-data"), csi=(drv, "h-3")),
    )
    result = schedule(nodes, [running, third, newcomer], storage)
    assert result.bindings == {}
    assert "2 node(s) exceed max volume count" in result.unschedulable["default/new"]


def test_a_volume_in_one_zone_keeps_the_pod_in_that_zone() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [node("a", labels={zone: "z1"}), node("b", labels={zone: "z2"})]
    storage = listing(
        storage_class("local"),
        claim("data", volume="pd", bound=True),
        volume("pd", claim_ref=("default", "data"), labels={zone: "z2"}),
    )
    result = schedule(nodes, [pod("solo", None, extra_spec=mounts("data"))], storage)
    assert result.bindings == {"default/solo": "b"}
    storage = listing(
        storage_class("local"),
        claim("data", volume="pd", bound=True),
        volume("pd", claim_ref=("default", "data"), labels={zone: "z3"}),
    )
    result = schedule(nodes, [pod("solo", None, extra_spec=mounts("data"))], storage)
    assert "2 node(s) had no available volume zone" in result.unschedulable["default/solo"]


def test_a_claim_bound_to_a_missing_volume_is_named() -> None:
    nodes, _ = racks(1, 2)
    storage = listing(storage_class("local"), claim("data", volume="gone", bound=True))
    result = schedule(nodes, [pod("solo", None, extra_spec=mounts("data"))], storage)
    # VolumeZone's PreFilter reads the volume before VolumeBinding's Filter could.
    assert 'persistentvolume "gone" not found' in result.unschedulable["default/solo"]


def test_dynamic_provisioning_goes_where_the_driver_publishes_room() -> None:
    nodes, _ = racks(1, 3)
    drv = "lvm.csi.example.com"
    storage = listing(
        storage_class("lvm", provisioner=drv),
        csidriver(drv),
        claim("scratch", cls="lvm", size="200Gi"),
        capacity("r0n0", "lvm", "100Gi", {"kubernetes.io/hostname": "r0n0"}),
        capacity("r0n2", "lvm", "1Ti", {"kubernetes.io/hostname": "r0n2"}),
    )
    result = schedule(nodes, [pod("solo", None, extra_spec=mounts("scratch"))], storage)
    assert result.bindings == {"default/solo": "r0n2"}
    assert result.volumes == {"default/scratch": Decision("default/scratch", node="r0n2")}


def test_a_claim_already_given_a_node_provisions_there_only() -> None:
    nodes, _ = racks(1, 3)
    drv = "lvm.csi.example.com"
    storage = listing(
        storage_class("lvm", provisioner=drv),
        claim("scratch", cls="lvm", annotations={"volume.kubernetes.io/selected-node": "r0n1"}),
    )
    result = schedule(nodes, [pod("solo", None, extra_spec=mounts("scratch"))], storage)
    assert result.bindings == {"default/solo": "r0n1"}


def test_a_claim_with_an_unreadable_size_is_named_not_crashed_on() -> None:
    nodes, _ = racks(1, 1)
    bad = claim("data")
    bad["spec"]["resources"]["requests"]["storage"] = "lots"
    result = schedule(
        nodes, [pod("solo", None, extra_spec=mounts("data"))], listing(storage_class("local"), bad)
    )
    assert (
        "persistentvolumeclaim default/data: spec.resources.requests.storage"
        in result.unschedulable["default/solo"]
    )


def test_a_bound_volume_or_a_class_that_cannot_be_read_is_named() -> None:
    nodes, _ = racks(1, 1)
    pv = volume("ds", claim_ref=("default", "data"))
    pv["spec"]["nodeAffinity"] = {"required": "rack0"}
    storage = listing(storage_class("local"), claim("data", volume="ds", bound=True), pv)
    result = schedule(nodes, [pod("solo", None, extra_spec=mounts("data"))], storage)
    assert (
        "persistentvolume ds: spec.nodeAffinity.required: must be a NodeSelector"
        in result.unschedulable["default/solo"]
    )
    cls = storage_class("local")
    cls["allowedTopologies"] = ["rack0"]
    result = schedule(nodes, [pod("solo", None, extra_spec=mounts("data"))], listing(cls, claim("data")))
    assert (
        "storageclass local: allowedTopologies[0].matchLabelExpressions: must be a list"
        in result.unschedulable["default/solo"]
    )
