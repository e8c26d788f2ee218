"""Volcano scheduler configuration (``volcano-scheduler.conf``).

The file format is Volcano's ``conf.SchedulerConfiguration``::

    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: gang
        enableJobOrder: false          # the enableXxx / enabledXxx callback switches
        arguments: {...}
    configurations:                    # per-action arguments
    - name: allocate
      arguments: {...}

:func:`load_scheduler_config` accepts that text or a ConfigMap whose ``data`` holds it
under ``volcano-scheduler.conf`` (Helm chart) or ``scheduler.conf``.

What Volcano refuses (``UnmarshalSchedulerConf``; the scheduler then keeps its previous
configuration) raises :class:`ConfigError` here too: YAML that does not decode into the
configuration's types (``tiers`` not a list, a switch that is not a bool, ...), an unknown or
empty action name (``actions: ""``, ``"allocate,"``), and hierarchical drf with proportion
in one tier. Volcano logs and skips a plugin whose name it does not know; we list it in
``unknown_plugins`` and ``warnings`` (the session notes). Plugins Volcano has but hyperplace
does not implement are unknown too.

Differences from Volcano, on purpose:

* Volcano silently ignores misspelt keys (yaml.v2 is not strict); we still ignore them but
  add a warning naming the line.
* Every :class:`ConfigError` names the source, the field and the line.
* A plugin without a name raises :class:`ConfigError` (Volcano skips it).
* PyYAML parses the text; where it differs from yaml.v2 (plain ``y``/``n`` booleans,
  ``1e3`` floats) plugin arguments and switches are read the yaml.v2 way.

Plugin arguments are read by each plugin with the rules of :mod:`.arguments`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from .arguments import YAML_V2_BOOLS

CONFIGMAP_KEYS = ("volcano-scheduler.conf", "scheduler.conf")


# Actions hyperplace runs, and Volcano actions it accepts but does not run. Listing them
# lets Volcano's own configurations (the e2e CI file has reclaim and preempt) load as-is.
IMPLEMENTED_ACTIONS = frozenset(
    {"enqueue", "allocate", "backfill", "preempt", "reclaim", "gangpreempt", "gangreclaim"}
)
# Volcano v1.15's gang-aware eviction actions replace the legacy ones: its design has them
# never configured together with preempt or reclaim in one action list.
LEGACY_EVICTION_ACTIONS = ("preempt", "reclaim")
GANG_EVICTION_ACTIONS = ("gangpreempt", "gangreclaim")
NOOP_ACTIONS: Mapping[str, str] = {
    "shuffle": "evicts pods to rebalance; not run by hyperplace",
}
KNOWN_ACTIONS = frozenset(IMPLEMENTED_ACTIONS | NOOP_ACTIONS.keys())

# Plugins hyperplace implements, and plugins it accepts without effect, with what the
# ignored plugin would have done. They sit in Volcano's default and user-guide tiers, so
# refusing them would refuse Volcano's own configurations.
IMPLEMENTED_PLUGINS = frozenset(
    {
        "priority",
        "gang",
        "predicates",
        "nodeorder",
        "binpack",
        "network-topology-aware",
        "proportion",
        "drf",
        "overcommit",
        "capacity",
        "conformance",
        "sla",
        "cdp",
        "pdb",
        "resourcequota",
        "nodegroup",
    }
)
NOOP_PLUGINS: Mapping[str, str] = {}
KNOWN_PLUGINS = frozenset(IMPLEMENTED_PLUGINS | NOOP_PLUGINS.keys())

# Volcano plugin names that exist upstream but are not in KNOWN_PLUGINS, for a clearer
# warning ("not supported") than for a typo ("unknown").
VOLCANO_ONLY_PLUGINS = frozenset(
    {
        "deviceshare",
        "extender",
        "numaaware",
        "rescheduling",
        "reservation",
        "resource-strategy-fit",
        "task-topology",
        "tdm",
        "usage",
        "capacity-card",
    }
)

# PluginOption callback switches, spelt exactly as Volcano's yaml tags (some say "enable",
# some "enabled"). enableNamespaceOrder only exists in older Volcano releases.
ENABLE_FLAGS = (
    "enableJobOrder",
    "enableNamespaceOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledClusterOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
)


def _flag_stem(name: str) -> str:
    """ "enablePredicate", "enabledPredicate", "EnabledPredicate", "predicate" -> "predicate"."""
    low = name.lower()
    for prefix in ("enabled", "enable"):
        if low.startswith(prefix) and len(low) > len(prefix):
            return low[len(prefix) :]
    return low


_FLAG_BY_STEM = {_flag_stem(f): f for f in ENABLE_FLAGS}


def canonical_flag(name: str) -> str | None:
    """The Volcano yaml key for a callback switch however it is spelt, or None."""
    return _FLAG_BY_STEM.get(_flag_stem(name))


class ConfigError(ValueError):
    """An invalid scheduler configuration; the message names the source, field and line."""


class EnabledFlags(dict[str, bool]):
    """The callback switches of one plugin, keyed by Volcano's yaml key.

    Lookups also accept the other spellings (``"predicate"``, ``"enabledPredicate"``,
    ``"EnabledPredicate"``) because Volcano itself mixes "enable" and "enabled".
    A switch that was not set is True, as ``ApplyPluginConfDefaults`` makes it.
    """

    def _key(self, name: object) -> object:
        if isinstance(name, str):
            return canonical_flag(name) or name
        return name

    def __getitem__(self, name: str) -> bool:
        return super().__getitem__(str(self._key(name)))

    def __contains__(self, name: object) -> bool:
        return super().__contains__(self._key(name))

    def __setitem__(self, name: str, value: bool) -> None:
        super().__setitem__(str(self._key(name)), value)

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(str(self._key(name)), default)


def _all_enabled() -> EnabledFlags:
    return EnabledFlags(dict.fromkeys(ENABLE_FLAGS, True))


def _flags(given: Mapping[str, bool]) -> EnabledFlags:
    """Every switch, on unless ``given`` (in any spelling) turns it off."""
    flags = _all_enabled()
    for key, value in given.items():
        flags[key] = bool(value)
    return flags


@dataclass
class PluginOption:
    """One ``tiers[].plugins[]`` entry: name, arguments and callback switches."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    enabled: dict[str, bool] = field(default_factory=_all_enabled, repr=False)
    # The switches the file wrote (Volcano's *bool: nil and true differ for enableHierarchy).
    explicit: dict[str, bool] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # Built by hand (tests, callers) with a partial or plain dict: fill in the
        # defaults and the spelling-tolerant lookups.
        if not isinstance(self.enabled, EnabledFlags):
            self.enabled = _flags(self.enabled)

    def __repr__(self) -> str:
        off = [k for k, v in self.enabled.items() if not v]
        return f"PluginOption(name={self.name!r}, arguments={self.arguments!r}, disabled={off!r})"

    def is_enabled(self, callback: str) -> bool:
        """Whether a callback (``"predicate"``, ``"enableNodeOrder"``, ...) is switched on."""
        key = canonical_flag(callback)
        if key is None:
            raise KeyError(f"unknown plugin callback switch {callback!r}")
        return bool(self.enabled.get(key, True))


