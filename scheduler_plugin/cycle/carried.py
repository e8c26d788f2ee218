"""``--verify-state`` for the sums sessions carry from one snapshot to the next.

Opening a session adds up every job (per queue for proportion and the queue status, per job
for drf). Those sums are carried between the snapshots of one incremental cache and patched
for the jobs that changed; here each is held against the same sum made afresh. Any difference
is a bug, and stops the scheduler as a drifted snapshot does.
"""

from __future__ import annotations

from typing import Any

from ..algorithms.queue_sums import QueueJobSums, queue_job_sums
from ..cache.cluster_state import ClusterState
from ..cache.verify import StateDriftError, verify_snapshot
from ..model.resources import Res
from ..model.snapshot import ClusterSnapshot
from ..plugins.drf import job_shares


def _res(r: Res) -> dict[str, float]:
    """A resource with its zero dimensions left out (a sum patched down to zero keeps them)."""
    out = {"cpu": r.cpu, "memory": r.memory, **(r.scalars or {})}
    return {k: v for k, v in out.items() if v}


def _queue(s: QueueJobSums) -> tuple[Any, ...]:
    return (_res(s.allocated), _res(s.request), _res(s.inqueue), _res(s.elastic), s.jobs)


def carried_differences(snap: ClusterSnapshot) -> list[str]:
    """What the sums carried into ``snap`` get wrong against the same sums made afresh."""
    out: list[str] = []

    def check(what: str, got: Any, want: Any) -> None:
        if got != want:
            text = f"{what}: carried {got!r} != afresh {want!r}"
            out.append(text if len(text) < 600 else text[:600] + "...")

    got_q, want_q = queue_job_sums(snap), queue_job_sums(snap, carried=False)
    check(
        "queue job sums", {q: _queue(s) for q, s in got_q.items()}, {q: _queue(s) for q, s in want_q.items()}
    )
    (got_s, got_a), (want_s, want_a) = job_shares(snap), job_shares(snap, carried=False)
    check("drf shares", got_s, want_s)
    check("drf allocations", {k: _res(v) for k, v in got_a.items()}, {k: _res(v) for k, v in want_a.items()})
    return out


def verify_carried(snap: ClusterSnapshot) -> None:
    """Raise :class:`~scheduler_plugin.cache.verify.StateDriftError` naming every carried sum
    of ``snap`` that differs from a fresh one."""
    diffs = carried_differences(snap)
    if diffs:
        raise StateDriftError(
            f"sums carried between snapshots drifted from a fresh sum ({len(diffs)} differences):\n  "
            + "\n  ".join(diffs)
        )


def verify_state(state: ClusterState, snap: ClusterSnapshot, rebuilt: ClusterSnapshot) -> None:
    """Everything ``--verify-state`` checks of an incremental snapshot ``snap`` of ``state``:
    the snapshot against ``rebuilt`` (the same objects built from scratch), then the sums
    carried into it against fresh ones. Raises :class:`StateDriftError` on any difference."""
    verify_snapshot(state, snap, rebuilt)
    verify_carried(snap)
