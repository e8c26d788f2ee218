"""Preemption where inter-pod terms, not room, keep a pod out: the victims' leaving changes the
affinity counts, as kube-scheduler's preemption removes lower-priority pods and filters again."""

from __future__ import annotations

from typing import Any

from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, racks, running_gang
from tests.scheduler.builders import schedule

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def term(key: str, **labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def labelled(
    pods: list[dict[str, Any]], spec: dict[str, Any] | None = None, **labels: str
) -> list[dict[str, Any]]:
    for p in pods:
        p["metadata"]["labels"].update(labels)
        if spec is not None:
            p["spec"]["affinity"] = spec
    return pods


def run(gangs: list[tuple[Any, list[dict[str, Any]]]], nodes: list[dict[str, Any]], hns: list[Any]) -> Any:
    pgs = [pg for pg, _ in gangs]
    pods = [p for _, ps in gangs for p in ps]
    res, _ = schedule(nodes, pods, hns, pgs, priority_classes=PRIORITY_CLASSES, config=PREEMPT_CONF)
    return res


def victims(res: Any) -> list[str]:
    return sorted(e.victim for e in res.evictions)


def test_a_pod_that_refuses_to_share_a_host_with_batch_pods_evicts_one_where_room_is_no_issue() -> None:
    # Every node has room; each runs a low-priority batch pod, which the urgent pod's
    # anti-affinity refuses to share a host with. Evicting one batch pod opens its node.
    nodes, hns = racks(1, 2, cpu=8)
    batch_a, pods_a = running_gang("batch-a", ["r0n0"], cpu=1)
    batch_b, pods_b = running_gang("batch-b", ["r0n1"], cpu=1)
    urgent, pods_u = pending_gang("urgent", 1, cpu=1)
    res = run(
        [
            (batch_a, labelled(pods_a, app="batch")),
            (batch_b, labelled(pods_b, app="batch")),
            (urgent, labelled(pods_u, anti(term(HOST, app="batch")))),
        ],
        nodes,
        hns,
    )
    assert len(victims(res)) == 1
    nom = res.nominations["default/urgent"]
    (node,) = nom.pods.values()
    # The victim is the batch pod of the node the urgent pod is nominated to.
    assert victims(res) == [{"r0n0": "default/batch-a-t0-0", "r0n1": "default/batch-b-t0-0"}[node]]
    assert not res.bindings


def test_a_gang_that_must_spread_one_per_host_evicts_on_as_many_hosts_as_it_has_pods() -> None:
    # Four full nodes; the urgent 3-pod gang needs a whole node per pod (anti-affinity against
    # itself) and frees three nodes, not three pods' worth of room on fewer.
    nodes, hns = racks(1, 4, cpu=4)
    low, pods_low = running_gang("low", ["r0n0", "r0n1", "r0n2", "r0n3"], min_member=1, cpu=4)
    urgent, pods_u = pending_gang("urgent", 3, cpu=1)
    res = run(
        [(low, pods_low), (urgent, labelled(pods_u, anti(term(HOST, job="urgent")), job="urgent"))],
        nodes,
        hns,
    )
    nom = res.nominations["default/urgent"]
    assert len(set(nom.pods.values())) == 3
    assert len(victims(res)) == 3


def test_a_low_priority_pod_whose_anti_affinity_keeps_the_urgent_pod_out_of_its_zone_is_evicted() -> None:
    # The only zone with room holds a low-priority pod that refuses web pods in its zone.
    nodes, hns = racks(1, 2, cpu=4)
    for n, z in zip(nodes, ("z0", "z1"), strict=True):
        n["metadata"]["labels"][ZONE] = z
    grumpy, pods_g = running_gang("grumpy", ["r0n0"], cpu=1)
    full, pods_f = running_gang("full", ["r0n1"], cpu=4, priority="high")
    web, pods_w = pending_gang("web", 1, cpu=2)
    res = run(
        [
            (grumpy, labelled(pods_g, anti(term(ZONE, app="web")))),
            (full, pods_f),
            (web, labelled(pods_w, app="web")),
        ],
        nodes,
        hns,
    )
    assert victims(res) == ["default/grumpy-t0-0"]
    assert list(res.nominations["default/web"].pods.values()) == ["r0n0"]
