"""``resourcequota`` plugin: a PodGroup whose ``minResources`` would exceed a ResourceQuota of its
namespace stays Pending, with the quota's name in the reason (Volcano's ``resourcequota``).

Volcano's vote: for every ResourceQuota of the job's namespace, the PodGroup's minResources on
the resources the quota limits, plus what the quota has used and what this session admitted in
the namespace before, must stay within ``hard``; else REJECT. Here:

* a quota key ``requests.<name>`` limits ``<name>`` of minResources too (Volcano compares the
  names literally, so a quota written as ``requests.cpu``, the usual form, never stops it);
  ``limits.*`` and ``count/*`` keys are not about requests and are left alone;
* a quota without ``status.used`` yet (the quota controller has not written it, as in the
  simulator) counts what the namespace's bound pods request;
* the job's own pods, which the quota admitted when they were created, are taken out of what the
  quota has used (Volcano counts them twice, so a PodGroup of plain pods created within the quota
  is refused: its pods' requests in ``used``, and minResources again on top).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.kube import QuantityError, format_milli, milli_value

from ..config.scheduler_conf import PluginOption
from ..framework.extension_points import ABSTAIN, JOB_ENQUEUEABLE, PERMIT, REJECT
from ..framework.session import Session
from ..model.jobs import JobInfo


def _limited_name(key: str) -> str | None:
    """The minResources name a quota key limits (None: not a request)."""
    if key.startswith(("limits.", "count/")):
        return None
    return key[len("requests.") :] if key.startswith("requests.") else key


def _milli(rl: Mapping[str, Any] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in (rl or {}).items():
        try:
            out[str(k)] = milli_value(v)
        except QuantityError:
            continue
    return out


def _usage(ssn: Session, jobs: list[JobInfo], namespace: str, running_only: bool) -> dict[str, int]:
    """What the pods of ``jobs`` in ``namespace`` request (milli), by resource name: the bound
    ones, or every one the quota counts (``running_only`` False)."""
    snap = ssn.snap
    out: dict[str, int] = {}
    for job in jobs:
        for t in job.tasks:
            if t.namespace == namespace and (t.running or not running_only):
                for r, v in zip(snap.resources, t.requests.tolist(), strict=True):
                    if v:
                        out[r] = out.get(r, 0) + int(v)
    return out


def register(ssn: Session, args: dict[str, Any], opt: PluginOption) -> None:
    """Register the enqueue vote."""
    if not ssn.snap.quotas:
        return
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for q in ssn.snap.quotas:
        by_ns.setdefault(str((q.get("metadata") or {}).get("namespace") or "default"), []).append(q)
    admitted: dict[str, dict[str, int]] = {}  # namespace -> minResources admitted this session

    def enqueueable(job: JobInfo) -> int:
        want = _milli(job.podgroup.spec.min_resources)
        ns = job.podgroup.metadata.namespace or "default"
        quotas = by_ns.get(ns)
        if not want or not quotas:
            return ABSTAIN if not quotas else PERMIT
        pending = admitted.get(ns, {})
        for q in quotas:
            hard = _milli((q.get("spec") or {}).get("hard"))
            status = q.get("status") or {}
            used = _milli(status.get("used")) if "used" in status else None
            if used is None:
                bound = _usage(ssn, list(ssn.snap.jobs.values()), ns, True)
                own = _usage(ssn, [job], ns, True)
            else:
                bound, own = {}, _usage(ssn, [job], ns, False)
            over: list[str] = []
            for key, limit in sorted(hard.items()):
                name = _limited_name(key)
                if name is None or name not in want:
                    continue
                have = used.get(key, 0) if used is not None else bound.get(name, 0)
                have = max(have - own.get(name, 0), 0)
                if have + pending.get(name, 0) + want[name] > limit:
                    over.append(
                        f"{key} requested {format_milli(name, want[name])}, used "
                        f"{format_milli(name, have + pending.get(name, 0))}, limited {format_milli(name, limit)}"
                    )
            if over:
                name = (q.get("metadata") or {}).get("name", "")
                ssn.enqueue_reasons.setdefault(
                    job.key, f"resource quota {ns}/{name} insufficient: {'; '.join(over)} (resourcequota)"
                )
                return REJECT
        acc = admitted.setdefault(ns, {})
        for name, v in want.items():
            acc[name] = acc.get(name, 0) + v
        return PERMIT

    ssn.register(JOB_ENQUEUEABLE, enqueueable)
