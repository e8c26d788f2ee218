"""A PodGroup made before its pods is admitted by the queue's rules, not waved through."""

from __future__ import annotations

from hyperplace.api import PodGroup, Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import run_session
from tests.scheduler.builders import node

# No plugin here votes on JobReady (gang is left out), as in Volcano's own enqueue tests.
ENQUEUE_ONLY = load_scheduler_config(
    """
actions: "enqueue"
tiers:
- plugins:
  - name: proportion
"""
)


def test_a_podgroup_without_pods_that_asks_more_than_its_queue_may_hold_stays_pending():
    # A team's queue may hold 1 cpu; a PodGroup asking 8 cpu arrives before its pods exist.
    queue = Queue.model_validate(
        {"metadata": {"name": "team"}, "spec": {"weight": 1, "capability": {"cpu": "1", "memory": "1Gi"}}}
    )
    pg = PodGroup.model_validate(
        {
            "metadata": {"name": "big", "namespace": "default"},
            "spec": {"minMember": 1, "queue": "team", "minResources": {"cpu": "8", "memory": "8Gi"}},
            "status": {"phase": "Pending"},
        }
    )
    snap = build_snapshot(nodes=[node("n1", cpu=16, memory="64Gi")], pods=[], podgroups=[pg], queues=[queue])
    result = run_session(snap, ENQUEUE_ONLY, now=0.0)
    # Nothing of it runs, so it is admitted only if the queue can take its minResources: it cannot.
    assert result.jobs["default/big"].pg_phase == "Pending"
