"""What a session's plugins make of a snapshot before any action runs: the parsed arguments of
each plugin, each plugin's node scores per task and HyperNode scores per SubJob, and the nodes a
plugin's predicate keeps a job's queue off.

Nothing here scores: every number comes from the functions the plugins registered at the
session's ``nodeOrder``, ``hyperNodeOrder`` and ``nodeFence`` points (:meth:`Session.node_scores_by_plugin`,
:meth:`Session.hypernode_scores_by_plugin`), called as the domain search calls them. It is what
``explain --output json`` shows under ``scores`` and what the conformance suite compares with
the scores Volcano's plugin tests assert.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..config.scheduler_conf import SchedulerConfig
from ..framework.extension_points import NODE_FENCE
from ..framework.session import Session
from ..model.snapshot import ClusterSnapshot
from .run import open_session


@dataclasses.dataclass(frozen=True)
class SessionScores:
    """One opened session's plugin arguments and scores, by name."""

    # plugin -> its arguments after parsing and defaulting (plugins that keep them as data).
    arguments: dict[str, dict[str, Any]]
    # task key -> node -> plugin -> score (every node; 0 where a plugin scores none), for the
    # first task of each SubJob and pod shape; ``same_as`` names it for the others.
    node_scores: dict[str, dict[str, dict[str, float]]]
    # SubJob id -> HyperNode -> plugin -> score (the SubJob's pending requests, every HyperNode).
    hypernode_scores: dict[str, dict[str, dict[str, float]]]
    # job -> plugin -> the nodes its predicate keeps the job's queue off (``nodeFence``), and why.
    node_fences: dict[str, dict[str, dict[str, Any]]]
    # task key -> the task of the same SubJob and pod shape whose node scores it shares.
    same_as: dict[str, str] = dataclasses.field(default_factory=dict)

    def scores_of(self, task: str) -> dict[str, dict[str, float]] | None:
        """A task's node -> plugin -> score, through ``same_as``."""
        return self.node_scores.get(self.same_as.get(task, task))

    def as_dict(self) -> dict[str, Any]:
        """The JSON form ``explain`` prints."""
        return {
            "arguments": self.arguments,
            "nodeScores": self.node_scores,
            "sameScoresAs": self.same_as,
            "hyperNodeScores": self.hypernode_scores,
            "nodeFences": self.node_fences,
        }


def plugin_arguments(ssn: Session) -> dict[str, dict[str, Any]]:
    """The parsed arguments of each plugin that keeps them as a dataclass (``args``)."""
    out: dict[str, dict[str, Any]] = {}
    for name, plugin in ssn.plugins.items():
        args = getattr(plugin, "args", None)
        if dataclasses.is_dataclass(args) and not isinstance(args, type):
            out[name] = _plain(dataclasses.asdict(args))
    return out


def _plain(v: Any) -> Any:
    """Tuples as lists, so the arguments read the same in JSON and YAML."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def session_scores(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    jobs: set[str] | None = None,
    nodes: list[str] | None = None,
    clock: float | None = None,
) -> SessionScores:
    """Open a session on ``snapshot`` (no action runs) and ask its plugins for the scores of
    every task of ``jobs`` (every job when None) on ``nodes`` (every node when None) scored
    together, as the domain search scores a domain's nodes (network-topology-aware breaks a tie
    among the best of them), and of every HyperNode for each of their SubJobs."""
    ssn = open_session(snapshot, config, clock)
    index = {n: i for i, n in enumerate(snapshot.node_names)}
    names = list(snapshot.node_names) if nodes is None else nodes
    every_node = np.array([index[n] for n in names], dtype=np.int64)
    hns = np.arange(len(snapshot.tree), dtype=np.int64)
    node_scores: dict[str, dict[str, dict[str, float]]] = {}
    hn_scores: dict[str, dict[str, dict[str, float]]] = {}
    fences: dict[str, dict[str, dict[str, Any]]] = {}
    same_as: dict[str, str] = {}
    for key, job in sorted(snapshot.jobs.items()):
        if jobs is not None and key not in jobs:
            continue
        for plugin, fence in ssn.fns_by_plugin(NODE_FENCE):
            got = fence(job)
            if got is not None:
                off, why = got
                fences.setdefault(key, {})[plugin] = {
                    "nodes": [snapshot.node_names[i] for i in off.tolist()],
                    "reason": why,
                }
        for sj in job.subjobs.values():
            # The node order functions read a task's requests and pod shape, its SubJob and its
            # job: tasks of one SubJob and shape score alike, and are scored once (what keeps
            # ``explain`` of a big gang on a big cluster small).
            first: dict[int, str] = {}
            for t in sj.tasks:
                if t.shape in first:
                    same_as[t.key] = first[t.shape]
                    continue
                first[t.shape] = t.key
                parts = ssn.node_scores_by_plugin(t, sj, every_node)
                node_scores[t.key] = {
                    n: {p: float(s[i]) for p, s in parts.items()} for i, n in enumerate(names)
                }
            pending = [t.requests for t in sj.tasks if t.node < 0]
            if not pending:
                continue
            request = np.sum(pending, axis=0).astype(np.int64)
            parts = ssn.hypernode_scores_by_plugin(sj, request, hns)
            hn_scores[sj.id] = {
                snapshot.tree.names[h]: {p: float(s[i]) for p, s in parts.items()} for i, h in enumerate(hns)
            }
    return SessionScores(plugin_arguments(ssn), node_scores, hn_scores, fences, same_as)
