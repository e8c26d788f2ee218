"""One converted Volcano case through one of our sessions, as Volcano's ``uthelper`` runs it:
the case's objects in a snapshot, its configuration, its actions once, then what the session
bound, evicted, pipelined (our nominations) and which phase each PodGroup ends in."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from hyperplace.api import HyperNode, PodGroup, Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import ENABLE_FLAGS, SchedulerConfig, load_scheduler_config
from scheduler_plugin.cycle import SessionResult, run_session
from scheduler_plugin.cycle.scores import SessionScores, session_scores
from scheduler_plugin.model.snapshot import ClusterSnapshot

# The session's clock: nothing in a converted case depends on wall time.
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def conf_text(conf: Mapping[str, Any]) -> str:
    """The volcano-scheduler.conf of a case: each plugin with every switch written, on for
    those the Go test set and off for the rest (a Go test's unset switch is off; the file's
    loader would default it on)."""
    tiers = []
    for tier in conf.get("tiers") or []:
        plugins = []
        for p in tier.get("plugins") or []:
            entry: dict[str, Any] = {"name": p["name"]}
            on = set(p.get("enabled") or [])
            entry.update({flag: flag in on for flag in ENABLE_FLAGS})
            if p.get("arguments"):
                entry["arguments"] = p["arguments"]
            plugins.append(entry)
        tiers.append({"plugins": plugins})
    body: dict[str, Any] = {"actions": conf["actions"], "tiers": tiers}
    if conf.get("configurations"):
        body["configurations"] = conf["configurations"]
    return yaml.safe_dump(body, sort_keys=False)


def case_config(case: Mapping[str, Any]) -> SchedulerConfig:
    return load_scheduler_config(conf_text(case["conf"]), source="conformance case")


def node_for_session(node: Mapping[str, Any]) -> dict[str, Any]:
    """Volcano's test nodes carry no conditions and its cache takes them as ready; ours reads
    the Ready condition, so the case's node is given one."""
    out = dict(node)
    status = dict(out.get("status") or {})
    status.setdefault("conditions", [{"type": "Ready", "status": "True"}])
    out["status"] = status
    return out


def case_snapshot(case: Mapping[str, Any]) -> ClusterSnapshot:
    """The case's objects as the snapshot a session reads."""
    objs = case["objects"]
    snap = build_snapshot(
        nodes=[node_for_session(n) for n in objs["nodes"]],
        pods=objs["pods"],
        hypernodes=[HyperNode.model_validate(h) for h in objs["hypernodes"]],
        podgroups=[PodGroup.model_validate(pg) for pg in objs["podgroups"]],
        queues=[Queue.model_validate(q) for q in objs["queues"]],
        priority_classes=objs["priorityclasses"],
        quotas=objs["resourcequotas"],
    )
    return snap


def run_case(case: Mapping[str, Any]) -> SessionResult:
    """The case's one session."""
    return run_session(case_snapshot(case), case_config(case), now=NOW)


def case_scores(case: Mapping[str, Any]) -> SessionScores:
    """What the plugins of the case's session, opened and no action run, score."""
    nodes = case["scores"].get("scored_nodes")
    return session_scores(case_snapshot(case), case_config(case), nodes=nodes, clock=NOW)


def score_mismatches(expect: Mapping[str, Any], got: SessionScores, pods: list[dict[str, Any]]) -> list[str]:
    """Scores off by more than the Go test's tolerance: a task's node score is the sum over the
    plugins (Volcano's ``NodeOrderFn`` and ``BatchNodeOrderFn`` sum them too), a HyperNode's is
    the named plugin's part (``HyperNodeOrderMapFn`` answers per plugin); and predicate
    verdicts: a node a plugin fences the task's job off (our ``nodeFence``, a predicate of the
    job's queue) where Volcano's ``PredicateFn`` fails, and no other."""
    eps = float(expect["tolerance"])
    out: list[str] = []
    for task, by_node in (expect.get("nodes") or {}).items():
        ours = got.scores_of(task)
        if ours is None:
            out.append(f"{task}: not scored")
            continue
        for node, want in by_node.items():
            have = sum(ours.get(node, {}).values())
            if abs(have - want) > eps:
                out.append(f"{task} on {node}: {have:g}, want {want:g}")
    jobs = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": f"{p['metadata']['namespace']}/"
        + (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name", "")
        for p in pods
    }
    for task, by_node in (expect.get("predicates") or {}).items():
        fences = got.node_fences.get(jobs.get(task, ""), {})
        off = {n for f in fences.values() for n in f["nodes"]}
        for node, status in by_node.items():
            if (node in off) != (status != "Success"):
                out.append(f"{task} on {node}: {'fenced' if node in off else 'passes'}, want {status}")
    if "hypernodes" in expect:
        plugin = expect["plugin"]
        subjobs = list(got.hypernode_scores.values())
        if len(subjobs) != 1:
            return [*out, f"{len(subjobs)} SubJobs with pending pods scored, want 1"]
        for hn, want in expect["hypernodes"].items():
            have = subjobs[0].get(hn, {}).get(plugin, 0.0)
            if abs(have - want) > eps:
                out.append(f"HyperNode {hn}: {have:g}, want {want:g}")
    return out


