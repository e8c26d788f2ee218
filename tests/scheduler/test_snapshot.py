"""Snapshot building: usage accounting and the fast static mask for unconstrained pods."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.filters.pod_constraints import static_feasibility_mask

from .builders import node, pod, podgroup

EFFECTS = st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.booleans(),
            st.lists(st.tuples(st.sampled_from(["a", "b"]), EFFECTS), max_size=2),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_plain_pods_get_the_same_mask_as_the_full_predicates(specs: list) -> None:
    nodes = [
        node(
            f"n{i}",
            ready=ready,
            unschedulable=unsched,
            taints=[{"key": k, "value": "v", "effect": e} for k, e in taints],
        )
        for i, (ready, unsched, taints) in enumerate(specs)
    ]
    snap = build_snapshot(nodes=nodes, pods=[pod("x-0", "x")], podgroups=[podgroup("x", 1)])
    shape = snap.shapes[0]
    assert (
        snap.static_mask(shape).tolist()
        == static_feasibility_mask(shape.constraints, snap.node_static).tolist()
    )


def test_used_resources_count_bound_non_terminal_pods_only() -> None:
    pods = [
        pod("a", None, cpu=1, node_name="n0"),
        pod("b", None, cpu=2, node_name="n0", phase="Failed"),
        pod("c", None, cpu="500m", node_name="n1", phase="Pending"),  # bound, not started yet
    ]
    snap = build_snapshot(nodes=[node("n0"), node("n1")], pods=pods)
    cpu = snap.resources.index("cpu")
    assert snap.used[:, cpu].tolist() == [1000, 500]
    pods_col = snap.resources.index("pods")
    assert snap.used[:, pods_col].tolist() == [1000, 1000]
    assert snap.allocatable[0, pods_col] == 110_000


def test_bound_pods_with_and_without_a_job_claim_their_host_ports_and_room() -> None:
    port = {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
    pods = [
        pod("free", None, cpu=1, node_name="n0", extra_spec=port),
        pod("j-0", "j", cpu=2, node_name="n1", extra_spec=port),
    ]
    snap = build_snapshot(nodes=[node("n0"), node("n1"), node("n2")], pods=pods, podgroups=[podgroup("j", 1)])
    assert snap.node_ports == [{("TCP", "0.0.0.0", 8080)}, {("TCP", "0.0.0.0", 8080)}, set()]
    assert snap.used[:, snap.resources.index("pods")].tolist() == [1000, 1000, 0]


def test_a_node_that_reports_only_capacity_offers_nothing_as_in_kube_scheduler() -> None:
    n = node("n0", cpu=8)
    del n["status"]["allocatable"]
    snap = build_snapshot(nodes=[n], pods=[pod("p", None, cpu=1)])
    assert snap.allocatable[0, snap.resources.index("cpu")] == 0
    assert snap.allocatable[0, snap.resources.index("pods")] == 0  # no pod slot: "Too many pods"
    assert snap.node_static[0].allocatable["cpu"] == 8000
