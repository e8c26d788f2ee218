"""User story: a LeaderWorkerSet with ``leaderworkerset.sigs.k8s.io/exclusive-topology`` on a live
cluster. LWS's pod webhook injects required pod affinity (to its own group) and anti-affinity (to
every other group) with the annotation's label as topologyKey. The PodGroup controller turns the
annotation into an exclusive domain at the tier label discovery builds from that label, and the
scheduler keeps those two terms by placement: one group per rack, whole, nobody else in it. The
same terms without an exclusive domain are judged by the InterPodAffinity filter as kube-scheduler
judges them: the group together, apart from the other groups.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from controller.manager import ControllerManager, ManagerConfig
from hyperplace.api import HyperNode, PodGroup
from hyperplace.kube.workloads import lws_exclusive_affinity_key
from hyperplace.runtime.api import CONFIGMAPS, NODES, PODS
from hyperplace.runtime.fakeapi import FakeApi
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import SessionResult, run_session
from tests.scheduler.builders import node

from .test_podgroup_controller import eventually, group_of, podgroup
from .test_workload_podgroups import NS, lws_pods, make_lws

RACK = "example.com/rack"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"


def injected(pod: dict[str, Any], group_key: str, topology_key: str = RACK) -> dict[str, Any]:
    """``pod`` as LWS v0.10.0's pod webhook leaves it (``SetExclusiveAffinities``): the group-key
    label, required affinity to its group and anti-affinity to other groups, per topology key."""
    pod["metadata"]["labels"][GROUP_KEY] = group_key
    pod["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": GROUP_KEY, "operator": "In", "values": [group_key]}]
                    },
                    "topologyKey": topology_key,
                }
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": GROUP_KEY, "operator": "Exists"},
                            {"key": GROUP_KEY, "operator": "NotIn", "values": [group_key]},
                        ]
                    },
                    "topologyKey": topology_key,
                }
            ]
        },
    }
    return pod


def discovery_conf() -> dict[str, Any]:
    """Label discovery: tier 1 from the rack label, tier 2 from the spine label."""
    return {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "config": {
                    "networkTopologyTypes": {
                        "rack-spine": [
                            {"nodeLabel": "example.com/spine"},
                            {"nodeLabel": RACK},
                            {"nodeLabel": "kubernetes.io/hostname"},
                        ]
                    }
                },
            }
        ]
    }


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakeApi, ControllerManager]]:
    """Three racks of two 4-cpu nodes under one spine, discovered from node labels."""
    api = FakeApi()
    for i in range(6):
        await api.create(NODES, node(f"n{i}", cpu=4, labels={RACK: f"r{i // 2}", "example.com/spine": "s0"}))
    await api.create(
        CONFIGMAPS,
        {
            "metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
            "data": {"volcano-controller.conf": yaml.safe_dump(discovery_conf())},
        },
        "volcano-system",
    )
    mgr = ControllerManager(api, ManagerConfig(workers=2, seed=0), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    await eventually(lambda: len(api.objects.get("hypernodes", {})) == 4)
    yield api, mgr
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def lws_groups(
    api: FakeApi, groups: int, annotation: str | None = RACK, topology_key: str = RACK
) -> list[dict[str, Any]]:
    """A LeaderWorkerSet of ``groups`` groups of two 1-cpu pods, as its webhook leaves them."""
    lws, sts = await make_lws(api, {EXCLUSIVE: annotation} if annotation else {})
    made = []
    for g in range(groups):
        for p in lws_pods(lws, sts, g, 2, cpu="1"):
            made.append(await api.create(PODS, injected(p, f"key{g}", topology_key), NS))
    for p in made:
        name = p["metadata"]["name"]
        await eventually(lambda name=name: group_of(api, name) is not None)
    return made


def schedule(api: FakeApi) -> SessionResult:
    """One scheduling session over what the fake API holds (as the scheduler's informers see it)."""
    return run_session(
        build_snapshot(
            nodes=list(api.objects.get("nodes", {}).values()),
            pods=list(api.objects.get("pods", {}).values()),
            hypernodes=[HyperNode.model_validate(h) for h in api.objects.get("hypernodes", {}).values()],
            podgroups=[PodGroup.model_validate(pg) for pg in api.objects.get("podgroups", {}).values()],
        )
    )


def racks_by_group(result: SessionResult) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, n in result.bindings.items():
        group = key.split("/")[1].split("-")[1]  # infer-<group>[-<worker>]
        out.setdefault(group, set()).add(f"r{int(n[1:]) // 2}")
    return out


async def test_each_lws_group_takes_a_rack_of_its_own_although_both_would_fit_in_one(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    await lws_groups(api, 2)
    for g in range(2):
        pg = await eventually(lambda g=g: podgroup(api, f"infer-{g}"))
        assert pg["metadata"]["annotations"]["hyperplace.io/exclusive-topology"] == "true"
        assert pg["metadata"]["annotations"]["hyperplace.io/exclusive-topology-key"] == RACK
        assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    result = schedule(api)
    assert result.unschedulable == {}
    assert len(result.bindings) == 4
    placed = racks_by_group(result)
    assert all(len(r) == 1 for r in placed.values()), placed  # podAffinity: the group in one rack
    assert placed["0"] != placed["1"], placed  # podAntiAffinity: no other group in its rack


async def test_a_third_group_waits_while_every_rack_holds_another_group(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    await lws_groups(api, 4)
    result = schedule(api)
    placed = racks_by_group(result)
    assert len(placed) == 3 and len(set().union(*placed.values())) == 3, placed
    waiting = {k for k in ("0", "1", "2", "3") if k not in placed}
    assert len(waiting) == 1  # 3 racks, 3 groups: the fourth keeps out although there is room


async def test_affinity_of_another_shape_is_judged_by_the_affinity_filter(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    # The terms name a different label than the LWS's exclusive-topology annotation: no
    # exclusive domain keeps them, the filter does (the group shares the one spine).
    await lws_groups(api, 1, topology_key="example.com/spine")
    result = schedule(api)
    assert len(result.bindings) == 2


async def test_without_an_exclusive_domain_the_injected_affinity_is_kept_by_the_filter(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    # No exclusive-topology annotation on the LWS (e.g. terms written by hand): the filter keeps
    # each group in one rack and the two groups in different racks.
    await lws_groups(api, 2, annotation=None)
    result = schedule(api)
    assert len(result.bindings) == 4
    racks = racks_by_group(result)
    assert all(len(r) == 1 for r in racks.values())
    assert racks["0"] != racks["1"]


async def test_a_tier_limit_below_the_labels_tier_is_reported_and_the_filter_keeps_the_terms(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    # The spine label's tier is 2; a highest-tier limit of 1 would make the exclusive domain a
    # rack, which does not keep other groups out of the spine.
    lws, sts = await make_lws(
        api,
        {
            EXCLUSIVE: "example.com/spine",
            "volcano.sh/network-topology-mode": "hard",
            "volcano.sh/network-topology-highest-tier": "1",
        },
    )
    for p in lws_pods(lws, sts, 0, 2, cpu="1"):
        await api.create(PODS, injected(p, "key0", "example.com/spine"), NS)
    pg = await eventually(
        lambda: (got := podgroup(api, "infer-0")) and (got.get("status") or {}).get("conditions") and got
    )
    assert "hyperplace.io/exclusive-topology-key" not in pg["metadata"]["annotations"]
    (cond,) = [c for c in pg["status"]["conditions"] if c["type"] == "InvalidAnnotation"]
    assert EXCLUSIVE in cond["message"] and "anti-affinity" in cond["message"]
    await eventually(lambda: group_of(api, "infer-0-1") is not None)
    # No exclusive domain, so the InterPodAffinity filter keeps the injected terms: the one group
    # fits its spine.
    result = schedule(api)
    assert len(result.bindings) == 2


def test_only_the_exact_lws_shape_is_recognised() -> None:
    base = injected(
        {"metadata": {"name": "p", "labels": {}}, "spec": {}},
        "k",
    )
    assert lws_exclusive_affinity_key(base) == RACK

    def changed(edit: Any) -> dict[str, Any]:
        p = copy.deepcopy(base)
        edit(p)
        return p

    def aff(p: dict[str, Any]) -> list[dict[str, Any]]:
        return p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]

    def anti(p: dict[str, Any]) -> list[dict[str, Any]]:
        return p["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]

    others = [
        changed(lambda p: p["metadata"]["labels"].update({GROUP_KEY: "other"})),  # not its own group
        changed(lambda p: aff(p)[0].update({"namespaces": ["a", "b"]})),
        changed(lambda p: anti(p)[0].update({"topologyKey": "example.com/spine"})),
        changed(lambda p: anti(p)[0]["labelSelector"]["matchExpressions"].pop()),  # every group, own too
        changed(lambda p: aff(p).append({"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": RACK})),
        changed(lambda p: aff(p)[0]["labelSelector"].update({"matchLabels": {"app": "x"}})),
        changed(lambda p: p["spec"]["affinity"].pop("podAntiAffinity")),
    ]
    assert [lws_exclusive_affinity_key(p) for p in others] == [None] * len(others)
