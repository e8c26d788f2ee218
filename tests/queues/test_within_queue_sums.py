"""A large gang in a full queue is judged by sums, and told exactly what the pod-by-pod walk says.

When every plugin that limits a queue judges "allocated + request <= limit", the pods of a
unit the queue cannot take whole are not voted on and charged one by one: the first pod the
queue refuses is found by bisection over sums. What the unit keeps (whole groups before it, the
fitting part of a group that may be partial, nothing when an atomic group breaks) and the reason
given must be those of the walk, for any mix of pod sizes and group kinds.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperplace.api import Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle.run import open_session
from scheduler_plugin.placement.gang_units import Group, within_queue
from tests.queues.test_queue_limits import queue_conf
from tests.scheduler.builders import job_pods, node, podgroup

CONFIGS = {
    "proportion": load_scheduler_config(queue_conf("enqueue, allocate")),
    "capacity": load_scheduler_config(queue_conf("enqueue, allocate", "capacity")),
}


def _session(plugin: str, cap_cpu: int, cap_gpu: int, used_cpu: int, pods: list[tuple[int, int]]) -> Any:
    """A queue limited to ``cap_cpu``/``cap_gpu`` holding ``used_cpu`` CPUs, and one pending job
    whose pods request the (cpu, gpu) pairs of ``pods``."""
    nodes = [node(f"n{i}", cpu=64, memory="512Gi", gpu=8) for i in range(8)]
    queue = Queue.model_validate(
        {
            "metadata": {"name": "q"},
            "spec": {
                "capability": {"cpu": str(cap_cpu), "nvidia.com/gpu": str(cap_gpu)},
                "deserved": {"cpu": str(cap_cpu), "nvidia.com/gpu": str(cap_gpu)},
            },
        }
    )
    objs = job_pods("old", 1, cpu=used_cpu, node_name="n0") if used_cpu else []
    for p in objs:
        p["status"]["phase"] = "Running"
    for i, (cpu, gpu) in enumerate(pods):
        objs += job_pods("big", 1, cpu=cpu, gpu=gpu, task=f"t{i}")
    pgs = [podgroup("big", len(pods), queue="q")]
    if used_cpu:
        pgs.append(podgroup("old", 1, queue="q"))
    snap = build_snapshot(nodes=nodes, pods=objs, podgroups=pgs, queues=[queue])
    ssn = open_session(snap, CONFIGS[plugin])
    return ssn, snap.jobs["default/big"]


def _groups(job: Any, cuts: list[int], atomic: list[bool]) -> list[Group]:
    """The job's pods, in name order, cut into consecutive groups."""
    tasks = sorted(job.tasks, key=lambda t: int(t.key.rsplit("-t", 1)[1].split("-")[0]))
    sj = next(iter(job.subjobs.values()))
    out: list[Group] = []
    start = 0
    for k, (cut, whole) in enumerate(zip([*cuts, len(tasks)], [*atomic, True], strict=False)):
        end = len(tasks) if k == len(cuts) else min(max(cut, start), len(tasks))
        if end > start:
            out.append(Group(sj, tasks[start:end], whole))
        start = end
    return out


def _walked(ssn: Any, job: Any, groups: list[Group], monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(type(ssn), "judges_sums", lambda self: False)
        return within_queue(ssn, job, groups)


def _view(got: Any) -> tuple[list[tuple[list[str], bool]], str | None]:
    kept, why = got
    return [([t.key for t in g.tasks], g.atomic) for g in kept], why


def test_a_gang_one_pod_too_large_for_its_queue_keeps_the_groups_before_the_pod_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 10 CPUs left; pods of 3 CPUs in groups of two: the fourth pod is refused.
    ssn, job = _session("proportion", 20, 64, 10, [(3, 0)] * 6)
    groups = _groups(job, [2, 4], [True, False, True])
    assert ssn.judges_sums()
    by_sums = _view(within_queue(ssn, job, groups))
    assert by_sums == _view(_walked(ssn, job, groups, monkeypatch))
    kept, why = by_sums
    assert [len(k) for k, _ in kept] == [2, 1]  # the first group whole, one pod of the partial one
    assert why is not None and "cpu" in why


@settings(max_examples=60, deadline=None)
@given(
    plugin=st.sampled_from(sorted(CONFIGS)),
    cap_cpu=st.integers(4, 60),
    cap_gpu=st.integers(0, 40),
    used_cpu=st.integers(0, 16),
    pods=st.lists(st.tuples(st.integers(1, 8), st.sampled_from([0, 0, 1, 4, 8])), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 12), max_size=4),
    atomic=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_judged_by_sums_a_unit_keeps_what_the_pod_by_pod_walk_keeps_and_says_why_alike(
    plugin: str,
    cap_cpu: int,
    cap_gpu: int,
    used_cpu: int,
    pods: list[tuple[int, int]],
    cuts: list[int],
    atomic: list[bool],
) -> None:
    ssn, job = _session(plugin, cap_cpu, cap_gpu, used_cpu, pods)
    groups = _groups(job, sorted(cuts), atomic)
    with pytest.MonkeyPatch.context() as mp:
        walked = _view(_walked(ssn, job, groups, mp))
    assert _view(within_queue(ssn, job, groups)) == walked
