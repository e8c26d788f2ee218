"""Preferred node affinity and PreferNoSchedule taints score nodes as kube-scheduler's
NodeAffinity and TaintToleration score them, weighed by the nodeorder plugin's
``nodeaffinity.weight`` (2) and ``tainttoleration.weight`` (3) as in Volcano."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT, load_scheduler_config
from scheduler_plugin.filters.plugin import default_normalize_score
from tests.scheduler.builders import job_pods, node, pod, podgroup, schedule


def prefer(weight: int, key: str, value: str) -> dict[str, Any]:
    term = {
        "weight": weight,
        "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]},
    }
    return {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}}


def tainted(name: str, effect: str = "PreferNoSchedule") -> dict[str, Any]:
    n = node(name, cpu=8)
    n["spec"] = {"taints": [{"key": "maintenance", "value": "soon", "effect": effect}]}
    return n


def test_a_pod_that_prefers_a_zone_goes_there_though_its_nodes_are_busier() -> None:
    nodes = [node("a", cpu=8, labels={"zone": "z1"}), node("b", cpu=8, labels={"zone": "z2"})]
    busy = pod("busy", None, cpu=4, node_name="b")
    plain, _ = schedule(nodes, [busy, *job_pods("plain", 1)], [], [podgroup("plain", 1)])
    assert plain.bindings == {"default/plain-t0-0": "a"}
    picky, _ = schedule(
        nodes, [busy, *job_pods("picky", 1, extra_spec=prefer(50, "zone", "z2"))], [], [podgroup("picky", 1)]
    )
    assert picky.bindings == {"default/picky-t0-0": "b"}


def test_a_node_about_to_be_drained_is_avoided_unless_the_pod_tolerates_it() -> None:
    nodes = [tainted("a"), node("b", cpu=8)]
    busy = pod("busy", None, cpu=4, node_name="b")
    result, _ = schedule(nodes, [busy, *job_pods("web", 1)], [], [podgroup("web", 1)])
    assert result.bindings == {"default/web-t0-0": "b"}
    tolerant = {"tolerations": [{"key": "maintenance", "operator": "Exists", "effect": "PreferNoSchedule"}]}
    result, _ = schedule(nodes, [busy, *job_pods("ok", 1, extra_spec=tolerant)], [], [podgroup("ok", 1)])
    assert result.bindings == {"default/ok-t0-0": "a"}  # the emptier node, now that it is not avoided


def test_with_no_weight_for_them_node_preferences_do_not_move_a_pod() -> None:
    text = DEFAULT_CONFIG_TEXT.replace(
        "  - name: nodeorder\n",
        "  - name: nodeorder\n    arguments:\n      nodeaffinity.weight: 0\n      tainttoleration.weight: 0\n",
    )
    config = load_scheduler_config(text, source="<test>")
    nodes = [node("a", cpu=8, labels={"zone": "z1"}), node("b", cpu=8, labels={"zone": "z2"})]
    busy = pod("busy", None, cpu=4, node_name="b")
    pods = [busy, *job_pods("picky", 1, extra_spec=prefer(50, "zone", "z2"))]
    result, _ = schedule(nodes, pods, [], [podgroup("picky", 1)], config=config)
    assert result.bindings == {"default/picky-t0-0": "a"}


def test_image_locality_is_said_to_have_no_effect() -> None:
    text = DEFAULT_CONFIG_TEXT.replace(
        "  - name: nodeorder\n", "  - name: nodeorder\n    arguments:\n      imagelocality.weight: 1\n"
    )
    config = load_scheduler_config(text, source="<test>")
    result, _ = schedule([node("a", cpu=8)], job_pods("x", 1), [], [podgroup("x", 1)], config=config)
    assert any("imagelocality.weight is accepted without effect" in n for n in result.notes)


def test_kube_normalization_gives_the_best_node_full_marks_and_reverses_counts_of_bad_things() -> None:
    assert default_normalize_score(np.array([0, 25, 50]), reverse=False).tolist() == [0, 50, 100]
    assert default_normalize_score(np.array([0, 1, 3]), reverse=True).tolist() == [100, 67, 0]
    assert default_normalize_score(np.array([0, 0]), reverse=True).tolist() == [100, 100]
    assert default_normalize_score(np.array([0, 0]), reverse=False).tolist() == [0, 0]
