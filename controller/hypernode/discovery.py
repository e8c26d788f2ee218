"""HyperNode auto-discovery, as Volcano's discoverers do it: from node labels (here) and
from an NVIDIA UFM fabric (:mod:`controller.hypernode.ufm`, sources ``ufm``).

Configuration lives in Volcano's ConfigMap ``volcano-controller-configmap``, key
``volcano-controller.conf``::

    networkTopologyDiscovery:
      - source: label
        enabled: true
        interval: 10m
        config:
          networkTopologyTypes:
            topograph:                       # type name, at most 20 characters
              - nodeLabel: network.topology.nvidia.com/spine      # top ...
              - nodeLabel: network.topology.nvidia.com/block
              - nodeLabel: kubernetes.io/hostname               # ... bottom (dropped)

Rules (``pkg/controllers/hypernode/discovery/label/label.go``):

* Each type's list runs top to bottom. The last entry (the hostname) is dropped and the
  rest reversed, so the key just above the hostname is tier 1.
* A type whose name is longer than 20 characters, or whose list repeats a label, is
  rejected with a warning (Volcano logs and skips it).
* Per node and type, keys are walked from tier 1 upward, stopping at the first missing
  key. The HyperNode at tier i is identified by (key, value) *globally*, across types;
  its members are the node (tier 1) or the tier-(i-1) HyperNode, of type Node at tier 1
  and HyperNode above, de-duplicated and sorted by name.
* ``tierName`` is the label key; labels are ``volcano.sh/network-topology-source=label``
  plus ``{key: value}``.
* Names: an existing label-sourced HyperNode carrying ``{key: value}`` whose name starts
  with ``hypernode-<cleanType>-tier<i>`` is reused (first by name); otherwise
  ``hypernode-<cleanType>-tier<i>-<5 random chars>`` with up to 20 attempts to avoid a
  clash. Randomness comes from the caller's ``random.Random`` so runs are reproducible.
* Existing HyperNodes carrying the source label are created, updated or deleted to match.

Go's map iteration and lister order are random; we walk types and nodes sorted by name so
that one ``rng`` seed always yields the same names.

Besides Volcano's rules, a label source may name ``presets`` (``aws``, ``gke``,
``nvidia-clique``, ``topograph``): the labels clouds and NVIDIA write, turned into HyperNodes
by :mod:`controller.hypernode.presets`; both kinds are reconciled together.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from hyperplace.api import ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec, ObjectMeta
from hyperplace.api.constants import NETWORK_TOPOLOGY_SOURCE_LABEL
from hyperplace.api.times import parse_go_duration

from .presets import PresetConfigError, build_preset_hypernodes, nominal_tier_names, selected_presets
from .ufm import UFM_SOURCE, UfmError, UfmPort, parse_ports, read_file_answer, ufm_settings
from .ufm import build_hypernodes as build_ufm_hypernodes

CONFIGMAP_NAME = "volcano-controller-configmap"
CONFIG_KEY = "volcano-controller.conf"
LABEL_SOURCE = "label"
DEFAULT_INTERVAL_SECONDS = 3600.0
MAX_TYPE_NAME_LENGTH = 20
NAME_ATTEMPTS = 20
# k8s.io/apimachinery/pkg/util/rand.String's alphabet (no vowels, no confusable digits).
RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class DiscoveryConfigError(ValueError):
    """The ConfigMap cannot be used; the message reads like Volcano's loader error."""


class DiscoveryError(RuntimeError):
    """Discovery could not produce a result (Volcano retries the whole run later)."""


@dataclass
class DiscoverySource:
    """One ``networkTopologyDiscovery`` entry."""

    source: str
    enabled: bool = False
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS
    credentials: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class DiscoveryConfig:
    sources: list[DiscoverySource] = field(default_factory=list)

    def enabled(self, source: str) -> DiscoverySource | None:
        """The first enabled entry for ``source``, if any."""
        return next((s for s in self.sources if s.source == source and s.enabled), None)


@dataclass
class DiscoveryResult:
    """What label discovery wants the cluster to hold, and the changes to get there."""

    desired: list[HyperNode] = field(default_factory=list)
    create: list[HyperNode] = field(default_factory=list)
    update: list[HyperNode] = field(default_factory=list)  # existing objects with spec/labels applied
    delete: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    enabled: bool = True


# --- configuration -----------------------------------------------------------------------


