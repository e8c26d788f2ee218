"""Lease-based leader election: one leader, take-over only after expiry on the
candidate's own clock, conflicts lose the round, release on shutdown."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hyperplace.runtime.api import LEASES, ApiError
from hyperplace.runtime.fakeapi import FakeApi
from hyperplace.runtime.leader import LeaderElector


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def elector(api: FakeApi, who: str, clock: Clock | None = None, **kw: Any) -> LeaderElector:
    return LeaderElector(api, "kube-system", "hyperplace-controller", who, clock=clock or Clock(), **kw)


def lease(api: FakeApi) -> dict[str, Any]:
    obj = api.peek(LEASES, "kube-system/hyperplace-controller")
    assert obj is not None
    return obj


async def test_first_candidate_creates_the_lease_and_leads() -> None:
    api = FakeApi()
    a = elector(api, "a")
    assert await a.try_acquire_or_renew()
    spec = lease(api)["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("a", 15, 0)
    assert spec["renewTime"].endswith("Z") and "." in spec["renewTime"]


async def test_second_candidate_waits_for_expiry_measured_on_its_own_clock() -> None:
    api = FakeApi()
    a_clock, b_clock = Clock(), Clock()
    a, b = elector(api, "a", a_clock), elector(api, "b", b_clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b starts observing now
    b_clock.t += 14.9
    assert not await b.try_acquire_or_renew()
    # The leader renews: the record changes, so b's expiry window restarts.
    assert await a.try_acquire_or_renew()
    b_clock.t += 10
    assert not await b.try_acquire_or_renew()
    b_clock.t += 15.1  # a stopped renewing 15.1 s ago by b's clock
    assert await b.try_acquire_or_renew()
    spec = lease(api)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    # a's next attempt sees b's fresh lease and does not steal it back.
    assert not await a.try_acquire_or_renew()


async def test_wall_clock_renew_time_is_never_trusted() -> None:
    api = FakeApi()
    a = elector(api, "a")
    assert await a.try_acquire_or_renew()
    obj = lease(api)
    obj["spec"]["renewTime"] = "2000-01-01T00:00:00.000000Z"  # looks ancient to a wall clock
    b = elector(api, "b")
    assert not await b.try_acquire_or_renew()


async def test_a_stale_write_conflicts_and_loses_the_round() -> None:
    api = FakeApi()
    a, b = elector(api, "a"), elector(api, "b")
    assert await a.try_acquire_or_renew()
    api.objects["leases"]["kube-system/hyperplace-controller"]["spec"]["holderIdentity"] = ""
    real_get = api.get

    async def get_then_race(*args: Any, **kw: Any) -> dict[str, Any]:
        seen = await real_get(*args, **kw)
        await api.patch(LEASES, "hyperplace-controller", {"spec": {"holderIdentity": "c"}}, "kube-system")
        return seen

    api.get = get_then_race  # type: ignore[method-assign]
    assert not await b.try_acquire_or_renew()
    assert ("replace", "leases", "hyperplace-controller") in api.calls
    assert lease(api)["spec"]["holderIdentity"] == "c"


async def test_durations_are_validated_like_client_go() -> None:
    api = FakeApi()
    with pytest.raises(ValueError, match="lease_duration"):
        elector(api, "a", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="retry_period"):
        elector(api, "a", lease_duration=15, renew_deadline=2, retry_period=2)
    with pytest.raises(ValueError, match="identity"):
        elector(api, "")


async def test_run_leads_then_releases_on_cancel_so_a_successor_takes_over_at_once() -> None:
    api = FakeApi()
    a = elector(api, "a", lease_duration=3, renew_deadline=2, retry_period=0.05)
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(a.run(lead))
    await asyncio.wait_for(leading.wait(), 2)
    assert a.is_leader and a.healthy()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    spec = lease(api)["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    assert not a.is_leader
    b = elector(api, "b")
    assert await b.try_acquire_or_renew()


async def test_leader_that_cannot_renew_before_the_deadline_stops_leading() -> None:
    api = FakeApi()
    a = LeaderElector(
        api,
        "kube-system",
        "hyperplace-controller",
        "a",
        lease_duration=1.0,
        renew_deadline=0.3,
        retry_period=0.05,
        clock=asyncio.get_running_loop().time,  # real time: the renew loop sleeps for real
    )
    cancelled = asyncio.Event()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.create_task(a.run(lead))
    await asyncio.sleep(0.1)
    assert a.is_leader
    api.fail_next("get", 500, "InternalError", times=1000)
    await asyncio.wait_for(task, 3)  # run() returns: leadership lost
    assert cancelled.is_set() and not a.is_leader


async def test_unhealthy_when_the_leader_has_not_renewed_for_too_long() -> None:
    api = FakeApi()
    clock = Clock()
    a = elector(api, "a", clock)
    assert await a.try_acquire_or_renew()
    a.is_leader = True
    clock.t += 30
    assert a.healthy()
    clock.t += 10
    assert not a.healthy()


async def test_api_errors_other_than_conflict_propagate_from_one_round() -> None:
    api = FakeApi()
    api.fail_next("get", 403, "Forbidden")
    with pytest.raises(ApiError):
        await elector(api, "a").try_acquire_or_renew()
