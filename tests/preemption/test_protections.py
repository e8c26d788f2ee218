"""A pod its owner protected is never evicted: ``volcano.sh/preemptable`` is read where Volcano
reads it (the pod's annotation, else its label; else the PodGroup's annotation, else its label),
with Go's ParseBool spellings, per pod, by preempt and reclaim alike. A gang's surplus pods go
before any gang is broken, and a gang is never broken around a protected pod."""

from __future__ import annotations

from typing import Any

import pytest

from hyperplace.api import Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import run_session
from scheduler_plugin.model.jobs import go_bool
from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, running_gang
from tests.scheduler.builders import node
from tests.scheduler_conf.defaults import default_conf_text

# Volcano's default tiers without the node scorers.
RECLAIM_CONF = load_scheduler_config(
    default_conf_text("enqueue, allocate, reclaim", volcano=True, without={"nodeorder", "binpack"})
)


def one_node_cluster(cpu: int = 4) -> list[dict[str, Any]]:
    return [node("n0", cpu=cpu)]


def run(groups, nodes, conf=PREEMPT_CONF, queues=()):
    snap = build_snapshot(
        nodes=nodes,
        pods=[p for _, ps in groups for p in ps],
        podgroups=[pg for pg, _ in groups],
        queues=list(queues),
        priority_classes=PRIORITY_CLASSES,
    )
    return run_session(snap, conf)


def mark(
    pods: list[dict[str, Any]], value: str, where: str = "annotations", index: int | None = None
) -> None:
    for i, p in enumerate(pods):
        if index is None or i == index:
            p["metadata"].setdefault(where, {})["volcano.sh/preemptable"] = value


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_go_parsebool_true_spellings(value):
    assert go_bool(value) is True


@pytest.mark.parametrize("value", ["0", "f", "F", "FALSE", "false", "False"])
def test_go_parsebool_false_spellings(value):
    assert go_bool(value) is False


@pytest.mark.parametrize("value", ["yes", "no", " false", "fAlse", "", "2"])
def test_anything_else_is_not_a_go_bool(value):
    assert go_bool(value) is None


@pytest.mark.parametrize("where", ["annotations", "labels"])
@pytest.mark.parametrize("value", ["false", "0", "F"])
def test_a_lone_protected_pod_survives_preemption(where, value):
    low = running_gang("low", ["n0"], priority="low")
    mark(low[1], value, where)
    high = pending_gang("high", 1, tier=None, priority="high")
    res = run([low, high], one_node_cluster())
    assert res.evictions == []
    reason = res.unschedulable["default/high-t0-0"]
    assert "1 running pod of lower priority is protected by volcano.sh/preemptable" in reason


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_a_lone_protected_pod_survives_reclaim(where):
    nodes = one_node_cluster()
    a = running_gang("a", ["n0"], priority="low", queue="qa")
    mark(a[1], "0", where)
    b = pending_gang("b", 1, tier=None, priority="low", queue="qb")
    queues = [Queue.model_validate({"metadata": {"name": q}, "spec": {"weight": 1}}) for q in ("qa", "qb")]
    res = run([a, b], nodes, RECLAIM_CONF, queues)
    assert res.evictions == []


def test_an_unprotected_neighbour_is_evicted_in_place_of_the_protected_one():
    nodes = [node("n0", cpu=4), node("n1", cpu=4)]
    keep = running_gang("keep", ["n0"], priority="low")
    mark(keep[1], "false")
    go = running_gang("go", ["n1"], priority="low")
    high = pending_gang("high", 1, tier=None, priority="high")
    res = run([keep, go, high], nodes)
    assert [e.victim for e in res.evictions] == ["default/go-t0-0"]


def test_the_pods_own_mark_wins_over_its_podgroups():
    low = running_gang("low", ["n0"], priority="low", annotations={"volcano.sh/preemptable": "false"})
    mark(low[1], "true")
    high = pending_gang("high", 1, tier=None, priority="high")
    res = run([low, high], one_node_cluster())
    assert [e.victim for e in res.evictions] == ["default/low-t0-0"]


def test_the_podgroup_mark_covers_pods_that_say_nothing():
    low = running_gang("low", ["n0"], priority="low", annotations={"volcano.sh/preemptable": "0"})
    high = pending_gang("high", 1, tier=None, priority="high")
    res = run([low, high], one_node_cluster())
    assert res.evictions == []


