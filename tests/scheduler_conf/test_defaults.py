"""The tests' view of the default configuration stays the scheduler's own."""

from __future__ import annotations

import pytest

from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG, load_scheduler_config
from tests.scheduler_conf.defaults import TOPOLOGY_PLUGIN, default_conf_text


def test_unchanged_it_is_the_default() -> None:
    assert load_scheduler_config(default_conf_text()) == DEFAULT_CONFIG


def test_volcano_tiers_are_ours_without_what_ours_adds() -> None:
    conf = load_scheduler_config(default_conf_text("enqueue, allocate, reclaim", volcano=True))
    assert conf.actions == ["enqueue", "allocate", "reclaim"]
    assert conf.plugin(TOPOLOGY_PLUGIN) is None
    binpack = conf.plugin("binpack")
    assert binpack is not None and binpack.arguments == {}
    ours = [[o.name for o in tier if o.name != TOPOLOGY_PLUGIN] for tier in DEFAULT_CONFIG.tiers]
    assert [[o.name for o in tier] for tier in conf.tiers] == ours


def test_a_plugin_the_default_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="no plugin"):
        default_conf_text(without={"nodeordr"})