@dataclass
class Outcome:
    """What Volcano's ``CheckAll`` reads of a session."""

    binds: dict[str, str] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)
    pipelined: dict[str, dict[str, str]] = field(default_factory=dict)  # job -> pod -> node
    status: dict[str, str] = field(default_factory=dict)
    # Binds per lowest-tier HyperNode of their node, sorted (nodes in none are not counted).
    binds_per_leaf: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "binds": self.binds,
            "binds_per_leaf": self.binds_per_leaf,
            "evicted": self.evicted,
            "pipelined": self.pipelined,
            "status": self.status,
        }


def outcome_of(case: Mapping[str, Any], result: SessionResult) -> Outcome:
    """Binds, evictions, pipelined pods, and each PodGroup's phase as Volcano's JobUpdater
    writes it: Running once its minimum is placed, else the phase enqueue gave it or it had
    (Inqueue stays Inqueue), else Pending."""
    before = {
        f"{pg['metadata']['namespace']}/{pg['metadata']['name']}": (pg.get("status") or {}).get("phase", "")
        for pg in case["objects"]["podgroups"]
    }
    status: dict[str, str] = {}
    for key, job in result.jobs.items():
        if job.pg_phase is not None:
            status[key] = job.pg_phase
        elif job.phase == "Running":
            status[key] = "Running"
        else:
            status[key] = "Inqueue" if before.get(key) == "Inqueue" else "Pending"
    tree = case_snapshot(case).tree
    node_index = {n: i for i, n in enumerate(tree.node_names)}
    per_leaf: Counter[int] = Counter(
        int(tree.leaf_of[node_index[n]]) for n in result.bindings.values() if tree.leaf_of[node_index[n]] >= 0
    )
    return Outcome(
        binds_per_leaf=sorted(per_leaf.values()),
        binds=dict(result.bindings),
        evicted=sorted(e.victim for e in result.evictions),
        pipelined={k: dict(n.pods) for k, n in result.nominations.items()},
        status=status,
    )


def mismatches(expect: Mapping[str, Any], got: Outcome) -> list[str]:
    """What differs from the expectations, judged as Volcano's ``CheckAll`` judges: exact binds
    (or only their number with MinimalBindCheck), the evicted pods as a multiset, every
    pipelined pod of an expected job on one of its nodes, and the listed PodGroup phases."""
    out: list[str] = []
    if len(got.binds) != expect.get("binds_num", 0):
        out.append(f"{len(got.binds)} binds, want {expect.get('binds_num', 0)}: {got.binds}")
    if "binds" in expect and got.binds != expect["binds"]:
        out.append(f"binds {got.binds}, want {expect['binds']}")
    if "binds_per_leaf" in expect and got.binds_per_leaf != expect["binds_per_leaf"]:
        out.append(f"binds per leaf HyperNode {got.binds_per_leaf}, want {expect['binds_per_leaf']}")
    if sorted(got.evicted) != sorted(expect.get("evicted") or []) or len(got.evicted) != expect.get(
        "evict_num", 0
    ):
        out.append(f"evicted {got.evicted}, want {expect.get('evicted')} ({expect.get('evict_num', 0)})")
    for job, nodes in (expect.get("pipelined") or {}).items():
        pods = got.pipelined.get(job) or {}
        if not pods:
            out.append(f"{job}: nothing pipelined, want pods on {nodes}")
        elif any(n not in nodes for n in pods.values()):
            out.append(f"{job}: pipelined {pods}, want on {nodes}")
    for job, phase in (expect.get("status") or {}).items():
        if got.status.get(job) != phase:
            out.append(f"{job}: phase {got.status.get(job)}, want {phase}")
    return out
