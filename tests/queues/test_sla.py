"""The ``sla`` plugin, as Volcano documents it: a job that waited past its ``sla-waiting-time``
goes first, is admitted even when ``overcommit`` would hold it Pending, and gets room held."""

from __future__ import annotations

from typing import Any

from hyperplace.api import PodGroup
from hyperplace.api.times import parse_rfc3339
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import SessionResult, run_session
from tests.scheduler.builders import hypernode, job_pods, node, pod, podgroup

T0 = "2026-01-01T00:00:00Z"
LEAF = {"mode": "hard", "highestTierAllowed": 1}


def conf(sla: str | None, global_wait: str | None = None) -> Any:
    """Volcano's default tiers with overcommit at factor 1; ``sla`` first when given."""
    sla_entry = ""
    if sla is not None:
        sla_entry = "  - name: sla\n"
        if global_wait:
            sla_entry += f"    arguments:\n      sla-waiting-time: {global_wait}\n"
    return load_scheduler_config(
        f"""
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
{sla_entry}  - name: priority
  - name: gang
- plugins:
  - name: overcommit
    arguments:
      overcommit-factor: 1.0
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
    )


def world(annotation: str | None = "5m") -> tuple[list[dict[str, Any]], list[PodGroup]]:
    """Two leaves of eight 8-GPU nodes. Ten one-node jobs run (three in leaf0, seven in leaf1), so
    48 GPUs are idle; a 64-GPU gang (one leaf) created at T0 asks for more than that, and a stream
    of small jobs arrived after it."""
    pods = [pod(f"old{i}-t0-0", f"old{i}", cpu=8, gpu=8, index=0, node_name=f"n{i:02d}") for i in range(3)]
    pods += [
        pod(f"old{i}-t0-0", f"old{i}", cpu=8, gpu=8, index=0, node_name=f"n{i + 5:02d}") for i in range(3, 10)
    ]
    pgs = [podgroup(f"old{i}", 1) for i in range(10)]
    pods += job_pods("big", 8, cpu=8, gpu=8, created=T0)
    big = podgroup("big", 8, topology=LEAF, created=T0)
    big.spec.min_resources = {"cpu": "64", "nvidia.com/gpu": "64"}
    if annotation is not None:
        big.metadata.annotations = {"volcano.sh/sla-waiting-time": annotation}
    pgs.append(big)
    for i in range(5):
        created = f"2026-01-01T00:00:{10 + i}Z"
        pods.append(pod(f"s{i}-t0-0", f"s{i}", cpu=8, gpu=8, index=0, created=created))
        pgs.append(podgroup(f"s{i}", 1, created=created))
    return pods, pgs


def session(pods: list[dict[str, Any]], pgs: list[PodGroup], at: str | None, config: Any) -> SessionResult:
    nodes = [node(f"n{i:02d}", cpu=64, memory="512Gi", gpu=8) for i in range(16)]
    tree = [
        hypernode("leaf0", 1, nodes=[f"n{i:02d}" for i in range(8)]),
        hypernode("leaf1", 1, nodes=[f"n{i:02d}" for i in range(8, 16)]),
        hypernode("spine", 2, children=["leaf0", "leaf1"]),
    ]
    snap = build_snapshot(nodes=nodes, pods=pods, hypernodes=tree, podgroups=pgs)
    return run_session(snap, config, now=parse_rfc3339(at) if at else None)


def small_jobs_in_leaf0(result: SessionResult) -> list[str]:
    leaf0 = {f"n{i:02d}" for i in range(8)}
    return sorted(k for k, n in result.bindings.items() if k.startswith("default/s") and n in leaf0)


def test_without_sla_the_big_gang_stays_pending_and_small_jobs_fill_its_leaf() -> None:
    pods, pgs = world()
    result = session(pods, pgs, "2026-01-01T00:06:00Z", conf(sla=None))
    big = result.jobs["default/big"]
    assert big.pg_phase == "Pending"
    assert big.explanation is not None and "overused" in big.explanation.summary
    assert len(small_jobs_in_leaf0(result)) == 5  # leaf0's five free nodes all taken
    assert not result.reservations


def test_past_its_sla_the_gang_is_admitted_and_its_leaf_is_held() -> None:
    pods, pgs = world()
    result = session(pods, pgs, "2026-01-01T00:06:00Z", conf(sla="sla"))
    big = result.jobs["default/big"]
    assert big.pg_phase == "Inqueue"  # admitted although overcommit would refuse it
    # Its SLA (5m), not the reservation's own two-hour threshold, starts the hold.
    assert result.reservations["default/big"].hypernode == "leaf0"
    assert small_jobs_in_leaf0(result) == []  # the small jobs wait rather than delay it
    assert any(c["type"] == "HyperNodeReserved" and c["status"] == "True" for c in big.conditions)


def test_before_its_deadline_nothing_changes() -> None:
    pods, pgs = world()
    result = session(pods, pgs, "2026-01-01T00:04:00Z", conf(sla="sla"))
    assert result.jobs["default/big"].pg_phase == "Pending"
    assert not result.reservations
    assert len(small_jobs_in_leaf0(result)) == 5


def test_without_a_clock_no_deadline_passes() -> None:
    pods, pgs = world()
    result = session(pods, pgs, None, conf(sla="sla"))
    assert result.jobs["default/big"].pg_phase == "Pending"


def test_the_plugin_argument_is_the_default_and_the_annotation_overrides_it() -> None:
    pods, pgs = world(annotation=None)
    at = "2026-01-01T00:06:00Z"
    assert result_phase(pods, pgs, at, conf(sla="sla", global_wait="5m")) == "Inqueue"
    assert result_phase(pods, pgs, at, conf(sla="sla", global_wait="1h")) == "Pending"
    pods, pgs = world(annotation="2m")
    assert result_phase(pods, pgs, at, conf(sla="sla", global_wait="1h")) == "Inqueue"


def result_phase(pods: list[dict[str, Any]], pgs: list[PodGroup], at: str, config: Any) -> str | None:
    return session(pods, pgs, at, config).jobs["default/big"].pg_phase


def test_a_malformed_waiting_time_is_named_and_ignored() -> None:
    pods, pgs = world(annotation="five minutes")
    result = session(pods, pgs, "2026-01-01T00:06:00Z", conf(sla="sla"))
    assert result.jobs["default/big"].pg_phase == "Pending"
    assert any(
        "annotation volcano.sh/sla-waiting-time: invalid duration 'five minutes'" in n for n in result.notes
    )
    bad = session(pods, pgs, "2026-01-01T00:06:00Z", conf(sla="sla", global_wait="-1m"))
    assert any("plugin sla: sla-waiting-time: must be positive" in n for n in bad.notes)


def test_an_overdue_job_goes_before_an_older_job_without_an_sla() -> None:
    # One free 4-cpu node; "first" is older, "urgent" waited past its 1-minute SLA.
    nodes = [node("n0", cpu=4)]
    pods = job_pods("first", 1, cpu=4, created=T0) + job_pods(
        "urgent", 1, cpu=4, created="2026-01-01T00:01:00Z"
    )
    first = podgroup("first", 1, created=T0)
    urgent = podgroup("urgent", 1, created="2026-01-01T00:01:00Z")
    urgent.metadata.annotations = {"sla-waiting-time": "1m"}  # the older, unprefixed key
    snap = build_snapshot(nodes=nodes, pods=pods, podgroups=[first, urgent])
    at = parse_rfc3339("2026-01-01T00:03:00Z")
    assert run_session(snap, conf(sla="sla"), now=at).bindings == {"default/urgent-t0-0": "n0"}
    assert run_session(snap, conf(sla=None), now=at).bindings == {"default/first-t0-0": "n0"}
