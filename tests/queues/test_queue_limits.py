"""No path past a queue's limit: allocate, backfill, preempt and reclaim (and gangpreempt,
gangreclaim) ask the one question "does this queue stay within its limit" before they place or
nominate a pod. When the queue is at its limit, preempt evicts lower-priority pods of that queue
first (Volcano's preempt evicts until its queue is Allocatable again); when there are none, the
pod waits and says why.

The property test at the end drives random queues, jobs and action lists cycle after cycle
(bindings applied, victims removed, nominations carried) and checks that no queue's allocation
ever goes past its capability, nor a parent queue's past its own."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hyperplace.api import PodGroup, Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import run_session
from simulator.cli import app
from tests.preemption.helpers import PRIORITY_CLASSES
from tests.scheduler.builders import job_pods, node, podgroup
from tests.scheduler_conf.defaults import default_conf_text


def queue_conf(actions: str, plugin: str = "proportion", *, hierarchy: bool = False, **arguments: Any) -> str:
    """Volcano's default tiers with ``actions``; with ``plugin="capacity"``, the capacity plugin
    (``enableHierarchy``, ``arguments``) in proportion's place."""
    if plugin == "proportion":
        return default_conf_text(actions, volcano=True)
    capacity: dict[str, Any] = {"name": "capacity", "enableHierarchy": hierarchy}
    if arguments:
        capacity["arguments"] = arguments
    return default_conf_text(actions, volcano=True, replace={"proportion": capacity})


def _doc(kind: str, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    api = {
        "Queue": "scheduling.volcano.sh/v1beta1",
        "PodGroup": "scheduling.volcano.sh/v1beta1",
    }.get(kind, "v1")
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, **meta}, "spec": spec}


