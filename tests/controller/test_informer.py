"""The informer mirrors the server through list + watch and survives 410 Gone by relisting."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from hyperplace.runtime.api import NODES, PODS
from hyperplace.runtime.fakeapi import FakeApi
from hyperplace.runtime.informer import Informer, wait_for_sync


def pod(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {}}


async def eventually(cond: Callable[[], bool], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.002)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def add(self, o: dict[str, Any]) -> None:
        self.events.append(("add", o["metadata"]["name"]))

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def delete(self, o: dict[str, Any]) -> None:
        self.events.append(("delete", o["metadata"]["name"]))


async def running(inf: Informer) -> Callable[[], Awaitable[None]]:
    task = asyncio.create_task(inf.run())
    assert await wait_for_sync([inf], timeout=2)

    async def stop() -> None:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    return stop


async def test_initial_list_fills_the_store_and_sets_synced() -> None:
    api = FakeApi()
    api.seed(PODS, pod("a"))
    api.seed(PODS, pod("b", ns="other"))
    inf = Informer(api, PODS, rng=None)
    rec = Recorder()
    inf.add_handler(rec.add, rec.update, rec.delete)
    stop = await running(inf)
    assert sorted(inf.store) == ["default/a", "other/b"]
    assert sorted(rec.events) == [("add", "a"), ("add", "b")]
    assert api.calls[0] == ("list", "pods", "")
    await stop()


async def test_watch_events_update_store_handlers_and_resource_version() -> None:
    api = FakeApi()
    inf = Informer(api, PODS)
    rec = Recorder()
    inf.add_handler(rec.add, rec.update, rec.delete)
    stop = await running(inf)
    created = await api.create(PODS, pod("a"), "default")
    await api.patch(PODS, "a", {"metadata": {"labels": {"x": "1"}}}, "default")
    await api.delete(PODS, "a", "default")
    await eventually(lambda: len(rec.events) == 3)
    assert rec.events == [("add", "a"), ("update", "a"), ("delete", "a")]
    assert inf.store == {}
    assert int(inf.resource_version) == api.rv > int(created["metadata"]["resourceVersion"])
    await stop()


async def test_bookmarks_advance_the_resource_version_without_events() -> None:
    api = FakeApi()
    await api.create(NODES, {"metadata": {"name": "n0"}})
    inf = Informer(api, NODES)
    stop = await running(inf)
    await api.create(PODS, pod("p"), "default")  # bumps the global RV, not a node event
    api.bookmark()
    await eventually(lambda: inf.resource_version == str(api.rv))
    assert list(inf.store) == ["n0"]
    await stop()


async def test_watch_timeout_resumes_from_last_resource_version_without_relist() -> None:
    api = FakeApi()
    inf = Informer(api, PODS, watch_timeout=(1, 1))
    stop = await running(inf)
    await api.create(PODS, pod("a"), "default")
    await eventually(lambda: "default/a" in inf.store)
    api.disconnect_watchers()
    await eventually(lambda: sum(c[0] == "watch" for c in api.calls) >= 2)
    assert [c for c in api.calls if c[0] == "list"] == [("list", "pods", "")]
    assert api.calls[-1] == ("watch", "pods", str(api.rv))
    await api.create(PODS, pod("b"), "default")
    await eventually(lambda: "default/b" in inf.store)
    assert inf.relists == 0
    await stop()


async def test_410_gone_relists_replaces_store_and_synthesises_missed_deletes() -> None:
    api = FakeApi()
    for name in ("keep", "change", "vanish"):
        api.seed(PODS, pod(name))
    inf = Informer(api, PODS)
    rec = Recorder()
    inf.add_handler(rec.add, rec.update, rec.delete)
    stop = await running(inf)
    rec.events.clear()

    # While the informer is disconnected the world changes and history is compacted.
    api.disconnect_watchers()
    await asyncio.sleep(0)
    api.objects["pods"].pop("default/vanish")
    api.rv += 1
    api.objects["pods"]["default/change"]["metadata"]["resourceVersion"] = str(api.rv)
    api.objects["pods"]["default/change"]["metadata"]["labels"] = {"v": "2"}
    api.seed(PODS, pod("new"))
    api.compact()

    await eventually(lambda: inf.relists == 1)
    assert sorted(inf.store) == ["default/change", "default/keep", "default/new"]
    assert inf.store["default/change"]["metadata"]["labels"] == {"v": "2"}
    assert sorted(rec.events) == [("add", "new"), ("delete", "vanish"), ("update", "change")]
    # The relist is a consistent read (resourceVersion ""), and watching resumes from it.
    await eventually(lambda: api.calls[-1][0] == "watch")
    assert api.calls[-1] == ("watch", "pods", str(api.rv))
    await api.create(PODS, pod("after"), "default")
    await eventually(lambda: "default/after" in inf.store)
    await stop()


async def test_410_raised_as_an_exception_also_relists() -> None:
    api = FakeApi()
    inf = Informer(api, PODS, backoff=(0.001, 0.001))
    stop = await running(inf)
    api.fail_next("watch", 410, "Expired")
    api.disconnect_watchers()
    await eventually(lambda: inf.relists == 1)
    await stop()


async def test_list_failures_back_off_and_retry_until_synced() -> None:
    api = FakeApi()
    api.seed(PODS, pod("a"))
    api.fail_next("list", 500, "InternalError", times=2)
    inf = Informer(api, PODS, backoff=(0.001, 0.002))
    task = asyncio.create_task(inf.run())
    assert await wait_for_sync([inf], timeout=2)
    assert [c[0] for c in api.calls].count("list") == 3
    assert list(inf.store) == ["default/a"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_wait_for_sync_times_out_when_an_informer_never_lists() -> None:
    api = FakeApi()
    inf = Informer(api, PODS)
    assert not await wait_for_sync([inf], timeout=0.01)


async def test_secondary_index_tracks_adds_moves_and_deletes() -> None:
    api = FakeApi()
    inf = Informer(api, PODS)
    inf.add_index(
        "job", lambda o: [o["metadata"]["labels"]["job"]] if "job" in o["metadata"].get("labels", {}) else []
    )
    stop = await running(inf)
    await api.create(PODS, pod("a", job="j1"), "default")
    await api.create(PODS, pod("b", job="j1"), "default")
    await eventually(lambda: len(inf.by_index("job", "j1")) == 2)
    await api.patch(PODS, "b", {"metadata": {"labels": {"job": "j2"}}}, "default")
    await eventually(lambda: len(inf.by_index("job", "j2")) == 1)
    assert [o["metadata"]["name"] for o in inf.by_index("job", "j1")] == ["a"]
    await api.delete(PODS, "a", "default")
    await eventually(lambda: inf.by_index("job", "j1") == [])
    await stop()


async def test_a_failing_handler_does_not_stop_the_informer() -> None:
    api = FakeApi()
    inf = Informer(api, PODS)

    def boom(_: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    inf.add_handler(on_add=boom)
    stop = await running(inf)
    await api.create(PODS, pod("a"), "default")
    await api.create(PODS, pod("b"), "default")
    await eventually(lambda: len(inf.store) == 2)
    await stop()
