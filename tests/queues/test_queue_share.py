"""Queue shares as Volcano's proportion plugin computes them.

The cases are the ones Volcano's own proportion tests pin (TestEnqueueAndAllocable), stated at
the level of the computation, and the water-filling stories of its documentation."""

from __future__ import annotations

import pytest

from scheduler_plugin.algorithms.queue_shares import (
    QueueDemand,
    allocatable,
    compute_shares,
    enqueueable,
    overused,
    queue_order_key,
)
from scheduler_plugin.model.resources import Missing, Res

G = 10**9


def R(cpu: str = "0", mem: str = "0", gpu: str | None = None) -> Res:
    rl: dict[str, str] = {"cpu": cpu, "memory": mem}
    if gpu is not None:
        rl["nvidia.com/gpu"] = gpu
    return Res.from_list(rl)


def test_units_are_volcanos() -> None:
    r = Res.from_list(
        {"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": 8, "pods": "110", "count/pods": "3"}
    )
    assert (r.cpu, r.memory) == (1500, 2 * 2**30)
    assert r.scalars == {"nvidia.com/gpu": 8000, "pods": 110}
    assert (
        Res.from_milli({"cpu": 2000, "memory": 3 * 1000 * 2**30, "nvidia.com/gpu": 4000}).get("memory")
        == 3 * 2**30
    )


def test_missing_scalar_dimension_reads_as_zero_or_infinity() -> None:
    gpu = R("1", "1G", gpu="1")
    cpu_only = R("2", "2G")
    assert not gpu.less_equal(cpu_only, Missing.ZERO)
    assert gpu.less_equal(cpu_only, Missing.INFINITY)
    # A capability that names no GPUs does not limit GPUs.
    assert R("4", "4G", gpu="8").min_dimension(cpu_only, Missing.INFINITY).get("nvidia.com/gpu") == 8000
    assert R("4", "4G", gpu="8").min_dimension(cpu_only, Missing.ZERO).get("nvidia.com/gpu") == 0


def _enqueue_case() -> dict[str, QueueDemand]:
    # Volcano TestEnqueueAndAllocable: two nodes of 2 cpu / 2G; q1 runs pod1 (1c2G), q2 runs pod2 (2c1G).
    return {
        "q1": QueueDemand(
            "q1", weight=1, capability=R("2", "2G"), allocated=R("1", "2G"), request=R("1", "2G")
        ),
        "q2": QueueDemand(
            "q2", weight=1, capability=R("3", "3G"), allocated=R("2", "1G"), request=R("2", "1G")
        ),
    }


def _shares(demands: dict[str, QueueDemand], pending: dict[str, Res]) -> dict:
    for q, r in pending.items():
        demands[q].request.add(r)
    return compute_shares(R("4", "4G"), demands.values())


def test_case0_memory_beyond_deserved_but_a_cpu_only_job_is_enqueued_and_allocated() -> None:
    shares = _shares(_enqueue_case(), {"q1": R("1", "0G")})
    q1 = shares["q1"]
    assert (q1.deserved.cpu, q1.deserved.memory) == (2000, 2 * G)
    assert enqueueable(q1, R("1", "0G")) == (True, "")
    assert allocatable(q1, R("1", "0G"))[0]


def test_case1_cpu_beyond_deserved_but_a_memory_only_job_is_enqueued_and_allocated() -> None:
    shares = _shares(_enqueue_case(), {"q2": R("0", "1G")})
    assert enqueueable(shares["q2"], R("0", "1G")) == (True, "")
    assert allocatable(shares["q2"], R("0", "1G"))[0]


def test_case2_and_3_beyond_capability_is_not_enqueued_and_beyond_deserved_not_allocated() -> None:
    shares = _shares(_enqueue_case(), {"q1": R("1", "1G")})
    ok, why = enqueueable(shares["q1"], R("1", "1G"))
    assert not ok and why == "queue resource quota insufficient: insufficient memory"
    ok, short = allocatable(shares["q1"], R("1", "1G"))
    assert not ok and short == ["memory"]


def test_case4_a_closed_queue_admits_nothing() -> None:
    q3 = QueueDemand("q3", capability=R("3", "3G"), state="Closed", request=R("1", "1G"))
    share = compute_shares(R("4", "4G"), [q3])["q3"]
    assert enqueueable(share, R("1", "1G")) == (False, "queue q3 is Closed, not Open")
    assert not allocatable(share, R("1", "1G"))[0]


def test_equal_weights_split_the_cluster_in_half_when_both_want_more() -> None:
    shares = compute_shares(
        R("16", "64G", gpu="16"),
        [
            QueueDemand("team-a", request=R("16", "64G", gpu="16")),
            QueueDemand("team-b", request=R("16", "64G", gpu="16")),
        ],
    )
    for q in ("team-a", "team-b"):
        assert shares[q].deserved.get("nvidia.com/gpu") == pytest.approx(8000)
        assert shares[q].deserved.cpu == pytest.approx(8000)


def test_what_a_modest_queue_does_not_need_goes_to_the_hungry_one() -> None:
    # 1:1 weights, but team-b asks for only 2 of the 16 GPUs: team-a deserves the other 14.
    shares = compute_shares(
        R("16", "64G", gpu="16"),
        [
            QueueDemand("team-a", request=R("16", "64G", gpu="16")),
            QueueDemand("team-b", request=R("2", "8G", gpu="2")),
        ],
    )
    assert shares["team-b"].deserved.get("nvidia.com/gpu") == pytest.approx(2000)
    assert shares["team-a"].deserved.get("nvidia.com/gpu") == pytest.approx(14000, rel=1e-6)


def test_weights_divide_in_proportion() -> None:
    shares = compute_shares(
        R("12", "12G"),
        [
            QueueDemand("big", weight=2, request=R("12", "12G")),
            QueueDemand("small", weight=1, request=R("12", "12G")),
        ],
    )
    assert shares["big"].deserved.cpu == pytest.approx(8000)
    assert shares["small"].deserved.cpu == pytest.approx(4000)


def test_capability_caps_and_guarantee_is_set_aside() -> None:
    shares = compute_shares(
        R("10", "10G"),
        [
            QueueDemand("capped", capability=R("2", "0"), request=R("10", "10G")),
            QueueDemand("guaranteed", guarantee=R("6", "6G"), request=R("10", "10G")),
            QueueDemand("other", request=R("10", "10G")),
        ],
    )
    capped = shares["capped"]
    assert capped.deserved.cpu == pytest.approx(2000)
    # memory capability 0 means unlimited; the real capability is the cluster less others' guarantees.
    assert capped.real_capability.memory == pytest.approx(4 * G)
    assert shares["guaranteed"].deserved.cpu >= 6000 - 0.1
    assert shares["guaranteed"].real_capability.cpu == pytest.approx(10000)


def test_overused_queue_and_order() -> None:
    shares = compute_shares(
        R("8", "8G"),
        [
            QueueDemand("a", allocated=R("6", "6G"), request=R("8", "8G")),
            QueueDemand("b", allocated=R("1", "1G"), request=R("8", "8G")),
            QueueDemand("urgent", priority=10, allocated=R("0", "0"), request=R("1", "1G")),
        ],
    )
    assert overused(shares["a"]) and not overused(shares["b"])
    order = [a.name for a in sorted(shares.values(), key=queue_order_key)]
    assert order == ["urgent", "b", "a"]
