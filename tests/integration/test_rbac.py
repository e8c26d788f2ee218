"""The shipped RBAC, as a real apiserver's authorizer reads it (``kubectl auth can-i --as``).

The exact grants are derived from the code in tests/rbac; here the same manifests are applied to
a real kube-apiserver and the permissions the issue found too broad are asked for as each
ServiceAccount: they must be refused, and what each component needs must be allowed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.manifests.test_manifests import MUST, MUST_NOT, NS

from .conftest import Cluster
from .kube import REPO

pytestmark = pytest.mark.apiserver


@pytest.fixture(scope="module")
def rbac(cluster: Cluster) -> Iterator[Cluster]:
    cluster.kubectl.run("apply", "-f", str(REPO / "manifests" / "namespace.yaml"))
    for component in ("webhooks", "controller", "scheduler"):
        cluster.kubectl.run("apply", "-f", str(REPO / "manifests" / component / "rbac.yaml"))
    hooks = [str(REPO / "manifests" / "webhooks" / name) for name in ("validating.yaml", "mutating.yaml")]
    for path in hooks:
        cluster.kubectl.run("apply", "-f", path)
    yield cluster
    # The shipped configurations call a webhook Service this cluster does not run: left in
    # place, they would refuse every HyperNode and Job the later tests create.
    for path in hooks:
        cluster.kubectl.run("delete", "-f", path, "--ignore-not-found")


def can_i(cluster: Cluster, perm: tuple[str, str, str, str, str | None, str | None]) -> bool:
    sa, verb, group, resource, namespace, name = perm
    res, _, sub = resource.partition("/")
    target = f"{res}.{group}" if group else res
    args = ["auth", "can-i", verb, f"{target}/{name}" if name else target]
    if sub:
        args.append(f"--subresource={sub}")
    args += ["-n", namespace] if namespace else ["--all-namespaces"]
    args.append(f"--as=system:serviceaccount:{NS}:{sa}")
    proc = cluster.kubectl.run(*args, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode == 0


@pytest.mark.parametrize("perm", MUST, ids=lambda p: f"{p[0]}-{p[1]}-{p[3]}")
def test_each_component_may_do_what_it_does(
    rbac: Cluster, perm: tuple[str, str, str, str, str | None, str | None]
) -> None:
    assert can_i(rbac, perm), perm


@pytest.mark.parametrize("perm", MUST_NOT, ids=lambda p: f"{p[0]}-{p[1]}-{p[3]}-{p[4]}-{p[5]}")
def test_and_nothing_the_issue_found_too_broad(
    rbac: Cluster, perm: tuple[str, str, str, str, str | None, str | None]
) -> None:
    assert not can_i(rbac, perm), perm


def test_the_webhook_account_can_touch_only_its_own_configurations(rbac: Cluster) -> None:
    """RBAC cannot limit fields: the webhooks' own configurations stay patchable (the documented
    remaining risk), but no other configuration can be created, patched or deleted."""
    as_webhooks = f"--as=system:serviceaccount:{NS}:hyperplace-webhooks"
    hostile = json.dumps({"webhooks": [{"name": "x", "clientConfig": {"url": "https://evil.example/"}}]})
    rbac.kubectl.apply(
        [
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "someone-elses"},
                "webhooks": [],
            }
        ]
    )
    other = rbac.kubectl.run(
        "patch", "validatingwebhookconfiguration", "someone-elses", "--type=merge", "-p", hostile,
        "--dry-run=server", as_webhooks, check=False,
    )  # fmt: skip
    assert other.returncode != 0 and "forbidden" in other.stderr.lower(), other.stderr
    delete = rbac.kubectl.run(
        "delete", "validatingwebhookconfiguration", "hyperplace-validating-webhooks", "--dry-run=server",
        as_webhooks, check=False,
    )  # fmt: skip
    assert delete.returncode != 0 and "forbidden" in delete.stderr.lower(), delete.stderr
    own = rbac.kubectl.run(
        "patch", "validatingwebhookconfiguration", "hyperplace-validating-webhooks", "--type=json",
        "-p", json.dumps([{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "Zm9v"}]),
        "--dry-run=server", as_webhooks, check=False,
    )  # fmt: skip
    assert own.returncode == 0, own.stderr
