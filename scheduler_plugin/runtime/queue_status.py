"""The scheduler's part of Queue status: ``status.allocated`` (Volcano's ``updateQueueStatus``).

Volcano's scheduler writes, at the end of every session, what each queue holds: the requests
of its jobs' pods that are running or bound, those bound by this session included. The queue
controller owns the rest of the status (state, PodGroup counts). The patch touches only
``allocated``, and nulls resource names the queue no longer holds (a merge patch merges maps).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.kube import milli_value
from hyperplace.runtime.api import Obj
from scheduler_plugin.cycle import SessionResult


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal as quantities ("2" == "2000m")."""
    if set(a) != set(b):
        return False
    try:
        return all(milli_value(a[k]) == milli_value(b[k]) for k in a)
    except Exception:  # an unparsable quantity written by someone else: rewrite it
        return False


def queue_allocated_patch(queue: Mapping[str, Any], allocated: Mapping[str, str]) -> Obj | None:
    """Merge patch setting the queue's ``status.allocated``; None when it already says so."""
    current = ((queue.get("status") or {}).get("allocated")) or {}
    if not isinstance(current, Mapping):
        current = {}
    if _same(current, allocated):
        return None
    body: dict[str, Any] = {k: None for k in current if k not in allocated}
    body.update(allocated)
    return {"status": {"allocated": body}}


def wanted_allocated(result: SessionResult) -> dict[str, dict[str, str]]:
    """Queue name -> the ``allocated`` resource list this session ends with."""
    return {name: q.to_dict()["allocated"] for name, q in result.queues.items()}
