"""Hot spares per leaf (``hyperplace.io/spare-nodes`` on a HyperNode, :mod:`hyperplace.api.spares`).

When a node fails under a one-leaf training gang, its replacement can only go into that leaf; a
full leaf means an eviction or a wait. An operator who keeps a node or two free per leaf gets
the gang whole again at once, without evicting anyone. In a session:

* **which nodes**: in every leaf whose nearest annotated HyperNode (itself or an ancestor)
  asks for N spares, the first N nodes by name that are Ready, schedulable, free of
  ``NoSchedule``/``NoExecute`` taints and run no pod of any gang (pods of no PodGroup, a
  DaemonSet's, do not count). A spare a replacement took is no longer free; the next free node
  of the leaf becomes the spare. A leaf with fewer free nodes keeps what it has (the shortfall
  is in the report).
* **who may use them**: the replacements of a gang that ran and lost pods
  (:mod:`..model.gang_damage`), of a queue the annotation allows; and, when the annotation
  lends them, jobs whose pending pods are all marked ``volcano.sh/preemptable: "true"`` or all
  set ``activeDeadlineSeconds``. The repair step evicts a borrower when a replacement needs its
  room (a preemptable pod yields to it).
* **how**: spare nodes are filled in the session's working state for the whole action (no pod
  fits), and lifted only around the try of a job that may use them, as the exclusive fences
  are (:mod:`.exclusive_fences`, which runs this).

The session's :attr:`~..framework.session.Session.spare_report` says per leaf how many spares are
wanted, held and used (pods placed on them), for the scheduler's metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hyperplace.api.spares import LEND_PREEMPTABLE, LEND_TIME_LIMITED, SpareError, SparePolicy, spare_policy

from ..framework.session import Session
from ..model.gang_damage import replacements
from ..model.jobs import JobInfo
from ..model.memo import MemoKey


@dataclass(frozen=True)
class _Plan:
    leaves: list[tuple[int, SparePolicy]]  # (leaf HyperNode id, its policy), count > 0
    problems: list[str]


# The leaves that keep spares and their policies: the snapshot's tree and annotations alone.
SPARE_PLAN: MemoKey[_Plan] = MemoKey("hot-spare leaves")
# Nodes running a pod of some gang: never a spare.
GANG_NODES: MemoKey[np.ndarray] = MemoKey("nodes running gang pods")


def _plan(ssn: Session) -> _Plan:
    snap = ssn.snap
    tree = snap.tree
    policies: dict[int, SparePolicy] = {}
    problems: list[str] = []
    for name, marks in sorted(snap.spare_marks.items()):
        h = tree.id_of(name)
        if h is None:
            continue
        try:
            got = spare_policy(marks)
        except SpareError as err:
            problems.append(f"HyperNode {name}: {err}; no spare nodes kept for it")
            continue
        if got is not None:
            policies[h] = got
    leaves: list[tuple[int, SparePolicy]] = []
    if policies:
        for leaf in sorted({int(x) for x in tree.leaf_of.tolist() if x >= 0}):
            h = leaf
            while h != -1 and h not in policies:
                h = int(tree.parent[h])
            if h != -1 and policies[h].count > 0:
                leaves.append((leaf, policies[h]))
    return _Plan(leaves, problems)


def _gang_nodes(ssn: Session) -> np.ndarray:
    snap = ssn.snap
    busy = np.zeros(snap.num_nodes, dtype=bool)
    for job in snap.jobs.values():
        if len(job.pending) < len(job.tasks):
            for t in job.tasks:
                if t.running and t.node >= 0:
                    busy[t.node] = True
    return busy


def _usable(ssn: Session, n: int) -> bool:
    st = ssn.snap.node_static[n]
    if not st.ready or st.unschedulable:
        return False
    return not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in st.taints)


class Spares:
    """The spare nodes of one action: filled for every job but those that may use them."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._nodes: dict[int, np.ndarray] = {}  # leaf -> its spare nodes (filled)
        self._policy: dict[int, SparePolicy] = {}
        self._lifted: list[int] = []
        if not ssn.snap.spare_marks:
            return
        plan = ssn.snap.memo.get_or_put(SPARE_PLAN, lambda: _plan(ssn))
        for p in plan.problems:
            ssn.note(p)
        if not plan.leaves:
            return
        busy = ssn.snap.memo.get_or_put(GANG_NODES, lambda: _gang_nodes(ssn)).copy()
        placed = list(ssn.placed.values())
        if placed:
            busy[np.asarray(placed, dtype=np.int64)] = True
        tree, names = ssn.snap.tree, ssn.snap.node_names
        report = ssn.spare_report
        for leaf, policy in plan.leaves:
            free = [int(n) for n in tree.node_sets[leaf].tolist() if not busy[n] and _usable(ssn, int(n))]
            free.sort(key=lambda n: names[n])
            chosen = np.asarray(free[: policy.count], dtype=np.int64)
            self._policy[leaf] = policy
            report.wanted[tree.names[leaf]] = policy.count
            report.held[tree.names[leaf]] = len(chosen)
            if len(chosen):
                self._nodes[leaf] = chosen
                ssn.state.fill(chosen, +1)

    def __bool__(self) -> bool:
        return bool(self._nodes)

    def may_use(self, job: JobInfo, policy: SparePolicy) -> bool:
        """Whether ``job``'s pods may go onto spares kept by ``policy``."""
        if policy.queues is not None and job.queue not in policy.queues:
            return False
        if replacements(job):
            return True
        pending = job.pending
        if not pending:
            return False
        if LEND_PREEMPTABLE in policy.lend and all(
            t.preemptable is True or (t.preemptable is None and job.preemptable is True) for t in pending
        ):
            return True
        return LEND_TIME_LIMITED in policy.lend and all(t.deadline is not None for t in pending)

    def before(self, job: JobInfo) -> None:
        """Lift the spares ``job`` may use for its try."""
        self._lifted = [leaf for leaf in self._nodes if self.may_use(job, self._policy[leaf])]
        for leaf in self._lifted:
            self.ssn.state.fill(self._nodes[leaf], -1)

    def after(self, job: JobInfo, placed: bool) -> None:
        """Fill the lifted spares again, counting the pods ``job`` placed on them."""
        if placed and self._lifted:
            where = {n for t in job.tasks if (n := self.ssn.placed.get(t.key, -1)) >= 0}
            names = self.ssn.snap.tree.names
            for leaf in self._lifted:
                on = sum(1 for n in self._nodes[leaf].tolist() if n in where)
                if on:
                    used = self.ssn.spare_report.used
                    used[names[leaf]] = used.get(names[leaf], 0) + on
        for leaf in self._lifted:
            self.ssn.state.fill(self._nodes[leaf], +1)
        self._lifted = []

    def fill_all(self, sign: int) -> None:
        """Lift (-1) or fill again (+1) every spare: around a dry run without them."""
        for nodes in self._nodes.values():
            self.ssn.state.fill(nodes, sign)

    def finish(self) -> None:
        """Remove every fill (later actions see the real usage)."""
        for nodes in self._nodes.values():
            self.ssn.state.fill(nodes, -1)
        self._nodes = {}

    def why(self, job: JobInfo) -> str | None:
        """A line for a job that may not use the spares kept where it might have fitted."""
        kept = [leaf for leaf in self._nodes if not self.may_use(job, self._policy[leaf])]
        if not kept:
            return None
        names = self.ssn.snap.tree.names
        n = sum(len(self._nodes[leaf]) for leaf in kept)
        where = ", ".join(names[leaf] for leaf in kept[:5]) + (", ..." if len(kept) > 5 else "")
        return f"{n} spare node(s) kept for replacements of gangs that lost pods ({where})"
