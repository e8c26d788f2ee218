"""``--verify-state``: an incremental snapshot held against a from-scratch build of the same
objects (:func:`~.rebuild.build_snapshot`); any difference is a bug, and stops the scheduler."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..model.jobs import JobInfo, TaskInfo
from ..model.snapshot import ClusterSnapshot
from .cluster_state import ClusterState

I64 = npt.NDArray[np.int64]


def _task_view(t: TaskInfo, snap: ClusterSnapshot) -> tuple[Any, ...]:
    sh = snap.shapes[t.shape]
    req = {r: int(v) for r, v in zip(snap.resources, t.requests.tolist(), strict=True) if v}
    shape_req = {r: int(v) for r, v in zip(snap.resources, sh.requests.tolist(), strict=True) if v}
    return (
        t.key, t.name, t.namespace, t.uid, t.role, t.index, t.labels, req, shape_req,
        sh.constraints.signature, sh.constraints.host_ports, t.priority, t.creation, t.best_effort,
        t.node, t.running, t.subjob, t.job, t.order_key, t.prio_order_key, t.rank, t.priority_class,
        t.preempt_never, t.preemptable, t.bad_mark, t.cooldown, t.scheduled_at, t.bad_cooldown, t.deadline,
        t.started_at, t.replaces_node, t.releasing,
    )  # fmt: skip


def _job_view(j: JobInfo, snap: ClusterSnapshot) -> tuple[Any, ...]:
    subjobs = [
        (
            sj.id,
            sj.gid,
            sj.policy,
            sj.min_available,
            sj.match_index,
            sj.topology,
            sj.allocated_hypernode,
            [_task_view(t, snap) for t in sj.tasks],
        )
        for sj in j.subjobs.values()
    ]
    return (
        j.key, j.podgroup.to_dict(), j.queue, j.priority, j.creation, j.min_member, j.min_task_member,
        j.topology, j.has_policies, j.min_subjobs, j.allocated_hypernode, j.problems, subjobs,
    )  # fmt: skip


def _columns(snap: ClusterSnapshot, m: I64) -> dict[str, list[int]]:
    """Matrix columns by resource name, all-zero ones left out (an unused column is harmless)."""
    return {r: m[:, i].tolist() for i, r in enumerate(snap.resources) if m[:, i].any()}


def snapshot_differences(got: ClusterSnapshot, want: ClusterSnapshot) -> list[str]:
    """What differs between two snapshots of the same cluster, ignoring representation
    (shape ids, resource column order, dict order). Empty when they are equivalent."""
    out: list[str] = []

    def check(what: str, a: Any, b: Any) -> None:
        if a != b:
            text = f"{what}: incremental {a!r} != rebuilt {b!r}"
            out.append(text if len(text) < 600 else text[:600] + "...")

    check("node names", got.node_names, want.node_names)
    if out:
        return out
    check("node statics", got.node_static, want.node_static)
    check("allocatable", _columns(got, got.allocatable), _columns(want, want.allocatable))
    check("used", _columns(got, got.used), _columns(want, want.used))
    check("host ports", got.node_ports, want.node_ports)
    check("plain mask", got.plain_mask.tolist(), want.plain_mask.tolist())
    gt, wt = got.tree, want.tree
    check("tree names", gt.names, wt.names)
    check("tree tiers", gt.tiers.tolist(), wt.tiers.tolist())
    check("tree parents", gt.parent.tolist(), wt.parent.tolist())
    check("tree node sets", [s.tolist() for s in gt.node_sets], [s.tolist() for s in wt.node_sets])
    check("tree tier names", gt.tier_names, wt.tier_names)
    check("tree problems", gt.problems, wt.problems)
    check("hot-spare annotations", dict(got.spare_marks), dict(want.spare_marks))
    check("job keys", sorted(got.jobs), sorted(want.jobs))
    for k in sorted(set(got.jobs) & set(want.jobs)):
        check(f"job {k}", _job_view(got.jobs[k], got), _job_view(want.jobs[k], want))
    check("orphan pods", got.orphan_pods, want.orphan_pods)
    check("standalone jobs", got.standalone, want.standalone)
    check("pods on a missing node", got.missing_node_pods, want.missing_node_pods)
    check(
        "queues",
        {k: q.to_dict() for k, q in got.queues.items()},
        {k: q.to_dict() for k, q in want.queues.items()},
    )
    check("scheduler names", got.scheduler_names, want.scheduler_names)
    check("bound pods by class", _classes(got), _classes(want))
    check("namespace labels", got.namespace_labels, want.namespace_labels)
    check("storage", got.storage.content(), want.storage.content())
    check("dynamic resources", got.dra.content(), want.dra.content())
    return out


def _classes(snap: ClusterSnapshot) -> dict[Any, list[int]]:
    """Bound pods per class, as sorted node indices (grouping order is representation)."""
    out: dict[Any, list[int]] = {}
    for c, nodes in snap.pod_classes:
        out.setdefault(c, []).extend(nodes.tolist())
    return {c: sorted(v) for c, v in out.items()}


class StateDriftError(AssertionError):
    """The incremental state disagrees with a rebuild from the same objects (a bug)."""


def verify_snapshot(state: ClusterState, snap: ClusterSnapshot, rebuilt: ClusterSnapshot) -> None:
    """Raise :class:`StateDriftError` naming every difference between ``snap`` (from
    ``state``) and ``rebuilt`` (:func:`~.rebuild.build_snapshot` of the same objects)."""
    diffs = snapshot_differences(snap, rebuilt)
    if diffs:
        raise StateDriftError(
            f"incremental scheduler state drifted from a rebuild ({len(diffs)} differences):\n  "
            + "\n  ".join(diffs[:20])
        )
