"""The storage objects are kept from watch events like the rest of the cluster state: an event
changes the next snapshot, a relist of the same objects changes nothing, and the incremental
view always equals a from-scratch build."""

from __future__ import annotations

from scheduler_plugin.cache.cluster_state import ClusterState
from scheduler_plugin.cache.storage import StorageListing, StorageState
from scheduler_plugin.filters.volumes import PodUse, parse_claim, parse_volume
from tests.scheduler.builders import node, pod

from .builders import claim, mounts, storage_class, volume


def test_a_claim_bound_by_the_controller_shows_in_the_next_snapshot_only() -> None:
    state = ClusterState(("volcano",))
    state.replace_all([node("n0")], [], storage=StorageListing(classes=[storage_class("local")]))
    state.storage.claims.set(claim("data"))
    first = state.snapshot()
    assert first.storage.claims["default/data"].fully_bound is False
    assert state.snapshot() is first  # nothing changed: the same view

    state.storage.claims.set(claim("data", volume="v", bound=True))
    second = state.snapshot()
    assert second is not first
    assert second.storage.claims["default/data"].fully_bound
    assert first.storage.claims["default/data"].fully_bound is False  # an old view never changes
    assert second.storage.classes is first.storage.classes  # kinds that did not change are shared


def test_a_relist_of_the_same_objects_changes_nothing() -> None:
    state = StorageState()
    objs = [claim("a"), claim("b")]
    state.replace(StorageListing(claims=objs))
    view = state.view()
    state.replace(StorageListing(claims=objs))
    assert state.view() is view
    state.replace(StorageListing(claims=objs[:1]))  # b deleted while the watch was down
    assert set(state.view().claims) == {"default/a"}


def test_bound_pods_count_as_users_of_their_claims_until_they_end() -> None:
    state = ClusterState(("volcano",))
    running = pod("holder", None, node_name="n0", extra_spec=mounts("data"))
    state.replace_all([node("n0")], [running])
    assert state.snapshot().storage.pod_uses == {"default/holder": PodUse("n0", (("default/data", False),))}
    assert state.snapshot().storage.users == {"default/data": 1}
    state.set_pod({**running, "status": {"phase": "Succeeded"}})
    assert state.snapshot().storage.pod_uses == {}


def test_a_view_keeps_the_claims_in_use_it_was_made_with_while_pods_come_and_go() -> None:
    # The cycle reads a view while the watch goes on changing the state: what a view holds
    # never changes under it, though a node's uses are shared between views until they change.
    state = StorageState()
    a = pod("a", None, node_name="n0", extra_spec=mounts("data"))
    b = pod("b", None, node_name="n0", extra_spec=mounts("data"))
    state.set_pod("default/a", a)
    first = state.view()
    state.set_pod("default/b", b)
    second = state.view()
    state.set_pod("default/a", None)
    third = state.view()
    assert set(first.pod_uses) == {"default/a"} and first.users == {"default/data": 1}
    assert set(second.pod_uses) == {"default/a", "default/b"} and second.users == {"default/data": 2}
    assert set(third.pod_uses) == {"default/b"} and third.users == {"default/data": 1}
    state.set_pod("default/b", None)
    assert state.view().uses_by_node == {} and state.view().users == {}
    assert set(third.pod_uses) == {"default/b"}


def test_objects_that_cannot_be_read_name_the_field() -> None:
    bad = claim("data")
    bad["spec"]["accessModes"] = "ReadWriteOnce"
    assert (
        parse_claim(bad).bad
        == "persistentvolumeclaim default/data: spec.accessModes: must be a list of strings, got 'ReadWriteOnce'"
    )
    pv = volume("v")
    pv["spec"]["capacity"]["storage"] = "ten"
    assert (parse_volume(pv).bad or "").startswith(
        "persistentvolume v: spec.capacity.storage: quantities must match"
    )
