"""The scheduler process writes a gang's ResourceClaims before its pods: each claim the session
allocated gets its allocation and its pods in ``reservedFor`` (kube-scheduler's DynamicResources
PreBind), so the kubelet finds every pod's devices when it starts it; when a write fails, no pod
of the gang is bound and no claim is left allocated to a pod that never ran."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.runtime.api import (
    DEVICE_CLASSES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Obj,
    meta,
)
from hyperplace.runtime.fakeapi import FakeApi
from tests.scheduler_runtime.helpers import (
    NS,
    ClusterApi,
    events_for,
    eventually,
    node_of,
    running,
    seed_gang,
    seed_racks,
)

from .builders import claim, claim_spec, device_class, gpu_slice, template, uses_template

FINALIZER = "resource.kubernetes.io/delete-protection"


class DeviceApi(ClusterApi):
    """The fake API server, also noting, at each bind, whether the pod's claims were allocated
    and reserved for it (what the kubelet needs to start it)."""

    def __init__(self) -> None:
        super().__init__()
        self.unready_at_bind: list[str] = []
        # Each claim status write that landed: (claim, allocated, reserved pods, binds so far).
        self.claim_writes: list[tuple[str, bool, int, int]] = []

    async def patch(
        self,
        res: Any,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        out = await super().patch(res, name, patch, namespace, subresource=subresource)
        if res is RESOURCE_CLAIMS and subresource == "status":
            st = out.get("status") or {}
            self.claim_writes.append(
                (name, bool(st.get("allocation")), len(st.get("reservedFor") or []), len(self.bound))
            )
        return out

    def _bind(self, binding: Mapping[str, Any], namespace: str | None) -> Obj:
        p = self.objects["pods"][f"{namespace or NS}/{meta(binding)['name']}"]
        for s in (p.get("status") or {}).get("resourceClaimStatuses") or []:
            c = self.objects.get("resourceclaims", {}).get(f"{namespace or NS}/{s['resourceClaimName']}")
            status = (c or {}).get("status") or {}
            uids = {r.get("uid") for r in status.get("reservedFor") or []}
            if not status.get("allocation") or meta(p)["uid"] not in uids:
                self.unready_at_bind.append(str(meta(p)["name"]))
        return super()._bind(binding, namespace)


def seed_gpus(api: FakeApi, nodes: list[str], gpus: int = 4) -> None:
    api.seed(DEVICE_CLASSES, device_class())
    for n in nodes:
        api.seed(RESOURCE_SLICES, gpu_slice(n, gpus))


def claims_for(api: FakeApi, keys: list[str], gpus: int) -> list[str]:
    """Each pod of ``keys`` claims ``gpus`` GPUs from one template; the resourceclaim controller
    has made its claim. Returns the claim keys."""
    spec = claim_spec(gpus)
    api.seed(RESOURCE_CLAIM_TEMPLATES, template("gpus", spec))
    out = []
    for k in keys:
        p = api.objects["pods"][k]
        name = uses_template(p, "gpus")
        api.seed(RESOURCE_CLAIMS, claim(name, spec, owner_pod=p))
        out.append(f"{NS}/{name}")
    return out


def rc(api: FakeApi, key: str) -> Obj:
    got = api.peek(RESOURCE_CLAIMS, key)
    assert got is not None, key
    return got


async def test_a_gangs_claims_are_allocated_and_reserved_before_any_of_its_pods_is_bound() -> None:
    api = DeviceApi()
    names = seed_racks(api, racks=2, per_rack=4)
    seed_gpus(api, names)
    keys = seed_gang(api, "g", 4, cpu=1, tier=1)
    claims = claims_for(api, keys, 4)
    async with running(api):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound")
    assert api.unready_at_bind == []
    seen: set[tuple[str, str]] = set()
    for k, ck in zip(keys, claims, strict=True):
        c = rc(api, ck)
        assert FINALIZER in c["metadata"]["finalizers"]
        results = c["status"]["allocation"]["devices"]["results"]
        assert {r["pool"] for r in results} == {node_of(api, k)}
        seen |= {(r["pool"], r["device"]) for r in results}
        assert [r["uid"] for r in c["status"]["reservedFor"]] == [api.objects["pods"][k]["metadata"]["uid"]]
    assert len(seen) == 16  # 4 pods x 4 GPUs, none twice
    assert {node_of(api, k)[:2] for k in keys} == {node_of(api, keys[0])[:2]}  # one rack


async def test_a_claim_write_refused_is_given_back_before_any_pod_is_bound_and_the_gang_tried_again() -> None:
    api = DeviceApi()
    names = seed_racks(api, racks=1, per_rack=2)
    seed_gpus(api, names)
    keys = seed_gang(api, "g", 2, cpu=1, tier=1)
    claims = claims_for(api, keys, 4)
    first, second = (c.split("/", 1)[1] for c in claims)
    # The second claim's status write is refused once (an admission webhook, a conflict storm):
    # the first claim's allocation comes off again, no pod is bound, and the next try places
    # the gang whole.
    api.fail_next("patch/status", 403, "Forbidden", times=1, name=second)
    async with running(api):
        await eventually(lambda: all(node_of(api, k) for k in keys), what="gang bound on the next try")
    text = events_for(api, keys[0].split("/")[1], "FailedScheduling")[0]["message"]
    assert text.startswith('running PreBind plugin "DynamicResources": ')
    mine = [w for w in api.claim_writes if w[0] == first]
    # Allocated and reserved, then given back (no allocation, nobody reserved) before any
    # bind, then allocated again for the bind that followed.
    assert mine[0][1:3] == (True, 1) and mine[0][3] == 0
    assert mine[1][1:] == (False, 0, 0)
    assert mine[-1][1:3] == (True, 1)
    assert api.unready_at_bind == []


async def test_a_pod_whose_bind_fails_gives_its_devices_back_before_it_is_tried_again() -> None:
    api = DeviceApi()
    names = seed_racks(api, racks=1, per_rack=1)
    seed_gpus(api, names)
    keys = seed_gang(api, "solo", 1, cpu=1, tier=1)
    [ck] = claims_for(api, keys, 2)
    api.fail_next("create/binding", 500, "InternalError", times=1)
    async with running(api):
        await eventually(lambda: node_of(api, keys[0]), what="bound on the next try")
    assert "Binding rejected" in events_for(api, keys[0].split("/")[1], "FailedScheduling")[0]["message"]
    mine = [w[1:3] for w in api.claim_writes if w[0] == ck.split("/", 1)[1]]
    assert mine[0] == (True, 1) and (False, 0) in mine  # written, then given back
    assert mine[-1] == (True, 1)  # and written again for the bind that held


async def test_a_pod_waiting_for_its_claim_starts_once_the_controller_made_it() -> None:
    api = DeviceApi()
    names = seed_racks(api, racks=1, per_rack=1)
    seed_gpus(api, names)
    keys = seed_gang(api, "late", 1, cpu=1, tier=1)
    spec = claim_spec(1)
    api.seed(RESOURCE_CLAIM_TEMPLATES, template("gpus", spec))
    p = api.objects["pods"][keys[0]]
    name = uses_template(p, "gpus", made=False)
    async with running(api):
        await eventually(
            lambda: (
                "ResourceClaim not created yet"
                in str(
                    [
                        c.get("message")
                        for c in (api.objects["pods"][keys[0]].get("status") or {}).get("conditions") or []
                    ]
                )
            ),
            what="the wait reported",
        )
        await api.create(RESOURCE_CLAIMS, claim(name, spec, owner_pod=p), NS)
        cur = api.objects["pods"][keys[0]]
        await api.patch(
            PODS,
            meta(cur)["name"],
            {"status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": name}]}},
            NS,
            subresource="status",
        )
        await eventually(lambda: node_of(api, keys[0]), what="pod bound")
    assert api.unready_at_bind == []
