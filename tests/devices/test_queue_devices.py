"""A queue's GPU limit holds whether its GPUs come as ``nvidia.com/gpu`` or as DRA claims: the
queue plugins count devices per DeviceClass as ``deviceclass/<class>``, as Volcano v1.15 names
them in a queue's capability and status, and reclaim frees the devices it counts on."""

from __future__ import annotations

from typing import Any

from hyperplace.api import PodGroup, Queue
from scheduler_plugin.algorithms.device_quota import claim_devices, pod_devices
from scheduler_plugin.algorithms.queue_sums import total_resource, used_resource
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle import SessionResult, run_session
from scheduler_plugin.filters.dra import compile_pod_claims, parse_claim_spec
from tests.queues.test_queue_limits import queue_conf
from tests.scheduler.builders import node, pod

from .builders import (
    GPU_CLASS,
    claim,
    claim_spec,
    device_class,
    dra_listing,
    gpu_slice,
    node_allocation,
    template,
    template_claims,
    uses_template,
)

GPUS = f"deviceclass/{GPU_CLASS}"


def conf(actions: str, plugin: str) -> Any:
    """Volcano's default tiers with ``actions``, the queue plugin ``proportion`` or ``capacity``."""
    return load_scheduler_config(queue_conf(actions, plugin))


def queue(name: str, **spec: Any) -> Queue:
    return Queue.model_validate(
        {"metadata": {"name": name}, "spec": {"weight": 1, "reclaimable": True, **spec}}
    )


def group(
    name: str, q: str, min_member: int, phase: str = "Inqueue", created: str = "2026-01-01T00:00:00Z"
) -> PodGroup:
    return PodGroup.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
            "spec": {"minMember": min_member, "queue": q},
            "status": {"phase": phase},
        }
    )


def job(name: str, q: str, replicas: int, gpus_each: int, min_member: int | None = None, **kw: Any):
    """A job of ``replicas`` pods, each claiming ``gpus_each`` GPUs through the template ``<job>``
    (the claims made by the resourceclaim controller, not allocated yet)."""
    pods = [pod(f"{name}-{i}", name, cpu=1) for i in range(replicas)]
    spec = claim_spec(gpus_each)
    objs = [template(name, spec), *template_claims(pods, name, spec)]
    return pods, group(name, q, replicas if min_member is None else min_member, **kw), objs


def session(
    nodes: int,
    jobs: list[tuple[list[dict[str, Any]], PodGroup, dict[str, Any]]],
    queues: list[Queue],
    config: Any,
    extra: list[dict[str, Any]] | None = None,
    running: list[dict[str, Any]] | None = None,
) -> SessionResult:
    names = [f"n{i}" for i in range(nodes)]
    snap = build_snapshot(
        nodes=[node(n, cpu=64) for n in names],
        pods=[p for ps, _, _ in jobs for p in ps] + (running or []),
        podgroups=[g for _, g, _ in jobs],
        queues=queues,
        storage=dra_listing(
            device_class(),
            *(gpu_slice(n, 8) for n in names),
            *(o for _, _, objs in jobs for o in objs),
            *(extra or []),
        ),
    )
    return run_session(snap, config)


def placed(result: SessionResult, job: str) -> int:
    return sum(1 for k in result.bindings if k.startswith(f"default/{job}-"))


def test_a_queue_capability_on_a_device_class_caps_the_gpus_its_jobs_claim() -> None:
    # Two nodes of 8 GPUs; team may hold 8 GPUs; two gangs of 2 pods x 4 GPUs each. The cluster
    # has room for both, the queue for one.
    jobs = [job("first", "team", 2, 4), job("second", "team", 2, 4, created="2026-01-01T00:01:00Z")]
    limited = session(2, jobs, [queue("team", capability={GPUS: 8})], conf("enqueue, allocate", "capacity"))
    assert placed(limited, "first") == 2 and placed(limited, "second") == 0
    why = str(limited.jobs["default/second"].conditions)
    assert GPUS in why, why
    # The same queue without the limit takes both.
    jobs = [job("first", "team", 2, 4), job("second", "team", 2, 4, created="2026-01-01T00:01:00Z")]
    free = session(2, jobs, [queue("team", capability={"cpu": "64"})], conf("enqueue, allocate", "capacity"))
    assert placed(free, "first") == 2 and placed(free, "second") == 2


def test_admission_counts_the_devices_of_min_member_pods() -> None:
    # A gang of 4 pods x 4 GPUs cannot be admitted to a queue that may hold 8: it stays Pending
    # and holds nothing, instead of being admitted and never placed.
    jobs = [job("big", "team", 4, 4, phase="Pending")]
    result = session(2, jobs, [queue("team", capability={GPUS: 8})], conf("enqueue, allocate", "capacity"))
    assert placed(result, "big") == 0
    assert result.jobs["default/big"].pg_phase == "Pending"
    assert GPUS in str(result.jobs["default/big"].conditions), result.jobs["default/big"]


def test_proportion_splits_the_gpus_between_two_teams_by_weight() -> None:
    # 16 GPUs, cpu to spare: counting only cpu, the first team's elastic job would take every
    # GPU; counting the devices, each team deserves 8 and gets 2 pods of 4.
    jobs = [
        job("ta", "team-a", 4, 4, min_member=1),
        job("tb", "team-b", 4, 4, min_member=1, created="2026-01-01T00:01:00Z"),
    ]
    result = session(2, jobs, [queue("team-a"), queue("team-b")], conf("enqueue, allocate", "proportion"))
    assert placed(result, "ta") == 2 and placed(result, "tb") == 2


