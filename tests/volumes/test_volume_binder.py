"""The scheduler process binds a gang's claims before its pods: the PersistentVolumes or nodes
the session chose are written (kube-scheduler's VolumeBinding PreBind), the PersistentVolume
controller binds the claims, and only then are the pods bound; when the claims cannot be bound
the writes are given back and no pod of the gang is bound."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from hyperplace.runtime.api import (
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    STORAGE_CLASSES,
    ApiError,
    Obj,
    clone,
    meta,
)
from hyperplace.runtime.fakeapi import FakeApi
from simulator.controllers.persistent_volumes import bind_step
from tests.scheduler.builders import pod as make_pod
from tests.scheduler_runtime.helpers import (
    NS,
    ClusterApi,
    condition,
    events_for,
    eventually,
    node_of,
    pod,
    running,
    seed_gang,
    seed_racks,
)

from .builders import claim, mounts, storage_class, volume


class VolumeApi(ClusterApi):
    """The fake API server, also noting, at each bind, whether the pod's claims were all bound."""

    def __init__(self) -> None:
        super().__init__()
        self.unbound_at_bind: list[str] = []

    def _bind(self, binding: Mapping[str, Any], namespace: str | None) -> Obj:
        p = self.peek_pod(str(meta(binding).get("name")), namespace or NS)
        for v in (p.get("spec") or {}).get("volumes") or []:
            name = (v.get("persistentVolumeClaim") or {}).get("claimName")
            c = self.objects.get("persistentvolumeclaims", {}).get(f"{namespace or NS}/{name}")
            if name and (
                c is None or "pv.kubernetes.io/bind-completed" not in (meta(c).get("annotations") or {})
            ):
                self.unbound_at_bind.append(f"{meta(p)['name']}:{name}")
        return super()._bind(binding, namespace)

    def peek_pod(self, name: str, ns: str) -> Obj:
        return self.objects["pods"][f"{ns}/{name}"]


async def pv_controller_loop(api: FakeApi, period: float = 0.02) -> None:
    """kube-controller-manager's PersistentVolume controller, as the simulator models it,
    writing through the API (spec and metadata, then status)."""
    while True:
        claims = [clone(o) for o in api.objects.get("persistentvolumeclaims", {}).values()]
        vols = [clone(o) for o in api.objects.get("persistentvolumes", {}).values()]
        classes = {str(meta(o)["name"]): o for o in api.objects.get("storageclasses", {}).values()}
        labels = {
            str(meta(o)["name"]): meta(o).get("labels") or {} for o in api.objects.get("nodes", {}).values()
        }
        ch = bind_step(claims, vols, classes, labels.get)
        try:
            for pv in ch.created:
                await api.create(PERSISTENT_VOLUMES, pv)
            created = {str(meta(pv)["name"]) for pv in ch.created}
            for name, pv in ch.volumes.items():
                if name not in created:
                    await api.replace(PERSISTENT_VOLUMES, pv)
                await api.patch(PERSISTENT_VOLUMES, name, {"status": pv["status"]}, subresource="status")
            for key, c in ch.claims.items():
                ns = key.split("/", 1)[0]
                await api.replace(PERSISTENT_VOLUME_CLAIMS, c, ns)
                await api.patch(
                    PERSISTENT_VOLUME_CLAIMS,
                    key.split("/", 1)[1],
                    {"status": c["status"]},
                    ns,
                    subresource="status",
                )
        except ApiError:
            pass  # a write raced another: next pass
        await asyncio.sleep(period)


@contextlib.asynccontextmanager
async def pv_controller(api: FakeApi) -> AsyncIterator[None]:
    task = asyncio.create_task(pv_controller_loop(api))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def seed(api: FakeApi, *objs: dict[str, Any]) -> None:
    res = {
        "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIMS,
        "PersistentVolume": PERSISTENT_VOLUMES,
        "StorageClass": STORAGE_CLASSES,
    }
    for o in objs:
        api.seed(res[o["kind"]], o)


