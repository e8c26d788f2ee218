"""The node side of the cluster state: node order, resource columns and the per-node rows a
snapshot shares (static facts, allocatable, used, the plain mask, host ports).

Rows are shared with the snapshots handed out until the next change, which copies before it
writes (copy-on-write, :meth:`NodeTable.own`): a snapshot never changes after it was taken.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import numpy.typing as npt

from ..filters.nodes import NodeStatic
from ..model.snapshot import HostPort
from .records import NodeRecord, PodRecord

I64 = npt.NDArray[np.int64]
BASE_RESOURCES = ("cpu", "memory", "pods")


class NodeTable:
    """Nodes in name order, with one row per node in each array."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.nidx: dict[str, int] = {}
        self.resources: list[str] = list(BASE_RESOURCES)
        self.ridx: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.statics: list[NodeStatic] = []
        self.alloc = np.zeros((0, len(self.resources)), dtype=np.int64)
        self.used = np.zeros((0, len(self.resources)), dtype=np.int64)
        self.plain = np.zeros(0, dtype=bool)
        self.ports: list[set[HostPort]] = []
        self.shared = False  # the rows belong to a snapshot too

    def own(self) -> None:
        """Copy what a snapshot shares before the first write after it (copy-on-write)."""
        if self.shared:
            self.alloc = self.alloc.copy()
            self.used = self.used.copy()
            self.plain = self.plain.copy()
            self.statics = list(self.statics)
            self.ports = list(self.ports)
            self.shared = False

    def vec(self, rq: Mapping[str, int]) -> I64:
        """A request as a row of the resource columns."""
        v = np.zeros(len(self.resources), dtype=np.int64)
        for r, q in rq.items():
            v[self.ridx[r]] = q
        return v

    def knows(self, resources: Iterable[str]) -> bool:
        """Every one of ``resources`` has a column."""
        return all(r in self.ridx for r in resources)

    def set_row(self, name: str, rec: NodeRecord) -> None:
        """A laid-out node's static facts changed (its used row stays)."""
        i = self.nidx[name]
        self.own()
        self.statics[i] = rec.static
        self.alloc[i] = self.vec(rec.alloc)
        self.plain[i] = rec.plain

    def account(self, rec: PodRecord, sign: int, ports_on: Callable[[str], set[HostPort]]) -> None:
        """Add (sign=1) or remove a bound pod's requests and host ports on its node
        (``ports_on``: the ports the pods left on a node hold)."""
        assert rec.node is not None and rec.requests is not None
        i = self.nidx.get(rec.node)
        if i is None:
            return
        self.own()
        for r, v in rec.requests.items():
            self.used[i, self.ridx[r]] += sign * v
        if rec.ports:
            # Sets in a snapshot are never mutated: replace this node's set.
            self.ports[i] = self.ports[i] | set(rec.ports) if sign > 0 else ports_on(rec.node)

    def lay_out(self, nodes: Mapping[str, NodeRecord], pod_resources: Iterable[str]) -> None:
        """Every node in name order with fresh rows (used left empty: the caller accounts the
        pods), and a column for every resource a node offers or a pod asks for."""
        names = sorted(nodes)
        res: dict[str, None] = dict.fromkeys(BASE_RESOURCES)
        for n in names:
            res.update(dict.fromkeys(nodes[n].alloc))
        res.update(dict.fromkeys(pod_resources))
        self.names = names
        self.nidx = {n: i for i, n in enumerate(names)}
        self.resources = list(res)
        self.ridx = {r: i for i, r in enumerate(self.resources)}
        shape = (len(names), len(self.resources))
        self.statics = [nodes[x].static for x in names]
        self.alloc = np.zeros(shape, dtype=np.int64)
        for i, x in enumerate(names):
            for k, v in nodes[x].alloc.items():
                self.alloc[i, self.ridx[k]] = v
        self.plain = np.array([nodes[x].plain for x in names], dtype=bool)
        self.used = np.zeros(shape, dtype=np.int64)
        self.ports = [set() for _ in names]
        self.shared = False

    def merge(
        self,
        added: list[str],
        removed: set[str],
        nodes: Mapping[str, NodeRecord],
        pods_on: Callable[[str], list[PodRecord]],
    ) -> list[int]:
        """Merge nodes ``added`` (sorted) into the order and drop ``removed``, in O(N) array
        work: the rows of the nodes that stay move to their new places and only the new rows
        are made (from ``pods_on``, the pods bound there). Returns old index -> new index (-1:
        gone)."""
        old_names = self.names
        kept = [n for n in old_names if n not in removed] if removed else old_names
        names = list(heapq.merge(kept, added)) if added else list(kept)
        nidx = {n: i for i, n in enumerate(names)}
        old_pos = np.fromiter(
            (i for i, n in enumerate(old_names) if n not in removed), dtype=np.int64, count=len(kept)
        )
        new_pos = np.fromiter((nidx[n] for n in kept), dtype=np.int64, count=len(kept))
        perm = np.full(len(old_names), -1, dtype=np.int64)
        perm[old_pos] = new_pos
        shape = (len(names), len(self.resources))
        alloc = np.zeros(shape, dtype=np.int64)
        used = np.zeros(shape, dtype=np.int64)
        plain = np.zeros(len(names), dtype=bool)
        alloc[new_pos] = self.alloc[old_pos]
        used[new_pos] = self.used[old_pos]
        plain[new_pos] = self.plain[old_pos]
        statics: list[NodeStatic | None] = [None] * len(names)
        ports: list[set[HostPort]] = [set()] * len(names)
        for o, n in zip(old_pos.tolist(), new_pos.tolist(), strict=True):
            statics[n] = self.statics[o]
            ports[n] = self.ports[o]
        for name in added:
            i = nidx[name]
            rec = nodes[name]
            statics[i] = rec.static
            plain[i] = rec.plain
            alloc[i] = self.vec(rec.alloc)
            held: set[HostPort] = set()
            for p in pods_on(name):
                assert p.requests is not None
                used[i] += self.vec(p.requests)
                held |= p.ports
            ports[i] = held
        self.names, self.nidx = names, nidx
        self.alloc, self.used, self.plain = alloc, used, plain
        self.statics = statics  # type: ignore[assignment]  # every slot filled above
        self.ports = ports
        self.shared = False
        return perm.tolist()
