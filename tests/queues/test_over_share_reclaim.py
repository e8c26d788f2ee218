"""Reclaim from queues over their share, as Volcano's proportion plugin and victim queue do.

Stories from Volcano's own reclaim tests (tests/conformance has them as converted cases)."""

from __future__ import annotations

from hyperplace.api import PodGroup, Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import run_session
from tests.scheduler.builders import node, pod

RECLAIM = load_scheduler_config(
    """
actions: "reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: proportion
"""
)

CLASSES = [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
    for n, v in (("low", 100), ("mid", 500), ("high", 1000))
]


def group(name: str, queue: str, phase: str, priority_class: str) -> PodGroup:
    return PodGroup.model_validate(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": 1, "queue": queue, "priorityClassName": priority_class},
            "status": {"phase": phase},
        }
    )


def running(name: str, grp: str, preemptable: bool = True) -> dict:
    p = pod(name, grp, cpu=1, memory="1Gi", node_name="n1")
    p["metadata"]["labels"]["volcano.sh/preemptable"] = "true" if preemptable else "false"
    return p


def session(
    pods: list[dict], groups: list[PodGroup], queues: list[str], priority: dict[str, int] | None = None
):
    snap = build_snapshot(
        nodes=[node("n1", cpu=4, memory="4Gi")],
        pods=pods,
        podgroups=groups,
        queues=[
            Queue.model_validate(
                {"metadata": {"name": q}, "spec": {"weight": 1, "priority": (priority or {}).get(q, 0)}}
            )
            for q in queues
        ],
        priority_classes=CLASSES,
    )
    return run_session(snap, RECLAIM, now=0.0)


def two_teams_over_their_share(a_class: str, b_class: str, c_class: str) -> tuple[list[dict], list[PodGroup]]:
    """Teams A and B each run two 1-cpu pods (one preemptable) on a 4-cpu node; team C submits
    one. Each share is 1 cpu for C and 1.5 for A and B: both are over theirs."""
    pods = [
        running("a-0", "a"),
        running("a-1", "a", preemptable=False),
        running("b-0", "b"),
        running("b-1", "b", preemptable=False),
        pod("c-0", "c", cpu=1, memory="1Gi"),
    ]
    groups = [
        group("a", "team-a", "Running", a_class),
        group("b", "team-b", "Running", b_class),
        group("c", "team-c", "Inqueue", c_class),
    ]
    return pods, groups


def test_a_newcomer_team_gets_its_share_back_even_if_that_leaves_the_over_share_team_just_below_its_own():
    # Whichever of A and B gives a pod back drops to 1, below its 1.5. C must still get its
    # pod: it holds nothing, and it cannot take more than its share, so the team that gave
    # cannot be reclaimed from again by C.
    pods, groups = two_teams_over_their_share("mid", "low", "high")
    result = session(pods, groups, ["team-a", "team-b", "team-c"])
    # One pod goes, the preemptable one of the lower-priority job (B's PodGroup is "low"; the
    # pods carry no priority of their own, so the jobs' priorities decide, as in Volcano).
    assert [e.victim for e in result.evictions] == ["default/b-0"]
    assert result.nominations["default/c"].pods == {"default/c-0": "n1"}


def test_a_team_at_or_below_its_share_gives_nothing():
    # A holds one pod, exactly its share of a node it shares with C: nothing is reclaimed.
    pods = [running("a-0", "a"), running("x-0", "x"), running("x-1", "x"), running("x-2", "x")]
    pods.append(pod("c-0", "c", cpu=1, memory="1Gi"))
    groups = [
        group("a", "team-a", "Running", "low"),
        group("x", "team-x", "Running", "low"),
        group("c", "team-a", "Inqueue", "high"),
    ]
    result = session(pods, groups, ["team-a", "team-x"])
    # Team A (a and c) is below its share of 2 cpu; team X is over (3 > 2): X gives one pod, A none.
    assert {e.victim_job for e in result.evictions} == {"default/x"}
    assert len(result.evictions) == 1


HIERARCHY = load_scheduler_config(
    """
actions: "enqueue, reclaim"
tiers:
- plugins:
  - name: gang
  - name: conformance
  - name: capacity
    enableHierarchy: true
"""
)


