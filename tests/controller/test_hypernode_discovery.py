"""Label-based HyperNode auto-discovery builds the tree Volcano's label discoverer builds."""

from __future__ import annotations

import random
from typing import Any

import pytest

from controller.hypernode.discovery import (
    DEFAULT_INTERVAL_SECONDS,
    DiscoveryConfig,
    DiscoveryConfigError,
    DiscoveryError,
    clean_type_name,
    discover_from_labels,
    parse_discovery_config,
)
from controller.hypernode.status import compute_status
from hyperplace.api import HyperNode
from hyperplace.api.times import parse_go_duration
from hyperplace.kube.members import node_labels_of

SOURCE = "volcano.sh/network-topology-source"

CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
    "data": {
        "volcano-controller.conf": """
networkTopologyDiscovery:
  - source: label
    enabled: true
    interval: 10m
    config:
      networkTopologyTypes:
        rdma:
          - nodeLabel: example.com/spine
          - nodeLabel: example.com/leaf
          - nodeLabel: kubernetes.io/hostname
  - source: ufm
    enabled: false
    config: {endpoint: https://ufm.example.com}
"""
    },
}


def make_node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


def rdma_nodes() -> list[dict[str, Any]]:
    spine = "example.com/spine"
    leaf = "example.com/leaf"
    return [
        make_node("n0", **{leaf: "l0", spine: "s0"}),
        make_node("n1", **{leaf: "l0", spine: "s0"}),
        make_node("n2", **{leaf: "l1", spine: "s0"}),
        make_node("n3", **{leaf: "l2"}),  # no spine label: stops at tier 1
        make_node("n4"),  # no tier-1 label: contributes nothing
    ]


def by_label(hns: list[HyperNode], key: str, value: str) -> HyperNode:
    return next(h for h in hns if (h.metadata.labels or {}).get(key) == value)


def members(h: HyperNode) -> list[tuple[str, str]]:
    return [(m.type, m.selector.exact_match.name) for m in h.spec.members if m.selector.exact_match]


def test_configmap_is_parsed_like_volcanos_loader() -> None:
    cfg = parse_discovery_config(CONFIGMAP)
    assert [(s.source, s.enabled, s.interval_seconds) for s in cfg.sources] == [
        ("label", True, 600.0),
        ("ufm", False, DEFAULT_INTERVAL_SECONDS),
    ]
    assert cfg.enabled("label") is not None and cfg.enabled("ufm") is None


def test_configmap_errors_use_volcanos_messages() -> None:
    with pytest.raises(
        DiscoveryConfigError, match=r"^config key not found in ConfigMap: volcano-controller\.conf$"
    ):
        parse_discovery_config({"kind": "ConfigMap", "data": {"other": ""}})
    with pytest.raises(DiscoveryConfigError, match=r"^failed to parse config: "):
        parse_discovery_config("networkTopologyDiscovery: [unclosed")


def test_go_durations_and_non_positive_intervals_default_to_one_hour() -> None:
    assert parse_go_duration("1h30m") == 5400
    assert parse_go_duration("250ms") == 0.25
    with pytest.raises(ValueError):
        parse_go_duration("10 minutes")
    for bad in ("0s", "-5m", "soon"):
        cfg = parse_discovery_config({"networkTopologyDiscovery": [{"source": "label", "interval": bad}]})
        assert cfg.sources[0].interval_seconds == DEFAULT_INTERVAL_SECONDS


def test_label_tree_has_leaf_at_tier_1_and_spine_above() -> None:
    res = discover_from_labels(parse_discovery_config(CONFIGMAP), rdma_nodes(), [], random.Random(1))
    assert len(res.desired) == 4  # leaves l0, l1, l2 and spine s0
    l0 = by_label(res.desired, "example.com/leaf", "l0")
    s0 = by_label(res.desired, "example.com/spine", "s0")
    assert l0.spec.tier == 1 and l0.spec.tier_name == "example.com/leaf"
    assert members(l0) == [("Node", "n0"), ("Node", "n1")]
    assert s0.spec.tier == 2 and s0.spec.tier_name == "example.com/spine"
    l1 = by_label(res.desired, "example.com/leaf", "l1")
    assert members(s0) == sorted([("HyperNode", l0.name), ("HyperNode", l1.name)])
    assert s0.metadata.labels == {SOURCE: "label", "example.com/spine": "s0"}
    assert l0.name.startswith("hypernode-rdma-tier1-") and len(l0.name) == len("hypernode-rdma-tier1-") + 5
    assert s0.name.startswith("hypernode-rdma-tier2-")
    assert [h.name for h in res.create] == [h.name for h in res.desired]
    assert res.update == [] and res.delete == [] and res.warnings == []


