"""Sums over the whole cluster stay exact however large it is."""

from __future__ import annotations

from scheduler_plugin.algorithms.queue_sums import total_resource, used_resource
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle import run_session
from tests.scheduler.builders import node, pod, podgroup


def test_a_cluster_with_more_memory_than_int64_milli_bytes_still_admits_jobs() -> None:
    # 10,240 nodes of 2 TiB hold 2.3e19 milli-bytes, past int64: the total wrapped negative and
    # every job was refused at admission ("insufficient memory"). Three nodes of 4 PiB do it too.
    nodes = [node(f"n{i}", cpu=64, memory="4Pi") for i in range(3)]
    running = [pod(f"r{i}", None, cpu=1, memory="3Pi", node_name=f"n{i}") for i in range(3)]
    snap = build_snapshot(
        nodes=nodes,
        pods=[*running, pod("p0", "g", cpu=1, memory="1Gi")],
        hypernodes=[],
        podgroups=[podgroup("g", 1)],
    )
    assert total_resource(snap).memory == 3 * 4 * 2**50
    assert used_resource(snap).memory == 3 * 3 * 2**50
    assert list(run_session(snap).bindings) == ["default/p0"]