def test_an_invalid_mark_protects_the_pod_and_is_shown_on_its_podgroup():
    low = running_gang("low", ["n0"], priority="low")
    mark(low[1], "nope")
    high = pending_gang("high", 1, tier=None, priority="high")
    res = run([low, high], one_node_cluster())
    # Volcano logs the value and reads it as false: the pod is not preemptable.
    assert res.evictions == []
    [cond] = [c for c in res.jobs["default/low"].conditions if c["type"] == "InvalidAnnotation"]
    assert "volcano.sh/preemptable='nope'" in cond["message"]
    assert "default/low-t0-0" in cond["message"]


def test_preemptable_pods_of_a_gang_go_and_the_protected_ones_stay():
    # A 4-pod gang (minMember 2) on four 4-cpu nodes; pod 0 is protected. The 2-pod urgent
    # gang needs two nodes: the gang's two surplus pods go, the gang keeps running.
    nodes = [node(f"n{i}", cpu=4) for i in range(4)]
    wide = running_gang("wide", [f"n{i}" for i in range(4)], min_member=2, priority="low")
    mark(wide[1], "false", index=0)
    urgent = pending_gang("urgent", 2, tier=None, priority="high")
    res = run([wide, urgent], nodes)
    victims = sorted(e.victim for e in res.evictions)
    assert len(victims) == 2
    assert "default/wide-t0-0" not in victims


def test_a_gang_is_never_broken_around_a_protected_pod():
    # minMember 4 leaves no surplus; with one pod protected the gang cannot go whole either.
    nodes = [node(f"n{i}", cpu=4) for i in range(4)]
    wide = running_gang("wide", [f"n{i}" for i in range(4)], priority="low")
    mark(wide[1], "false", index=3)
    urgent = pending_gang("urgent", 2, tier=None, priority="high")
    res = run([wide, urgent], nodes)
    assert res.evictions == []


def test_surplus_pods_go_before_any_gang_is_broken():
    nodes = [node(f"n{i}", cpu=4) for i in range(4)]
    tight = running_gang("tight", ["n0", "n1"], priority="low")  # minMember 2: no surplus
    loose = running_gang("loose", ["n2", "n3"], min_member=1, priority="low", created="2025-01-01T00:00:00Z")
    urgent = pending_gang("urgent", 1, tier=None, priority="high")
    res = run([tight, loose, urgent], nodes)
    [victim] = res.evictions
    assert victim.victim_job == "default/loose"


# ------------------------------------------------------------------ cdp: cooldown protection
CDP_CONF = load_scheduler_config(
    """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: cdp
- plugins:
  - name: predicates
"""
)
STARTED = "2026-03-01T12:00:00Z"
T0 = 1772366400.0  # STARTED in epoch seconds


def started(pods: list[dict[str, Any]], when: str = STARTED) -> None:
    for p in pods:
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": when}]


def run_at(groups, nodes, now: float, conf=CDP_CONF):
    snap = build_snapshot(
        nodes=nodes,
        pods=[p for _, ps in groups for p in ps],
        podgroups=[pg for pg, _ in groups],
        priority_classes=PRIORITY_CLASSES,
    )
    return run_session(snap, conf, now=now)


@pytest.mark.parametrize("where", ["labels", "annotations"])
def test_a_pod_in_its_cooldown_is_not_evicted_and_the_preemptor_says_why(where):
    low = running_gang("low", ["n0"], priority="low")
    started(low[1])
    for p in low[1]:
        p["metadata"].setdefault(where, {})["volcano.sh/cooldown-time"] = "1h"
    high = pending_gang("high", 1, tier=None, priority="high")
    res = run_at([low, high], one_node_cluster(), T0 + 600)
    assert res.evictions == []
    assert (
        "1 running pod of lower priority is protected by cdp (volcano.sh/cooldown-time not yet over)"
        in (res.unschedulable["default/high-t0-0"])
    )
    # An hour after it started, the cooldown is over.
    later = run_at([low, high], one_node_cluster(), T0 + 3601)
    assert [e.victim for e in later.evictions] == ["default/low-t0-0"]


def test_the_podgroup_cooldown_covers_its_pods():
    low = running_gang("low", ["n0"], priority="low")
    low[0].metadata.annotations = {"volcano.sh/cooldown-time": "30m"}
    started(low[1])
    high = pending_gang("high", 1, tier=None, priority="high")
    assert run_at([low, high], one_node_cluster(), T0 + 60).evictions == []


def test_without_the_cdp_plugin_the_cooldown_protects_nothing():
    low = running_gang("low", ["n0"], priority="low")
    started(low[1])
    mark(low[1], "1h", "labels")
    for p in low[1]:
        p["metadata"]["labels"]["volcano.sh/cooldown-time"] = p["metadata"]["labels"].pop(
            "volcano.sh/preemptable"
        )
    high = pending_gang("high", 1, tier=None, priority="high")
    res = run_at([low, high], one_node_cluster(), T0 + 60, PREEMPT_CONF)
    assert [e.victim for e in res.evictions] == ["default/low-t0-0"]


