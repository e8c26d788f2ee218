"""NVIDIA ComputeDomains as a gang constraint: the workload pods of a ComputeDomain share GPU
memory over multi-node NVLink, which holds only inside one NVLink clique. A job whose pods claim
a ComputeDomain's IMEX channel (:func:`..filters.dra.uses_compute_domain`) and that asks for no
network topology of its own is held to one value of the clique label, as a Kubernetes PodGroup's
required topology key is (:data:`~hyperplace.api.workload.UPSTREAM_TOPOLOGY_KEY`): one tier-1
HyperNode of the ``nvidia-clique`` preset, or the label's domains when there are no HyperNodes.
The incremental state and the rebuild both ask :func:`with_clique` (one rule)."""

from __future__ import annotations

from collections.abc import Iterable

from hyperplace.api import PodGroup
from hyperplace.api.podgroup import NetworkTopologySpec
from hyperplace.api.workload import UPSTREAM_TOPOLOGY_KEY

from ..filters.dra import CLIQUE_LABEL, DraObjects, PodClaims, compute_domain_templates, uses_compute_domain


def clique_keys(objects: DraObjects) -> tuple[str, ...]:
    """The topology keys the tree needs for ComputeDomains: the clique label while any
    template or claim asks for a ComputeDomain channel."""
    return (CLIQUE_LABEL,) if compute_domain_templates(objects) else ()


def with_clique(pg: PodGroup, pods: Iterable[PodClaims], objects: DraObjects) -> PodGroup:
    """``pg`` as the job is built from: held to one NVLink clique when its pods claim a
    ComputeDomain channel and it sets no network topology (its own wins)."""
    if pg.spec.network_topology is not None or objects.empty:
        return pg
    if not any(uses_compute_domain(c, objects) for c in pods if c.refs):
        return pg
    annotations = dict(pg.metadata.annotations or {})
    annotations[UPSTREAM_TOPOLOGY_KEY] = CLIQUE_LABEL
    return pg.model_copy(
        update={
            "metadata": pg.metadata.model_copy(update={"annotations": annotations}),
            "spec": pg.spec.model_copy(
                update={"network_topology": NetworkTopologySpec(mode="hard", highest_tier_name=CLIQUE_LABEL)}
            ),
        }
    )
