"""Nominations across cycles: the room preempt and reclaim freed, held for their gangs.

A nomination carried from the previous session (``SessionResult.nominations``) keeps its room:
its pods are allocated on their nodes before any action runs, so no other job can take it,
and are bound as soon as none of those nodes is over its allocatable (the victims are gone).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..framework.evictions import Nomination
from ..framework.session import Session
from ..framework.statement import Statement
from ..model.jobs import TaskInfo


def hold_nominations(ssn: Session, carried: Mapping[str, Nomination]) -> None:
    """Keep the room of earlier nominations for their gangs, and bind those whose victims left.

    A nomination lapses when its job or one of its pods is gone or already bound, or a nominated
    node disappeared. Otherwise the pods are allocated on their nodes before any action runs, so
    no other job can take the room; when no nominated node is over its allocatable any more
    (the victims terminated), the pods become bindings.
    """
    snap = ssn.snap
    nidx = {name: i for i, name in enumerate(snap.node_names)}
    for jkey in sorted(carried):
        nom = carried[jkey]
        job = snap.jobs.get(jkey)
        if job is None or not nom.pods:
            continue
        pending = {t.key: t for t in job.pending}
        tasks: list[TaskInfo] = []
        nodes: list[int] = []
        for pk, node in sorted(nom.pods.items()):
            t = pending.get(pk)
            n = nidx.get(node)
            if t is None or n is None or pk in ssn.placed:
                tasks = []
                break
            tasks.append(t)
            nodes.append(n)
        if not tasks:
            continue
        stmt = Statement(ssn)
        stmt.allocate(tasks, nodes)
        if ssn.state.overcommitted(nodes):
            ledger = ssn.ledger
            ledger.nominations[jkey] = nom
            ledger.gone.update(nom.victims)
            for t, n in zip(tasks, nodes, strict=True):
                ssn.task_reasons[t.key] = (
                    f"nominated to {snap.node_names[n]}; waiting for the victims of {nom.action} to terminate"
                )
            stmt.closed = True
            continue
        stmt.commit()
        ssn.ledger.bound.add(jkey)
        tree = snap.tree
        if job.with_topology and tree.ready:
            hn = tree.lowest_containing(nodes)
            if hn >= 0:
                ssn.job_hn[jkey] = tree.lca(ssn.job_hn.get(jkey, -1), hn)
