"""What ranks the candidate domains of a unit beyond HyperNode bin-packing (pure: it reads the
snapshot and the session's allocation state).

* partition capacity: how many partitions of k pods of a shape each HyperNode can host when
  every partition must fit inside one domain of tier <= L (summed over children above L);
* the tiers the partitions would take inside a job domain (lower is better);
* the fewest leaves the gang needs there (its room spread over fewer leaves is better);
* closeness to the HyperNode the job already holds (the tier of their lowest common ancestor).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..algorithms.demand import PartitionClass
from ..framework.alloc_state import AllocState
from ..model.snapshot import ClusterSnapshot

I64 = npt.NDArray[np.int64]


class DomainRanking:
    """The ranking keys of candidate HyperNodes, from the current fit counts."""

    def __init__(self, snap: ClusterSnapshot, state: AllocState) -> None:
        self.snap = snap
        self.tree = snap.tree
        self.state = state
        # Children before parents, for the partition-capacity roll-up.
        self._bottom_up = np.argsort(-self.tree.depth, kind="stable").tolist()

    def pcap(self, sid: int, limit: int, size: int) -> I64:
        """Partitions of ``size`` pods of shape ``sid`` each HyperNode can host (tier limit ``limit``)."""
        dom = self.state.dom_counts(self.snap.shapes[sid])
        tiers = self.tree.tiers
        out = np.where(tiers <= limit, dom // max(size, 1), 0).astype(np.int64)
        children = self.tree.children
        for h in self._bottom_up:
            if tiers[h] > limit and children[h]:
                out[h] = int(out[children[h]].sum())
        return out

    def closeness(self, cands: I64, allocated: int) -> I64:
        """Tier of LCA(candidate, allocated HyperNode): with pods already running, nearer domains
        come first (the intent of Volcano's LCA node score); all zero before the first placement."""
        if allocated < 0:
            return np.zeros(len(cands), dtype=np.int64)
        tree = self.tree
        return np.array([int(tree.tiers[tree.lca(int(c), allocated)]) for c in cands], dtype=np.int64)

    # ------------------------------------------------------------------ exact placement
    def partition_tier_sums(self, classes: dict[PartitionClass, int], cands: I64) -> I64:
        """Lowest reachable sum of partition tiers inside each candidate job domain.

        The job's tier comes first, but among domains of that tier the partitions' own tiers
        matter next (a domain whose leaves each hold whole partitions beats one where they must
        straddle leaves, however well the latter bin-packs). For each partition class, count how
        many partitions fit at tier <= t for every tier t up to its limit and fill the lowest
        tiers first, as place_batch does. Classes are counted independently (a lower bound when
        two classes share a shape), which is enough to rank domains.
        """
        out = np.zeros(len(cands), dtype=np.int64)
        for (sid, limit, k), n in classes.items():
            prev = np.zeros(len(cands), dtype=np.int64)
            for t in self.tree.sorted_tiers:
                if t > limit:
                    break
                cap = np.minimum(self.pcap(sid, t, k)[cands], n)
                out += t * (cap - prev)
                prev = cap
        return out

    def leaves_needed(self, total: dict[int, int], cands: I64) -> I64:
        """Fewest leaves each candidate domain needs for the gang (per shape, the largest leaves
        first; the most demanding shape counts). After the job's tier and the partitions' tiers,
        fewer leaves is the next goal: bin-packing alone prefers a well-packed domain even when
        its room is scattered over many leaves."""
        tree = self.tree
        out = np.zeros(len(cands), dtype=np.int64)
        for sid, k in total.items():
            counts = self.state.node_counts(self.snap.shapes[sid])
            for i, h in enumerate(cands.tolist()):
                nodes = tree.node_sets[h]
                c = counts[nodes]
                nz = c > 0
                if not nz.any():
                    continue
                leaves = tree.leaf_of[nodes[nz]]
                leaves = np.where(leaves >= 0, leaves, -(nodes[nz] + 1))  # a node outside every leaf
                _, inv = np.unique(leaves, return_inverse=True)
                caps = np.sort(np.bincount(inv, weights=c[nz]))[::-1]
                need = int(np.searchsorted(np.cumsum(caps), k)) + 1
                out[i] = max(out[i], need)
        return out
