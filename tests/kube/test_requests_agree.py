"""The scheduler, the simulator and the Job controller count a pod's requests alike.

A user who sees a node as full in ``hyperplace simulate`` must find the scheduler refusing it
for the same reason, and a PodGroup's ``minResources`` must be what its pods will take:
sidecar containers (init containers with ``restartPolicy: Always``) count everywhere.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.job.reconcile import template_requests
from hyperplace.kube.requests import pod_requests
from scheduler_plugin.cache.rebuild import build_snapshot
from simulator.resources import used_by_node

RESOURCES = ["cpu", "memory", "nvidia.com/gpu"]
quantity = st.sampled_from(["0", "100m", "1", "2", "500m", "1Gi", "3Gi", "64Mi"])
resource_list = st.dictionaries(st.sampled_from(RESOURCES), quantity, max_size=3)


@st.composite
def container(draw: st.DrawFn, sidecar: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "resources": {}}
    for kind in ("requests", "limits"):
        got = draw(resource_list)
        if got:
            c["resources"][kind] = got
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


@st.composite
def pod(draw: st.DrawFn, i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": draw(st.sampled_from(["n0", "n1"])),
        "containers": draw(st.lists(container(), min_size=1, max_size=3)),
    }
    inits = draw(st.lists(st.booleans().flatmap(lambda s: container(sidecar=s)), max_size=3))
    if inits:
        spec["initContainers"] = inits
    overhead = draw(resource_list)
    if overhead:
        spec["overhead"] = overhead
    pod_level = draw(resource_list)
    if pod_level:
        spec["resources"] = {"requests": pod_level}
    return {
        "metadata": {"name": f"p{i}", "namespace": "default"},
        "spec": spec,
        "status": {"phase": "Running"},
    }


NODES = [
    {
        "metadata": {"name": n},
        "status": {"allocatable": {"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": "64", "pods": "110"}},
    }
    for n in ("n0", "n1")
]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(*(pod(i) for i in range(n)))))
def test_node_usage_and_min_resources_agree_with_the_scheduler(pods: tuple[dict[str, Any], ...]) -> None:
    snap = build_snapshot(NODES, list(pods))
    shown = used_by_node(pods)
    for i, node in enumerate(snap.node_names):
        charged = {r: int(v) for r, v in zip(snap.resources, snap.used[i].tolist(), strict=True) if v}
        assert {r: v for r, v in shown.get(node, {}).items() if v} == charged
    for p in pods:
        want = {k: Fraction(v, 1000) for k, v in pod_requests(p).items() if k != "pods"}
        assert template_requests(p["spec"]) == want


def test_a_sidecar_counts_for_the_pods_whole_life() -> None:
    spec = {
        "nodeName": "n0",
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "2"}}}],
        "initContainers": [
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "setup", "resources": {"requests": {"cpu": "2500m"}}},
        ],
    }
    p = {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}
    # app + proxy run together (3); setup runs beside proxy only (3.5): the peak wins.
    assert pod_requests(p)["cpu"] == 3500
    assert used_by_node([p])["n0"]["cpu"] == 3500
    assert template_requests(spec) == {"cpu": Fraction(7, 2)}