def _pod(name: str, group: str, cpu: int, priority: str, node_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "priorityClassName": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return _doc("Pod", name, spec, namespace="default", annotations={"scheduling.k8s.io/group-name": group})


def issue_example(tmp_path: Path, actions: str, plugin: str = "proportion") -> Path:
    """The issue's cluster: a queue of capability cpu 4 running a 3-cpu low-priority pod, a
    pending 3-cpu high-priority pod of the same queue, one 12-cpu node."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "12", "memory": "48Gi", "pods": "110"}},
        },
        *PRIORITY_CLASSES[:2],
        _doc("Queue", "q1", {"weight": 1, "capability": {"cpu": "4"}}),
        _doc(
            "PodGroup",
            "lowpg",
            {"minMember": 1, "queue": "q1", "priorityClassName": "low"},
            namespace="default",
        ),
        _pod("low-0", "lowpg", 3, "low", node_name="n1"),
        _doc(
            "PodGroup",
            "highpg",
            {"minMember": 1, "queue": "q1", "priorityClassName": "high"},
            namespace="default",
        ),
        _pod("high-0", "highpg", 3, "high"),
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "volcano-scheduler.conf").write_text(queue_conf(actions, plugin))
    return tmp_path


def simulate(path: Path) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["simulate", str(path), "--output", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_without_preempt_the_high_priority_pod_waits_for_its_queue(tmp_path):
    out = simulate(issue_example(tmp_path, "enqueue, allocate"))
    assert out["evictions"] == []
    assert out["queues"]["q1"]["allocated"]["cpu"] == "3"
    reason = out["pods"]["default/high-0"]["reason"]
    assert "queue q1 would exceed its deserved share in cpu" in reason
    # What preemption would do names the queue, not the virtual root.
    assert "would fit it after evicting 1 lower-priority pods of queue q1" in reason
    assert "cluster-top-hypernode" not in reason


def test_preempt_evicts_the_low_priority_pod_of_the_queue_and_keeps_it_within_its_limit(tmp_path):
    out = simulate(issue_example(tmp_path, "enqueue, allocate, preempt"))
    assert out["evictions"] == ["default/low-0"]
    assert out["pods"]["default/high-0"]["node"] == "n1"
    assert out["queues"]["q1"]["allocated"]["cpu"] == "3"


def test_capacity_queues_hold_their_capability_against_preempt_too(tmp_path):
    out = simulate(issue_example(tmp_path, "enqueue, allocate, preempt", plugin="capacity"))
    assert out["evictions"] == ["default/low-0"]
    assert out["queues"]["q1"]["allocated"]["cpu"] == "3"


def test_a_queue_at_its_limit_with_no_lower_priority_pod_makes_the_pod_wait_and_say_why(tmp_path):
    path = issue_example(tmp_path, "enqueue, allocate, preempt")
    text = (path / "cluster.yaml").read_text().replace("priorityClassName: low", "priorityClassName: high")
    (path / "cluster.yaml").write_text(text)
    out = simulate(path)
    assert out["evictions"] == []
    assert out["queues"]["q1"]["allocated"]["cpu"] == "3"
    reason = out["pods"]["default/high-0"]["reason"]
    assert "preempt: queue q1 would exceed its deserved share in cpu" in reason
    assert "no lower-priority pod of queue q1 may be evicted for it" in reason


def test_four_high_priority_jobs_never_take_the_queue_past_its_limit(tmp_path):
    path = issue_example(tmp_path, "enqueue, allocate, preempt")
    docs = list(yaml.safe_load_all((path / "cluster.yaml").read_text()))
    for i in range(1, 4):
        docs.append(
            _doc(
                "PodGroup",
                f"highpg{i}",
                {"minMember": 1, "queue": "q1", "priorityClassName": "high"},
                namespace="default",
            )
        )
        docs.append(_pod(f"high{i}-0", f"highpg{i}", 3, "high"))
    (path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    out = simulate(path)
    assert out["evictions"] == ["default/low-0"]
    assert out["queues"]["q1"]["allocated"]["cpu"] == "3"
    running = [k for k, v in out["pods"].items() if v["node"]]
    assert len(running) == 1


def test_reclaim_does_not_take_a_queue_at_its_limit_past_it():
    conf = load_scheduler_config(queue_conf("enqueue, allocate, reclaim", "capacity"))
    nodes = [node("n0", cpu=4), node("n1", cpu=4)]
    queues = [
        Queue.model_validate(
            {"metadata": {"name": "a"}, "spec": {"capability": {"cpu": "2"}, "deserved": {"cpu": "2"}}}
        ),
        Queue.model_validate({"metadata": {"name": "b"}, "spec": {"deserved": {"cpu": "2"}}}),
    ]
    pgs = [podgroup("a1", 1, queue="a"), podgroup("b1", 2, queue="b"), podgroup("a2", 1, queue="a")]
    pods = job_pods("a1", 1, cpu=2, node_name="n0") + job_pods("b1", 2, cpu=3, node_name=None)
    pods[1]["spec"]["nodeName"], pods[2]["spec"]["nodeName"] = "n0", "n1"
    pods[1]["status"]["phase"] = pods[2]["status"]["phase"] = "Running"
    pods += job_pods("a2", 1, cpu=2)
    snap = build_snapshot(
        nodes=nodes, pods=pods, podgroups=pgs, queues=queues, priority_classes=PRIORITY_CLASSES
    )
    res = run_session(snap, conf)
    assert res.evictions == []
    assert "reclaim: queue a would exceed its capability in cpu" in res.unschedulable["default/a2-t0-0"]


# ------------------------------------------------------------------------------ property
ACTION_LISTS = [
    "enqueue, allocate, preempt",
    "enqueue, allocate, reclaim",
    "enqueue, allocate, backfill, preempt, reclaim",
    "enqueue, allocate, reclaim, preempt",
    "allocate, preempt, reclaim",
    "preempt, reclaim",
    "enqueue, preempt, allocate",
    "enqueue, allocate, gangpreempt",
    "enqueue, allocate, gangreclaim",
    "enqueue, allocate, backfill, gangpreempt, gangreclaim",
    "gangreclaim, gangpreempt, allocate",
]


def _limits(queues: list[Queue]) -> dict[str, float]:
    out = {}
    for q in queues:
        cap = (q.spec.capability or {}).get("cpu")
        if cap is not None:
            out[q.name] = float(cap) * 1000
    return out


def _world(
    seed: int, hierarchy: bool
) -> tuple[list[dict[str, Any]], list[Queue], list[PodGroup], list[dict[str, Any]]]:
    rnd = random.Random(seed)
    nodes = [node(f"n{i}", cpu=rnd.choice([4, 6, 8])) for i in range(rnd.randint(2, 4))]
    free = {n["metadata"]["name"]: int(n["status"]["allocatable"]["cpu"]) for n in nodes}
    names = [f"q{i}" for i in range(rnd.randint(2, 3))]
    queues: list[Queue] = []
    if hierarchy:
        queues.append(
            Queue.model_validate(
                {"metadata": {"name": "org"}, "spec": {"capability": {"cpu": str(rnd.randint(4, 14))}}}
            )
        )
    for name in names:
        spec: dict[str, Any] = {"weight": rnd.randint(1, 3), "reclaimable": rnd.random() < 0.8}
        if rnd.random() < 0.8:
            spec["capability"] = {"cpu": str(rnd.randint(2, 10))}
        if rnd.random() < 0.6:
            spec["deserved"] = {"cpu": str(rnd.randint(1, 6))}
        if hierarchy:
            spec["parent"] = "org"
        queues.append(Queue.model_validate({"metadata": {"name": name}, "spec": spec}))
    limits = _limits(queues)
    used = dict.fromkeys([q.name for q in queues], 0.0)
    pgs: list[PodGroup] = []
    pods: list[dict[str, Any]] = []
    for j in range(rnd.randint(3, 8)):
        q = rnd.choice(names)
        prio = rnd.choice(["low", "high"])
        size = rnd.randint(1, 3)
        cpu = rnd.randint(1, 3)
        name = f"j{j}"
        pg = podgroup(
            name, rnd.randint(1, size), queue=q, priority_class=prio, created=f"2026-01-01T00:00:{j:02d}Z"
        )
        ps = job_pods(name, size, cpu=cpu, created=f"2026-01-01T00:00:{j:02d}Z")
        for p in ps:
            p["spec"]["priorityClassName"] = prio
        # Start some jobs running where they fit, their queues (and the parent) within limits.
        if rnd.random() < 0.5:
            chain = [q, "org"] if hierarchy else [q]
            if all(used[c] + size * cpu * 1000 <= limits.get(c, float("inf")) for c in chain):
                spots = []
                for _ in ps:
                    spot = next((n for n, f in free.items() if f >= cpu), None)
                    if spot is None:
                        break
                    free[spot] -= cpu
                    spots.append(spot)
                if len(spots) == len(ps):
                    for p, spot in zip(ps, spots, strict=True):
                        p["spec"]["nodeName"] = spot
                        p["status"]["phase"] = "Running"
                    for c in chain:
                        used[c] += size * cpu * 1000
                    pg = PodGroup.model_validate(
                        {**pg.model_dump(by_alias=True, exclude_none=True), "status": {"phase": "Running"}}
                    )
                else:
                    for spot in spots:
                        free[spot] += cpu
        pgs.append(pg)
        pods.extend(ps)
    return nodes, queues, pgs, pods


def _allocated(pods: list[dict[str, Any]], pgs: dict[str, PodGroup], queues: list[Queue]) -> dict[str, float]:
    parent = {q.name: q.spec.parent for q in queues}
    out: dict[str, float] = {}
    for p in pods:
        if not p["spec"].get("nodeName"):
            continue
        group = p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        q: str | None = pgs[group].spec.queue
        cpu = float(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]) * 1000
        while q:
            out[q] = out.get(q, 0.0) + cpu
            q = parent.get(q)
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    plugin=st.sampled_from(["proportion", "capacity", "capacity-hierarchy"]),
    actions=st.sampled_from(ACTION_LISTS),
)
def test_no_queue_ever_goes_past_its_limit(seed, plugin, actions):
    hierarchy = plugin == "capacity-hierarchy"
    nodes, queues, pgs, pods = _world(seed, hierarchy)
    conf = load_scheduler_config(queue_conf(actions, plugin.removesuffix("-hierarchy"), hierarchy=hierarchy))
    limits = _limits(queues)
    by_name = {pg.metadata.name: pg for pg in pgs}
    nominations: dict[str, Any] = {}
    for _cycle in range(4):
        snap = build_snapshot(
            nodes=nodes,
            pods=pods,
            podgroups=list(by_name.values()),
            queues=queues,
            priority_classes=PRIORITY_CLASSES,
        )
        res = run_session(snap, conf, nominations=nominations)
        gone = {e.victim for e in res.evictions}
        pods = [p for p in pods if f"default/{p['metadata']['name']}" not in gone]
        for p in pods:
            key = f"default/{p['metadata']['name']}"
            if key in res.bindings:
                p["spec"]["nodeName"] = res.bindings[key]
                p["status"]["phase"] = "Running"
        for key, outcome in res.jobs.items():
            name = key.split("/", 1)[1]
            if name in by_name and outcome.pg_phase:
                data = by_name[name].model_dump(by_alias=True, exclude_none=True)
                data["status"] = {**data.get("status", {}), "phase": outcome.pg_phase}
                by_name[name] = PodGroup.model_validate(data)
        nominations = dict(res.nominations)
        allocated = _allocated(pods, by_name, queues)
        # Nominated pods hold their room and bind next cycle: they count against the queue now.
        for nom in nominations.values():
            for pk in nom.pods:
                p = next(p for p in pods if f"default/{p['metadata']['name']}" == pk)
                if not p["spec"].get("nodeName"):
                    q: str | None = by_name[
                        p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
                    ].spec.queue
                    cpu = float(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]) * 1000
                    parent = {x.name: x.spec.parent for x in queues}
                    while q:
                        allocated[q] = allocated.get(q, 0.0) + cpu
                        q = parent.get(q)
        for q, limit in limits.items():
            assert allocated.get(q, 0.0) <= limit + 0.1, (
                q,
                allocated,
                limits,
                actions,
                [str(e) for e in res.evictions],
            )


# ------------------------------------------------------------------ capacity: ancestorReclaimLevel
def _ancestor_story(level: int | None):
    args = {"ancestorReclaimLevel": level} if level is not None else {}
    conf = load_scheduler_config(queue_conf("enqueue, allocate, reclaim", "capacity", hierarchy=True, **args))
    queues = [
        Queue.model_validate({"metadata": {"name": "pa"}, "spec": {"deserved": {"cpu": "8"}}}),
        Queue.model_validate({"metadata": {"name": "pb"}, "spec": {"deserved": {"cpu": "8"}}}),
        Queue.model_validate(
            {
                "metadata": {"name": "pa-x"},
                "spec": {"parent": "pa", "deserved": {"cpu": "2"}, "reclaimable": True},
            }
        ),
        Queue.model_validate(
            {"metadata": {"name": "pb-y"}, "spec": {"parent": "pb", "deserved": {"cpu": "8"}}}
        ),
    ]
    nodes = [node("n0", cpu=4), node("n1", cpu=4)]
    pgs, pods = [], []
    for i, n in enumerate(["n0", "n0", "n1"]):
        pgs.append(podgroup(f"x{i}", 1, queue="pa-x"))
        ps = job_pods(f"x{i}", 1, cpu=2)
        ps[0]["spec"]["nodeName"], ps[0]["status"]["phase"] = n, "Running"
        pods += ps
    pgs.append(podgroup("y", 1, queue="pb-y"))
    pods += job_pods("y", 1, cpu=4)
    snap = build_snapshot(
        nodes=nodes, pods=pods, podgroups=pgs, queues=queues, priority_classes=PRIORITY_CLASSES
    )
    return run_session(snap, conf)


def test_ancestor_reclaim_level_spares_a_leaf_whose_parent_is_within_its_share():
    # pa-x holds 6 cpu, above its own 2, but its parent pa holds 6 of the 8 it deserves.
    # Leaf over its share: reclaimed (Volcano's default), the pod on n1, where 2 cpu are free already.
    assert [e.victim for e in _ancestor_story(None).evictions] == ["default/x2-t0-0"]
    res = _ancestor_story(1)
    assert res.evictions == []
    assert not any("ancestorReclaimLevel" in n for n in res.notes)


def test_a_negative_ancestor_reclaim_level_falls_back_to_zero_with_a_note():
    res = _ancestor_story(-1)
    assert len(res.evictions) == 1
    assert any("ancestorReclaimLevel should be non-negative, got -1" in n for n in res.notes)
