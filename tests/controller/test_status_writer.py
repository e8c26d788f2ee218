"""Status reaches the object on our CRDs (status subresource) and on Volcano's PodGroup CRD
(none), and a NotFound from a missing subresource is never taken for a deleted object."""

from __future__ import annotations

import logging

import pytest

from hyperplace.runtime.api import JOBS, PODGROUPS, ApiError
from hyperplace.runtime.fakeapi import FakeApi
from hyperplace.runtime.status_writer import StatusWriter


def _pg(name: str = "pg") -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"minMember": 1},
    }


async def test_on_volcanos_podgroup_crd_status_goes_through_the_object() -> None:
    api = FakeApi()
    api.no_status_subresource = {"podgroups"}
    api.seed(PODGROUPS, _pg())
    writer = StatusWriter(api)
    assert await writer.has_status_subresource(PODGROUPS) is False
    assert await writer.has_status_subresource(JOBS) is True
    await writer.patch_status(PODGROUPS, "pg", {"status": {"phase": "Running"}}, "ns")
    assert api.peek(PODGROUPS, "ns/pg")["status"]["phase"] == "Running"
    assert ("patch/status", "podgroups", "pg") not in api.calls


async def test_on_our_crd_status_goes_through_the_subresource() -> None:
    api = FakeApi()
    api.seed(PODGROUPS, _pg())
    writer = StatusWriter(api)
    await writer.patch_status(PODGROUPS, "pg", {"status": {"phase": "Inqueue"}}, "ns")
    assert api.peek(PODGROUPS, "ns/pg")["status"]["phase"] == "Inqueue"
    assert ("patch/status", "podgroups", "pg") in api.calls


async def test_a_crd_swapped_to_volcanos_shape_is_noticed_logged_and_the_write_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeApi()
    api.seed(PODGROUPS, _pg())
    writer = StatusWriter(api)
    assert await writer.has_status_subresource(PODGROUPS) is True  # cached: our CRD
    api.no_status_subresource = {"podgroups"}  # Volcano's CRD applied over ours
    with caplog.at_level(logging.WARNING):
        await writer.patch_status(PODGROUPS, "pg", {"status": {"phase": "Running"}}, "ns")
    assert api.peek(PODGROUPS, "ns/pg")["status"]["phase"] == "Running"
    assert "is not served" in caplog.text
    assert await writer.has_status_subresource(PODGROUPS) is False


async def test_a_crd_swapped_back_to_a_status_subresource_is_noticed_too() -> None:
    api = FakeApi()
    api.no_status_subresource = {"podgroups"}
    api.seed(PODGROUPS, _pg())
    writer = StatusWriter(api)
    assert await writer.has_status_subresource(PODGROUPS) is False
    api.no_status_subresource = set()  # now the object ignores status: must use /status
    await writer.patch_status(PODGROUPS, "pg", {"status": {"phase": "Running"}}, "ns")
    assert api.peek(PODGROUPS, "ns/pg")["status"]["phase"] == "Running"
    assert await writer.has_status_subresource(PODGROUPS) is True


@pytest.mark.parametrize("volcano_shape", [False, True])
async def test_a_deleted_object_is_still_reported_as_not_found(volcano_shape: bool) -> None:
    api = FakeApi()
    if volcano_shape:
        api.no_status_subresource = {"podgroups"}
    writer = StatusWriter(api)
    with pytest.raises(ApiError) as err:
        await writer.patch_status(PODGROUPS, "gone", {"status": {"phase": "Running"}}, "ns")
    assert err.value.not_found
