"""Hierarchical DRF (``drf`` with ``enableHierarchy``), on the cases of Volcano's hdrf tests:
teams in a tree of queues share the cluster by dominant resource, level by level."""

from __future__ import annotations

from typing import Any

from hyperplace.api import Queue
from scheduler_plugin.algorithms.hdrf import Hierarchy, QueueRank, parse_path
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import run_session
from scheduler_plugin.model.resources import Res
from tests.scheduler.builders import node, pod, podgroup

HDRF = load_scheduler_config(
    """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: drf
    enableHierarchy: true
  - name: predicates
"""
)


def hqueue(name: str, path: str, weights: str) -> Queue:
    return Queue.model_validate(
        {
            "metadata": {
                "name": name,
                "annotations": {"volcano.sh/hierarchy": path, "volcano.sh/hierarchy-weights": weights},
            },
            "spec": {"weight": 1},
            "status": {"state": "Open"},
        }
    )


def team(name: str, queue: str, n: int, cpu: str, mem: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """``n`` one-pod jobs ``<name>-<i>`` of a team (allocate re-reads the queue order after each job)."""
    pods = [pod(f"{name}-{i}-t0-0", f"{name}-{i}", cpu=cpu, memory=mem, index=0) for i in range(n)]
    return pods, [podgroup(f"{name}-{i}", 1, queue=queue) for i in range(n)]


def placed(result: Any, job: str) -> int:
    return sum(1 for k in result.bindings if k.startswith(f"default/{job}-"))


def test_rescaling_two_teams_split_the_cluster_and_eng_splits_its_half_by_resource() -> None:
    # Volcano's "rescaling test": sci (weight 50) and eng (50) under root; eng's dev asks only
    # for cpu, prod only for memory. sci gets half of both; dev half the cpu, prod half the
    # memory: eng's two one-resource children together count as one half, not as two.
    nodes = [node("n", cpu=10, memory="10G", pods=50)]
    pods: list[dict[str, Any]] = []
    pgs: list[Any] = []
    for name, queue, cpu, mem in (
        ("pg1", "root-sci", "1", "1G"),
        ("pg21", "root-eng-dev", "1", "0"),
        ("pg22", "root-eng-prod", "0", "1G"),
    ):
        p, g = team(name, queue, 10, cpu, mem)
        pods += p
        pgs += g
    queues = [
        hqueue("root-sci", "root/sci", "100/50"),
        hqueue("root-eng-dev", "root/eng/dev", "100/50/50"),
        hqueue("root-eng-prod", "root/eng/prod", "100/50/50"),
    ]
    snap = build_snapshot(nodes=nodes, pods=pods, podgroups=pgs, queues=queues)
    result = run_session(snap, HDRF)
    assert {j: placed(result, j) for j in ("pg1", "pg21", "pg22")} == {"pg1": 5, "pg21": 5, "pg22": 5}


def test_without_the_hierarchy_queues_are_not_ordered_and_the_first_team_takes_all() -> None:
    # The same jobs with flat drf: every job starts at share 0, so job order falls back to
    # creation time and name, and pg1's ten jobs take all the cpu and memory.
    flat = load_scheduler_config(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: drf\n'
        "  - name: predicates\n"
    )
    nodes = [node("n", cpu=10, memory="10G", pods=50)]
    pods: list[dict[str, Any]] = []
    pgs: list[Any] = []
    for name, cpu, mem in (("pg1", "1", "1G"), ("pg21", "1", "0"), ("pg22", "0", "1G")):
        p, g = team(name, "q", 10, cpu, mem)
        pods += p
        pgs += g
    q = Queue.model_validate({"metadata": {"name": "q"}, "spec": {}, "status": {"state": "Open"}})
    snap = build_snapshot(nodes=nodes, pods=pods, podgroups=pgs, queues=[q])
    result = run_session(snap, flat)
    assert {j: placed(result, j) for j in ("pg1", "pg21", "pg22")} == {"pg1": 10, "pg21": 0, "pg22": 0}


def test_a_queue_is_never_ahead_of_or_behind_its_own_parent_level() -> None:
    a = QueueRank(((False, 0.0), (False, 0.2)))
    b = QueueRank(((False, 0.0), (False, 0.2), (False, 0.9)))
    assert a == b and not a < b and not b < a
    assert QueueRank(((False, 0.0), (False, 0.1))) < QueueRank(((False, 0.0), (True, 0.0)))


def test_paths_and_weights_are_read_as_volcano_reads_them() -> None:
    assert parse_path("root/eng/prod", "1/2/8") == [("eng", 2.0), ("prod", 8.0)]
    # A weight below 1, not a number, or missing counts as 1.
    assert parse_path("root/a/b", "1/0.5") == [("a", 1.0), ("b", 1.0)]
    assert parse_path("root/a", "1/x") == [("a", 1.0)]
    assert parse_path("", "") == []


def test_reclaim_takes_only_while_the_reclaimer_stays_behind() -> None:
    # Two teams of weight 1 on 10 cpu; b holds 8, a holds 0 and asks 1: a task of b may go.
    total = Res(cpu=10000, memory=10 * 2**30)
    h = Hierarchy(total)
    one = Res(cpu=1000)
    h.add_job("a/j", "qa", parse_path("root/a", "1/1"), Res(), Res(cpu=10000))
    h.add_job("b/j", "qb", parse_path("root/b", "1/1"), Res(cpu=8000), Res(cpu=10000))
    h.update()
    assert h.reclaimable(("a/j", "qa", one), [(0, "b/j", "qb", one)]) == [0]
    # Once a holds 5 and b 5, a sixth cpu for a would put it ahead: nothing is taken.
    h2 = Hierarchy(total)
    h2.add_job("a/j", "qa", parse_path("root/a", "1/1"), Res(cpu=5000), Res(cpu=10000))
    h2.add_job("b/j", "qb", parse_path("root/b", "1/1"), Res(cpu=5000), Res(cpu=10000))
    h2.update()
    assert h2.reclaimable(("a/j", "qa", one), [(0, "b/j", "qb", one)]) == []
