"""Loading volcano-scheduler.conf text and ConfigMaps the way Volcano reads them."""

from __future__ import annotations

import pytest

from scheduler_plugin.config.scheduler_conf import (
    DEFAULT_CONFIG,
    KNOWN_ACTIONS,
    KNOWN_PLUGINS,
    ConfigError,
    PluginOption,
    load_scheduler_config,
)
from scheduler_plugin.plugins.network_topology_aware import network_topology_args

# The network-topology user guide's ConfigMap, verbatim (including the trailing blank on the
# fading line).
USER_GUIDE_CONFIGMAP = """\
kind: ConfigMap
apiVersion: v1
metadata:
  name: volcano-scheduler-configmap
  namespace: volcano-system
data:
  volcano-scheduler.conf: |
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
      - name: network-topology-aware # Add it to enable network-topology-aware plugin
        arguments:
          weight: 10
          hypernode.binpack.cpu: 5                                     # HyperNode-level bin packing weight for CPU
          hypernode.binpack.memory: 1                                  # HyperNode-Level bin packing weight for memory
          hypernode.binpack.resources: nvidia.com/gpu, example.com/foo # Custom resource names to be considered by the bin packing strategy
          hypernode.binpack.resources.nvidia.com/gpu: 2                # HyperNode-Level bin packing weight for "nvidia.com/gpu" resources
          hypernode.binpack.resources.example.com/foo: 3               # HyperNode-Level bin packing weight for "example.com/foo" resources
          hypernode.binpack.normal-pod.enable: true                    # Whether or not to enable HyperNode-level bin packing for normal pods
          hypernode.binpack.normal-pod.fading: 0.8                     # Parameter to control the weights of hypernodes of different tiers, i.e., the weights of hypernodes of tier `i` are math.Pow(fading, i-1) \n"""

# Volcano's installer/helm/chart/volcano/config/volcano-scheduler-ci.conf
E2E_CI_CONF = """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""


def names(conf_tiers: list[list[PluginOption]]) -> list[list[str]]:
    return [[o.name for o in tier] for tier in conf_tiers]


def test_user_guide_config_parses_with_gpu_weights() -> None:
    conf = load_scheduler_config(USER_GUIDE_CONFIGMAP, source="volcano-scheduler-configmap.yaml")
    assert conf.actions == ["enqueue", "allocate", "backfill"]
    assert names(conf.tiers) == [
        ["priority", "gang", "conformance"],
        ["drf", "predicates", "proportion", "nodeorder", "binpack", "network-topology-aware"],
    ]
    assert conf.unknown_plugins == [] and conf.unknown_actions == [] and conf.warnings == []
    nta = conf.plugin("network-topology-aware")
    assert nta is not None
    args = network_topology_args(nta.arguments)
    assert args.weight == 10
    assert (args.binpack.cpu, args.binpack.memory) == (5, 1)
    assert args.binpack.listed == {"nvidia.com/gpu": 2, "example.com/foo": 3}
    assert args.normal_pod_enable is True
    assert args.normal_pod_fading == pytest.approx(0.8)
    assert args.evict_max_hypernodes == 8


def test_user_guide_config_is_the_default_config_apart_from_arguments() -> None:
    conf = load_scheduler_config(USER_GUIDE_CONFIGMAP)
    assert conf.actions == DEFAULT_CONFIG.actions
    assert names(conf.tiers) == names(DEFAULT_CONFIG.tiers)
    # Our default differs only in counting GPUs in both bin-pack scores (bench/quality).
    default_nta = DEFAULT_CONFIG.plugin("network-topology-aware")
    assert default_nta is not None and default_nta.arguments == {
        "hypernode.binpack.resources": "nvidia.com/gpu"
    }
    default_binpack = DEFAULT_CONFIG.plugin("binpack")
    assert default_binpack is not None and default_binpack.arguments == {
        "binpack.resources": "nvidia.com/gpu"
    }


def test_e2e_ci_config_parses_with_eviction_actions_accepted() -> None:
    conf = load_scheduler_config(E2E_CI_CONF, source="volcano-scheduler-ci.conf")
    assert conf.actions == ["enqueue", "allocate", "backfill", "reclaim", "preempt"]
    assert names(conf.tiers) == [
        ["priority", "gang", "conformance", "sla"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack", "network-topology-aware"],
    ]
    assert conf.unknown_plugins == [] and conf.unknown_actions == []
    assert all(opt.is_enabled("predicate") for tier in conf.tiers for opt in tier)


def test_default_config_has_the_user_guide_plugins() -> None:
    assert DEFAULT_CONFIG.actions == ["enqueue", "allocate", "backfill"]
    assert names(DEFAULT_CONFIG.tiers) == [
        ["priority", "gang", "conformance"],
        ["drf", "predicates", "proportion", "nodeorder", "binpack", "network-topology-aware"],
    ]
    assert DEFAULT_CONFIG.scheduler_names == ("volcano",)
    assert {opt.name for tier in DEFAULT_CONFIG.tiers for opt in tier} <= KNOWN_PLUGINS
    assert set(DEFAULT_CONFIG.actions) <= KNOWN_ACTIONS


def test_allocate_unit_test_tier_with_subjob_switches() -> None:
    conf = load_scheduler_config(
        """