@dataclass
class SchedulerConfig:
    """A parsed scheduler configuration.

    ``actions`` keeps only known actions, in file order; ``tiers`` keeps every plugin
    entry (unknown ones too, so a caller can show the file as written) and
    ``unknown_plugins`` lists the names outside :data:`KNOWN_PLUGINS`.
    """

    actions: list[str]
    tiers: list[list[PluginOption]]
    scheduler_names: tuple[str, ...] = ("volcano",)
    unknown_plugins: list[str] = field(default_factory=list)
    unknown_actions: list[str] = field(default_factory=list)  # always empty: unknown actions raise
    configurations: dict[str, dict[str, Any]] = field(default_factory=dict)  # action -> arguments
    warnings: list[str] = field(default_factory=list)

    def plugin(self, name: str) -> PluginOption | None:
        """The first entry for plugin ``name`` in tier order, or None."""
        for tier in self.tiers:
            for opt in tier:
                if opt.name == name:
                    return opt
        return None

    def action_arguments(self, action: str) -> dict[str, Any]:
        """``configurations[].arguments`` of an action (``GetArgOfActionFromConf``), or {}."""
        return self.configurations.get(action, {})


# ---------------------------------------------------------------------------------------
# Loading


class _Lines:
    """Line numbers of YAML nodes by path, for error messages."""

    def __init__(self, text: str, source: str, offset: int = 0) -> None:
        self.source = source
        self.offset = offset  # lines before the conf text (inside a ConfigMap)
        try:
            self.root: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            self.root = None

    def line(self, path: tuple[str | int, ...]) -> int | None:
        """The line of the node at ``path``, or of its deepest existing ancestor (so a
        missing field points at the map that lacks it)."""
        node = self.root
        if node is None:
            return None
        for step in path:
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                child = next((v for k, v in node.value if getattr(k, "value", None) == step), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
                child = node.value[step]
            if child is None:
                break
            node = child
        return node.start_mark.line + 1 + self.offset

    def where(self, path: tuple[str | int, ...]) -> str:
        text = ""
        for step in path:
            text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
        n = self.line(path)
        return f"{self.source}: {text or '<root>'}" + (f" (line {n})" if n else "")


def _load_yaml(text: str, source: str, offset: int = 0) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        where = f" line {mark.line + 1 + offset}" if mark is not None else ""
        raise ConfigError(f"{source}:{where}: invalid YAML: {problem}") from None


def _unwrap_configmap(doc: Any, text: str, source: str) -> tuple[str, str, int] | None:
    """``(conf text, source label, line offset)`` when ``doc`` is a ConfigMap, else None."""
    if not isinstance(doc, Mapping):
        return None
    data = doc.get("data")
    if doc.get("kind") != "ConfigMap" and not (
        isinstance(data, Mapping) and any(k in data for k in CONFIGMAP_KEYS)
    ):
        return None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: data: a scheduler ConfigMap needs data.{CONFIGMAP_KEYS[0]}")
    for key in CONFIGMAP_KEYS:
        if key in data:
            value = data[key]
            if not isinstance(value, str):
                raise ConfigError(f"{source}: data.{key}: must be a string (use a `|` block)")
            # Errors inside the block are reported with file line numbers where we can
            # find the block: a literal block starts on the line after its key.
            lines = _Lines(text, source)
            key_line = lines.line(("data", key))
            return value, f"{source} data.{key}", (key_line or 1)
    raise ConfigError(
        f"{source}: data: no {' or '.join(CONFIGMAP_KEYS)} key (found: {', '.join(map(str, data)) or 'none'})"
    )


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in YAML_V2_BOOLS:
        return YAML_V2_BOOLS[value]  # yaml.v2 reads a plain y/n as a boolean; PyYAML does not
    # yaml.v2 refuses to unmarshal anything else into *bool and Volcano then keeps its
    # previous configuration; we refuse too.
    raise ConfigError(f"{where}: must be true or false, got {value!r}")


def _parse_plugin(raw: Any, path: tuple[str | int, ...], lines: _Lines, warnings: list[str]) -> PluginOption:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{lines.where(path)}: a plugin must be a map with a name")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{lines.where((*path, 'name'))}: required plugin name is missing")
    arguments = raw.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ConfigError(f"{lines.where((*path, 'arguments'))}: must be a map")
    enabled = _all_enabled()
    explicit: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key in ENABLE_FLAGS:
            enabled[key] = explicit[key] = _as_bool(value, lines.where((*path, key)))
            continue
        hint = canonical_flag(str(key))
        suggestion = f"; did you mean {hint}?" if hint else ""
        warnings.append(
            f"{lines.where((*path, key))}: unknown plugin option, ignored as Volcano does{suggestion}"
        )
    return PluginOption(
        name=name.strip(),
        arguments={str(k): v for k, v in arguments.items()},
        enabled=enabled,
        explicit=explicit,
    )