def test_same_seed_gives_same_names() -> None:
    cfg = parse_discovery_config(CONFIGMAP)
    a = discover_from_labels(cfg, rdma_nodes(), [], random.Random(7))
    b = discover_from_labels(cfg, list(reversed(rdma_nodes())), [], random.Random(7))
    assert [h.to_dict() for h in a.desired] == [h.to_dict() for h in b.desired]


def test_rediscovery_reuses_names_and_changes_nothing() -> None:
    cfg = parse_discovery_config(CONFIGMAP)
    first = discover_from_labels(cfg, rdma_nodes(), [], random.Random(1))
    again = discover_from_labels(cfg, rdma_nodes(), first.desired, random.Random(99))
    assert [h.name for h in again.desired] == [h.name for h in first.desired]
    assert again.create == [] and again.update == [] and again.delete == []


def test_relabelled_node_updates_and_vanished_domain_is_deleted() -> None:
    cfg = parse_discovery_config(CONFIGMAP)
    first = discover_from_labels(cfg, rdma_nodes(), [], random.Random(1))
    nodes = rdma_nodes()
    nodes[3]["metadata"]["labels"]["example.com/leaf"] = "l1"  # n3 moves from l2 to l1
    manual = HyperNode.model_validate(
        {
            "metadata": {"name": "manual"},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}]},
        }
    )
    res = discover_from_labels(cfg, nodes, [*first.desired, manual], random.Random(2))
    l1 = by_label(first.desired, "example.com/leaf", "l1")
    l2 = by_label(first.desired, "example.com/leaf", "l2")
    assert res.delete == [l2.name]  # the hand-made "manual" HyperNode is never touched
    assert [h.name for h in res.update] == [l1.name]
    assert members(res.update[0]) == [("Node", "n2"), ("Node", "n3")]
    assert res.create == []


def test_update_keeps_foreign_labels_and_status() -> None:
    cfg = parse_discovery_config(CONFIGMAP)
    first = discover_from_labels(cfg, rdma_nodes(), [], random.Random(1))
    l0 = by_label(first.desired, "example.com/leaf", "l0").model_copy(deep=True)
    l0.metadata.labels = {**(l0.metadata.labels or {}), "team": "infra"}
    l0.spec.members = l0.spec.members[:1]
    l0.status = compute_status(l0, node_labels_of(rdma_nodes()), {}, now="t")
    others = [h for h in first.desired if h.name != l0.name]
    res = discover_from_labels(cfg, rdma_nodes(), [*others, l0], random.Random(3))
    (updated,) = res.update
    assert (updated.metadata.labels or {})["team"] == "infra"
    assert updated.status is not None and updated.status.node_count == 1
    assert members(updated) == [("Node", "n0"), ("Node", "n1")]


def test_existing_name_is_reused_only_with_matching_prefix() -> None:
    cfg = parse_discovery_config(CONFIGMAP)
    legacy = HyperNode.model_validate(
        {
            "metadata": {
                "name": "hypernode-other-tier1-abcde",
                "labels": {SOURCE: "label", "example.com/leaf": "l0"},
            },
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}]},
        }
    )
    keep = legacy.model_copy(deep=True)
    keep.metadata.name = "hypernode-rdma-tier1-zzzzz"
    res = discover_from_labels(cfg, rdma_nodes(), [legacy, keep], random.Random(1))
    assert by_label(res.desired, "example.com/leaf", "l0").name == "hypernode-rdma-tier1-zzzzz"
    assert "hypernode-other-tier1-abcde" in res.delete


def test_identity_is_global_across_types() -> None:
    cfg = {
        "networkTopologyTypes": {
            "a": [{"nodeLabel": "zone"}, {"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}],
            "b": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}],
        }
    }
    nodes = [make_node("n0", rack="r1", zone="z"), make_node("n1", rack="r1")]
    res = discover_from_labels(cfg, nodes, [], random.Random(0))
    racks = [h for h in res.desired if "rack" in (h.metadata.labels or {})]
    assert len(racks) == 1 and members(racks[0]) == [("Node", "n0"), ("Node", "n1")]