def test_the_cluster_total_and_its_use_count_devices_per_class() -> None:
    names = ["n0", "n1"]
    p = pod("held", "g", cpu=1, node_name="n0", phase="Running")
    made = uses_template(p, "t")
    snap = build_snapshot(
        nodes=[node(n, cpu=64) for n in names],
        pods=[p],
        podgroups=[group("g", "default", 1, phase="Running")],
        storage=dra_listing(
            device_class(),
            *(gpu_slice(n, 8) for n in names),
            template("t", claim_spec(3)),
            claim(
                made,
                claim_spec(3),
                owner_pod=p,
                allocation=node_allocation("n0", ["gpu-0", "gpu-1", "gpu-2"]),
            ),
        ),
    )
    assert total_resource(snap).get(GPUS) == 16_000
    assert used_resource(snap).get(GPUS) == 3_000


def test_what_a_claim_counts() -> None:
    exact = parse_claim_spec(claim_spec(4), "c")
    assert claim_devices(exact) == {GPU_CLASS: 4}
    every = parse_claim_spec(
        {
            "devices": {
                "requests": [
                    {"name": "all", "exactly": {"deviceClassName": GPU_CLASS, "allocationMode": "All"}}
                ]
            }
        },
        "c",
    )
    assert claim_devices(every) == {}  # not known before allocation (Volcano skips it too)
    admin = parse_claim_spec(
        {
            "devices": {
                "requests": [{"name": "mon", "exactly": {"deviceClassName": GPU_CLASS, "adminAccess": True}}]
            }
        },
        "c",
    )
    assert claim_devices(admin) == {}  # an admin holds no device
    first = parse_claim_spec(
        {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": GPU_CLASS, "count": 8},
                            {"name": "small", "deviceClassName": GPU_CLASS, "count": 4},
                        ],
                    }
                ]
            }
        },
        "c",
    )
    assert claim_devices(first) == {GPU_CLASS: 4}  # at least the fewest it may get
    # A pod counts the template of a claim not made yet.
    from scheduler_plugin.cache.storage import StorageState

    st = StorageState()
    st.replace(dra_listing(device_class(), template("t", claim_spec(2))))
    p = pod("p", None)
    uses_template(p, "t", made=False)
    assert pod_devices(compile_pod_claims(p), st.dra_view()) == {GPU_CLASS: 2}


def holding(
    job: str, q: str, n: int, gpus_each: int, per_node: int
) -> tuple[list[dict[str, Any]], PodGroup, list[dict[str, Any]]]:
    """A running elastic job of ``n`` pods, each holding ``gpus_each`` allocated GPUs, ``per_node``
    pods on each node in turn."""
    pods, objs = [], [template(job, claim_spec(gpus_each))]
    for i in range(n):
        where, slot = f"n{i // per_node}", i % per_node
        p = pod(f"{job}-{i}", job, cpu=1, node_name=where, phase="Running")
        p["metadata"]["labels"]["volcano.sh/preemptable"] = "true"
        made = uses_template(p, job)
        devices = [f"gpu-{slot * gpus_each + k}" for k in range(gpus_each)]
        objs.append(
            claim(
                made,
                claim_spec(gpus_each),
                owner_pod=p,
                allocation=node_allocation(where, devices),
                reserved_for=[
                    {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                ],
            )
        )
        pods.append(p)
    return pods, group(job, q, 1, phase="Running"), objs


def test_reclaim_takes_gpus_back_from_a_team_over_its_share_and_frees_their_devices() -> None:
    # team-b holds all 16 GPUs (4 pods x 4); team-a asks for a gang of 2 pods x 4. Each deserves 8 GPUs:
    # reclaim evicts two of team-b's pods, and the devices they free are what team-a's pods get.
    jobs = [holding("tb", "team-b", 4, 4, per_node=2), job("ta", "team-a", 2, 4)]
    result = session(2, jobs, [queue("team-a"), queue("team-b")], conf("enqueue, reclaim", "proportion"))
    victims = {e.victim for e in result.evictions}
    assert len(victims) == 2 and all(v.startswith("default/tb-") for v in victims), result.evictions
    # Both victims on one node: that node's 8 freed GPUs are where the gang is nominated.
    assert len({e.node for e in result.evictions}) == 1
    assert result.nominations["default/ta"] is not None


def test_a_victim_put_back_holds_its_devices_again() -> None:
    # A plan that evicts a pod and is then undone must leave its GPU taken: else the next gang
    # would be given a device a running pod holds.
    from scheduler_plugin.cache.storage import StorageState
    from scheduler_plugin.filters.dynamic_resources import DraState
    from scheduler_plugin.filters.nodes import node_static_from_dict
    from scheduler_plugin.filters.pod_constraints import compile_pod_constraints

    pods, _g, objs = holding("old", "q", 1, 1, per_node=1)
    newcomer = pod("new", None, cpu=1)
    objs += template_claims([newcomer], "one", claim_spec(1))
    st = StorageState()
    st.replace(dra_listing(device_class(), gpu_slice("n0", 1), *objs))
    state = DraState(st.dra_view(), [node_static_from_dict(node("n0", cpu=8))], {})
    old, new = state.pod(compile_pod_constraints(pods[0])), state.pod(compile_pod_constraints(newcomer))
    assert state.reasons(new, 0)  # the only GPU is held
    state.give_back(old, 0)  # the victim search lets it go...
    assert state.reasons(new, 0) == ()
    state.take(old, 0)  # ...and puts it back
    assert state.reasons(new, 0), "the GPU the running pod holds was left free"