def _parse_conf(doc: Any, lines: _Lines) -> SchedulerConfig:
    source = lines.source
    if doc is None:
        raise ConfigError(f"{source}: the configuration is empty")
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source}: the configuration must be a YAML map, got {type(doc).__name__}")
    warnings: list[str] = []
    for key in doc:
        if key not in ("actions", "tiers", "configurations", "metrics"):
            warnings.append(f"{lines.where((str(key),))}: unknown field, ignored as Volcano does")

    actions_raw = doc.get("actions", "")
    if actions_raw is None:
        actions_raw = ""
    if not isinstance(actions_raw, str):
        raise ConfigError(
            f"{lines.where(('actions',))}: must be a comma-separated string such as "
            f'"enqueue, allocate, backfill", got {type(actions_raw).__name__}'
        )
    # UnmarshalSchedulerConf: every comma-separated part must name an action, or the whole
    # file is refused ("failed to find Action <part>"). An empty string splits into one
    # empty part, so a file without actions (or with a stray comma) is refused too.
    actions: list[str] = []
    for part in actions_raw.split(","):
        name = part.strip()
        if name in KNOWN_ACTIONS:
            actions.append(name)
            continue
        known = ", ".join(sorted(KNOWN_ACTIONS))
        what = f"unknown action {name!r}" if name else "an empty action name (no actions, or a stray comma)"
        raise ConfigError(
            f"{lines.where(('actions',))}: {what}; Volcano refuses the configuration "
            f"(failed to find Action {part}); known actions: {known}"
        )

    legacy = [a for a in actions if a in LEGACY_EVICTION_ACTIONS]
    gang = [a for a in actions if a in GANG_EVICTION_ACTIONS]
    if legacy and gang:
        raise ConfigError(
            f"{lines.where(('actions',))}: {', '.join(gang)} cannot be combined with {', '.join(legacy)} in one "
            "action list: Volcano's gang-aware eviction actions replace the legacy preempt and reclaim "
            '(use e.g. "enqueue, allocate, backfill, gangpreempt, gangreclaim")'
        )

    tiers_raw = doc.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfigError(f"{lines.where(('tiers',))}: must be a list of {{plugins: [...]}}")
    tiers: list[list[PluginOption]] = []
    unknown_plugins: list[str] = []
    for i, tier in enumerate(tiers_raw):
        if not isinstance(tier, Mapping):
            raise ConfigError(f"{lines.where(('tiers', i))}: a tier must be a map with plugins")
        plugins_raw = tier.get("plugins") or []
        if not isinstance(plugins_raw, list):
            raise ConfigError(f"{lines.where(('tiers', i, 'plugins'))}: must be a list")
        opts = [
            _parse_plugin(p, ("tiers", i, "plugins", j), lines, warnings) for j, p in enumerate(plugins_raw)
        ]
        for j, opt in enumerate(opts):
            if any(opt.name == seen.name for t in (*tiers, opts[:j]) for seen in t):
                warnings.append(
                    f"{lines.where(('tiers', i, 'plugins', j, 'name'))}: plugin {opt.name!r} is configured "
                    "more than once; SchedulerConfig.plugin() returns the first entry"
                )
            if opt.name not in KNOWN_PLUGINS:
                unknown_plugins.append(opt.name)
                what = "is not supported by hyperplace" if opt.name in VOLCANO_ONLY_PLUGINS else "is unknown"
                warnings.append(
                    f"{lines.where(('tiers', i, 'plugins', j, 'name'))}: plugin {opt.name!r} {what}"
                )
        # unmarshalSchedulerConf: hierarchical drf and proportion cannot share a tier.
        if _hierarchical_drf(tier) and any(o.name == "proportion" for o in opts):
            raise ConfigError(
                f"{lines.where(('tiers', i))}: proportion and drf with hierarchy enabled conflicts"
            )
        tiers.append(opts)

    configurations: dict[str, dict[str, Any]] = {}
    conf_raw = doc.get("configurations") or []
    if not isinstance(conf_raw, list):
        raise ConfigError(f"{lines.where(('configurations',))}: must be a list of {{name, arguments}}")
    for i, c in enumerate(conf_raw):
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            raise ConfigError(f"{lines.where(('configurations', i))}: needs a name")
        args = c.get("arguments") or {}
        if not isinstance(args, Mapping):
            raise ConfigError(f"{lines.where(('configurations', i, 'arguments'))}: must be a map")
        # GetArgOfActionFromConf returns the first entry with the name.
        configurations.setdefault(c["name"], {str(k): v for k, v in args.items()})

    return SchedulerConfig(
        actions=actions,
        tiers=tiers,
        unknown_plugins=unknown_plugins,
        configurations=configurations,
        warnings=warnings,
    )