def test_bad_type_entries_are_rejected_with_reasons() -> None:
    cfg = {
        "networkTopologyTypes": {
            "a-type-name-longer-than-20": [{"nodeLabel": "x"}, {"nodeLabel": "kubernetes.io/hostname"}],
            "dup": [{"nodeLabel": "x"}, {"nodeLabel": "x"}, {"nodeLabel": "kubernetes.io/hostname"}],
            "ok": [{"nodeLabel": "x"}, {"nodeLabel": "kubernetes.io/hostname"}],
        }
    }
    res = discover_from_labels(cfg, [make_node("n0", x="1")], [], random.Random(0))
    assert len(res.warnings) == 2
    assert "exceeds 20" in res.warnings[0] and "a-type-name-longer-than-20" in res.warnings[0]
    assert "duplicate labels" in res.warnings[1]
    assert [h.name[: len("hypernode-ok-tier1")] for h in res.desired] == ["hypernode-ok-tier1"]


def test_disabled_label_source_touches_nothing() -> None:
    cfg = DiscoveryConfig()
    existing = [
        HyperNode.model_validate(
            {
                "metadata": {"name": "x", "labels": {SOURCE: "label"}},
                "spec": {
                    "tier": 1,
                    "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}],
                },
            }
        )
    ]
    res = discover_from_labels(cfg, rdma_nodes(), existing, random.Random(0))
    assert not res.enabled and res.delete == [] and res.desired == []


def test_name_clashes_are_retried_then_fail_after_20_attempts() -> None:
    class Fixed(random.Random):
        def choice(self, seq: Any) -> Any:
            return seq[0]

    cfg = {"networkTopologyTypes": {"t": [{"nodeLabel": "x"}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    clash = HyperNode.model_validate(
        {
            "metadata": {"name": "hypernode-t-tier1-bbbbb"},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "q"}}}]},
        }
    )
    with pytest.raises(DiscoveryError, match="after 20 attempts"):
        discover_from_labels(cfg, [make_node("n0", x="1")], [clash], Fixed())


def test_clean_type_name_matches_volcano() -> None:
    assert clean_type_name("NVLink_Fabric.v2-x") == "nvlink-fabric.v2-x"


def test_topograph_labelled_cluster_builds_four_tiers() -> None:
    """NVIDIA topograph labels nodes with network.topology.nvidia.com/{accelerator,block,
    spine,datacenter}; listing them top-down makes accelerator (NVLink domain) tier 1."""
    p = "network.topology.nvidia.com/"
    cfg = parse_discovery_config(
        {
            "networkTopologyDiscovery": [
                {
                    "source": "label",
                    "enabled": True,
                    "config": {
                        "networkTopologyTypes": {
                            "topograph": [
                                {"nodeLabel": p + "datacenter"},
                                {"nodeLabel": p + "spine"},
                                {"nodeLabel": p + "block"},
                                {"nodeLabel": p + "accelerator"},
                                {"nodeLabel": "kubernetes.io/hostname"},
                            ]
                        }
                    },
                }
            ]
        }
    )
    nodes = []
    for i in range(8):
        nodes.append(
            make_node(
                f"gpu-{i}",
                **{
                    p + "accelerator": f"nvl-{i // 2}",
                    p + "block": f"block-{i // 4}",
                    p + "spine": "spine-0",
                    p + "datacenter": "dc-west",
                },
            )
        )
    res = discover_from_labels(cfg, nodes, [], random.Random(0))
    tiers = sorted((h.spec.tier, h.spec.tier_name) for h in res.desired)
    assert tiers == [(1, p + "accelerator")] * 4 + [(2, p + "block")] * 2 + [
        (3, p + "spine"),
        (4, p + "datacenter"),
    ]
    dc = by_label(res.desired, p + "datacenter", "dc-west")
    spine = by_label(res.desired, p + "spine", "spine-0")
    assert members(dc) == [("HyperNode", spine.name)]
    assert all(h.name.startswith(f"hypernode-topograph-tier{h.spec.tier}-") for h in res.desired)
    # The discovered tree is consistent: the datacenter sees all 8 GPUs and is Ready.
    hns = {h.name: h for h in res.desired}
    st = compute_status(dc, node_labels_of(nodes), hns, now="t")
    assert st.node_count == 8
    assert st.conditions is not None and st.conditions[0].status == "True"
