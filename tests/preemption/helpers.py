"""A small cluster for the preemption stories: two racks (tier-1 HyperNodes) under a spine."""

from __future__ import annotations

from typing import Any

from hyperplace.api import PodGroup
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from tests.scheduler.builders import hypernode, job_pods, node, podgroup

# Volcano's documented preemption setup: allocate first, then preempt; priority, gang and
# conformance in the first tier decide who may be a victim.
PREEMPT_CONF = load_scheduler_config(
    """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: network-topology-aware
  - name: binpack
"""
)

PRIORITY_CLASSES = [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "system-cluster-critical"},
        "value": 2000000000,
    },
]


def racks(n_racks: int = 2, per_rack: int = 4, cpu: int = 4) -> tuple[list[dict[str, Any]], list[Any]]:
    """``rack0..`` tier 1 with ``per_rack`` nodes each, ``spine`` tier 2 over all of them."""
    nodes = [node(f"r{r}n{i}", cpu=cpu) for r in range(n_racks) for i in range(per_rack)]
    hns = [hypernode(f"rack{r}", 1, nodes=[f"r{r}n{i}" for i in range(per_rack)]) for r in range(n_racks)]
    hns.append(hypernode("spine", 2, children=[f"rack{r}" for r in range(n_racks)]))
    return nodes, hns


def running_gang(
    name: str,
    nodes: list[str],
    min_member: int | None = None,
    priority: str = "low",
    cpu: int = 4,
    annotations: dict[str, str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    queue: str | None = None,
    ns: str = "default",
) -> tuple[PodGroup, list[dict[str, Any]]]:
    """A gang already running one pod per node of ``nodes``."""
    pg = podgroup(
        name,
        min_member if min_member is not None else len(nodes),
        priority_class=priority,
        created=created,
        queue=queue,
        ns=ns,
    )
    if annotations:
        pg.metadata.annotations = dict(annotations)
    pods = job_pods(name, len(nodes), cpu=cpu, created=created, ns=ns)
    for p, n in zip(pods, nodes, strict=True):
        p["spec"]["nodeName"] = n
        p["spec"]["priorityClassName"] = priority
        p["status"]["phase"] = "Running"
    return pg, pods


def pending_gang(
    name: str,
    replicas: int,
    tier: int | None = 1,
    priority: str = "high",
    cpu: int = 4,
    queue: str | None = None,
) -> tuple[PodGroup, list[dict[str, Any]]]:
    """A pending gang of ``replicas`` pods (minMember = replicas), hard-limited to ``tier``."""
    topo = {"mode": "hard", "highestTierAllowed": tier} if tier is not None else None
    pg = podgroup(name, replicas, topology=topo, priority_class=priority, queue=queue)
    pods = job_pods(name, replicas, cpu=cpu)
    for p in pods:
        p["spec"]["priorityClassName"] = priority
    return pg, pods