def test_an_invalid_cooldown_is_ignored_and_named():
    low = running_gang("low", ["n0"], priority="low")
    started(low[1])
    for p in low[1]:
        p["metadata"].setdefault("labels", {})["volcano.sh/cooldown-time"] = "an hour"
    high = pending_gang("high", 1, tier=None, priority="high")
    res = run_at([low, high], one_node_cluster(), T0 + 60)
    assert [e.victim for e in res.evictions] == ["default/low-t0-0"]
    [cond] = [c for c in res.jobs["default/low"].conditions if c["type"] == "InvalidAnnotation"]
    assert "volcano.sh/cooldown-time='an hour' is not a Go duration" in cond["message"]


# ------------------------------------------------------------------ pdb: disruption budgets
PDB_CONF = load_scheduler_config(
    """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: pdb
- plugins:
  - name: predicates
"""
)


def budget(name: str, app: str, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }
    if status is not None:
        out["status"] = status
    return out


def label(pods: list[dict[str, Any]], app: str) -> None:
    for p in pods:
        p["metadata"]["labels"]["app"] = app


def run_pdb(groups, nodes, pdbs, conf=PDB_CONF):
    snap = build_snapshot(
        nodes=nodes,
        pods=[p for _, ps in groups for p in ps],
        podgroups=[pg for pg, _ in groups],
        priority_classes=PRIORITY_CLASSES,
        pdbs=pdbs,
    )
    return run_session(snap, conf)


def three_singletons():
    nodes = [node(f"n{i}", cpu=4) for i in range(3)]
    web = [running_gang(f"web{i}", [f"n{i}"], priority="low") for i in range(3)]
    for _, pods in web:
        label(pods, "web")
    return nodes, web


def test_a_budget_lets_only_as_many_go_as_it_allows():
    nodes, web = three_singletons()
    urgent = pending_gang("urgent", 3, tier=None, priority="high")
    # minAvailable 2 of 3 running: one may go; the 3-pod gang cannot fit on what one frees.
    res = run_pdb([*web, urgent], nodes, [budget("web", "web", minAvailable=2)])
    assert res.evictions == []
    assert (
        "2 running pods of lower priority are protected by a PodDisruptionBudget (pdb)"
        in (res.unschedulable["default/urgent-t0-0"])
    )
    one = pending_gang("one", 1, tier=None, priority="high")
    res = run_pdb([*web, one], nodes, [budget("web", "web", minAvailable=2)])
    assert len(res.evictions) == 1


def test_the_written_status_is_what_counts():
    nodes, web = three_singletons()
    urgent = pending_gang("urgent", 2, tier=None, priority="high")
    pdb = budget("web", "web", {"disruptionsAllowed": 2}, maxUnavailable=0)
    assert len(run_pdb([*web, urgent], nodes, [pdb]).evictions) == 2
    pdb = budget("web", "web", {"disruptionsAllowed": 0}, maxUnavailable=3)
    assert run_pdb([*web, urgent], nodes, [pdb]).evictions == []


def test_max_unavailable_as_a_percentage():
    nodes, web = three_singletons()
    urgent = pending_gang("urgent", 2, tier=None, priority="high")
    # 34% of 3 rounds up to 2 unavailable pods.
    assert len(run_pdb([*web, urgent], nodes, [budget("web", "web", maxUnavailable="34%")]).evictions) == 2


def test_two_preemptors_in_one_cycle_do_not_break_a_budget_between_them():
    nodes, web = three_singletons()
    a = pending_gang("a", 1, tier=None, priority="high")
    b = pending_gang("b", 1, tier=None, priority="high")
    res = run_pdb([*web, a, b], nodes, [budget("web", "web", minAvailable=2)])
    assert len(res.evictions) == 1


def test_unbudgeted_neighbours_go_instead():
    nodes, web = three_singletons()
    nodes.append(node("n3", cpu=4))
    other = running_gang("other", ["n3"], priority="low")
    urgent = pending_gang("urgent", 1, tier=None, priority="high")
    res = run_pdb([*web, other, urgent], nodes, [budget("web", "web", minAvailable=3)])
    assert [e.victim for e in res.evictions] == ["default/other-t0-0"]


def test_without_the_pdb_plugin_budgets_are_not_read():
    nodes, web = three_singletons()
    urgent = pending_gang("urgent", 3, tier=None, priority="high")
    res = run_pdb([*web, urgent], nodes, [budget("web", "web", minAvailable=3)], PREEMPT_CONF)
    assert len(res.evictions) == 3
