"""How much whole-domain room is left: per tier, free HyperNodes and per-shape fits.

A cluster can hold 40 free GPUs and still have no leaf with 8 of them: a job that needs a
tier-1 domain of 8 then waits. This module says so, per tier of the HyperNode tree:

* ``hypernodes`` / ``free_hypernodes``: HyperNodes of the tier, and those entirely free (every
  node ready, schedulable, untainted and with nothing of the accelerator in use; on a cluster
  without the accelerator, with no cpu in use).
* per **pod shape** (default: 1, 4 and 8 accelerators with proportional cpu and memory):
  ``fit`` = how many such pods fit on the tier's nodes in total, and ``best`` = how many fit
  in its best single HyperNode (and which one). Fits are per node, as the scheduler counts
  them (``min`` over requested resources of free // request), summed per HyperNode.

Proportional cpu/memory: a pod of ``g`` accelerators asks ``g`` times ``share`` (default 0.9)
of the per-accelerator cpu and memory of the tightest accelerator node (``min`` over such nodes
of allocatable / accelerators). A pod of a whole node's accelerators thus fits an empty node
of any kind the cluster has, DaemonSets and sidecars (the other 10%) included.

Pure and vectorised (a few passes over the node arrays plus one bincount per shape):
the scheduler computes it every cycle; ``hyperplace tree`` and the HTML picture show the
same figures from the same function.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..model.hypernode_tree import HyperNodeTree
from ..model.memo import MemoKey
from ..model.snapshot import ClusterSnapshot

I64 = npt.NDArray[np.int64]

DEFAULT_ACCELERATOR = "nvidia.com/gpu"
DEFAULT_SHAPES: tuple[int, ...] = (1, 4, 8)
DEFAULT_SHARE = 0.9
# Largest accelerator count a shape may ask for (bad input gets a clear error, not a silly figure).
MAX_SHAPE_ACCELERATORS = 4096


class ShapeSpecError(ValueError):
    """A fragmentation shape list that does not parse."""


@dataclass(frozen=True)
class FragmentationConfig:
    """Which shapes to count: ``shapes`` accelerators per pod, of resource ``accelerator``,
    with ``share`` of the per-accelerator cpu and memory."""

    shapes: tuple[int, ...] = DEFAULT_SHAPES
    accelerator: str = DEFAULT_ACCELERATOR
    share: float = DEFAULT_SHARE

    @classmethod
    def parse(
        cls, shapes: str, accelerator: str = DEFAULT_ACCELERATOR, share: float = DEFAULT_SHARE
    ) -> FragmentationConfig:
        """``"1,4,8"`` (accelerators per pod, comma separated), a resource name and a share."""
        out: list[int] = []
        for part in shapes.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                g = int(part)
            except ValueError:
                raise ShapeSpecError(
                    f"fragmentation shapes: {part!r} is not a whole number of {accelerator} per pod"
                ) from None
            if not 1 <= g <= MAX_SHAPE_ACCELERATORS:
                raise ShapeSpecError(
                    f"fragmentation shapes: {g} must be between 1 and {MAX_SHAPE_ACCELERATORS}"
                )
            if g not in out:
                out.append(g)
        if not out:
            raise ShapeSpecError("fragmentation shapes: give at least one count, e.g. 1,4,8")
        if not accelerator.strip():
            raise ShapeSpecError("fragmentation accelerator resource: must not be empty")
        if not 0.0 <= share <= 1.0:
            raise ShapeSpecError(f"fragmentation share: {share} must be between 0 and 1")
        return cls(tuple(out), accelerator.strip(), share)


@dataclass(frozen=True)
class PodShape:
    """One counted shape: its label and requests (milli-units, by resource name)."""

    name: str  # e.g. "8xnvidia.com/gpu" (the metric's ``shape`` label)
    accelerators: int
    requests: Mapping[str, int]


@dataclass
class TierFragmentation:
    """The figures of one tier."""

    tier: int
    hypernodes: int
    free_hypernodes: int
    fit: dict[str, int] = field(default_factory=dict)  # shape -> pods fitting on the tier's nodes
    best: dict[str, int] = field(default_factory=dict)  # shape -> pods fitting in its best HyperNode
    best_hypernode: dict[str, str | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``hyperplace tree --output json``)."""
        return {
            "tier": self.tier,
            "hyperNodes": self.hypernodes,
            "freeHyperNodes": self.free_hypernodes,
            "shapes": {
                s: {"fit": self.fit[s], "bestDomain": self.best[s], "bestHyperNode": self.best_hypernode[s]}
                for s in self.fit
            },
        }


