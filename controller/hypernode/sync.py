"""The HyperNode status controller: informers and a work queue around
:func:`controller.hypernode.status.compute_status`.

Key ``name``. A reconcile computes the HyperNode's status and patches it when it differs. Any
spec or label change of a HyperNode, and any node add/delete/label change, requeues every
HyperNode: counts and Ready depend on parents, children and nodes. Our own status writes do
not requeue anything. Every HyperNode of a discovery source also carries a ``Discovery``
condition with the outcome of that source's last run (set by
:mod:`controller.hypernode.discovery_sync`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic import ValidationError

from controller.kube_io import KubeIO, labels_of
from hyperplace.api import Condition, HyperNode
from hyperplace.kube.members import MemberIndex, node_labels_of
from hyperplace.runtime.api import HYPERNODES, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.workqueue import WorkQueue

from .discovery import source_of
from .status import TopologyIndex, compute_status

log = logging.getLogger(__name__)

# HyperNode condition saying how the last run of the HyperNode's discovery source went.
DISCOVERY_CONDITION = "Discovery"
MAX_DISCOVERY_MESSAGE = 4096


class HyperNodeController:
    """HyperNode status (nodeCount, Ready, Discovery); see the module docstring."""

    def __init__(self, io: KubeIO, hypernodes: Informer, nodes: Informer, *, now: Callable[[], str]) -> None:
        self.io = io
        self.hypernodes = hypernodes
        self.nodes = nodes
        self._now = now
        self.queue: WorkQueue[str] = WorkQueue(name="hypernodes")
        # source -> (status, reason, message) of its last run, shown on its HyperNodes.
        self.source_conditions: dict[str, tuple[str, str, str]] = {}
        self._hn_models: dict[str, tuple[str, HyperNode]] = {}  # name -> (resourceVersion, model)
        self._hn_view: dict[str, HyperNode] | None = None  # hypernode_models() until the store changes
        self._node_labels: dict[str, dict[str, str]] | None = None
        # Shared by every HyperNode reconcile until a spec or a node changes.
        self._topology: TopologyIndex | None = None
        # HyperNode members, kept resolved across changes (only what changed is re-resolved).
        self._members = MemberIndex()
        self._wire()

    def _wire(self) -> None:
        def hn_changed(old: Obj, new: Obj) -> None:
            # Our own status patches change neither spec nor labels: no requeue, no loop.
            if old.get("spec") != new.get("spec") or labels_of(old) != labels_of(new):
                self.requeue_all()

        self.hypernodes.add_handler(lambda _o: self.requeue_all(), hn_changed, lambda _o: self.requeue_all())

        def hn_store_changed(*_: Obj) -> None:
            self._hn_view = None  # status patches included: the models carry the status too

        self.hypernodes.add_handler(hn_store_changed, hn_store_changed, hn_store_changed)

        def node_event(_o: Obj) -> None:
            self._node_labels = None
            self.requeue_all()

        def node_changed(old: Obj, new: Obj) -> None:
            if labels_of(old) != labels_of(new):
                node_event(new)

        self.nodes.add_handler(node_event, node_changed, node_event)

    def requeue_all(self) -> None:
        """Queue every HyperNode; called on every change that can alter counts or readiness."""
        self._topology = None
        for name in self.hypernodes.store:
            self.queue.add(name)

    def set_source_condition(self, source: str, status: str, reason: str, message: str) -> None:
        """Record how the last run of a discovery source went, for its HyperNodes' condition."""
        value = (status, reason, message)
        if self.source_conditions.get(source) != value:
            self.source_conditions[source] = value
            self.requeue_all()  # the condition is written with each HyperNode's status

    # -- caches -----------------------------------------------------------------------------

    def hypernode_models(self) -> dict[str, HyperNode]:
        """name -> parsed HyperNode of the informer's store (shared: do not change it).

        Kept until the store changes: every HyperNode reconcile asks for all of them, and
        re-walking the store each time was O(HyperNodes^2) per pass, which at 666 HyperNodes
        over 10k nodes kept the controller's event loop busy enough to starve its Job
        reconciles (pods created at 2/s)."""
        if self._hn_view is not None:
            return self._hn_view
        out: dict[str, HyperNode] = {}
        fresh: dict[str, tuple[str, HyperNode]] = {}
        for name, obj in self.hypernodes.store.items():
            rv = str(meta(obj).get("resourceVersion", ""))
            cached = self._hn_models.get(name)
            if cached is not None and cached[0] == rv:
                model = cached[1]
            else:
                try:
                    model = HyperNode.model_validate(obj)
                except ValidationError:
                    continue
            fresh[name] = (rv, model)
            out[name] = model
        self._hn_models = fresh
        self._hn_view = out
        return out

    def _current_node_labels(self) -> dict[str, dict[str, str]]:
        if self._node_labels is None:
            self._node_labels = node_labels_of(self.nodes.objects())
        return self._node_labels

    # -- reconcile --------------------------------------------------------------------------

    async def reconcile(self, name: str) -> None:
        """Patch one HyperNode's status when it differs from the computed one."""
        obj = self.hypernodes.get(name)
        if obj is None:
            return
        models = self.hypernode_models()
        hn = models.get(name)
        if hn is None:
            log.warning("hypernode %s does not validate; skipping", name)
            return
        if self._topology is None:
            self._members.sync_nodes(self._current_node_labels())
            self._members.sync_hypernodes(models.values())
            self._topology = TopologyIndex(models, self._current_node_labels(), self._members)
        status = compute_status(
            hn, self._current_node_labels(), models, now=self._now(), index=self._topology
        )
        source = source_of(hn)
        if source is not None and source in self.source_conditions:
            st, reason, message = self.source_conditions[source]
            old = next((c for c in status.conditions or [] if c.type == DISCOVERY_CONDITION), None)
            since = old.last_transition_time if old is not None and old.status == st else None
            cond = Condition(
                type=DISCOVERY_CONDITION,
                status=st,
                reason=reason,
                message=message[:MAX_DISCOVERY_MESSAGE],
                last_transition_time=since or self._now(),
                observed_generation=hn.metadata.generation,
            )
            rest = [c for c in status.conditions or [] if c.type != DISCOVERY_CONDITION]
            status.conditions = [*rest, cond]
        await self.io.patch_status(HYPERNODES, name, None, obj.get("status"), status.to_dict())
