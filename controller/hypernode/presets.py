"""Topology presets: HyperNodes from the node labels that clouds and NVIDIA already write.

A preset names the labels of one provider from the level closest to the node upwards, so a
cluster on AWS, GKE, GB200 racks or under NVIDIA Topograph needs no hand-written discovery
rules. Selected in the label source of Volcano's controller ConfigMap (Volcano ignores the
key)::

    networkTopologyDiscovery:
      - source: label
        enabled: true
        config:
          presets: [aws]                 # or [nvidia-clique, gke]: listed closest-first

Several presets stack into one chain, the first listed closest to the node (an NVLink clique
under a cloud's network layers). Unlike the ``networkTopologyTypes`` rules, which stop at the
first missing label and number tiers by position, a preset chain *skips* a level a node does
not carry and numbers tiers by height: a HyperNode whose members are nodes is tier 1, one above
is one more than its highest child. So one part of a cluster may have three tiers and another
four (AWS instance types with a fourth network layer, Topograph nodes with or without an NVLink
domain), and tier 1 is always the domain closest to the node. ``tierName`` is the label key, or
``<key>@tier<N>`` for a key that sits at several tiers of a mixed tree (a tierName names one tier).

A HyperNode is identified by (label key, value), as Volcano's label discoverer does, and named
deterministically from the preset and the value (``aws-layer3-nn-...``), so a restarted
controller finds the same names. A value seen under two different parents is a labelling
error: the first parent (by node name) is kept and a warning names the node and both parents.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperplace.api import ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec, ObjectMeta
from hyperplace.api.constants import NETWORK_TOPOLOGY_SOURCE_LABEL

PRESETS_KEY = "presets"
# Longest generated name: short enough to be a label value wherever a HyperNode name is copied.
MAX_NAME_LENGTH = 63


@dataclass(frozen=True)
class Level:
    """One level of a preset: ``keys`` are alternatives, the first one a node carries is used."""

    name: str  # short, used in HyperNode names
    keys: tuple[str, ...]
    meaning: str


@dataclass(frozen=True)
class Preset:
    name: str
    prefix: str  # HyperNode name prefix
    levels: tuple[Level, ...]  # closest to the node first
    about: str


AWS_LAYER = "topology.k8s.aws/network-node-layer-"
GKE = "cloud.google.com/gce-topology-"
TOPOGRAPH = "network.topology.nvidia.com/"
GPU_CLIQUE = "nvidia.com/gpu.clique"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "aws",
            "aws",
            (
                Level("layer4", (AWS_LAYER + "4",), "bottom network node on instance types with four layers"),
                Level("layer3", (AWS_LAYER + "3",), "bottom network node of three-layer instance types"),
                Level("layer2", (AWS_LAYER + "2",), "middle network layer"),
                Level("layer1", (AWS_LAYER + "1",), "top of the network hierarchy"),
            ),
            "EKS network topology labels (EC2 instance topology)",
        ),
        Preset(
            "gke",
            "gke",
            (
                Level("host", (GKE + "host",), "physical host"),
                Level("subblock", (GKE + "subblock",), "sub-block (rack; on A4X one NVL72 domain)"),
                Level("block", (GKE + "block",), "block of a reservation"),
            ),
            "GKE physical topology labels of reserved capacity",
        ),
        Preset(
            "nvidia-clique",
            "nvl",
            (Level("clique", (GPU_CLIQUE,), "NVLink partition <ClusterUUID>.<CliqueID>"),),
            "GPU Operator's NVLink clique label (multi-node NVLink, e.g. GB200 NVL72)",
        ),
        Preset(
            "topograph",
            "topograph",
            (
                # Topograph leaves its accelerator label unset where the GPU Operator's clique
                # label is present and uses that instead.
                Level("nvl", (TOPOGRAPH + "accelerator", GPU_CLIQUE), "NVLink (accelerator) domain"),
                Level("leaf", (TOPOGRAPH + "leaf", TOPOGRAPH + "block"), "leaf switch"),
                Level("spine", (TOPOGRAPH + "spine",), "spine switch"),
                Level("core", (TOPOGRAPH + "core", TOPOGRAPH + "datacenter"), "core switch"),
            ),
            "NVIDIA Topograph's node labels",
        ),
    )
}


class PresetConfigError(ValueError):
    """The ``presets`` entry of a label source cannot be used; the message names the field."""


def selected_presets(source_config: Mapping[str, Any]) -> list[Preset]:
    """The presets a label source's ``config`` selects, closest to the node first.

    ``presets`` is a preset name or a list of them. Raises PresetConfigError for an unknown
    name, a repeated one, or a value of the wrong type."""
    raw = source_config.get(PRESETS_KEY)
    if raw is None:
        return []
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise PresetConfigError(f"config.{PRESETS_KEY} must be a preset name or a list of them, got {raw!r}")
    out: list[Preset] = []
    for i, name in enumerate(names):
        preset = PRESETS.get(name)
        if preset is None:
            known = ", ".join(sorted(PRESETS))
            raise PresetConfigError(f"config.{PRESETS_KEY}[{i}]: unknown preset {name!r} (known: {known})")
        if preset in out:
            raise PresetConfigError(f"config.{PRESETS_KEY}[{i}]: preset {name!r} is listed twice")
        out.append(preset)
    return out


def chain_of(presets: Sequence[Preset]) -> list[tuple[Preset, Level]]:
    """The stacked levels of ``presets``, closest to the node first."""
    return [(p, level) for p in presets for level in p.levels]


def nominal_tier_names(presets: Sequence[Preset]) -> dict[str, int]:
    """label key -> tier of that level where no level below it is skipped (a hint for names
    used by jobs before discovery has run; real tiers are by height)."""
    return {key: tier for tier, (_, level) in enumerate(chain_of(presets), start=1) for key in level.keys}


_INVALID = re.compile(r"[^a-z0-9.-]+")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def hypernode_name(preset: Preset, level: Level, value: str) -> str:
    """``<prefix>-<level>-<value>`` as a DNS subdomain; a value that had to be changed, or
    shortened, gets a hash of the original so that two values never share a name."""
    base = f"{preset.prefix}-{level.name}-" if len(preset.levels) > 1 else f"{preset.prefix}-"
    clean = _INVALID.sub("-", value.lower()).strip("-.")
    if not _SUBDOMAIN.fullmatch(
        clean
    ):  # e.g. "a.-b": each dot-separated part must be alphanumeric at its ends
        clean = re.sub(r"-+", "-", clean.replace(".", "-")).strip("-")
    name = base + clean
    if clean != value or len(name) > MAX_NAME_LENGTH:
        digest = hashlib.sha256(value.encode()).hexdigest()[:8]
        room = MAX_NAME_LENGTH - len(base) - len(digest) - 1
        name = f"{base}{clean[:room].rstrip('-.')}-{digest}".replace("--", "-")
    return name


@dataclass
class _Domain:
    preset: Preset
    level: Level
    key: str
    value: str
    parent: str | None = None
    nodes: set[str] = field(default_factory=set)
    children: set[str] = field(default_factory=set)


def build_preset_hypernodes(
    presets: Sequence[Preset], nodes: Sequence[Mapping[str, Any]]
) -> tuple[list[HyperNode], list[str]]:
    """The HyperNodes the labels of ``nodes`` describe under ``presets``, and warnings."""
    chain = chain_of(presets)
    domains: dict[str, _Domain] = {}
    warnings: list[str] = []
    for node in sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name", ""))):
        meta = node.get("metadata") or {}
        node_name = str(meta.get("name", ""))
        labels: Mapping[str, Any] = meta.get("labels") or {}
        path: list[str] = []
        for preset, level in chain:
            key = next((k for k in level.keys if labels.get(k)), None)
            if key is None:
                continue  # this node has no such level: the next one up takes its place
            value = str(labels[key])
            name = hypernode_name(preset, level, value)
            dom = domains.get(name)
            if dom is None:
                dom = domains[name] = _Domain(preset, level, key, value)
            elif (dom.key, dom.value) != (key, value):
                warnings.append(
                    f"node {node_name}: {key}={value} and {dom.key}={dom.value} both give HyperNode "
                    f"name {name}; the node is left out of it"
                )
                break
            path.append(name)
        # Link the node's path bottom-up; a domain keeps its first parent.
        for i, name in enumerate(path):
            dom = domains[name]
            if i == 0:
                dom.nodes.add(node_name)
            parent = path[i + 1] if i + 1 < len(path) else None
            if parent is None:
                if dom.parent is not None:
                    warnings.append(
                        f"node {node_name}: {dom.key}={dom.value} has no level above it here but "
                        f"{dom.parent} elsewhere; kept under {dom.parent}"
                    )
                break
            if dom.parent is None:
                dom.parent = parent
                domains[parent].children.add(name)
            elif dom.parent != parent:
                other = domains[parent]
                warnings.append(
                    f"node {node_name}: {dom.key}={dom.value} lies under {dom.parent} for other nodes but "
                    f"under {other.key}={other.value} ({parent}) for this one; kept under {dom.parent}"
                )
                break
    # A domain only a conflicting node named holds nothing: no HyperNode for it.
    domains = {n: d for n, d in domains.items() if d.nodes or d.children}
    # Tiers by height: nodes are tier 0, a HyperNode one more than its highest child.
    tiers: dict[str, int] = {}

    def tier(name: str) -> int:
        if name not in tiers:
            tiers[name] = 1 + max((tier(c) for c in domains[name].children), default=0)
        return tiers[name]

    key_tiers: dict[str, set[int]] = {}
    for name, dom in domains.items():
        key_tiers.setdefault(dom.key, set()).add(tier(name))
    out: list[HyperNode] = []
    # Lowest tier first, so that children exist before the parents that name them.
    for name in sorted(domains, key=lambda n: (tiers[n], n)):
        dom = domains[name]
        # In a mixed tree one label sits at several tiers; a tierName names one tier only.
        tier_name = dom.key if len(key_tiers[dom.key]) == 1 else f"{dom.key}@tier{tiers[name]}"
        if dom.nodes and dom.children:
            warnings.append(
                f"HyperNode {name} ({dom.key}={dom.value}) holds nodes directly "
                f"({', '.join(sorted(dom.nodes)[:3])}{', ...' if len(dom.nodes) > 3 else ''}) "
                "and lower HyperNodes: those nodes lack the lower level's label"
            )
        members = [
            MemberSpec(type="HyperNode", selector=MemberSelector(exact_match=ExactMatch(name=c)))
            for c in sorted(dom.children)
        ] + [
            MemberSpec(type="Node", selector=MemberSelector(exact_match=ExactMatch(name=n)))
            for n in sorted(dom.nodes)
        ]
        out.append(
            HyperNode(
                metadata=ObjectMeta(
                    name=name, labels={NETWORK_TOPOLOGY_SOURCE_LABEL: "label", dom.key: dom.value}
                ),
                spec=HyperNodeSpec(tier=tiers[name], tier_name=tier_name, members=members),
            )
        )
    return out, warnings
