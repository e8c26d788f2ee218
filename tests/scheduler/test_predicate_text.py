"""A pod no node takes is told why node by node, as kube-scheduler tells it.

The scheduler counts the reasons with array work; these tests check its text against the
plain reading: every node asked in turn whether a static predicate refuses the pod (not
ready, unschedulable, an untolerated taint, the node selector) and, if not, which requested
resources it lacks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hyperplace.kube.requests import pod_requests
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import run_session
from scheduler_plugin.filters.node_resources_fit import insufficient_resources
from scheduler_plugin.filters.nodes import node_static_from_dict
from scheduler_plugin.filters.pod_constraints import compile_pod_constraints
from scheduler_plugin.model.explanation import predicate_summary_of_counts

from .builders import node, pod, podgroup

TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    n = draw(st.integers(1, 10))
    nodes, running = [], []
    for i in range(n):
        name = f"n{i}"
        nodes.append(
            node(
                name,
                cpu=draw(st.integers(1, 8)),
                gpu=draw(st.sampled_from([0, 4, 8])),
                labels={"zone": draw(st.sampled_from(["a", "b"]))},
                taints=[TAINT] if draw(st.integers(0, 4)) == 0 else None,
                unschedulable=draw(st.integers(0, 5)) == 0,
                ready=draw(st.integers(0, 5)) != 0,
            )
        )
        for k in range(draw(st.integers(0, 3))):
            running.append(
                pod(f"r{i}-{k}", None, cpu=draw(st.integers(0, 3)), gpu=draw(st.sampled_from([0, 2, 4])),
                    node_name=name, scheduler="default-scheduler")
            )  # fmt: skip
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra["nodeSelector"] = {"zone": "a"}
    if draw(st.booleans()):
        extra["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    want = pod(
        "want-t0-0", "want", cpu=draw(st.integers(1, 9)), gpu=draw(st.sampled_from([0, 4, 8, 9])),
        index=0, extra_spec=extra,
    )  # fmt: skip
    return nodes, running, want


def node_by_node(nodes: list[dict[str, Any]], running: list[dict[str, Any]], want: dict[str, Any]) -> str:
    """The reasons as kube-scheduler finds them, one node at a time."""
    cons = compile_pod_constraints(want)
    req = {**pod_requests(want), "pods": 1000}
    reasons: list[str | None] = []
    for nd in nodes:
        static = node_static_from_dict(nd)
        r = cons.node_reason(static)
        if r is None:
            free = {k: v for k, v in static.allocatable.items()}
            for p in running:
                if p["spec"]["nodeName"] == nd["metadata"]["name"]:
                    for k, v in {**pod_requests(p), "pods": 1000}.items():
                        free[k] = free.get(k, 0) - v
            lacking = insufficient_resources(req, free)
            r = ", ".join(lacking) if lacking else None
        reasons.append(r)
    counts = Counter(r for r in reasons if r)
    return predicate_summary_of_counts(len(nodes), sum(1 for r in reasons if not r), counts)


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_the_counted_reasons_match_asking_every_node(
    case: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]],
) -> None:
    nodes, running, want = case
    snap = build_snapshot(nodes=nodes, pods=[*running, want], podgroups=[podgroup("want", 1)])
    result = run_session(snap)
    expected = node_by_node(nodes, running, want)
    if "default/want-t0-0" in result.bindings:
        assert not expected.startswith("0/")
        return
    outcome = result.jobs["default/want"]
    assert outcome.explanation is not None
    # A cluster with no ready room leaves the queue no share at all: that is the reason given.
    assume(outcome.explanation.reason != "QueueOverused")
    assert expected in outcome.explanation.message(), (expected, outcome.explanation.message())