def test_a_team_takes_its_share_back_from_a_sibling_team_when_their_department_is_full():
    # Department D may hold 4 cpu, shared by teams D1 and D2 (2 cpu deserved each). D1 runs
    # two 2-cpu pods, filling D; D2 submits one. Only D1's pods can give D room back, and D1
    # is above its share: its preemptable pod goes for D2.
    def queue(name: str, parent: str, cap: int, deserved: int) -> Queue:
        res = lambda n: {"cpu": str(n), "memory": f"{n}Gi"}  # noqa: E731
        return Queue.model_validate(
            {
                "metadata": {"name": name},
                "spec": {"weight": 1, "parent": parent, "capability": res(cap), "deserved": res(deserved)},
            }
        )

    d1_pods = [pod(f"d1-{i}", "d1", cpu=2, memory="2Gi", node_name="n1") for i in range(2)]
    d1_pods[0]["metadata"]["labels"]["volcano.sh/preemptable"] = "false"
    snap = build_snapshot(
        nodes=[node("n1", cpu=8, memory="8Gi")],
        pods=[*d1_pods, pod("d2-0", "d2", cpu=2, memory="2Gi")],
        podgroups=[group("d1", "team-d1", "Running", "low"), group("d2", "team-d2", "Inqueue", "low")],
        queues=[
            Queue.model_validate({"metadata": {"name": "root"}}),
            queue("dept", "root", 4, 4),
            queue("team-d1", "dept", 4, 2),
            queue("team-d2", "dept", 4, 2),
        ],
        priority_classes=CLASSES,
    )
    result = run_session(snap, HIERARCHY, now=0.0)
    assert [e.victim for e in result.evictions] == ["default/d1-1"]
    assert result.nominations["default/d2"].pods == {"default/d2-0": "n1"}


def _teams(specs: list[tuple[str, str, dict]]) -> list[Queue]:
    return [
        Queue.model_validate({"metadata": {"name": n}, "spec": {"weight": 1, "parent": p, **extra}})
        for n, p, extra in specs
    ]


def test_a_team_without_a_share_of_its_own_reclaims_on_its_department_share():
    # Department D deserves 1 GPU; its team D1 has no deserved share of its own. Team X, outside
    # D, holds all 4 GPUs. With ancestorReclaimLevel 1, D1's pod may reclaim because D is below
    # its share, and X's pod goes.
    conf = load_scheduler_config(
        """
actions: "enqueue, reclaim"
tiers:
- plugins:
  - name: gang
  - name: capacity
    enableHierarchy: true
    arguments: {ancestorReclaimLevel: 1}
"""
    )
    x = pod("x-0", "x", cpu=1, memory="1Gi", gpu=4, node_name="n1")
    d1 = pod("d1-0", "d1", cpu=1, memory="1Gi", gpu=1)
    snap = build_snapshot(
        nodes=[node("n1", cpu=16, memory="16Gi", gpu=4)],
        pods=[x, d1],
        podgroups=[group("x", "team-x", "Running", "low"), group("d1", "team-d1", "Inqueue", "low")],
        queues=_teams(
            [
                ("root", "", {}),
                ("dept", "root", {"deserved": {"nvidia.com/gpu": "1"}}),
                ("team-d1", "dept", {}),
                ("team-x", "root", {}),
            ]
        ),
        priority_classes=CLASSES,
    )
    result = run_session(snap, conf, now=0.0)
    assert [e.victim for e in result.evictions] == ["default/x-0"]


def test_reclaim_takes_from_the_queue_served_last_first():
    # Teams A (priority 5) and B (priority 10) are both over their share; C reclaims one pod.
    # The queue order serves B before A, so A, served last, gives the pod (Volcano's victim
    # queue order), although B's job comes later by name.
    pods, groups = two_teams_over_their_share("mid", "mid", "mid")
    result = session(pods, groups, ["team-a", "team-b", "team-c"], {"team-a": 5, "team-b": 10, "team-c": 1})
    assert [e.victim for e in result.evictions] == ["default/a-0"]


def test_among_equal_victims_the_job_last_in_order_goes():
    # Three identical one-pod jobs of team X over its share; C needs one pod's room. Volcano's
    # victim queue is the job order reversed: the job that sorts last (x3) goes.
    pods = [running(f"x{i}-0", f"x{i}") for i in (1, 2, 3)] + [running("y-0", "y", preemptable=False)]
    pods.append(pod("c-0", "c", cpu=1, memory="1Gi"))
    groups = [group(f"x{i}", "team-x", "Running", "low") for i in (1, 2, 3)]
    groups += [group("y", "team-x", "Running", "low"), group("c", "team-c", "Inqueue", "low")]
    result = session(pods, groups, ["team-x", "team-c"])
    assert [e.victim for e in result.evictions] == ["default/x3-0"]
