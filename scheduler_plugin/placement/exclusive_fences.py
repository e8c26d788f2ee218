"""Exclusive topology domains in a session (``hyperplace.io/exclusive-topology: "true"``), and the
other node fences a job's try is wrapped in: the nodes a plugin keeps its queue off (nodegroup)
and the hot spares it may not use (:mod:`.spares`).

A job marked exclusive (:mod:`hyperplace.api.exclusive`) takes whole HyperNodes at its hard
tier limit: its *domain* is the largest HyperNode at or below that tier holding its pods.

* While it holds a domain (a pod of it is bound, or placed earlier in this session), every node
  of the domain is *fenced*: filled in the session's working state, so no pod of another job
  fits there. The job itself is tried with its own fences lifted (a gang finishing after a
  failed bind, pods beyond its minimum).
* When it is placed, the domains at its tier where pods of other jobs run (or were placed in
  this session) are fenced for the duration of its own try, so it lands only in a clean one.

Pods of no PodGroup (DaemonSets, system pods) do not make a domain unclean; they only take
their room. With no exclusive job in the snapshot nothing here runs. The fences live for one
action: ``allocate``, and ``preempt``/``reclaim`` (and the gang actions), which never nominate a
gang into a domain held for another job (backfill places only best-effort pods).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from hyperplace.api.exclusive import is_exclusive

from ..framework.extension_points import NODE_FENCE
from ..framework.session import Session
from ..model.jobs import JobInfo
from ..model.memo import MemoKey
from .spares import Spares

# Keys of the snapshot's exclusive jobs with a hard tier limit.
EXCLUSIVE_JOBS: MemoKey[set[str]] = MemoKey("exclusive jobs")


def exclusive_jobs(ssn: Session) -> set[str]:
    """Keys of the snapshot's exclusive jobs with a hard tier limit (once per snapshot)."""
    return ssn.snap.memo.get_or_put(EXCLUSIVE_JOBS, lambda: _exclusive_jobs(ssn))


def _exclusive_jobs(ssn: Session) -> set[str]:
    return {
        key
        for key, job in ssn.snap.jobs.items()
        if is_exclusive(job.podgroup.metadata.annotations)
        and job.topology is not None
        and job.topology.mode == "hard"
        and job.topology.limit is not None
    }


