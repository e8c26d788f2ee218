"""Per-job views of a simulation result, shared by the table, ``explain`` and the HTML page.

A "job" here is a PodGroup (the scheduler's unit); when a Volcano Job owns it, the job
is shown under the Job's name, which is what the user wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hyperplace.api.constants import PARTITION_ID_KEY, TASK_SPEC_KEY
from hyperplace.api.topology_annotations import operator_podgroup_topology
from hyperplace.api.workload import is_upstream, upstream_spec_view
from hyperplace.kube.objects import namespaced_key, podgroup_key_of
from hyperplace.kube.workloads import rank_index
from scheduler_plugin.filters.dra import (
    CLIQUE_LABEL,
    DraObjects,
    compile_pod_claims,
    parse_claim,
    parse_claim_template,
    uses_compute_domain,
)

from .loader import UPSTREAM_PODGROUP
from .result import SimResult
from .topology import TopologyView, natural_key, natural_order


@dataclass
class PodView:
    """One pod of a job, with where it runs (or why not)."""

    key: str  # ns/name
    name: str
    task: str | None
    index: int | None
    partition: str | None
    node: str | None
    phase: str
    reason: str | None  # why it is not scheduled, when the scheduler said
    leaf: str | None = None  # lowest-tier HyperNode of its node


@dataclass
class JobView:
    """One job (PodGroup) with its pods and the scheduler's verdict."""

    key: str  # "ns/name" of the Volcano Job, or of the PodGroup when no Job owns it
    podgroup: str  # "ns/name" of the PodGroup
    kind: str  # "Job" or "PodGroup"
    phase: str
    min_member: int
    pods: list[PodView]
    allocated: str | None
    subgroups: dict[str, str]
    conditions: list[dict[str, Any]]
    outcome: Any = None  # the scheduler's JobOutcome
    topology_spec: dict[str, Any] | None = None
    partitions: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> partitionPolicy

    @property
    def running(self) -> int:
        return sum(1 for p in self.pods if p.node)

    @property
    def waiting(self) -> bool:
        return any(p.node is None for p in self.pods) or (
            not self.pods and self.phase in ("Pending", "Inqueue")
        )


