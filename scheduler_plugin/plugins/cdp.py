"""``cdp`` plugin: cooldown protection (Volcano's ``cdp``).

A pod marked ``volcano.sh/cooldown-time: <Go duration>`` (label, else annotation, as Volcano
reads it; here its PodGroup's mark covers the pods that carry none) is not evicted by preempt or
reclaim until that long after it started running (its ``PodScheduled`` condition, else its
start time), so a job that just started gets to do some work before it can be taken again.

Volcano registers this as a victim filter in its tier, where a tier left without candidates
hands the decision to the next one, and a later tier may then evict a pod in its cooldown. Here
the cooldown is a guard: it holds whatever the tiers decide. An invalid duration is logged and
ignored, as Volcano does, and named on the PodGroup.
"""

from __future__ import annotations

from typing import Any

from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import VICTIM_GUARD
from ..framework.session import Session
from ..model.jobs import COOLDOWN_KEY, TaskInfo, cooldown_until

PROTECTS = f"protected by cdp ({COOLDOWN_KEY} not yet over)"


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> None:
    """Guard the pods still in their cooldown at the session's clock."""
    jobs = ssn.snap.jobs

    def cooling_down(actor: TaskInfo, victims: list[TaskInfo]) -> list[TaskInfo]:
        now = ssn.clock
        out: list[TaskInfo] = []
        for t in victims:
            job = jobs.get(t.job)
            until = cooldown_until(t, job) if job is not None else None
            if until is None or until <= now:
                out.append(t)
        return out

    ssn.register(VICTIM_GUARD, (PROTECTS, cooling_down))