class Fences:
    """The exclusive holds of one allocate action."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.exclusive = exclusive_jobs(ssn)
        self.held: dict[int, str] = {}  # domain -> owner job key
        self._filled: dict[int, np.ndarray] = {}  # domain -> nodes filled for it
        self._trial: list[np.ndarray] = []
        # Nodes a plugin keeps a job's queue off (nodegroup), filled around each try of the job.
        self._queue_fns = ssn.fns(NODE_FENCE)
        self._queue_fence: np.ndarray | None = None
        self._queue_why: dict[str, str] = {}
        # Hot spares: filled for every job but the replacements that may use them.
        self.spares = Spares(ssn)
        if not self.exclusive:
            return
        for key in sorted(self.exclusive):
            job = self.ssn.snap.jobs[key]
            nodes = [t.node for t in job.tasks if t.running and t.node >= 0]
            if nodes:
                self._hold(job, nodes)

    # ------------------------------------------------------------------ domains
    def _domain(self, job: JobInfo, nodes: list[int]) -> int:
        tree = self.ssn.snap.tree
        h = tree.lowest_containing(nodes)
        if h < 0:
            return -1
        limit = job.topology.limit if job.topology is not None else None
        best = h
        for a in tree.ancestors(h):
            if limit is not None and int(tree.tiers[a]) <= limit:
                best = a
        return best

    def _candidates(self, job: JobInfo) -> list[int]:
        tree = self.ssn.snap.tree
        limit = job.topology.limit if job.topology is not None else None
        if limit is None:
            return []
        tiers = tree.tiers
        return [
            h
            for h in range(len(tree))
            if tiers[h] <= limit and (tree.parent[h] == -1 or tiers[tree.parent[h]] > limit)
        ]

    def _hold(self, job: JobInfo, nodes: list[int]) -> None:
        d = self._domain(job, nodes)
        if d < 0 or d in self.held:
            return
        self.held[d] = job.key
        members = self.ssn.snap.tree.node_sets[d]
        self.ssn.state.fill(members, +1)
        self._filled[d] = members

    def _dirty_nodes(self, me: str) -> set[int]:
        """Nodes where a pod of another job runs or was placed in this session."""
        ssn = self.ssn
        out: set[int] = set()
        for key, job in ssn.snap.jobs.items():
            if key == me:
                continue
            out.update(t.node for t in job.tasks if t.running and t.node >= 0)
        job_of = {t.key: j.key for j in ssn.snap.jobs.values() for t in j.pending}
        out.update(n for tk, n in ssn.placed.items() if job_of.get(tk, me) != me)
        return out

    # ------------------------------------------------------------------ around a job's try
    def _fence_queue(self, job: JobInfo) -> None:
        fenced: list[np.ndarray] = []
        for fn in self._queue_fns:
            got = fn(job)
            if got is not None and len(got[0]):
                fenced.append(got[0])
                self._queue_why[job.key] = got[1]
        if fenced:
            nodes = np.unique(np.concatenate(fenced))
            self.ssn.state.fill(nodes, +1)
            self._queue_fence = nodes

    def before(self, job: JobInfo) -> None:
        """Lift the job's own fences; for an exclusive job, fence the unclean domains of its tier;
        fence the nodes a plugin keeps the job's queue off."""
        if self._queue_fns:
            self._fence_queue(job)
        if self.spares:
            self.spares.before(job)
        if not self.exclusive:
            return
        for d, owner in self.held.items():
            if owner == job.key:
                self.ssn.state.fill(self._filled[d], -1)
        if job.key not in self.exclusive:
            return
        dirty = self._dirty_nodes(job.key)
        tree = self.ssn.snap.tree
        for h in self._candidates(job):
            if h in self.held:
                continue  # its own (lifted above) or fenced already for another exclusive job
            members = tree.node_sets[h]
            if any(int(n) in dirty for n in members.tolist()):
                self.ssn.state.fill(members, +1)
                self._trial.append(members)

    def after(self, job: JobInfo, placed: bool) -> None:
        """Undo the trial fences, restore the job's own, and hold the domain it now occupies."""
        if self._queue_fence is not None:
            self.ssn.state.fill(self._queue_fence, -1)
            self._queue_fence = None
        if placed:
            self._queue_why.pop(job.key, None)
        if self.spares:
            self.spares.after(job, placed)
        if not self.exclusive:
            return
        for members in self._trial:
            self.ssn.state.fill(members, -1)
        self._trial = []
        for d, owner in self.held.items():
            if owner == job.key:
                self.ssn.state.fill(self._filled[d], +1)
        if placed and job.key in self.exclusive:
            nodes = [n for t in job.tasks if (n := self.ssn.placed.get(t.key, t.node)) >= 0]
            self._hold(job, nodes)

    def finish(self) -> None:
        """Remove every fence (later actions see the real usage)."""
        for members in self._filled.values():
            self.ssn.state.fill(members, -1)
        self._filled = {}
        self.spares.finish()

    @contextmanager
    def lifted(self) -> Iterator[None]:
        """Every fence lifted for the block, then put back (a dry run: would a job have been
        placed with no domain held exclusively?)."""
        filled = list(self._filled.values())
        for members in filled:
            self.ssn.state.fill(members, -1)
        self.spares.fill_all(-1)
        try:
            yield
        finally:
            self.spares.fill_all(+1)
            for members in filled:
                self.ssn.state.fill(members, +1)

    def why(self, job: JobInfo) -> str | None:
        """A line for the explanation of a job kept out of, or waiting for, exclusive domains
        (or kept off some nodes by its queue)."""
        lines = [self._queue_why.get(job.key) or "", self.spares.why(job) or ""]
        if job.key in self.exclusive:
            limit = job.topology.limit if job.topology is not None else None
            lines.append(f"exclusive: needs a tier-{limit} HyperNode free of other jobs' pods")
        elif self.held:
            tree = self.ssn.snap.tree
            names = ", ".join(f"{tree.names[d]} by {owner}" for d, owner in sorted(self.held.items()))
            lines.append(f"held exclusively: {names}")
        return "; ".join(x for x in lines if x) or None


__all__ = ["Fences", "exclusive_jobs"]