def _hierarchical_drf(tier: Mapping[str, Any]) -> bool:
    """drf with ``enableHierarchy: true`` written in the tier. enableHierarchy defaults to
    True like every switch, but Volcano checks the conflict before applying defaults, so
    only an explicit true counts."""
    return any(
        isinstance(raw, Mapping) and raw.get("name") == "drf" and raw.get("enableHierarchy") is True
        for raw in tier.get("plugins") or []
    )


def load_scheduler_config(text: str, *, source: str = "<config>") -> SchedulerConfig:
    """Parse ``volcano-scheduler.conf`` text, or a ConfigMap YAML that carries it.

    Raises ConfigError (naming ``source``, the field and the line) for YAML errors and
    for values Volcano's yaml.v2 decoding would refuse.
    """
    doc = _load_yaml(text, source)
    inner = _unwrap_configmap(doc, text, source)
    if inner is not None:
        conf_text, label, offset = inner
        return _parse_conf(_load_yaml(conf_text, label, offset), _Lines(conf_text, label, offset))
    return _parse_conf(doc, _Lines(text, source))


# The configuration of Volcano's network-topology user guide (Volcano's default tiers plus
# binpack and network-topology-aware), with GPUs counted in both bin-pack scores: across the five
# seeds of the trace benchmark (bench/quality) that packs more jobs at their minimum leaf span
# and leaves less room stranded than the CPU-and-memory-only arguments Volcano defaults to. On
# nodes without GPUs the extra resource changes nothing. A configuration given to the scheduler
# is taken as written, Volcano's arguments included. (Volcano's compiled-in default has
# overcommit in tier 2 instead of binpack and network-topology-aware.)
DEFAULT_CONFIG_TEXT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
  - name: network-topology-aware
    arguments:
      hypernode.binpack.resources: nvidia.com/gpu
"""

# Shared: copy (copy.deepcopy) before changing it.
DEFAULT_CONFIG: SchedulerConfig = load_scheduler_config(DEFAULT_CONFIG_TEXT, source="<default>")
