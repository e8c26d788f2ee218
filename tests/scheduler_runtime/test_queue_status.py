"""On an API server the scheduler persists what enqueue decided (Inqueue, or Pending with the
reason) and writes each queue's ``status.allocated``, as Volcano's scheduler does."""

from __future__ import annotations

from hyperplace.runtime.api import PODGROUPS, PODS, QUEUES
from scheduler_plugin.runtime.queue_status import queue_allocated_patch
from tests.scheduler.builders import job_pods, podgroup

from .helpers import NS, ClusterApi, condition, cycles_pass, eventually, node_of, running, seed_racks


def seed_team_job(api: ClusterApi, name: str, replicas: int, cpu: int, queue: str) -> list[str]:
    pg = podgroup(name, replicas, queue=queue).to_dict()
    pg["spec"]["minResources"] = {"cpu": str(cpu * replicas)}
    api.seed(PODGROUPS, pg)
    pods = job_pods(name, replicas, cpu=cpu)
    for p in pods:
        api.seed(PODS, p)
    return [f"{NS}/{p['metadata']['name']}" for p in pods]


async def test_capability_holds_the_second_job_pending_and_allocated_is_written() -> None:
    api = ClusterApi()
    seed_racks(api)  # 32 cpu
    api.seed(
        QUEUES,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "team"},
            "spec": {"weight": 1, "capability": {"cpu": "6"}},
            "status": {"state": "Open"},
        },
    )
    first = seed_team_job(api, "first", 2, 2, "team")
    seed_team_job(api, "second", 2, 2, "team")
    async with running(api) as (sched, _):
        await eventually(lambda: all(node_of(api, k) for k in first), what="first bound")
        await eventually(
            lambda: (
                ((api.peek(QUEUES, "team") or {}).get("status") or {}).get("allocated", {}).get("cpu") == "4"
            ),
            what="queue allocated written",
        )
        await cycles_pass(sched, 3)
    second = api.peek(PODGROUPS, f"{NS}/second")
    assert second is not None and second["status"]["phase"] == "Pending"
    unsched = condition(second, "Unschedulable")
    assert unsched is not None and unsched["reason"] == "NotEnqueued"
    assert "queue resource quota insufficient: insufficient cpu" in unsched["message"]
    first_pg = api.peek(PODGROUPS, f"{NS}/first")
    assert first_pg is not None and first_pg["status"]["phase"] == "Running"
    queue = api.peek(QUEUES, "team")
    assert queue is not None and queue["status"]["state"] == "Open"  # the controller's field, untouched
    # Written once, not every cycle.
    assert sum(1 for c in api.calls if c == ("patch/status", "queues", "team")) == 1


def test_the_allocated_patch_nulls_resources_the_queue_no_longer_holds() -> None:
    queue = {"status": {"allocated": {"cpu": "4", "memory": "0", "nvidia.com/gpu": "8"}}}
    assert queue_allocated_patch(queue, {"cpu": "4000m", "memory": "0", "nvidia.com/gpu": "8"}) is None
    assert queue_allocated_patch(queue, {"cpu": "2", "memory": "0"}) == {
        "status": {"allocated": {"nvidia.com/gpu": None, "cpu": "2", "memory": "0"}}
    }
