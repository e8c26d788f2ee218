"""A gang that lost a pod with its node waits for its replacement in its own domain (the
scheduler repairs it there first); when that takes longer than ``--damaged-gang-restart-after``,
the Job restarts whole and goes wherever it fits."""

from __future__ import annotations

from typing import Any

from controller.job.reconcile import JobReconcile
from hyperplace.api.times import parse_rfc3339, rfc3339

from .test_job_lifecycle_rules import T0, Cluster, spec_with

START = parse_rfc3339(T0) or 0.0
LOST = START + 3600  # an hour into the run, a node under the gang failed
TEN_MINUTES = 600.0


def at(seconds: float) -> str:
    return rfc3339(seconds)


def whole_gang() -> Cluster:
    """The design doc's 14-pod Job as one gang (minAvailable 14), all running since T0."""
    c = Cluster(spec_with(minAvailable=14))
    c.reconcile()
    for name in c.pods:
        c.set(name, "Running")
        c.pods[name]["status"]["startTime"] = T0
    c.reconcile()
    return c


def lose_a_pod(c: Cluster) -> str:
    """A pod was evicted with its node; the controller makes it again (its replacement)."""
    name = sorted(c.pods)[0]
    del c.pods[name]
    c.reconcile(now=at(LOST))
    assert name in c.pods, "the lost pod is made again"
    c.pods[name]["metadata"]["creationTimestamp"] = at(LOST)
    return name


def passes(c: Cluster, when: float, **kw: Any) -> JobReconcile:
    return c.reconcile(now=at(when), damaged_restart_after=TEN_MINUTES, **kw)


def test_the_replacement_waits_in_its_domain_then_the_job_restarts_whole() -> None:
    c = whole_gang()
    lose_a_pod(c)
    early = passes(c, LOST + 300)
    assert not early.delete_pods
    assert early.requeue_after is not None and abs(early.requeue_after - 300) < 1
    late = passes(c, LOST + TEN_MINUTES + 1)
    assert len(late.delete_pods) == 14  # every pod, the waiting one too: the gang starts again whole
    assert late.status.retry_count == 1
    assert late.status.state is not None and late.status.state.phase == "Restarting"
    assert "short of its minimum" in (late.status.state.message or "")


def test_a_job_with_its_own_pending_policy_follows_it() -> None:
    c = whole_gang()
    raw = c.job.to_dict()
    raw["spec"]["policies"] = [{"event": "PodPending", "timeout": "1h", "action": "AbortJob"}]
    c.job = type(c.job).model_validate(raw)
    lose_a_pod(c)
    out = passes(c, LOST + TEN_MINUTES + 1)
    assert not out.delete_pods
    assert out.status.retry_count == 0


def test_a_gang_never_whole_is_not_restarted_however_long_it_waits() -> None:
    """Half-bound after a failed bind: the pending pod is as old as the others."""
    c = Cluster(spec_with(minAvailable=14))
    c.reconcile()
    for name in sorted(c.pods)[1:]:
        c.set(name, "Running")
        c.pods[name]["status"]["startTime"] = at(START + 5)
    out = passes(c, START + 7200)
    assert not out.delete_pods
    assert out.status.retry_count == 0


def test_a_gang_still_at_its_minimum_is_left_running() -> None:
    """A pod beyond the minimum lost: the gang runs on (minAvailable 3 of 14)."""
    c = Cluster(spec_with(minAvailable=3))
    c.reconcile()
    for name in c.pods:
        c.set(name, "Running")
        c.pods[name]["status"]["startTime"] = T0
    c.reconcile()
    lose_a_pod(c)
    out = passes(c, LOST + 7200)
    assert not out.delete_pods


def test_off_means_the_gang_waits_as_on_volcano() -> None:
    c = whole_gang()
    lose_a_pod(c)
    out = c.reconcile(now=at(LOST + 7200))
    assert not out.delete_pods


def test_the_controller_flag_sets_the_wait_and_off_turns_it_off() -> None:
    from controller.__main__ import parse_args

    assert parse_args([]).damaged_gang_restart_after == TEN_MINUTES
    assert parse_args(["--damaged-gang-restart-after", "90s"]).damaged_gang_restart_after == 90
    assert parse_args(["--damaged-gang-restart-after", "off"]).damaged_gang_restart_after is None
