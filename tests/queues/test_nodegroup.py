"""The ``nodegroup`` plugin: a Queue's ``spec.affinity`` keeps its jobs on (or off) the node
groups labelled ``volcano.sh/nodegroup-name``, as Volcano's plugin defines it, in allocate,
backfill and preemption alike."""

from __future__ import annotations

from typing import Any

import pytest

from hyperplace.api import Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import run_session
from tests.preemption.helpers import PRIORITY_CLASSES, pending_gang, running_gang
from tests.scheduler.builders import job_pods, node, podgroup


def conf(actions: str = "enqueue, allocate, backfill", args: str = "", flags: str = ""):
    return load_scheduler_config(
        f"""
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: nodegroup{flags}
{args}
"""
    )


def cluster() -> list[dict[str, Any]]:
    """Two nodes in group a, two in group b, one without a group."""
    out = [node(f"a{i}", cpu=4, labels={"volcano.sh/nodegroup-name": "a"}) for i in range(2)]
    out += [node(f"b{i}", cpu=4, labels={"volcano.sh/nodegroup-name": "b"}) for i in range(2)]
    out.append(node("plain", cpu=4))
    return out


def queue(name: str, affinity: dict[str, Any] | None = None, parent: str | None = None) -> Queue:
    spec: dict[str, Any] = {"weight": 1}
    if affinity is not None:
        spec["affinity"] = affinity
    if parent:
        spec["parent"] = parent
    return Queue.model_validate({"metadata": {"name": name}, "spec": spec})


def run(groups, queues, config, nodes=None):
    snap = build_snapshot(
        nodes=nodes or cluster(),
        pods=[p for _, ps in groups for p in ps],
        podgroups=[pg for pg, _ in groups],
        queues=queues,
        priority_classes=PRIORITY_CLASSES,
    )
    return run_session(snap, config)


def gang(name: str, n: int, q: str, cpu: int = 4):
    return podgroup(name, n, queue=q), job_pods(name, n, cpu=cpu)


REQUIRED_A = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["a"]}}


def test_a_queue_with_a_required_group_runs_only_there():
    res = run([gang("j", 2, "qa")], [queue("qa", REQUIRED_A)], conf())
    assert sorted(res.bindings.values()) == ["a0", "a1"]
    # A third pod does not fit in group a: it waits, and says which groups its queue may use.
    res = run([gang("k", 3, "qa")], [queue("qa", REQUIRED_A)], conf())
    assert res.bindings == {}
    assert "nodegroup: queue qa may use node groups a (2 of 5 nodes)" in res.unschedulable["default/k-t0-0"]


def test_required_anti_affinity_keeps_a_queue_off_a_group():
    aff = {
        "nodeGroupAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["a", "b"]},
        "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["a"]},
    }
    res = run([gang("j", 2, "q")], [queue("q", aff)], conf())
    assert sorted(res.bindings.values()) == ["b0", "b1"]


def test_preferred_groups_score_higher():
    aff = {
        "nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["a"],
            "preferredDuringSchedulingIgnoredDuringExecution": ["b"],
        }
    }
    res = run([gang("j", 1, "q", cpu=1)], [queue("q", aff)], conf())
    assert next(iter(res.bindings.values())).startswith("a")  # required 100 beats preferred 50


def test_strict_keeps_queues_without_affinity_off_every_node_and_non_strict_lets_them_use_plain_ones():
    res = run([gang("j", 1, "free")], [queue("free")], conf())
    assert res.bindings == {}
    res = run([gang("j", 1, "free")], [queue("free")], conf(args="    arguments: {strict: false}"))
    assert list(res.bindings.values()) == ["plain"]


def test_with_hierarchy_a_queue_takes_its_parents_affinity():
    queues = [queue("org", REQUIRED_A), queue("team", parent="org")]
    res = run([gang("j", 1, "team")], queues, conf(flags="\n    enableHierarchy: true"))
    assert next(iter(res.bindings.values())).startswith("a")
    res = run([gang("j", 1, "team")], queues, conf())
    assert res.bindings == {}  # no hierarchy: no affinity of its own, strict


def test_preemption_stays_in_the_queues_groups():
    # Group a is full of low-priority pods of queue qa; group b has room. A high-priority pod of
    # qa (required a) must preempt in group a, not take group b's room.
    low = running_gang("low", ["a0"], priority="low", queue="qa")
    low2 = running_gang("low2", ["a1"], priority="low", queue="qa", created="2026-01-02T00:00:00Z")
    high = pending_gang("high", 1, tier=None, priority="high", queue="qa")
    res = run([low, low2, high], [queue("qa", REQUIRED_A)], conf("enqueue, allocate, preempt"))
    assert len(res.evictions) == 1
    assert set(res.nominations["default/high"].pods.values()) <= {"a0", "a1"}


@pytest.mark.parametrize("actions", ["enqueue, allocate, backfill"])
def test_best_effort_pods_of_the_queue_stay_in_its_groups_too(actions):
    pg = podgroup("be", 1, queue="qa")
    pods = job_pods("be", 2, cpu=0)
    res = run([(pg, pods)], [queue("qa", REQUIRED_A)], conf(actions))
    assert res.bindings and set(res.bindings.values()) <= {"a0", "a1"}
