"""Volcano v1.15's ``gangpreempt`` and ``gangreclaim`` load and run as our topology-first
preempt and reclaim, with their ``maxDomains`` and ``allowWholeBundle`` arguments; an action
list that combines them with ``preempt`` or ``reclaim`` is refused, as Volcano's design has it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hyperplace.api import Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import ConfigError, load_scheduler_config
from scheduler_plugin.cycle import run_session
from simulator.cli import app
from tests.preemption.helpers import PRIORITY_CLASSES, pending_gang, racks, running_gang
from tests.queues.test_queue_limits import issue_example, simulate

TIERS = """
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: network-topology-aware
"""


def conf(actions: str, configurations: str = ""):
    return load_scheduler_config(f'actions: "{actions}"\n{TIERS}{configurations}')


def run(groups, nodes, hns, config, queues=()):
    snap = build_snapshot(
        nodes=nodes,
        pods=[p for _, ps in groups for p in ps],
        hypernodes=hns,
        podgroups=[pg for pg, _ in groups],
        queues=list(queues),
        priority_classes=PRIORITY_CLASSES,
    )
    return run_session(snap, config)


def test_a_v115_configuration_with_the_gang_actions_loads():
    c = conf("enqueue, allocate, backfill, gangpreempt, gangreclaim")
    assert c.actions == ["enqueue", "allocate", "backfill", "gangpreempt", "gangreclaim"]


@pytest.mark.parametrize(
    "actions",
    [
        "enqueue, allocate, gangpreempt, preempt",
        "allocate, reclaim, gangreclaim",
        "allocate, gangpreempt, reclaim",
    ],
)
def test_the_gang_actions_are_not_combined_with_preempt_or_reclaim(actions):
    with pytest.raises(ConfigError, match="cannot be combined with"):
        conf(actions)


def test_simulate_refuses_the_combination_with_exit_2_and_the_reason(tmp_path: Path):
    path = issue_example(tmp_path, "enqueue, allocate, gangpreempt, preempt")
    res = CliRunner().invoke(app, ["simulate", str(path)])
    assert res.exit_code == 2
    assert "gangpreempt cannot be combined with preempt in one action list" in res.stderr


def test_gangpreempt_keeps_the_queue_within_its_limit_like_preempt(tmp_path: Path):
    out = simulate(issue_example(tmp_path, "enqueue, allocate, gangpreempt"))
    assert out["evictions"] == ["default/low-0"]
    assert out["queues"]["q1"]["allocated"]["cpu"] == "3"


def test_gangpreempt_places_the_gang_in_the_rack_that_breaks_fewest_gangs():
    nodes, hns = racks(n_racks=2, per_rack=4, cpu=4)
    a = running_gang("a", ["r0n0", "r0n1"])
    b = running_gang("b", ["r0n2", "r0n3"])
    c = running_gang("c", [f"r1n{i}" for i in range(4)])
    urgent = pending_gang("urgent", 4, tier=1)
    res = run([a, b, c, urgent], nodes, hns, conf("enqueue, allocate, gangpreempt"))
    assert sorted(e.victim_job for e in res.evictions) == ["default/c"] * 4
    assert "preempted (gangpreempt) by default/urgent" in res.evictions[0].reason


def test_allow_whole_bundle_false_never_breaks_a_gang():
    nodes, hns = racks(n_racks=1, per_rack=4, cpu=4)
    whole = running_gang("whole", [f"r0n{i}" for i in range(4)])
    urgent = pending_gang("urgent", 2, tier=1)
    off = conf(
        "enqueue, allocate, gangpreempt",
        "configurations:\n- name: gangpreempt\n  arguments:\n    allowWholeBundle: false\n",
    )
    assert run([whole, urgent], nodes, hns, off).evictions == []
    on = conf("enqueue, allocate, gangpreempt")
    assert len(run([whole, urgent], nodes, hns, on).evictions) == 4
    # Surplus pods above minMember may still go with whole bundles off.
    loose = running_gang("loose", [f"r0n{i}" for i in range(4)], min_member=2)
    assert len(run([loose, urgent], nodes, hns, off).evictions) == 2


def test_max_domains_bounds_the_search_and_a_bad_value_falls_back_with_a_note():
    nodes, hns = racks(n_racks=2, per_rack=4, cpu=4)
    a = running_gang("a", [f"r0n{i}" for i in range(4)])
    urgent = pending_gang("urgent", 4, tier=1)
    bad = conf(
        "enqueue, allocate, gangpreempt",
        "configurations:\n- name: gangpreempt\n  arguments:\n    maxDomains: 0\n",
    )
    res = run([a, urgent], nodes, hns, bad)
    assert any("Invalid maxDomains value 0 for action gangpreempt" in n for n in res.notes)
    # rack1 is free: the gang binds there without evicting anyone.
    assert res.evictions == []


def test_gangreclaim_takes_a_queues_share_back():
    nodes, hns = racks(n_racks=2, per_rack=4, cpu=4)
    a1 = running_gang("a1", [f"r0n{i}" for i in range(4)], queue="team-a")
    a2 = running_gang("a2", [f"r1n{i}" for i in range(4)], queue="team-a", created="2026-01-02T00:00:00Z")
    b1 = pending_gang("b1", 4, tier=1, priority="low", queue="team-b")
    queues = [
        Queue.model_validate({"metadata": {"name": q}, "spec": {"weight": 1, "reclaimable": True}})
        for q in ("team-a", "team-b")
    ]
    res = run([a1, a2, b1], nodes, hns, conf("enqueue, allocate, gangreclaim"), queues)
    assert len(res.evictions) == 4
    assert {e.action for e in res.evictions} == {"reclaim"}
    assert "default/b1" in res.nominations
