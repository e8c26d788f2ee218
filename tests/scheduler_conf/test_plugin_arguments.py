"""Plugin arguments parsed with Volcano's framework.Arguments rules and defaults."""

from __future__ import annotations

import operator
from typing import Any

import pytest

from scheduler_plugin.config.arguments import ResourceWeights
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.plugins.binpack import BinpackArgs, binpack_args
from scheduler_plugin.plugins.network_topology_aware import NetworkTopologyArgs, network_topology_args


def test_no_arguments_give_volcano_defaults() -> None:
    args = network_topology_args({})
    assert args == NetworkTopologyArgs(
        weight=1,
        binpack=ResourceWeights(cpu=1, memory=1, listed={}),
        normal_pod_enable=True,
        normal_pod_fading=0.8,
        evict_max_hypernodes=8,
    )
    assert network_topology_args(None) == args
    assert args.warnings == ()


def test_volcano_unit_test_customized_arguments() -> None:
    # network_topology_aware_test.go "build plugin with customized valid arguments"
    args = network_topology_args(
        {
            "weight": 2,
            "hypernode.binpack.cpu": 3,
            "hypernode.binpack.memory": 4,
            "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpuxxx": 5,
            "hypernode.binpack.resources.example.com/foo": 6,
            "hypernode.binpack.normal-pod.enable": False,
            "hypernode.binpack.normal-pod.fading": 0,
        }
    )
    assert (args.weight, args.binpack.cpu, args.binpack.memory) == (2, 3, 4)
    # the gpuxxx key names no listed resource: ignored, so the GPU keeps weight 1
    assert args.binpack.listed == {"nvidia.com/gpu": 1, "example.com/foo": 6}
    assert args.normal_pod_enable is False
    assert args.normal_pod_fading == 0.0


@pytest.mark.parametrize(
    ("key", "attr", "default"),
    [
        ("weight", "weight", 1),
        ("hypernode.binpack.cpu", "binpack.cpu", 1),
        ("hypernode.binpack.memory", "binpack.memory", 1),
    ],
)
def test_negative_weights_reset_to_one_and_zero_is_kept(key: str, attr: str, default: int) -> None:
    def read(value: int) -> Any:
        return operator.attrgetter(attr)(network_topology_args({key: value}))

    assert read(-3) == default
    assert read(0) == 0
    assert read(7) == 7


def test_negative_resource_weight_resets_to_one() -> None:
    args = network_topology_args(
        {"hypernode.binpack.resources": "nvidia.com/gpu", "hypernode.binpack.resources.nvidia.com/gpu": -2}
    )
    assert args.binpack.listed == {"nvidia.com/gpu": 1}


def test_resource_list_is_trimmed_and_blank_entries_dropped() -> None:
    args = network_topology_args({"hypernode.binpack.resources": " nvidia.com/gpu ,, example.com/foo ,"})
    assert args.binpack.listed == {"nvidia.com/gpu": 1, "example.com/foo": 1}


def test_resource_list_that_is_not_a_string_counts_as_empty() -> None:
    args = network_topology_args({"hypernode.binpack.resources": ["nvidia.com/gpu"]})
    assert args.binpack.listed == {}
    assert args.warnings


def test_fading_negative_resets_zero_allowed_int_accepted() -> None:
    assert network_topology_args({"hypernode.binpack.normal-pod.fading": -0.5}).normal_pod_fading == 0.8
    assert network_topology_args({"hypernode.binpack.normal-pod.fading": 0.0}).normal_pod_fading == 0.0
    # GetFloat64 also takes a YAML integer
    assert network_topology_args({"hypernode.binpack.normal-pod.fading": 1}).normal_pod_fading == 1.0


@pytest.mark.parametrize(("value", "expected"), [(0, 8), (-1, 8), (3, 3), ("5", 5)])
def test_evict_max_hypernodes_non_positive_resets_to_eight(value: Any, expected: int) -> None:
    assert (
        network_topology_args({"hypernode.gradient.evict.max-hypernodes": value}).evict_max_hypernodes
        == expected
    )


@pytest.mark.parametrize("value", ["yes please", 1, 0, "1", None, 0.5])
def test_non_bool_normal_pod_enable_keeps_the_default(value: Any) -> None:
    args = network_topology_args({"hypernode.binpack.normal-pod.enable": value})
    assert args.normal_pod_enable is True
    assert any("hypernode.binpack.normal-pod.enable to bool" in w for w in args.warnings)


