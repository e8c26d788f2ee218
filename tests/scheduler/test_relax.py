"""Time-bounded topology relaxation: "tier 1 for 10 minutes, then tier 2" (Slurm's --switches=N@T)."""

from __future__ import annotations

from typing import Any

import pytest

from hyperplace.api import PodGroup
from hyperplace.api.relax import RelaxError, parse_relax, relax_state
from hyperplace.api.times import parse_go_duration, parse_rfc3339
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import run_session
from scheduler_plugin.cycle.relaxation import relax_snapshot
from scheduler_plugin.model.snapshot import ClusterSnapshot

from .builders import eight_nodes, guide_tree, job_pods, podgroup

CREATED = "2026-01-01T00:00:00Z"
T0 = parse_rfc3339(CREATED) or 0.0


def annotated(pg: PodGroup, relax: str) -> PodGroup:
    data: dict[str, Any] = pg.model_dump(by_alias=True, exclude_none=True)
    data["metadata"]["annotations"] = {"hyperplace.io/relax-topology": relax}
    return PodGroup.model_validate(data)


def six_wide_job(relax: str | None, tier: int = 2) -> ClusterSnapshot:
    """Six 4-CPU pods on 4-CPU nodes: no tier-1 HyperNode (4 nodes) holds them, tier 2 does."""
    pg = podgroup("wide", 6, topology={"mode": "hard", "highestTierAllowed": tier}, created=CREATED)
    if relax is not None:
        pg = annotated(pg, relax)
    return build_snapshot(
        nodes=eight_nodes(), pods=job_pods("wide", 6, cpu=4), hypernodes=guide_tree(), podgroups=[pg]
    )


def condition(result: Any, key: str) -> dict[str, Any]:
    return next(c for c in result.jobs[key].conditions if c["type"] == "TopologyRelaxation")


def test_a_job_asking_for_one_rack_first_waits_for_it_then_spreads_when_the_deadline_passes() -> None:
    snap = six_wide_job("1@10m")
    early = run_session(snap, now=T0 + 5 * 60)
    assert not early.bindings
    cond = condition(early, "default/wide")
    assert cond["reason"] == "Tier1" and "until 2026-01-01T00:10:00Z" in cond["message"]
    assert early.jobs["default/wide"].relaxation == {
        "tier": 1,
        "nextDeadline": "2026-01-01T00:10:00Z",
        "nextTier": None,
    }
    late = run_session(snap, now=T0 + 11 * 60)
    assert len(late.bindings) == 6
    assert condition(late, "default/wide")["status"] == "False"


def test_the_volcano_limit_stays_the_ceiling_of_every_step() -> None:
    snap = six_wide_job("1@10m,3@30m", tier=1)
    # Tier 3 is asked for after 10 minutes, but highestTierAllowed 1 keeps the job in one rack.
    result = run_session(snap, now=T0 + 15 * 60)
    assert not result.bindings
    assert run_session(snap, now=T0 + 15 * 60).jobs["default/wide"].relaxation["tier"] == 1  # type: ignore[index]


def test_jobs_without_the_annotation_schedule_on_the_same_snapshot_object() -> None:
    snap = six_wide_job(None)
    same, found = relax_snapshot(snap, T0)
    assert same is snap and found == {}
    assert len(run_session(snap, now=T0).bindings) == 6


def test_a_relaxed_session_leaves_the_snapshot_untouched_for_the_next_session() -> None:
    snap = six_wide_job("1@10m")
    run_session(snap, now=T0)
    assert snap.jobs["default/wide"].topology is not None
    assert snap.jobs["default/wide"].topology.limit == 2


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600), ("1h30m", 5400), ("1.5h", 5400), ("90s", 90), ("500ms", 0.5)]
)
def test_durations_read_like_go(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1@10m,1@30m", "ascend in tier and time"),
        ("2@30m,3@10m", "ascend in tier and time"),
        ("1@10minutes", "not a Go duration"),
        ("one@10m", "positive integer"),
        ("1", "<tier>@<duration>"),
        ("1@10m,", "empty step"),
        ("1@0s", "positive"),
    ],
)
def test_malformed_annotations_are_refused_naming_the_field(text: str, fragment: str) -> None:
    with pytest.raises(RelaxError) as exc:
        parse_relax(text)
    assert str(exc.value).startswith("metadata.annotations[hyperplace.io/relax-topology]")
    assert fragment in str(exc.value)


def test_steps_hold_until_their_deadline_and_then_give_way() -> None:
    steps = parse_relax("1@10m,2@30m")
    assert relax_state(steps, 0, None).tier == 1
    assert relax_state(steps, 600, None).tier == 2
    assert relax_state(steps, 1799, 5).next_tier is None
    assert relax_state(steps, 1800, None).tier is None


def test_the_scheduler_process_writes_the_tier_in_force_and_the_deadline_on_the_podgroup() -> None:
    from scheduler_plugin.runtime.status import podgroup_status_patch

    snap = six_wide_job("1@10m,2@30m", tier=3)
    outcome = run_session(snap, now=T0 + 60).jobs["default/wide"]
    pg = snap.jobs["default/wide"].podgroup.model_dump(by_alias=True, exclude_none=True)
    patch = podgroup_status_patch(pg, outcome, [], "2026-01-01T00:01:00Z")
    assert patch is not None
    conds = {c["type"]: c for c in patch["status"]["conditions"]}
    relax = conds["TopologyRelaxation"]
    assert relax["reason"] == "Tier1"
    assert relax["message"] == "topology relaxed to tier 1 until 2026-01-01T00:10:00Z, then tier 2"
