"""Adapter of the HyperNode controller's status: every HyperNode's node count and readiness
(``controller.hypernode.status``), over the member index the scheduler shares."""

from __future__ import annotations

import json

from hyperplace.api import HyperNode
from hyperplace.kube.members import node_labels_of

from ..cluster import Cluster


class HyperNodeStatus:
    """HyperNode status, recomputed when a Node or a HyperNode changed."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._signature: str | None = None
        self._node_labels: tuple[int, dict[str, dict[str, str]]] | None = None

    def reconcile(self) -> bool:
        """One pass; whether it changed anything."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.hypernode.status import compute_all

        c = self.cluster
        # Nodes are stored whole (never changed in place): their labels are read again only
        # when a Node was stored or removed since.
        node_writes = c.objects.version("Node")
        if self._node_labels is None or self._node_labels[0] != node_writes:
            self._node_labels = (node_writes, node_labels_of(c.of_kind("Node")))
        labels = self._node_labels[1]
        hn_objs = c.of_kind("HyperNode")

        # The controller reacts to Node and HyperNode changes; when neither the nodes nor any
        # HyperNode changed since the last pass, the status cannot change (resolving regex
        # members over thousands of nodes is the costly part).
        def signature() -> str:
            hns = [[o["metadata"]["name"], o.get("spec"), o.get("status")] for o in hn_objs]
            return json.dumps([node_writes, hns], sort_keys=True, default=str)

        if signature() == self._signature:
            return False
        models = {hn.name: hn for _, hn in c.models(HyperNode)}
        changed = False
        # One shared index for the whole tree: members are resolved once, not once per ancestor.
        c.members.sync_nodes(labels)
        c.members.sync_hypernodes(models.values())
        statuses = compute_all(models, labels, now=c.clock.now, members=c.members)
        for name, st in statuses.items():
            status = st.to_dict()
            obj = c.objects.get(("HyperNode", "", name))
            if obj is None:
                continue
            c.clock.freeze_times(status)
            if obj.get("status") != status:
                obj["status"] = status
                changed = True
        self._signature = signature()  # with the statuses just written
        return changed
