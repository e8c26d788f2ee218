"""A configuration without the gang plugin: a job is ready once its minMember pods run."""

from __future__ import annotations

from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from tests.scheduler.builders import node, pod, podgroup, schedule

NO_GANG = load_scheduler_config(
    """
actions: "allocate"
tiers:
- plugins:
  - name: drf
  - name: proportion
  - name: predicates
"""
)


def test_pods_of_a_job_without_a_gang_minimum_are_placed_as_they_fit():
    # minMember 0 asks for no gang; with no gang plugin to say when it is ready, it is ready
    # at once, and its pods are placed one by one as room allows: two of the three fit.
    pg = podgroup("loose", 0)
    pods = [pod(f"loose-{i}", "loose", cpu=2) for i in range(3)]
    result, _ = schedule([node("n1", cpu=4)], pods, podgroups=[pg], config=NO_GANG)
    assert len(result.bindings) == 2
    assert result.jobs["default/loose"].phase == "Running"


def test_a_job_with_a_minimum_is_running_only_once_that_many_pods_are_placed():
    pg = podgroup("pair", 2)
    pods = [pod(f"pair-{i}", "pair", cpu=3) for i in range(2)]
    result, _ = schedule([node("n1", cpu=4)], pods, podgroups=[pg], config=NO_GANG)
    # The minMember the user wrote still goes all or nothing (Volcano, with no JobReady vote,
    # would bind the one pod that fits): nothing is bound, and the PodGroup is not Running.
    assert result.bindings == {}
    assert result.jobs["default/pair"].phase == "Pending"