@pytest.mark.parametrize(
    ("value", "expected"), [("false", False), ("False", False), ("true", True), (False, False)]
)
def test_bool_strings_read_as_yaml_would(value: Any, expected: bool) -> None:
    assert network_topology_args({"hypernode.binpack.normal-pod.enable": value}).normal_pod_enable is expected


@pytest.mark.parametrize(("value", "expected"), [("10", 10), (" 3 ", 3), ("0", 0)])
def test_integer_strings_read_as_yaml_would(value: str, expected: int) -> None:
    assert network_topology_args({"weight": value}).weight == expected


@pytest.mark.parametrize("value", [2.5, 10.0, "2.5", "ten", True, None, [1]])
def test_non_integer_weight_keeps_the_default_like_go_get_int(value: Any) -> None:
    args = network_topology_args({"weight": value})
    assert args.weight == 1
    assert args.warnings == (f"Could not parse argument: {value!r} for key weight to int",)


def test_fading_as_string() -> None:
    assert network_topology_args({"hypernode.binpack.normal-pod.fading": "0.5"}).normal_pod_fading == 0.5
    assert network_topology_args({"hypernode.binpack.normal-pod.fading": "half"}).normal_pod_fading == 0.8


def test_resource_weight_lookup_mirrors_get_bin_pack_weight() -> None:
    args = network_topology_args(
        {
            "hypernode.binpack.cpu": 5,
            "hypernode.binpack.resources": "nvidia.com/gpu",
            "hypernode.binpack.memory": 0,
        }
    )
    assert args.binpack.of("cpu") == 5
    assert args.binpack.of("memory") == 0
    assert args.binpack.of("nvidia.com/gpu") == 1
    assert args.binpack.of("pods") is None
    assert args.binpack.of("example.com/foo") is None


# --- binpack -------------------------------------------------------------------------------


def test_binpack_defaults() -> None:
    assert binpack_args({}) == BinpackArgs(weight=1, weights=ResourceWeights(cpu=1, memory=1, listed={}))


def test_binpack_plugin_documented_example() -> None:
    args = binpack_args(
        {
            "binpack.weight": 10,
            "binpack.cpu": 5,
            "binpack.memory": 1,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 2,
            "binpack.resources.example.com/foo": 3,
        }
    )
    assert (args.weight, args.weights.cpu, args.weights.memory) == (10, 5, 1)
    assert args.weights.listed == {"nvidia.com/gpu": 2, "example.com/foo": 3}
    assert args.weights.of("nvidia.com/gpu") == 2
    assert args.weights.of("cpu") == 5
    assert args.weights.of("example.com/bar") is None


def test_binpack_negative_cpu_memory_reset_but_weight_is_taken_as_is() -> None:
    args = binpack_args({"binpack.weight": -2, "binpack.cpu": -1, "binpack.memory": -1})
    # calculateWeight only resets cpu, memory and resource weights; a zero or negative
    # plugin weight is kept (zero disables binpack's node order).
    assert (args.weight, args.weights.cpu, args.weights.memory) == (-2, 1, 1)


def test_network_topology_keys_do_not_configure_binpack() -> None:
    assert binpack_args({"hypernode.binpack.cpu": 5, "weight": 3}) == BinpackArgs()


def test_exponent_float_from_the_file_is_a_float_as_in_yaml_v2() -> None:
    # PyYAML leaves `1e-1` a string; Volcano's yaml.v2 reads a float.
    conf = load_scheduler_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: network-topology-aware\n    arguments:\n'
        "      hypernode.binpack.normal-pod.fading: 1e-1\n      weight: 1e1\n"
    )
    opt = conf.plugin("network-topology-aware")
    assert opt is not None
    args = network_topology_args(opt.arguments)
    assert args.normal_pod_fading == pytest.approx(0.1)
    # ... and a float is no int for GetInt, so the weight keeps its default
    assert args.weight == 1


@pytest.mark.parametrize(("value", "expected"), [("y", True), ("N", False), ("off", False), ("on", True)])
def test_yaml_1_1_bool_words_are_booleans(value: str, expected: bool) -> None:
    assert network_topology_args({"hypernode.binpack.normal-pod.enable": value}).normal_pod_enable is expected
