"""Topology presets: a cluster labelled by its cloud or by NVIDIA gets its HyperNodes from one word
in the discovery configuration. Each test starts from the labels the provider documents."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

import pytest
import yaml

from controller.hypernode.discovery import (
    DiscoveryConfigError,
    discover_from_labels,
    discovered_tier_names,
    parse_discovery_config,
)
from controller.hypernode.presets import PRESETS, hypernode_name
from controller.manager import ControllerManager, ManagerConfig
from hyperplace.api import HyperNode
from hyperplace.runtime.api import CONFIGMAPS, HYPERNODES, NODES
from hyperplace.runtime.fakeapi import FakeApi
from tests.controller.test_manager import eventually

SOURCE = "volcano.sh/network-topology-source"
AWS = "topology.k8s.aws/network-node-layer-"
GKE = "cloud.google.com/gce-topology-"
TG = "network.topology.nvidia.com/"
CLIQUE = "nvidia.com/gpu.clique"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


def config(presets: Any) -> dict[str, Any]:
    return {
        "networkTopologyDiscovery": [{"source": "label", "enabled": True, "config": {"presets": presets}}]
    }


def discover(presets: Any, nodes: list[dict[str, Any]], existing: list[HyperNode] | None = None):
    return discover_from_labels(
        parse_discovery_config(config(presets)), nodes, existing or [], random.Random(0)
    )


def tree(hns: list[HyperNode]) -> dict[str, tuple[int, str | None, list[str]]]:
    """name -> (tier, tierName, member names)."""
    return {
        h.name: (
            h.spec.tier,
            h.spec.tier_name,
            [m.selector.exact_match.name for m in h.spec.members if m.selector.exact_match],
        )
        for h in hns
    }


def test_aws_three_layer_instances_give_three_tiers_with_layer_3_closest():
    # EKS: layer-1 is the top of the hierarchy, layer-3 the bottom on most instance types.
    labels = {AWS + "1": "nn-e50490a237cb0f01a", AWS + "2": "nn-1a2b3c4d5e6f7a8b9"}
    nodes = [
        node("i-0", **labels, **{AWS + "3": "nn-aaaaaaaaaaaaaaaa1"}),
        node("i-1", **labels, **{AWS + "3": "nn-aaaaaaaaaaaaaaaa1"}),
        node("i-2", **labels, **{AWS + "3": "nn-aaaaaaaaaaaaaaaa2"}),
    ]
    res = discover("aws", nodes)
    assert res.warnings == []
    assert tree(res.desired) == {
        "aws-layer3-nn-aaaaaaaaaaaaaaaa1": (1, AWS + "3", ["i-0", "i-1"]),
        "aws-layer3-nn-aaaaaaaaaaaaaaaa2": (1, AWS + "3", ["i-2"]),
        "aws-layer2-nn-1a2b3c4d5e6f7a8b9": (
            2,
            AWS + "2",
            ["aws-layer3-nn-aaaaaaaaaaaaaaaa1", "aws-layer3-nn-aaaaaaaaaaaaaaaa2"],
        ),
        "aws-layer1-nn-e50490a237cb0f01a": (3, AWS + "1", ["aws-layer2-nn-1a2b3c4d5e6f7a8b9"]),
    }
    # Created children first, so no parent names a HyperNode that does not exist yet.
    assert [h.spec.tier for h in res.create] == [1, 1, 2, 3]
    assert all(h.metadata.labels[SOURCE] == "label" for h in res.create)
    assert res.create[0].metadata.labels[AWS + "3"] == "nn-aaaaaaaaaaaaaaaa1"


def test_aws_mixed_three_and_four_layer_instances_share_one_tree():
    # Four-layer instance types carry layer-4 as their bottom; layer-3 is one above it there.
    top = {AWS + "1": "nn-top"}
    nodes = [
        node("p5-a", **top, **{AWS + "2": "nn-agg3", AWS + "3": "nn-leaf3"}),
        node("b300-a", **top, **{AWS + "2": "nn-agg4", AWS + "3": "nn-mid4", AWS + "4": "nn-leaf4"}),
    ]
    res = discover(["aws"], nodes)
    assert res.warnings == []
    got = tree(res.desired)
    assert got["aws-layer3-nn-leaf3"] == (1, AWS + "3@tier1", ["p5-a"])
    assert got["aws-layer4-nn-leaf4"] == (1, AWS + "4", ["b300-a"])
    assert got["aws-layer3-nn-mid4"] == (2, AWS + "3@tier2", ["aws-layer4-nn-leaf4"])
    assert got["aws-layer2-nn-agg3"] == (2, AWS + "2@tier2", ["aws-layer3-nn-leaf3"])
    assert got["aws-layer2-nn-agg4"] == (3, AWS + "2@tier3", ["aws-layer3-nn-mid4"])
    # The shared top is above the deeper part: its tier is one more than its highest child.
    assert got["aws-layer1-nn-top"] == (4, AWS + "1", ["aws-layer2-nn-agg3", "aws-layer2-nn-agg4"])


def test_gke_host_subblock_block():
    nodes = [
        node(f"gke-a4-{i}", **{GKE + "block": "blk1", GKE + "subblock": f"sb{i // 2}", GKE + "host": f"h{i}"})
        for i in range(4)
    ]
    res = discover("gke", nodes)
    got = tree(res.desired)
    assert got["gke-host-h0"] == (1, GKE + "host", ["gke-a4-0"])
    assert got["gke-subblock-sb0"] == (2, GKE + "subblock", ["gke-host-h0", "gke-host-h1"])
    assert got["gke-subblock-sb1"] == (2, GKE + "subblock", ["gke-host-h2", "gke-host-h3"])
    assert got["gke-block-blk1"] == (3, GKE + "block", ["gke-subblock-sb0", "gke-subblock-sb1"])
    assert len(got) == 4 + 2 + 1


def test_nvidia_clique_makes_nvlink_domains_tier_1():
    a, b = "5b0f2c1e-7a3d-4e9b-8c6f-1d2e3f4a5b6c.32766", "5b0f2c1e-7a3d-4e9b-8c6f-1d2e3f4a5b6c.1"
    nodes = [node("t0", **{CLIQUE: a}), node("t1", **{CLIQUE: a}), node("t2", **{CLIQUE: b}), node("cpu")]
    got = tree(discover("nvidia-clique", nodes).desired)
    assert got == {f"nvl-{a}": (1, CLIQUE, ["t0", "t1"]), f"nvl-{b}": (1, CLIQUE, ["t2"])}


def test_topograph_documented_example_and_its_alternative_keys():
    # Topograph's example: NVLink domain nvl1, leaf s1, spine s2, core s3.
    nodes = [
        node("n1", **{TG + "accelerator": "nvl1", TG + "leaf": "s1", TG + "spine": "s2", TG + "core": "s3"}),
        # Where the GPU Operator's clique label exists Topograph leaves accelerator unset.
        node("n2", **{CLIQUE: "uuid.7", TG + "leaf": "s4", TG + "spine": "s2", TG + "core": "s3"}),
        # Earlier Topograph releases: block (leaf) and datacenter (core).
        node("n3", **{TG + "block": "s5", TG + "spine": "s6", TG + "datacenter": "s7"}),
    ]
    res = discover("topograph", nodes)
    assert res.warnings == []
    got = tree(res.desired)
    assert got["topograph-nvl-nvl1"] == (1, TG + "accelerator", ["n1"])
    assert got["topograph-leaf-s1"] == (2, TG + "leaf", ["topograph-nvl-nvl1"])
    # The spine label sits at tier 3 above NVLink racks and at tier 2 above n3: one tierName per tier.
    assert got["topograph-spine-s2"] == (3, TG + "spine@tier3", ["topograph-leaf-s1", "topograph-leaf-s4"])
    assert got["topograph-spine-s6"] == (2, TG + "spine@tier2", ["topograph-leaf-s5"])
    assert got["topograph-core-s3"] == (4, TG + "core", ["topograph-spine-s2"])
    assert got["topograph-nvl-uuid.7"] == (1, CLIQUE, ["n2"])
    # n3 has no NVLink domain: its leaf is tier 1 (a three-tier part of a mixed tree).
    assert got["topograph-leaf-s5"] == (1, TG + "block", ["n3"])
    assert got["topograph-core-s7"] == (3, TG + "datacenter", ["topograph-spine-s6"])


def test_presets_stack_closest_first():
    nodes = [node(f"gb{i}", **{CLIQUE: "u.1", GKE + "subblock": "sb", GKE + "block": "b"}) for i in range(2)]
    got = tree(discover(["nvidia-clique", "gke"], nodes).desired)
    assert got == {
        "nvl-u.1": (1, CLIQUE, ["gb0", "gb1"]),
        "gke-subblock-sb": (2, GKE + "subblock", ["nvl-u.1"]),
        "gke-block-b": (3, GKE + "block", ["gke-subblock-sb"]),
    }


def test_a_domain_under_two_parents_is_reported_and_keeps_its_first():
    nodes = [
        node("a", **{GKE + "host": "h", GKE + "subblock": "sb1"}),
        node("b", **{GKE + "host": "h", GKE + "subblock": "sb2"}),
    ]
    res = discover("gke", nodes)
    got = tree(res.desired)
    assert got["gke-host-h"] == (1, GKE + "host", ["a", "b"])
    assert got["gke-subblock-sb1"][2] == ["gke-host-h"]
    assert "gke-subblock-sb2" not in got  # only the conflicting node named it
    assert any("node b" in w and "kept under gke-subblock-sb1" in w for w in res.warnings)


def test_rediscovery_is_stable_and_follows_relabelling():
    nodes = [node("a", **{CLIQUE: "u.1"}), node("b", **{CLIQUE: "u.2"})]
    first = discover("nvidia-clique", nodes)
    again = discover("nvidia-clique", nodes, first.desired)
    assert (again.create, again.update, again.delete) == ([], [], [])
    moved = discover(
        "nvidia-clique", [node("a", **{CLIQUE: "u.1"}), node("b", **{CLIQUE: "u.1"})], first.desired
    )
    assert [h.name for h in moved.update] == ["nvl-u.1"] and moved.delete == ["nvl-u.2"]


def test_names_are_dns_subdomains_and_never_shared():
    preset = PRESETS["topograph"]
    level = preset.levels[1]
    assert hypernode_name(preset, level, "Leaf_A") != hypernode_name(preset, level, "leaf-a")
    long = hypernode_name(preset, level, "x" * 200)
    assert len(long) <= 63 and long.startswith("topograph-leaf-x")
    subdomain = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
    for value in ("Leaf_A", "-edge-", "a.b", "a.-b", "x" * 200, "nn-e50490a237cb0f01a"):
        name = hypernode_name(preset, level, value)
        assert subdomain.fullmatch(name) and len(name) <= 63, name
    assert hypernode_name(preset, level, "a.-b") != hypernode_name(preset, level, "a-b")


@pytest.mark.parametrize(
    ("presets", "message"),
    [
        ("azure", "config.presets[0]: unknown preset 'azure' (known: aws, gke, nvidia-clique, topograph)"),
        (["gke", "gke"], "config.presets[1]: preset 'gke' is listed twice"),
        ({"aws": True}, "config.presets must be a preset name or a list of them"),
    ],
)
def test_a_bad_preset_refuses_the_configuration(presets: Any, message: str):
    # Refused whole: the controller keeps its HyperNodes instead of deleting them for a typo.
    with pytest.raises(DiscoveryConfigError, match=re.escape("label source: " + message)):
        parse_discovery_config(config(presets))


def test_tier_names_are_known_before_discovery_runs():
    source = parse_discovery_config(config(["nvidia-clique", "gke"])).enabled("label")
    assert source is not None
    names = discovered_tier_names(source.config)
    assert names[CLIQUE] == 1 and names[GKE + "host"] == 2 and names[GKE + "block"] == 4


def test_presets_sit_beside_volcano_rules():
    conf = {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "config": {
                    "presets": ["nvidia-clique"],
                    "networkTopologyTypes": {
                        "rack": [{"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]
                    },
                },
            }
        ]
    }
    nodes = [node("a", **{CLIQUE: "u.1"}), node("b", **{"example.com/rack": "r1"})]
    res = discover_from_labels(parse_discovery_config(conf), nodes, [], random.Random(0))
    got = tree(res.desired)
    assert got["nvl-u.1"] == (1, CLIQUE, ["a"])
    [rack] = [n for n in got if n.startswith("hypernode-rack-tier1-")]
    assert got[rack] == (1, "example.com/rack", ["b"])


async def test_the_controller_keeps_a_preset_tree_and_keeps_it_through_a_bad_configmap() -> None:
    api = FakeApi()
    mgr = ControllerManager(
        api, ManagerConfig(workers=2, config_namespace="volcano-system", seed=0), now=lambda: "T"
    )
    task = asyncio.create_task(mgr.run())
    try:
        top = {AWS + "1": "nn-top"}
        await api.create(NODES, node("p5-a", **top, **{AWS + "2": "nn-agg3", AWS + "3": "nn-leaf3"}))
        await api.create(
            NODES,
            node("b300-a", **top, **{AWS + "2": "nn-agg4", AWS + "3": "nn-mid4", AWS + "4": "nn-leaf4"}),
        )

        def configmap(presets: Any) -> dict[str, Any]:
            return {
                "metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
                "data": {"volcano-controller.conf": yaml.safe_dump(config(presets))},
            }

        await api.create(CONFIGMAPS, configmap(["aws"]), "volcano-system")
        await eventually(lambda: len(api.objects.get("hypernodes", {})) == 6)
        hns = {h["metadata"]["name"]: h for h in api.objects["hypernodes"].values()}
        assert hns["aws-layer1-nn-top"]["spec"]["tier"] == 4
        await eventually(
            lambda: (api.peek(HYPERNODES, "aws-layer1-nn-top") or {}).get("status", {}).get("nodeCount") == 2
        )
        # A typo in the preset list: the ConfigMap is refused whole and nothing is deleted.
        cm = api.peek(CONFIGMAPS, "volcano-system/volcano-controller-configmap")
        assert cm is not None
        await api.replace(CONFIGMAPS, {**cm, "data": configmap(["awz"])["data"]}, "volcano-system")
        await asyncio.sleep(0.2)
        assert len(api.objects["hypernodes"]) == 6
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