def _interval(raw: Any) -> float:
    """Volcano: a missing, unparseable or non-positive interval means one hour."""
    if raw is None:
        return DEFAULT_INTERVAL_SECONDS
    try:
        seconds = float(raw) / 1e9 if isinstance(raw, int | float) else parse_go_duration(str(raw))
    except ValueError:
        return DEFAULT_INTERVAL_SECONDS
    return seconds if seconds > 0 else DEFAULT_INTERVAL_SECONDS


def parse_discovery_config(configmap_or_yaml: Mapping[str, Any] | str) -> DiscoveryConfig:
    """Read ``networkTopologyDiscovery`` from Volcano's controller ConfigMap.

    Accepts the ConfigMap (a dict with ``data``), the YAML text under its key, or that
    YAML already parsed. Raises DiscoveryConfigError with Volcano's loader messages.
    """
    doc: Any
    if isinstance(configmap_or_yaml, str):
        text: Any = configmap_or_yaml
    elif "data" in configmap_or_yaml or configmap_or_yaml.get("kind") == "ConfigMap":
        data = configmap_or_yaml.get("data") or {}
        if CONFIG_KEY not in data:
            raise DiscoveryConfigError(f"config key not found in ConfigMap: {CONFIG_KEY}")
        text = data[CONFIG_KEY]
    else:
        text = None
        doc = configmap_or_yaml
    if text is not None:
        try:
            doc = yaml.safe_load(text) if text else {}
        except yaml.YAMLError as exc:
            raise DiscoveryConfigError(f"failed to parse config: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise DiscoveryConfigError(f"failed to parse config: expected a mapping, got {type(doc).__name__}")
    entries = doc.get("networkTopologyDiscovery") or []
    if not isinstance(entries, list):
        raise DiscoveryConfigError("failed to parse config: networkTopologyDiscovery must be a list")
    sources: list[DiscoverySource] = []
    for e in entries:
        if not isinstance(e, Mapping):
            raise DiscoveryConfigError(
                "failed to parse config: networkTopologyDiscovery entries must be mappings"
            )
        cfg = e.get("config") or {}
        sources.append(
            DiscoverySource(
                source=str(e.get("source", "")),
                enabled=e.get("enabled") is True,
                interval_seconds=_interval(e.get("interval")),
                credentials=dict(e["credentials"]) if isinstance(e.get("credentials"), Mapping) else None,
                config=dict(cfg) if isinstance(cfg, Mapping) else {},
            )
        )
        if sources[-1].source == LABEL_SOURCE:
            try:
                selected_presets(sources[-1].config)
            except PresetConfigError as exc:
                # Refused whole, like any unusable ConfigMap: the HyperNodes stay as they are.
                raise DiscoveryConfigError(f"label source: {exc}") from None
    return DiscoveryConfig(sources=sources)


def discovered_tier_names(source_config: Mapping[str, Any]) -> dict[str, int]:
    """tierName -> tier that label discovery of this source's ``config`` will create: the label
    keys of the ``networkTopologyTypes`` rules and of the selected presets."""
    types, _ = label_tiers(source_config)
    try:
        out = nominal_tier_names(selected_presets(source_config))
    except PresetConfigError:
        out = {}
    out.update({key: tier for keys in types.values() for tier, key in enumerate(keys, start=1)})
    return out


def label_tiers(source_config: Mapping[str, Any]) -> tuple[dict[str, list[str]], list[str]]:
    """``{type: [tier-1 key, tier-2 key, ...]}`` plus warnings for rejected types."""
    out: dict[str, list[str]] = {}
    warnings: list[str] = []
    types = source_config.get("networkTopologyTypes") or {}
    if not isinstance(types, Mapping):
        return out, [f"Cannot get networkTopologyTypes: expected a mapping, got {type(types).__name__}"]
    for name in sorted(types, key=str):
        entries = types[name]
        tname = str(name)
        if len(tname) > MAX_TYPE_NAME_LENGTH:
            warnings.append(
                f"The length of topologyTypeName exceeds {MAX_TYPE_NAME_LENGTH}. topologyTypeName is {tname}"
            )
            continue
        if not isinstance(entries, list) or not all(isinstance(x, Mapping) for x in entries):
            warnings.append(
                f"The configMap format is incorrect, type {tname} must list {{nodeLabel: key}} entries"
            )
            continue
        keys = [str(x.get("nodeLabel", "")) for x in entries]
        if len(set(keys)) != len(keys):
            warnings.append(
                f"The configMap format is incorrect, label is {keys}, error is there are duplicate labels"
            )
            continue
        out[tname] = list(reversed(keys[:-1]))
    return out, warnings


# --- discovery ---------------------------------------------------------------------------


def clean_type_name(name: str) -> str:
    """Volcano's ``cleanString``: lowercase letters; keep digits, '.', '-'; else '-'."""
    return "".join(c.lower() if c.isalpha() else c if (c.isdigit() or c in ".-") else "-" for c in name)


def is_label_sourced(hn: HyperNode) -> bool:
    return (hn.metadata.labels or {}).get(NETWORK_TOPOLOGY_SOURCE_LABEL) == LABEL_SOURCE


@dataclass
class _Info:
    tier: int
    tier_name: str
    labels: dict[str, str]
    members: list[str] = field(default_factory=list)


def _build_name(
    type_name: str,
    key: str,
    value: str,
    tier: int,
    labelled: Mapping[tuple[str, str], list[str]],
    taken: set[str],
    infos: Mapping[str, _Info],
    rng: random.Random,
) -> str:
    clean = clean_type_name(type_name)
    prefix = f"hypernode-{clean}-tier{tier}"
    for name in labelled.get((key, value), ()):  # sorted by name, for determinism
        if name.startswith(prefix):
            return name
    for _ in range(NAME_ATTEMPTS):
        suffix = "".join(rng.choice(RANDOM_ALPHABET) for _ in range(5))
        name = f"{prefix}-{suffix}"
        if name not in taken and name not in infos:
            return name
    raise DiscoveryError(f"unable to get unique hyperNodeName after {NAME_ATTEMPTS} attempts")


def _node_name_labels(node: Mapping[str, Any]) -> tuple[str, Mapping[str, str]]:
    meta = node.get("metadata") or {}
    return str(meta.get("name", "")), meta.get("labels") or {}


def discover_from_labels(
    config: DiscoveryConfig | Mapping[str, Any],
    nodes: list[dict[str, Any]],
    existing: list[HyperNode],
    rng: random.Random,
) -> DiscoveryResult:
    """The label-sourced HyperNodes the cluster should hold, and the diff to get there.

    ``config`` is a DiscoveryConfig (only an enabled ``label`` source runs; without one
    nothing is touched and ``enabled`` is False) or directly that source's ``config``
    mapping. Raises DiscoveryError when no unique name can be drawn.
    """
    if isinstance(config, DiscoveryConfig):
        source = config.enabled(LABEL_SOURCE)
        if source is None:
            return DiscoveryResult(enabled=False)
        source_config: Mapping[str, Any] = source.config
    else:
        source_config = config
    tiers, warnings = label_tiers(source_config)

    labelled = [hn for hn in existing if is_label_sourced(hn)]
    # (label key, value) -> names of label-sourced HyperNodes carrying it, sorted.
    by_pair: dict[tuple[str, str], list[str]] = {}
    for hn in sorted(labelled, key=lambda h: h.name):
        for k, v in (hn.metadata.labels or {}).items():
            by_pair.setdefault((k, v), []).append(hn.name)
    taken = {hn.name for hn in existing}
    infos: dict[str, _Info] = {}
    by_label: dict[tuple[str, str], str] = {}
    for node in sorted(nodes, key=lambda n: _node_name_labels(n)[0]):
        node_name, labels = _node_name_labels(node)
        for type_name, keys in tiers.items():
            member = node_name
            for i, key in enumerate(keys):
                if key not in labels:
                    break
                value = str(labels[key])
                tier = i + 1
                name = by_label.get((key, value))
                if name is None:
                    name = _build_name(type_name, key, value, tier, by_pair, taken, infos, rng)
                    by_label[(key, value)] = name
                # The first sighting fixes tier and labels (Volcano keeps the first record).
                info = infos.setdefault(name, _Info(tier=tier, tier_name=key, labels={key: value}))
                info.members.append(member)
                member = name

    desired = [
        HyperNode(
            metadata=ObjectMeta(
                name=name, labels={NETWORK_TOPOLOGY_SOURCE_LABEL: LABEL_SOURCE, **info.labels}
            ),
            spec=HyperNodeSpec(
                tier=info.tier,
                tier_name=info.tier_name,
                members=[
                    MemberSpec(
                        type="Node" if info.tier == 1 else "HyperNode",
                        selector=MemberSelector(exact_match=ExactMatch(name=m)),
                    )
                    for m in sorted(set(info.members))
                ],
            ),
        )
        for name, info in sorted(infos.items())
    ]

    try:
        presets = selected_presets(source_config)
    except PresetConfigError as exc:  # parse_discovery_config refuses it before this
        raise DiscoveryError(f"label source: {exc}") from None
    if presets:
        from_presets, preset_warnings = build_preset_hypernodes(presets, nodes)
        clash = {h.name for h in desired} & {h.name for h in from_presets}
        if clash:
            raise DiscoveryError(f"presets and networkTopologyTypes both name HyperNodes {sorted(clash)}")
        desired = [*desired, *from_presets]  # presets' come lowest tier first: children before parents
        warnings.extend(preset_warnings)

    result = source_diff(desired, existing, LABEL_SOURCE)
    result.warnings[:0] = warnings
    return result


def source_of(hn: HyperNode) -> str | None:
    """The discovery source that manages ``hn`` (its ``volcano.sh/network-topology-source``)."""
    return (hn.metadata.labels or {}).get(NETWORK_TOPOLOGY_SOURCE_LABEL)


def source_diff(desired: list[HyperNode], existing: list[HyperNode], source: str) -> DiscoveryResult:
    """Create, update or delete the HyperNodes labelled with ``source`` so that they match
    ``desired`` (Volcano's ``reconcileTopology``). A desired name already taken by a HyperNode
    of another source, or of none, is left alone with a warning rather than taken over."""
    warnings: list[str] = []
    current = {hn.name: hn for hn in existing}
    create: list[HyperNode] = []
    update: list[HyperNode] = []
    for want in desired:
        have = current.get(want.name)
        if have is None:
            create.append(want)
            continue
        if source_of(have) != source:
            owner = source_of(have)
            warnings.append(
                f"HyperNode {want.name} exists and is not managed by {source} discovery "
                f"({'source ' + owner if owner else 'created by hand'}); left unchanged"
            )
            continue
        labels = {**(have.metadata.labels or {}), **(want.metadata.labels or {})}
        # Compare before copying: a re-discovery that changes nothing must stay cheap.
        if want.spec.to_dict() != have.spec.to_dict() or labels != (have.metadata.labels or {}):
            # Volcano's update: spec replaced, labels merged, everything else kept.
            merged = have.model_copy(deep=True)
            merged.spec = want.spec.model_copy(deep=True)
            merged.metadata.labels = labels
            update.append(merged)
    wanted = {hn.name for hn in desired}
    delete = sorted(hn.name for hn in existing if source_of(hn) == source and hn.name not in wanted)
    return DiscoveryResult(desired=desired, create=create, update=update, delete=delete, warnings=warnings)


# --- UFM ---------------------------------------------------------------------------------


def discover_from_ufm(ports: list[UfmPort], existing: list[HyperNode]) -> DiscoveryResult:
    """The UFM-sourced HyperNodes of one complete answer, and the diff to get there."""
    return source_diff(build_ufm_hypernodes(ports), existing, UFM_SOURCE)


def discover_offline(
    config: DiscoveryConfig,
    nodes: list[dict[str, Any]],
    existing: list[HyperNode],
    rng: random.Random,
) -> DiscoveryResult:
    """What the controller's discovery would do, without a cluster or a network: label
    discovery, and UFM discovery when its endpoint is a ``file://`` saved answer.

    Sources run in turn, each on the result of the previous one. A UFM source that is
    fetched over the network, or whose saved answer cannot be used, adds a warning and
    changes nothing (the controller would keep its last good tree too). Raises
    DiscoveryError as :func:`discover_from_labels` does.
    """
    out = DiscoveryResult(enabled=False)
    current = {hn.name: hn for hn in existing}

    def apply(result: DiscoveryResult) -> None:
        out.enabled = True
        out.warnings.extend(result.warnings)
        for name in result.delete:
            current.pop(name, None)
            out.delete.append(name)
        for hn in result.update:
            current[hn.name] = hn
            out.update.append(hn)
        for hn in result.create:
            current[hn.name] = hn
            out.create.append(hn)
        out.desired.extend(result.desired)

    if config.enabled(LABEL_SOURCE) is not None:
        apply(discover_from_labels(config, nodes, list(current.values()), rng))
    source = config.enabled(UFM_SOURCE)
    if source is not None:
        try:
            settings = ufm_settings(source.config)
            if not settings.is_file:
                raise UfmError(
                    f"endpoint {settings.endpoint} is fetched by the controller; give a saved answer "
                    "(file:///path/ports.json) to preview it offline"
                )
            ports = parse_ports(read_file_answer(settings.url))
        except UfmError as exc:
            out.enabled = True
            out.warnings.append(f"ufm discovery: {exc}; HyperNodes kept as they are")
        else:
            apply(discover_from_ufm(ports, list(current.values())))
    return out