@dataclass
class FragmentationReport:
    """Per-tier figures, lowest tier first, plus the shapes they were counted for."""

    accelerator: str
    shapes: list[PodShape]
    tiers: list[TierFragmentation]
    note: str | None = None  # e.g. no node offers the accelerator

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``hyperplace tree --output json``)."""
        return {
            "accelerator": self.accelerator,
            "shapes": {s.name: dict(s.requests) for s in self.shapes},
            "tiers": [t.to_dict() for t in self.tiers],
            "note": self.note,
        }


def resolve_shapes(
    config: FragmentationConfig,
    resources: Sequence[str],
    allocatable: I64,
    schedulable: npt.NDArray[np.bool_],
) -> tuple[list[PodShape], str | None]:
    """The concrete requests of each configured shape on this cluster (or a note why none)."""
    if config.accelerator not in resources:
        return [], f"no node offers {config.accelerator}: no pod shapes to count"
    a = resources.index(config.accelerator)
    has = (allocatable[:, a] > 0) & schedulable
    if not has.any():
        return [], f"no schedulable node offers {config.accelerator}: no pod shapes to count"
    acc = np.maximum(allocatable[has, a] // 1000, 1)  # whole accelerators per node
    per: dict[str, int] = {}
    for r in ("cpu", "memory"):
        if r in resources:
            # The tightest node's share per accelerator (milli-units).
            per[r] = int(int((allocatable[has, resources.index(r)] // acc).min()) * config.share)
    shapes = []
    for g in config.shapes:
        req = {config.accelerator: g * 1000}
        for r, v in per.items():
            if v > 0:
                req[r] = g * v
        shapes.append(PodShape(f"{g}x{config.accelerator}", g, req))
    return shapes, None


def fragmentation(
    tree: HyperNodeTree,
    resources: Sequence[str],
    allocatable: I64,
    used: I64,
    schedulable: npt.NDArray[np.bool_],
    config: FragmentationConfig = FragmentationConfig(),
) -> FragmentationReport:
    """Per-tier free HyperNodes and per-shape fits; see the module docstring.

    ``allocatable``/``used`` are (nodes x resources) milli matrices in ``tree.node_names`` order,
    ``schedulable`` says which nodes take new pods at all (ready, schedulable, untainted).
    The virtual root (the whole cluster) is not a tier of its own.
    """
    resources = list(resources)
    shapes, note = resolve_shapes(config, resources, allocatable, schedulable)
    free = allocatable - used
    # Nodes holding none of the accelerator (or, without one, no cpu) count as free.
    key = config.accelerator if config.accelerator in resources else "cpu"
    busy = used[:, resources.index(key)] > 0 if key in resources else np.zeros(len(used), dtype=bool)
    node_free = schedulable & ~busy
    # Per node: busy flag and the fit count of every shape, summed per HyperNode in one pass
    # (a gather over the HyperNode -> node CSR and one reduceat).
    cols_per_node = [(~node_free).astype(np.int64)]
    for shape in shapes:
        cols = [resources.index(r) for r in shape.requests if r in resources]
        req = np.array([shape.requests[resources[c]] for c in cols], dtype=np.int64)
        c = (np.maximum(free[:, cols], 0) // req).min(axis=1) if cols else np.zeros(len(free), dtype=np.int64)
        cols_per_node.append(np.where(schedulable, c, 0).astype(np.int64))
    per_node = np.stack(cols_per_node, axis=1)
    sizes = np.diff(tree.hn_node_ptr)
    per_hn = np.zeros((len(sizes), per_node.shape[1]), dtype=np.int64)
    nonempty = sizes > 0
    if nonempty.any():
        sums = np.add.reduceat(per_node[tree.hn_node_idx], tree.hn_node_ptr[:-1][nonempty], axis=0)
        per_hn[nonempty] = sums
    hn_busy = per_hn[:, 0]
    counts = [(shape, per_node[:, i + 1], per_hn[:, i + 1]) for i, shape in enumerate(shapes)]
    root = tree.root
    tiers = tree.tiers
    anc = tree.ancestor_matrix()
    out: list[TierFragmentation] = []
    for row, t in enumerate(tree.sorted_tiers):
        ids = np.flatnonzero(tiers == t)
        ids = ids[ids != root]
        if not len(ids):
            continue
        tf = TierFragmentation(
            tier=int(t),
            hypernodes=len(ids),
            free_hypernodes=int(((hn_busy[ids] == 0) & (sizes[ids] > 0)).sum()),
        )
        covered = anc[row] >= 0  # nodes in some HyperNode of this tier (each counted once)
        for shape, c, dom in counts:
            tf.fit[shape.name] = int(c[covered].sum())
            d = dom[ids]
            j = int(np.argmax(d))  # first max: lowest id = name order
            tf.best[shape.name] = int(d[j])
            tf.best_hypernode[shape.name] = tree.names[int(ids[j])] if d[j] > 0 else None
        out.append(tf)
    return FragmentationReport(config.accelerator, shapes, out, note)


# The figures of a snapshot before any binding, with the configuration they were made for.
FRAGMENTATION: MemoKey[tuple[FragmentationConfig, FragmentationReport]] = MemoKey("fragmentation")


def snapshot_fragmentation(
    snap: ClusterSnapshot,
    config: FragmentationConfig = FragmentationConfig(),
    bindings: Mapping[str, str] | None = None,
) -> FragmentationReport:
    """:func:`fragmentation` of a snapshot, after the ``bindings`` a session made on it
    (``{"ns/pod": "node"}``; their requests are added to the snapshot's usage)."""
    if not bindings:
        # A cycle with no change reuses its snapshot: so do the figures.
        got = snap.memo.get(FRAGMENTATION)
        if got is None or got[0] != config:
            report = fragmentation(
                snap.tree, snap.resources, snap.allocatable, snap.used, snap.plain_mask, config
            )
            got = snap.memo.put(FRAGMENTATION, (config, report))
        return got[1]
    used = snap.used
    if bindings:
        used = used.copy()
        names = snap.node_names  # sorted by name: a binary search finds a node without an index
        left = len(bindings)
        for job in snap.jobs.values():
            for t in job.pending:
                node = bindings.get(t.key)
                if node is not None:
                    n = bisect.bisect_left(names, node)
                    if n >= len(names) or names[n] != node:
                        n = names.index(node) if node in names else -1  # not sorted after all
                    if n >= 0:
                        used[n] += t.requests
                    left -= 1
            if not left:
                break
    return fragmentation(snap.tree, snap.resources, snap.allocatable, used, snap.plain_mask, config)
