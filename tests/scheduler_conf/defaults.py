"""The scheduler's default configuration as a test varies it: one source for the default tiers the
tests run with, read from the scheduler's own text (``DEFAULT_CONFIG_TEXT``) so they cannot drift
from it. A test names only what it changes: the actions, Volcano's tiers instead of ours, a plugin
left out or replaced."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import yaml

from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT

# What our default adds to Volcano's default tiers (scheduler_conf.py says why): the
# network-topology-aware plugin, and GPUs counted by binpack.
TOPOLOGY_PLUGIN = "network-topology-aware"
GPU_BINPACK_ARGUMENTS = {"binpack": {"binpack.resources": "nvidia.com/gpu"}}


def default_conf_text(
    actions: str | None = None,
    *,
    volcano: bool = False,
    without: Collection[str] = (),
    replace: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The default configuration's text, with ``actions`` (as written in the file) instead of its own.

    ``volcano``: Volcano's default tiers, which ours extends: without network-topology-aware and
    with binpack's own arguments. ``without``: plugins left out. ``replace``: a plugin's entry
    given in place of another's, e.g. ``{"proportion": {"name": "capacity"}}``. A plugin named
    that the default does not have is an error, so a change of the default cannot silently
    change what a test runs."""
    doc = yaml.safe_load(DEFAULT_CONFIG_TEXT)
    if actions is not None:
        doc["actions"] = actions
    drop = set(without) | ({TOPOLOGY_PLUGIN} if volcano else set())
    replace = replace or {}
    seen: set[str] = set()
    for tier in doc["tiers"]:
        kept = []
        for entry in tier["plugins"]:
            name = entry["name"]
            seen.add(name)
            if name in drop:
                continue
            if volcano and name in GPU_BINPACK_ARGUMENTS:
                if entry.get("arguments") != GPU_BINPACK_ARGUMENTS[name]:
                    raise ValueError(
                        f"the default's {name} lacks the GPU arguments {GPU_BINPACK_ARGUMENTS[name]}"
                    )
                del entry["arguments"]
            kept.append(dict(replace[name]) if name in replace else entry)
        tier["plugins"] = kept
    missing = (drop | set(replace)) - seen
    if missing:
        raise ValueError(f"the default configuration has no plugin {sorted(missing)}")
    return yaml.safe_dump(doc, sort_keys=False)