def with_claims(api: FakeApi, keys: list[str], claim_of: Any) -> None:
    """Give each pod of ``keys`` its claim (``claim_of(i)``), as a StatefulSet would."""
    for i, k in enumerate(keys):
        p = api.objects["pods"][k]
        p["spec"].update(mounts(claim_of(i)))


def pvc(api: FakeApi, name: str) -> Obj:
    got = api.peek(PERSISTENT_VOLUME_CLAIMS, f"{NS}/{name}")
    assert got is not None, name
    return got


def pv(api: FakeApi, name: str) -> Obj:
    got = api.peek(PERSISTENT_VOLUMES, name)
    assert got is not None, name
    return got


def local_volumes(api: FakeApi, nodes: list[str], size: str = "10Gi") -> None:
    for n in nodes:
        seed(api, volume(f"local-{n}", size=size, on={"kubernetes.io/hostname": [n]}))


async def test_a_gangs_wait_for_first_consumer_claims_are_bound_before_any_of_its_pods() -> None:
    api = VolumeApi()
    names = seed_racks(api, racks=2, per_rack=2)
    keys = seed_gang(api, "g", 4, cpu=2, tier=2)
    with_claims(api, keys, lambda i: f"data-{i}")
    seed(api, storage_class("local"), *(claim(f"data-{i}", uid=f"uid-data-{i}") for i in range(4)))
    local_volumes(api, names)
    async with pv_controller(api), running(api):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
    assert api.unbound_at_bind == []  # every pod found its claims bound when it was bound
    for i, k in enumerate(keys):
        c = pvc(api, f"data-{i}")
        assert c["status"]["phase"] == "Bound"
        vol = pv(api, c["spec"]["volumeName"])
        # The volume PreBind chose is on the node the pod went to, and claimRef'd by PreBind.
        assert vol["metadata"]["name"] == f"local-{node_of(api, k)}"
        assert vol["spec"]["claimRef"]["uid"] == c["metadata"]["uid"]
        assert vol["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    writes = [c for c in api.calls if c[0] == "replace" and c[1] == "persistentvolumes"]
    assert writes, "PreBind wrote the claimRefs"


async def test_a_claim_to_provision_is_annotated_with_the_chosen_node_and_provisioned_there() -> None:
    api = VolumeApi()
    seed_racks(api, racks=1, per_rack=2)
    seed(api, storage_class("lvm", provisioner="lvm.csi.example.com"), claim("scratch", cls="lvm"))
    api.seed(PODS, make_pod("solo", None, cpu=1, scheduler="volcano", extra_spec=mounts("scratch")))
    async with pv_controller(api), running(api):
        await eventually(lambda: node_of(api, f"{NS}/solo"), what="pod bound")
    c = pvc(api, "scratch")
    assert c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node_of(api, f"{NS}/solo")
    made = pv(api, c["spec"]["volumeName"])
    term = made["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["values"] == [node_of(api, f"{NS}/solo")]
    assert api.unbound_at_bind == []


async def test_a_claim_deleted_while_its_gang_waits_leaves_no_pod_bound_and_no_volume_held() -> None:
    api = VolumeApi()
    names = seed_racks(api, racks=1, per_rack=2)
    keys = seed_gang(api, "g", 2, cpu=2, tier=1)
    with_claims(api, keys, lambda i: f"data-{i}")
    seed(api, storage_class("local"), *(claim(f"data-{i}", uid=f"uid-data-{i}") for i in range(2)))
    local_volumes(api, names)
    # No PersistentVolume controller: the claims stay unbound, so PreBind waits.
    async with running(api) as (sched, _):
        await eventually(
            lambda: all(pv(api, f"local-{n}")["spec"].get("claimRef") for n in names),
            what="claimRefs written",
        )
        assert not any(node_of(api, k) for k in keys)
        await api.delete(PERSISTENT_VOLUME_CLAIMS, "data-1", NS)
        await eventually(
            lambda: not any(pv(api, f"local-{n}")["spec"].get("claimRef") for n in names),
            what="claims given back",
        )
        await eventually(lambda: events_for(api, keys[0].split("/")[1], "FailedScheduling"), what="event")
        # The gang waits now for its missing claim, in kube-scheduler's words.
        await eventually(
            lambda: (
                'persistentvolumeclaim "data-1" not found'
                in ((condition(pod(api, keys[1]), "PodScheduled") or {}).get("message") or "")
            ),
            what="the missing claim reported",
        )
        assert len(sched.prebind.assumed) == 0
    assert not any(node_of(api, k) for k in keys)
    assert [c for c in api.calls if c[0] == "create/binding"] == []
    text = events_for(api, keys[0].split("/")[1], "FailedScheduling")[0]["message"]
    assert text.startswith('running PreBind plugin "VolumeBinding": binding volumes:')


async def test_claims_not_bound_in_time_are_given_back_and_no_pod_is_bound() -> None:
    api = VolumeApi()
    names = seed_racks(api, racks=1, per_rack=2)
    keys = seed_gang(api, "g", 2, cpu=2, tier=1)
    with_claims(api, keys, lambda i: f"data-{i}")
    seed(api, storage_class("local"), *(claim(f"data-{i}") for i in range(2)))
    local_volumes(api, names)
    async with running(api, volume_bind_timeout=0.3, bind_backoff=(30.0, 30.0)):
        await eventually(
            lambda: events_for(api, keys[0].split("/")[1], "FailedScheduling"), what="PreBind gave up"
        )
        await eventually(
            lambda: not any(pv(api, f"local-{n}")["spec"].get("claimRef") for n in names), what="given back"
        )
    assert (
        "context deadline exceeded"
        in events_for(api, keys[0].split("/")[1], "FailedScheduling")[0]["message"]
    )
    assert not any(node_of(api, k) for k in keys)


async def test_a_pod_waiting_for_a_missing_claim_starts_once_it_exists() -> None:
    api = VolumeApi()
    names = seed_racks(api, racks=1, per_rack=2)
    keys = seed_gang(api, "g", 1, cpu=1, tier=1)
    with_claims(api, keys, lambda i: "later")
    seed(api, storage_class("local"))
    local_volumes(api, names)
    async with pv_controller(api), running(api):
        await eventually(
            lambda: (
                'persistentvolumeclaim "later" not found'
                in ((condition(pod(api, keys[0]), "PodScheduled") or {}).get("message") or "")
            ),
            what="the missing claim reported",
        )
        await api.create(PERSISTENT_VOLUME_CLAIMS, claim("later"), NS)
        await eventually(lambda: node_of(api, keys[0]), what="pod bound")


async def test_an_unbound_immediate_claim_keeps_the_pod_waiting_saying_so() -> None:
    api = VolumeApi()
    seed_racks(api, racks=1, per_rack=2)
    keys = seed_gang(api, "g", 1, cpu=1, tier=1)
    with_claims(api, keys, lambda i: "fast")
    seed(
        api,
        storage_class("remote", mode="Immediate", provisioner="nfs.example.com"),
        claim("fast", cls="remote"),
    )
    async with running(api):
        await eventually(
            lambda: (
                "pod has unbound immediate PersistentVolumeClaims"
                in ((condition(pod(api, keys[0]), "PodScheduled") or {}).get("message") or "")
            ),
            what="reported",
        )
    assert node_of(api, keys[0]) is None


async def test_a_volume_taken_by_another_claim_since_the_session_is_never_overwritten() -> None:
    from scheduler_plugin.filters.volume_binding import Decision
    from scheduler_plugin.runtime.volume_binder import PreBind, PreBindError

    api = VolumeApi()
    seed(api, claim("mine"), claim("theirs"))
    seed(api, volume("disk", claim_ref=("default", "theirs")))
    sched_pod = make_pod("p", None, extra_spec=mounts("mine"))
    async with running(api) as (sched, _):
        await eventually(
            lambda: sched.pvs.get("disk") is not None and sched.pvcs.get("default/mine"), what="synced"
        )
        prebind: PreBind = sched.prebind
        try:
            prebind.plan([sched_pod], {"default/mine": Decision("default/mine", volume="disk")})
        except PreBindError as exc:
            assert "is bound to another claim" in str(exc)
        else:
            raise AssertionError("the plan took a volume bound to another claim")
    assert pv(api, "disk")["spec"]["claimRef"]["name"] == "theirs"