actions: "allocate"
tiers:
- plugins:
  - name: gang
    enabledSubJobReady: true
    enabledSubJobOrder: true
    enableJobOrder: false
  - name: predicates
  - name: network-topology-aware
"""
    )
    gang = conf.plugin("gang")
    assert gang is not None
    assert gang.enabled["enabledSubJobReady"] is True
    assert gang.is_enabled("subJobOrder")
    assert gang.enabled["enableJobOrder"] is False
    assert not gang.is_enabled("jobOrder")
    # every other switch defaults to on, as ApplyPluginConfDefaults does
    assert gang.is_enabled("enablePredicate") and gang.enabled.get("enabledHyperNodeOrder") is True


def test_flag_lookup_accepts_either_spelling() -> None:
    conf = load_scheduler_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    enableNodeOrder: false\n'
    )
    opt = conf.plugin("binpack")
    assert opt is not None
    for spelling in ("enableNodeOrder", "enabledNodeOrder", "EnabledNodeOrder", "nodeOrder", "NodeOrder"):
        assert opt.enabled[spelling] is False
        assert not opt.is_enabled(spelling)
        assert spelling in opt.enabled
    with pytest.raises(KeyError):
        opt.is_enabled("teleport")


def test_misspelt_switch_is_ignored_like_volcano_but_warned() -> None:
    conf = load_scheduler_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n    enabledPredicate: false\n',
        source="sched.conf",
    )
    opt = conf.plugin("predicates")
    assert opt is not None and opt.is_enabled("predicate")
    assert conf.warnings == [
        "sched.conf: tiers[0].plugins[0].enabledPredicate (line 5): unknown plugin option, "
        "ignored as Volcano does; did you mean enablePredicate?"
    ]


def test_unknown_action_refuses_the_whole_configuration_as_volcano_does() -> None:
    with pytest.raises(ConfigError) as err:
        load_scheduler_config('actions: "enqueue, allocate, teleport"\n', source="x.conf")
    assert str(err.value).startswith("x.conf: actions (line 1): unknown action 'teleport'")
    assert "failed to find Action  teleport" in str(err.value)


@pytest.mark.parametrize("actions", ['""', '"enqueue, allocate,"', '"allocate,,backfill"'])
def test_an_empty_action_name_is_refused(actions: str) -> None:
    # Volcano splits the string on commas and looks every part up, the empty one included.
    with pytest.raises(ConfigError, match="empty action name"):
        load_scheduler_config(f"actions: {actions}\n", source="c")


def test_unknown_and_unsupported_plugins_are_listed() -> None:
    conf = load_scheduler_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: task-topology\n  - name: gnag\n'
    )
    assert conf.unknown_plugins == ["task-topology", "gnag"]
    assert names(conf.tiers) == [["gang", "task-topology", "gnag"]]
    assert any("'task-topology' is not supported" in w for w in conf.warnings)
    assert any("'gnag' is unknown" in w for w in conf.warnings)


def test_action_configurations_are_kept_by_name() -> None:
    conf = load_scheduler_config(
        """
actions: "enqueue, allocate"
configurations:
- name: enqueue
  arguments:
    overcommit-factor: 1.2
- name: enqueue
  arguments:
    overcommit-factor: 9
