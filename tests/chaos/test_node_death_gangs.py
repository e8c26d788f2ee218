"""What the chaos campaign's node deaths showed the scheduler doing, pinned down outside the
campaign: a gang whose member is being deleted on a dead node (stuck Terminating, as with an
unreachable kubelet) after its Job restarted the task.

Seed 62 of the campaign (``python -m bench.chaos --seeds 100``): a hard tier-1 Job of three pods
(``RestartTask`` on ``PodEvicted``) ran in rack5; n5-1 was deleted with its machine. The
controller restarted the task: the two pods on live nodes went at once and were recreated, the
third stayed Terminating on the gone node until force-deleted 5 s later. Meanwhile the scheduler
bound the two new pods to rack4, counting the Terminating pod as a running member of the
3-member gang (a pod on no Node object is counted as running, with no room or topology), so the
gang started 2 of 3 before its third member existed. Volcano counts such a pod as Releasing,
not as a ready task (``ReadyTaskNum``), and waits for the third. The campaign's ``topology``
check does not count a pod on a dead node (lost, it is no longer where the gang runs), so only
this test shows it."""

from __future__ import annotations

from hyperplace.runtime.api import PODS
from tests.scheduler_runtime.helpers import (
    ClusterApi,
    cycles_pass,
    node_of,
    pod,
    running,
    seed_gang,
    seed_racks,
)


async def test_a_gang_waits_for_a_member_stuck_terminating_on_a_dead_node_to_be_replaced() -> None:
    api = ClusterApi()
    seed_racks(api, racks=2, per_rack=3)
    keys = seed_gang(api, "g", 3, cpu=2, tier=1)
    # g-t0-0 ran on n9-0, a machine deleted with its Node: it is being deleted and nobody will
    # finish it (no kubelet) until it is force-deleted.
    stuck = api.objects[PODS.plural][keys[0]]
    stuck["spec"]["nodeName"] = "n9-0"
    stuck["status"] = {"phase": "Running"}
    stuck["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    async with running(api) as (sched, _):
        await cycles_pass(sched, 5)
    assert [node_of(api, k) for k in keys[1:]] == [None, None], "no part of the gang starts"
    assert pod(api, keys[0])["spec"]["nodeName"] == "n9-0"
