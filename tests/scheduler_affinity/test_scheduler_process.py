"""User stories on the scheduler process (informers, cycles, binds) over the in-memory API: pods
with inter-pod anti-affinity and topology spread are bound where kube-scheduler would bind them,
and a term's namespaceSelector reads the Namespaces the scheduler watches."""

from __future__ import annotations

from typing import Any

import pytest

from hyperplace.runtime.api import NAMESPACES, PODGROUPS, PODS
from hyperplace.runtime.fakeapi import FakeApi
from tests.scheduler.builders import job_pods, podgroup
from tests.scheduler_runtime.helpers import (
    NS,
    ClusterApi,
    condition,
    cycles_pass,
    eventually,
    node_of,
    pod,
    running,
    seed_racks,
)

pytestmark = pytest.mark.asyncio

HOST = "kubernetes.io/hostname"


def seed_job(api: FakeApi, name: str, replicas: int, extra: dict[str, Any]) -> list[str]:
    api.seed(PODGROUPS, podgroup(name, replicas).to_dict())
    keys = []
    for p in job_pods(name, replicas, cpu=1, extra_spec=extra):
        p["metadata"]["labels"]["job"] = name
        api.seed(PODS, p)
        keys.append(f"{NS}/{p['metadata']['name']}")
    return keys


def anti(selector: dict[str, Any], **term: Any) -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": HOST, **term}
                ]
            }
        }
    }


async def test_a_gang_with_hostname_anti_affinity_is_bound_one_pod_per_node() -> None:
    api = ClusterApi()
    seed_racks(api, racks=2, per_rack=4, cpu=8)
    keys = seed_job(api, "spread", 6, anti({"matchLabels": {"job": "spread"}}))
    async with running(api):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="the gang bound")
    nodes = [node_of(api, k) for k in keys]
    assert len(set(nodes)) == 6


async def test_a_namespace_selector_reads_the_namespaces_the_scheduler_watches() -> None:
    api = ClusterApi()
    seed_racks(api, racks=1, per_rack=1, cpu=8)
    team = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"team": "a"}}}
    api.seed(NAMESPACES, team)
    # A pod of the "db" job runs on the only node; the new pod repels it through a
    # namespaceSelector that names the db pod's namespace by its label only.
    db = job_pods("db", 1, cpu=1, node_name="n0-0")[0]
    db["metadata"]["labels"]["job"] = "db"
    api.seed(PODS, db)
    selector = {"matchLabels": {"job": "db"}}
    (key,) = seed_job(api, "web", 1, anti(selector, namespaceSelector={"matchLabels": {"team": "a"}}))
    async with running(api) as (sched, _):
        await cycles_pass(sched, 3)
        assert node_of(api, key) is None
        why = condition(pod(api, key), "PodScheduled") or {}
        assert "no node fits the pod: node(s) didn't match pod anti-affinity rules" in str(why.get("message"))
        # The namespace is relabelled: the term no longer selects it, and the pod is bound.
        await api.patch(NAMESPACES, NS, {"metadata": {"labels": {"team": "b"}}})
        await eventually(lambda: node_of(api, key) == "n0-0", what="the pod bound once the label moved")