def pod_view(pod: dict[str, Any], result: SimResult, topo: TopologyView | None) -> PodView:
    """The PodView of a pod dict."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    ann = meta.get("annotations") or {}
    key = namespaced_key(pod)
    node = (pod.get("spec") or {}).get("nodeName") or None
    task = labels.get(TASK_SPEC_KEY) or ann.get(TASK_SPEC_KEY)
    return PodView(
        key=key,
        name=str(meta.get("name")),
        task=task,
        index=rank_index(labels, ann),
        partition=labels.get(PARTITION_ID_KEY),
        node=node,
        phase=str((pod.get("status") or {}).get("phase") or "Pending"),
        reason=None if node else result.unschedulable.get(key),
        leaf=topo.leaf_of(node) if (topo is not None and node) else None,
    )


def _workload_owner(meta: dict[str, Any]) -> tuple[str, str] | None:
    """(kind, ``ns/name``) a PodGroup made for a workload is shown under, as a Volcano Job's is:
    the owner's name for one the PodGroup controller named after its owner's uid
    (``podgroup-<uid>``), else the PodGroup's own (one per LeaderWorkerSet group, a training
    operator's); a batch/v1 Job is ``Job.batch``, apart from Volcano's ``Job``."""
    name = str(meta.get("name", ""))
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") != "Pod":
            kind = str(ref.get("kind"))
            if kind == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
                kind = "Job.batch"
            shown = ref.get("name") if name.startswith("podgroup-") else name
            return kind, f"{meta.get('namespace') or 'default'}/{shown}"
    return None


def job_views(result: SimResult, topo: TopologyView | None = None) -> list[JobView]:
    """One view per PodGroup, in input/creation order."""
    pods_by_group: dict[str, list[dict[str, Any]]] = {}
    for p in result.of_kind("Pod"):
        g = podgroup_key_of(p)
        if g:
            pods_by_group.setdefault(g, []).append(p)
    jobs_by_uid = {(j.get("metadata") or {}).get("uid"): j for j in result.of_kind("Job")}
    claims = DraObjects(
        claims={namespaced_key(c): parse_claim(c) for c in result.of_kind("ResourceClaim")},
        templates={
            namespaced_key(t): parse_claim_template(t) for t in result.of_kind("ResourceClaimTemplate")
        },
    )
    out: list[JobView] = []
    seen: set[str] = set()
    for pg in [*result.of_kind("PodGroup"), *result.of_kind(UPSTREAM_PODGROUP)]:
        pg_key = namespaced_key(pg)
        if pg_key in seen:
            continue  # a Volcano PodGroup of the same name is the job
        seen.add(pg_key)
        upstream = is_upstream(pg)
        meta = pg.get("metadata") or {}
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"), None)
        job = jobs_by_uid.get(owner.get("uid")) if owner else None
        workload = _workload_owner(meta) if job is None else None
        outcome = result.outcomes.get(pg_key)
        status = pg.get("status") or {}
        pods = [pod_view(p, result, topo) for p in pods_by_group.get(pg_key, [])]
        pods.sort(key=lambda v: (v.task or "", v.index if v.index is not None else -1, natural_key(v.name)))
        spec = pg.get("spec") or {}
        if upstream:
            spec = upstream_spec_view(pg)
        partitions: dict[str, dict[str, Any]] = {}
        if job is not None:
            for i, t in enumerate((job.get("spec") or {}).get("tasks") or []):
                if t.get("partitionPolicy"):
                    partitions[t.get("name") or f"default{i}"] = t["partitionPolicy"]
        out.append(
            JobView(
                key=namespaced_key(job) if job is not None else (workload[1] if workload else pg_key),
                podgroup=pg_key,
                kind="Job"
                if job is not None
                else (workload[0] if workload else (UPSTREAM_PODGROUP if upstream else "PodGroup")),
                phase=str(status.get("phase") or getattr(outcome, "phase", None) or "Pending"),
                min_member=int(spec.get("minMember") or 0),
                pods=pods,
                allocated=getattr(outcome, "allocated_hypernode", None) or None,
                subgroups=dict(getattr(outcome, "subgroups", None) or {}),
                conditions=list(status.get("conditions") or []),
                outcome=outcome,
                # As the scheduler reads it (a training operator's from its annotations).
                topology_spec=spec.get("networkTopology")
                or operator_podgroup_topology(pg)[0]
                or _compute_domain_topology(pods_by_group.get(pg_key, []), claims),
                partitions=partitions,
            )
        )
    return out


def _compute_domain_topology(pods: list[dict[str, Any]], objects: DraObjects) -> dict[str, Any] | None:
    """What the scheduler holds a ComputeDomain's workload to when its PodGroup sets no topology
    (``scheduler_plugin.cache.compute_domains``): one NVLink clique, hard."""
    if objects.empty or not any(uses_compute_domain(compile_pod_claims(p), objects) for p in pods):
        return None
    return {"mode": "hard", "highestTierName": CLIQUE_LABEL}


def job_names(podgroups: Iterable[dict[str, Any]]) -> dict[str, str]:
    """``ns/podgroup`` -> ``ns/job`` for PodGroups a Volcano Job owns: the name the user
    wrote, not the generated ``<job>-<uid>`` of its PodGroup."""
    out: dict[str, str] = {}
    for pg in podgroups:
        meta = pg.get("metadata") or {}
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"), None)
        if owner is not None and owner.get("name"):
            out[namespaced_key(pg)] = f"{meta.get('namespace') or 'default'}/{owner['name']}"
    return out


def find_job(views: Iterable[JobView], ref: str) -> JobView | None:
    """A job by ``ns/name`` of its Job or PodGroup (``name`` alone means namespace default)."""
    if "/" not in ref:
        ref = f"default/{ref}"
    for v in views:
        if ref in (v.key, v.podgroup):
            return v
    return None


def subgroup_label(subjob_id: str, podgroup_key: str) -> str:
    """``ns/pg/t0-1`` -> ``t0-1`` (the partition id as a user reads it)."""
    prefix = podgroup_key + "/"
    return subjob_id[len(prefix) :] if subjob_id.startswith(prefix) else subjob_id


def short_pod_name(pod: str, job: str) -> str:
    """``network-topology-job-t0-3`` -> ``t0-3`` within its job."""
    base = job.rpartition("/")[2] + "-"
    return pod[len(base) :] if pod.startswith(base) else pod


_NUM_TAIL = re.compile(r"^(.*?)(\d+)$")


def compress_names(names: list[str], limit: int = 6) -> str:
    """``node0, node1, node2, node3`` -> ``node0..node3``; long lists become ranges.

    Names sharing a prefix with consecutive numbers collapse to ``prefixA..prefixB``;
    at most ``limit`` pieces are shown, the rest summarized as ``+N more`` (N names).
    """
    if not names:
        return "-"
    pieces: list[tuple[str, int]] = []  # (text, how many names it stands for)
    run: list[tuple[str, int, str]] = []

    def flush() -> None:
        if len(run) >= 3:
            pieces.append((f"{run[0][2]}..{run[-1][2]}", len(run)))
        else:
            pieces.extend((r[2], 1) for r in run)
        run.clear()

    for n in sorted(dict.fromkeys(names), key=natural_key):
        m = _NUM_TAIL.match(n)
        if m and run and run[-1][0] == m.group(1) and run[-1][1] + 1 == int(m.group(2)):
            run.append((m.group(1), int(m.group(2)), n))
            continue
        flush()
        if m:
            run.append((m.group(1), int(m.group(2)), n))
        else:
            pieces.append((n, 1))
    flush()
    shown = ", ".join(text for text, _ in pieces[:limit])
    rest = sum(count for _, count in pieces[limit:])
    return f"{shown}, +{rest} more" if rest else shown


def queue_entries(result: SimResult) -> dict[str, Any]:
    """``{state, weight, allocated, deserved, capability, pending, inqueue, running}`` per
    Queue: the scheduler's view after the last session (deserved and capability when a queue
    plugin computed them, else null) and the queue controller's counts."""
    outcomes = getattr(result.session, "queues", None) or {}
    out: dict[str, Any] = {}
    for q in result.of_kind("Queue"):
        name = str((q.get("metadata") or {}).get("name"))
        status = q.get("status") or {}
        qo = outcomes.get(name)
        d = qo.to_dict() if qo is not None else {}
        out[name] = {
            "state": status.get("state") or d.get("state") or "Open",
            "weight": (q.get("spec") or {}).get("weight", 1),
            "allocated": d.get("allocated") or status.get("allocated") or {},
            "deserved": d.get("deserved"),
            "capability": d.get("capability"),
            **{k: int(status.get(k) or 0) for k in ("pending", "inqueue", "running")},
        }
    return natural_order(out)