"""
    )
    assert conf.action_arguments("enqueue") == {"overcommit-factor": 1.2}
    assert conf.action_arguments("allocate") == {}


def test_scheduler_conf_key_in_configmap_is_accepted() -> None:
    cm = 'kind: ConfigMap\ndata:\n  scheduler.conf: |\n    actions: "allocate, backfill"\n'
    assert load_scheduler_config(cm).actions == ["allocate", "backfill"]


# --- errors name the field and line ---------------------------------------------------------


def test_actions_as_a_list_is_refused_naming_the_line() -> None:
    with pytest.raises(ConfigError, match=r"bad\.conf: actions \(line 2\): must be a comma-separated string"):
        load_scheduler_config("# comment\nactions: [enqueue, allocate]\n", source="bad.conf")


def test_non_bool_switch_is_refused_with_configmap_line() -> None:
    cm = (
        "kind: ConfigMap\n"
        "data:\n"
        "  volcano-scheduler.conf: |\n"
        '    actions: "allocate"\n'
        "    tiers:\n"
        "    - plugins:\n"
        "      - name: gang\n"
        "        enableJobOrder: maybe\n"
    )
    with pytest.raises(ConfigError) as err:
        load_scheduler_config(cm, source="cm.yaml")
    assert str(err.value) == (
        "cm.yaml data.volcano-scheduler.conf: tiers[0].plugins[0].enableJobOrder (line 8): "
        "must be true or false, got 'maybe'"
    )


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"x\.conf: line 4: invalid YAML"):
        load_scheduler_config('actions: "allocate"\ntiers:\n  - plugins: [\n  - a: b: c\n', source="x.conf")


def test_plugin_without_name_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"tiers\[1\]\.plugins\[0\]\.name \(line 6\): required plugin name"):
        load_scheduler_config(
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - arguments: {}\n'
        )


def test_empty_configuration_is_refused() -> None:
    with pytest.raises(ConfigError, match="empty"):
        load_scheduler_config("   \n# nothing\n")


def test_configmap_without_scheduler_key_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"no volcano-scheduler\.conf or scheduler\.conf key \(found: other\)"
    ):
        load_scheduler_config("kind: ConfigMap\ndata:\n  other: x\n")


def test_hierarchical_drf_next_to_proportion_conflicts_like_volcano() -> None:
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n  - name: proportion\n'
    with pytest.raises(ConfigError, match="proportion and drf with hierarchy enabled conflicts"):
        load_scheduler_config(text)
    # enableHierarchy defaults to true, but only an explicit true conflicts (Volcano
    # checks before applying defaults)
    load_scheduler_config(text.replace("    enableHierarchy: true\n", ""))


def test_unknown_top_level_field_is_warned() -> None:
    conf = load_scheduler_config('actions: "allocate"\nactionz: "x"\n', source="c")
    assert conf.warnings == ["c: actionz (line 2): unknown field, ignored as Volcano does"]


def test_config_without_actions_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^c: actions \(line 1\): an empty action name"):
        load_scheduler_config("tiers:\n- plugins:\n  - name: gang\n", source="c")


def test_duplicate_plugin_is_warned_and_first_entry_wins() -> None:
    conf = load_scheduler_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    arguments: {binpack.cpu: 3}\n'
        "- plugins:\n  - name: binpack\n    arguments: {binpack.cpu: 9}\n",
        source="c",
    )
    binpack = conf.plugin("binpack")
    assert binpack is not None and binpack.arguments == {"binpack.cpu": 3}
    assert conf.warnings == [
        "c: tiers[1].plugins[0].name (line 7): plugin 'binpack' is configured more than once; "
        "SchedulerConfig.plugin() returns the first entry"
    ]


def test_plain_y_and_n_switches_are_booleans_as_in_yaml_v2() -> None:
    conf = load_scheduler_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: n\n'
    )
    gang = conf.plugin("gang")
    assert gang is not None and not gang.is_enabled("jobOrder")


def test_plugin_option_built_by_hand_gets_defaults_and_tolerant_lookups() -> None:
    opt = PluginOption("predicates", enabled={"predicate": False})
    assert not opt.is_enabled("enablePredicate")
    assert opt.enabled["enablePredicate"] is False
    assert opt.is_enabled("nodeOrder")  # not given: on
    opt.enabled["enabledNodeOrder"] = False  # any spelling writes the canonical switch
    assert opt.enabled["enableNodeOrder"] is False
    assert "enabledNodeOrder" not in dict(opt.enabled)
    assert (
        repr(opt)
        == "PluginOption(name='predicates', arguments={}, disabled=['enablePredicate', 'enableNodeOrder'])"
    )
