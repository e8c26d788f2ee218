"""``pdb`` plugin: victims that would break a PodDisruptionBudget are not chosen (Volcano's ``pdb``).

Volcano's plugin walks the candidate victims in order and keeps each while every budget whose
selector matches it (same namespace, not already in ``status.disruptedPods``) still allows one
more disruption (``status.disruptionsAllowed``); the Eviction API would refuse the rest anyway,
and the preemptor would then wait for a victim that never leaves. Here:

* a budget without a status yet (the disruption controller has not written it, as in the
  simulator) is counted the disruption controller's way from the pods the scheduler sees:
  healthy = running matching pods, desired = ``minAvailable`` (a number or a percentage of the
  matching pods, rounded up) or the matching pods less ``maxUnavailable``;
* victims already chosen in this session spend their budgets, so two preemptors in one cycle
  never break a budget between them;
* a budget's veto is a guard: it holds whatever the victim tiers decide (in Volcano a tier left
  without candidates hands the decision to the next, which may then pick the protected pods).

As in policy/v1, an empty selector selects every pod of the namespace; a budget without one
selects none.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperplace.kube import SelectorError, label_selector_matches

from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import VICTIM_GUARD
from ..framework.session import Session
from ..model.jobs import TaskInfo

log = logging.getLogger(__name__)
PROTECTS = "protected by a PodDisruptionBudget (pdb)"


@dataclass
class Budget:
    """One PodDisruptionBudget as the plugin reads it."""

    key: str
    namespace: str
    selector: Mapping[str, Any] | None
    allowed: int
    disrupted: frozenset[str]

    def covers(self, t: TaskInfo) -> bool:
        """Does the budget select pod ``t`` (and not count it as disrupted already)?"""
        if self.selector is None or t.namespace != self.namespace or t.name in self.disrupted:
            return False
        try:
            return label_selector_matches(self.selector, t.labels)
        except SelectorError:
            return False


def _scaled(value: Any, total: int) -> int | None:
    """An IntOrString: a number, or a percentage of ``total`` rounded up."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        try:
            return math.ceil(float(text[:-1]) * total / 100)
        except ValueError:
            return None
    try:
        return int(text)
    except ValueError:
        return None


def budgets(ssn: Session) -> list[Budget]:
    """The snapshot's budgets, each with the disruptions it allows now."""
    out: list[Budget] = []
    tasks = [t for j in ssn.snap.jobs.values() for t in j.tasks]
    for obj in ssn.snap.pdbs:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        ns = str(meta.get("namespace") or "default")
        b = Budget(
            f"{ns}/{meta.get('name', '')}",
            ns,
            spec.get("selector"),
            0,
            frozenset((status.get("disruptedPods") or {}).keys()),
        )
        if "disruptionsAllowed" in status:
            b.allowed = int(status.get("disruptionsAllowed") or 0)
        else:
            matching = [t for t in tasks if b.covers(t)]
            healthy = sum(1 for t in matching if t.running)
            if spec.get("maxUnavailable") is not None:
                most = _scaled(spec["maxUnavailable"], len(matching))
                desired = len(matching) - most if most is not None else len(matching)
            else:
                least = _scaled(spec.get("minAvailable", 1), len(matching))
                desired = least if least is not None else len(matching)
            b.allowed = max(healthy - desired, 0)
        out.append(b)
    return out


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> None:
    """Guard the victims whose eviction would break a budget."""
    if not ssn.snap.pdbs:
        return
    found = budgets(ssn)
    jobs = ssn.snap.jobs

    def within_budgets(actor: TaskInfo, victims: list[TaskInfo]) -> list[TaskInfo]:
        left = {b.key: b.allowed for b in found}
        for ev in ssn.ledger.evictions:  # victims chosen earlier in this session
            job = jobs.get(ev.victim_job)
            t = next((x for x in job.tasks if x.key == ev.victim), None) if job is not None else None
            if t is not None:
                for b in found:
                    if b.covers(t):
                        left[b.key] -= 1
        out: list[TaskInfo] = []
        for t in victims:
            mine = [b for b in found if b.covers(t)]
            if all(left[b.key] > 0 for b in mine):
                for b in mine:
                    left[b.key] -= 1
                out.append(t)
            else:
                log.debug("pod %s would break PodDisruptionBudget(s) %s", t.key, [b.key for b in mine])
        return out

    ssn.register(VICTIM_GUARD, (PROTECTS, within_budgets))
