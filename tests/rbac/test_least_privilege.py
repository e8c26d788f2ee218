"""Each component's RBAC grants exactly what its code asks the API server for.

The requests are recorded while the component runs its real code paths against the fake API
server (``tests/rbac/usage.py``); the grants are read from ``manifests/<component>/rbac.yaml``.
A request no grant allows would be a 403 in a cluster; a grant no request uses is privilege an
attacker who takes over the pod gets for free.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from hyperplace.runtime.fakeapi import Access

from .usage import COMPONENTS, Grant, deployment_env, grants, quiet_logs, record

# Grants no API call of ours makes, each needed by the API server itself.
NEEDED_BY_THE_SERVER = {
    # The controller's PodGroups and pods carry ownerReferences with blockOwnerDeletion: with the
    # OwnerReferencesPermissionEnforcement admission plugin on, setting that needs update on the
    # owner's finalizers subresource.
    ("controller", "batch.volcano.sh", "jobs/finalizers", "update"),
    # The PodGroups of pods of any owner carry the pod's ownerReferences (or one to the pod).
    ("controller", "batch", "jobs/finalizers", "update"),
    ("controller", "apps", "statefulsets/finalizers", "update"),
    ("controller", "apps", "replicasets/finalizers", "update"),
    ("controller", "", "pods/finalizers", "update"),
}

NAMED_VERBS = ("get", "update", "patch", "delete")


def known_objects(component: str) -> set[tuple[str, str]]:
    """(resource, name) of the objects a component's configuration names: its Lease, its
    webhook configurations. Requests on them must be pinned with resourceNames."""
    env = deployment_env(component)
    out: set[tuple[str, str]] = set()
    if "HYPERPLACE_LEADER_ELECTION_LEASE" in env:
        out.add(("leases", env["HYPERPLACE_LEADER_ELECTION_LEASE"]))
    if "HYPERPLACE_VALIDATING_WEBHOOK_CONFIGURATION" in env:
        out.add(("validatingwebhookconfigurations", env["HYPERPLACE_VALIDATING_WEBHOOK_CONFIGURATION"]))
    if "HYPERPLACE_MUTATING_WEBHOOK_CONFIGURATION" in env:
        out.add(("mutatingwebhookconfigurations", env["HYPERPLACE_MUTATING_WEBHOOK_CONFIGURATION"]))
    return out


def problems(
    component: str, used: Iterable[Access], granted: list[Grant], known: set[tuple[str, str]]
) -> list[str]:
    """Every way ``granted`` differs from least privilege for ``used``."""
    used = set(used)
    out: list[str] = []
    for a in sorted(used, key=str):
        if not any(g.allows(a) for g in granted):
            out.append(f"denied but used: {a}")
    for g in granted:
        uses = [a for a in used if g.allows(a)]
        if not uses:
            if (component, g.group, g.resource, g.verb) not in NEEDED_BY_THE_SERVER:
                where = f"in {g.namespace}" if g.namespace else "cluster-wide"
                out.append(f"granted but unused: {g.verb} {g.group}/{g.resource} {where} ({g.role})")
            continue
        if g.namespace is None and {a.namespace for a in uses} == {"hyperplace-system"}:
            out.append(f"cluster-wide but used only in hyperplace-system: {g.verb} {g.resource} ({g.role})")
        if g.verb in NAMED_VERBS and not g.names:
            pinned = {str(a.name) for a in uses if (a.resource, a.name) in known}
            if pinned and pinned == {str(a.name) for a in uses}:
                out.append(f"{g.verb} {g.resource} should be pinned to resourceNames {sorted(pinned)}")
        if g.names:
            unused_names = g.names - {str(a.name) for a in uses}
            if unused_names:
                out.append(f"resourceNames never used: {g.verb} {g.resource} {sorted(unused_names)}")
    return out


@pytest.mark.parametrize("component", COMPONENTS)
async def test_each_component_is_granted_exactly_what_it_uses(
    component: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with quiet_logs():
        used = await record(component, monkeypatch, tmp_path)
    assert used, "the scenario made no requests"
    found = problems(component, used, grants(component), known_objects(component))
    assert not found, f"manifests/{component}/rbac.yaml:\n  " + "\n  ".join(found)


def test_the_check_catches_missing_extra_wide_and_unpinned_grants() -> None:
    """The comparison itself can fail, in each of the ways it is meant to."""
    lease = Access("get", "coordination.k8s.io", "leases", None, "hyperplace-system", "l")
    bind = Access("create", "", "pods", "binding", "default", "p")
    known = {("leases", "l")}

    def g(
        verb: str, resource: str, group: str = "", ns: str | None = None, names: Iterable[str] = ()
    ) -> Grant:
        return Grant(group, resource, verb, ns, frozenset(names), "Role/x")

    exact = [
        g("get", "leases", "coordination.k8s.io", "hyperplace-system", ["l"]),
        g("create", "pods/binding"),
    ]
    assert problems("scheduler", [lease, bind], exact, known) == []
    assert problems("scheduler", [lease, bind], exact[:1], known) == [f"denied but used: {bind}"]
    assert problems("scheduler", [lease, bind], [*exact, g("patch", "pods")], known) == [
        "granted but unused: patch /pods cluster-wide (Role/x)"
    ]
    wide = [g("get", "leases", "coordination.k8s.io", None, ["l"]), exact[1]]
    assert problems("scheduler", [lease, bind], wide, known) == [
        "cluster-wide but used only in hyperplace-system: get leases (Role/x)"
    ]
    unpinned = [g("get", "leases", "coordination.k8s.io", "hyperplace-system"), exact[1]]
    assert problems("scheduler", [lease, bind], unpinned, known) == [
        "get leases should be pinned to resourceNames ['l']"
    ]
    # A list can never be authorized by a resourceNames rule (the request has no name).
    listing = Access("list", "", "configmaps", None, "hyperplace-system", None)
    assert not g("list", "configmaps", ns="hyperplace-system", names=["c"]).allows(listing)
