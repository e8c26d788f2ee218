"""Plugin arguments read as Volcano's ``framework.Arguments`` reads them.

``GetInt`` takes only integers, ``GetFloat64`` integers or floats, ``GetBool`` only booleans;
anything else keeps the default, with a warning. A string value is first read as the unquoted
YAML scalar it spells (``"10"`` -> 10, ``"true"`` -> True), because arguments that went through
a string-only channel (older Volcano's ``map[string]string``, CLI flags) should mean what they
would have meant in the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

# yaml.v2 scalars PyYAML resolves differently (see yaml_v2_scalar).
YAML_V2_BOOLS = {"y": True, "Y": True, "n": False, "N": False}
_YAML_V2_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


def yaml_v2_scalar(value: Any) -> Any:
    """A string read as the unquoted YAML scalar it spells; other values unchanged.

    PyYAML and Volcano's yaml.v2 both follow YAML 1.1 but differ in two corners, which
    we resolve like yaml.v2: ``y``/``n`` are booleans, and ``1e3`` (no dot, unsigned
    exponent) is a float.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in YAML_V2_BOOLS:
        return YAML_V2_BOOLS[text]
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return value
    if isinstance(parsed, bool | int | float):
        return parsed
    if _YAML_V2_FLOAT.match(text):
        return float(text)
    return value


def get_int(args: Mapping[str, Any], key: str, default: int, warnings: list[str]) -> int:
    """``Arguments.GetInt``: only an integer replaces the default (not a float, not a bool)."""
    if key not in args:
        return default
    value = yaml_v2_scalar(args[key])
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    warnings.append(f"Could not parse argument: {args[key]!r} for key {key} to int")
    return default


def get_float(args: Mapping[str, Any], key: str, default: float, warnings: list[str]) -> float:
    """``Arguments.GetFloat64``: a float or an integer replaces the default."""
    if key not in args:
        return default
    value = yaml_v2_scalar(args[key])
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    warnings.append(f"Could not parse argument: {args[key]!r} for key {key} to float64")
    return default


def get_bool(args: Mapping[str, Any], key: str, default: bool, warnings: list[str]) -> bool:
    """``Arguments.GetBool``: only a boolean replaces the default."""
    if key not in args:
        return default
    value = yaml_v2_scalar(args[key])
    if isinstance(value, bool):
        return value
    warnings.append(f"Could not parse argument: {args[key]!r} for key {key} to bool")
    return default


def weighted_resources(args: Mapping[str, Any], list_key: str, warnings: list[str]) -> dict[str, int]:
    """``<list_key>: "a, b"`` plus ``<list_key>.<name>: weight`` (default 1, < 0 -> 1).

    A non-string list is treated as empty, and weight keys for names not in the list are
    ignored, as in Volcano.
    """
    raw = args.get(list_key, "")
    if not isinstance(raw, str):
        warnings.append(f"Could not parse argument: {raw!r} for key {list_key} to string")
        raw = ""
    out: dict[str, int] = {}
    for part in raw.split(","):
        name = part.strip()
        if not name:
            continue
        weight = get_int(args, f"{list_key}.{name}", 1, warnings)
        out[name] = 1 if weight < 0 else weight
    return out


@dataclass
class ResourceWeights:
    """The weights of a bin-packing score (Volcano's ``getBinPackWeight``): cpu and memory
    always take part, another resource only when listed."""

    cpu: int = 1
    memory: int = 1
    listed: dict[str, int] = field(default_factory=dict)

    def of(self, name: str) -> int | None:
        """A resource's weight, or None when it takes no part."""
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        return self.listed.get(name)


def resource_weights(args: Mapping[str, Any], prefix: str, warnings: list[str]) -> ResourceWeights:
    """``<prefix>.cpu`` and ``<prefix>.memory`` (default 1, < 0 -> 1) and the resources of
    ``<prefix>.resources`` (see :func:`weighted_resources`)."""
    cpu = get_int(args, f"{prefix}.cpu", 1, warnings)
    memory = get_int(args, f"{prefix}.memory", 1, warnings)
    return ResourceWeights(
        cpu=1 if cpu < 0 else cpu,
        memory=1 if memory < 0 else memory,
        listed=weighted_resources(args, f"{prefix}.resources", warnings),
    )
