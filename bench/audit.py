"""Every write to the apiserver, by who made it: the apiserver's audit log, read back.

A benchmark sets ``HYPERPLACE_APISERVER_EXTRA_ARGS`` (read by ``hyperplace.localup.controlplane``)
from :func:`audit_flags` before starting the local control plane; the policy logs each write
(create, update, patch, delete) once, at Metadata level, and leaves reads and Lease renewals out.
:func:`count_writes` then counts a time window of the log by component (the ServiceAccount a
process runs as), resource[/subresource] and verb.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from pathlib import Path

from hyperplace.runtime.flags import SYSTEM_NAMESPACE

POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: None
  verbs: [get, list, watch]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: Metadata
"""
# The account bench/job_stream.py runs Volcano's own scheduler as: its writes are the scheduler's.
VOLCANO_ACCOUNT = "volcano-scheduler"
COMPONENTS = {
    "system:serviceaccount:hyperplace-system:hyperplace-scheduler": "scheduler",
    f"system:serviceaccount:{SYSTEM_NAMESPACE}:{VOLCANO_ACCOUNT}": "scheduler",
    "system:serviceaccount:hyperplace-system:hyperplace-controller": "controller",
    "system:serviceaccount:hyperplace-system:hyperplace-webhooks": "webhooks",
    "system:kube-controller-manager": "kube-controller-manager",
    "admin": "admin (bench, fake kubelet)",
}


def enable(root: Path) -> Path:
    """Write the policy under ``root`` and point the next local control plane at it; returns
    the log's path."""
    root.mkdir(parents=True, exist_ok=True)
    policy, log = root / "audit-policy.yaml", root / "audit.log"
    policy.write_text(POLICY)
    os.environ["HYPERPLACE_APISERVER_EXTRA_ARGS"] = (
        f"--audit-policy-file={policy} --audit-log-path={log} --audit-log-format=json "
        "--audit-log-mode=batch --audit-log-maxsize=0"
    )
    return log


def count_writes(log: Path, t_from: float, t_to: float, offset: int = 0) -> Counter[tuple[str, str, str]]:
    """Writes in ``log`` (from byte ``offset``) completed in [t_from, t_to) (epoch seconds), by
    (component, resource[/subresource], verb)."""
    out: Counter[tuple[str, str, str]] = Counter()
    if not log.exists():
        return out
    with log.open("rb") as fh:
        fh.seek(offset)
        for raw in fh:
            try:
                ev = json.loads(raw)
                when = dt.datetime.fromisoformat(ev.get("stageTimestamp") or "").timestamp()
            except ValueError:
                continue
            if not (t_from <= when < t_to):
                continue
            user = (ev.get("user") or {}).get("username", "")
            ref = ev.get("objectRef") or {}
            res = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            out[(COMPONENTS.get(user, user), res, ev.get("verb", "?"))] += 1
    return out


def by_component(writes: Counter[tuple[str, str, str]]) -> dict[str, Counter[str]]:
    """component -> "resource verb" -> count."""
    out: dict[str, Counter[str]] = {}
    for (who, res, verb), n in writes.items():
        out.setdefault(who, Counter())[f"{res} {verb}"] += n
    return out


def lines(writes: Counter[tuple[str, str, str]], indent: str = "  ") -> list[str]:
    """One line per component, its writes most first."""
    return [
        f"{indent}{who}: "
        + ", ".join(f"{k} {n}" for k, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
        for who, c in sorted(by_component(writes).items())
    ]
