"""The CA bundle reaches our webhook configurations, and only when it has to."""

from __future__ import annotations

import base64
import copy

import pytest

from hyperplace.pki.cabundle import bundle_patch, inject_ca_bundle, inject_into_cluster
from hyperplace.pki.certificates import generate_ca

CA = generate_ca().cert_pem
OTHER = generate_ca().cert_pem


def config(kind="ValidatingWebhookConfiguration", bundles=(None, None)):
    hooks = []
    for i, b in enumerate(bundles):
        client = {
            "service": {"name": "hyperplace-webhooks", "namespace": "hyperplace-system", "path": f"/p{i}"}
        }
        if b is not None:
            client["caBundle"] = b
        hooks.append({"name": f"h{i}.hyperplace.io", "clientConfig": client})
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "hyperplace-validating-webhooks", "resourceVersion": "41"},
        "webhooks": hooks,
    }


def test_missing_bundles_are_filled_in_without_touching_the_input():
    original = config()
    before = copy.deepcopy(original)
    changed, new = inject_ca_bundle(original, CA)
    assert changed
    assert original == before
    assert [base64.b64decode(h["clientConfig"]["caBundle"]) for h in new["webhooks"]] == [CA, CA]
    assert new["webhooks"][0]["clientConfig"]["service"] == original["webhooks"][0]["clientConfig"]["service"]


def test_current_bundle_is_left_alone():
    cfg = config(bundles=(base64.b64encode(CA).decode(),) * 2)
    changed, new = inject_ca_bundle(cfg, CA)
    assert not changed and new == cfg


def test_bundle_with_other_line_breaks_counts_as_current():
    wrapped = base64.encodebytes(CA).decode()  # 76-column lines
    changed, _ = inject_ca_bundle(config(bundles=(wrapped,)), CA)
    assert not changed


def test_one_stale_webhook_is_enough_to_patch():
    cfg = config(bundles=(base64.b64encode(CA).decode(), base64.b64encode(OTHER).decode()))
    changed, new = inject_ca_bundle(cfg, CA)
    assert changed
    assert {h["clientConfig"]["caBundle"] for h in new["webhooks"]} == {base64.b64encode(CA).decode()}


def test_patch_guards_the_resource_version_and_sets_each_bundle():
    _, new = inject_ca_bundle(config(), CA)
    want = base64.b64encode(CA).decode()
    assert bundle_patch(new) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": want},
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": want},
    ]


class FakeAdmissionApi:
    """The four AdmissionregistrationV1Api calls the adapter uses, over dicts."""

    def __init__(self, objects, appear_after=0):
        self.objects = objects
        self.patches = []
        self.reads = 0
        self.appear_after = appear_after

    async def _read(self, kind, name):
        self.reads += 1
        if self.reads <= self.appear_after or (kind, name) not in self.objects:
            err = Exception("not found")
            err.status = 404
            raise err
        return copy.deepcopy(self.objects[(kind, name)])

    async def read_validating_webhook_configuration(self, name):
        return await self._read("validating", name)

    async def read_mutating_webhook_configuration(self, name):
        return await self._read("mutating", name)

    async def patch_validating_webhook_configuration(self, name, body):
        self.patches.append(("validating", name, body))

    async def patch_mutating_webhook_configuration(self, name, body):
        self.patches.append(("mutating", name, body))


async def test_adapter_patches_only_the_stale_configuration():
    api = FakeAdmissionApi(
        {
            ("validating", "v"): config(),
            ("mutating", "m"): config("MutatingWebhookConfiguration", (base64.b64encode(CA).decode(),)),
        }
    )
    patched = await inject_into_cluster(api, [("validating", "v"), ("mutating", "m")], CA)
    assert patched == ["v"]
    assert [(k, n) for k, n, _ in api.patches] == [("validating", "v")]


async def test_adapter_waits_for_a_configuration_applied_later():
    api = FakeAdmissionApi({("validating", "v"): config()}, appear_after=2)
    assert await inject_into_cluster(api, [("validating", "v")], CA, poll_seconds=0.01) == ["v"]
    assert api.reads == 3


async def test_adapter_gives_up_on_a_configuration_that_never_appears():
    api = FakeAdmissionApi({})
    with pytest.raises(TimeoutError, match="validating webhook configuration v not found"):
        await inject_into_cluster(api, [("validating", "v")], CA, wait_seconds=0.05, poll_seconds=0.01)
