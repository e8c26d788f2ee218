"""A minimal HTTP server answering kubectl's API discovery, so `kubectl apply --dry-run=client`
can run without a cluster.

kubectl maps every kind to a resource through discovery even with ``--validate=false``, then GETs
each object to choose between create and patch. This server knows the built-in kinds the manifests
use (their real group/version/resource names) plus whatever CRDs it is given, and answers 404 for
every object, so kubectl reports ``created (dry run)`` for objects it could decode and map.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (groupVersion, plural, kind, namespaced) of the built-in kinds in manifests/.
BUILTIN = [
    ("v1", "namespaces", "Namespace", False),
    ("v1", "serviceaccounts", "ServiceAccount", True),
    ("v1", "services", "Service", True),
    ("v1", "configmaps", "ConfigMap", True),
    ("v1", "secrets", "Secret", True),
    ("v1", "resourcequotas", "ResourceQuota", True),
    ("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", True),
    ("apps/v1", "deployments", "Deployment", True),
    ("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ("rbac.authorization.k8s.io/v1", "roles", "Role", True),
    ("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", True),
    ("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", False),
    ("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", False),
    (
        "admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
    ),
    ("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", False),
]
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _resources(crds: Iterable[dict[str, Any]]) -> list[tuple[str, str, str, bool, list[str]]]:
    out: list[tuple[str, str, str, bool, list[str]]] = [(gv, p, k, ns, []) for gv, p, k, ns in BUILTIN]
    for crd in crds:
        spec = crd["spec"]
        names = spec["names"]
        for version in spec["versions"]:
            out.append(
                (
                    f"{spec['group']}/{version['name']}",
                    names["plural"],
                    names["kind"],
                    spec["scope"] == "Namespaced",
                    list(names.get("shortNames", [])),
                )
            )
    return out


@contextmanager
def fake_discovery(crds: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Serve discovery on 127.0.0.1; yields the server URL. Records nothing, changes nothing."""
    resources = _resources(crds)
    by_gv: dict[str, list[dict[str, Any]]] = {}
    for gv, plural, kind, namespaced, short in resources:
        entry = {
            "name": plural,
            "singularName": kind.lower(),
            "namespaced": namespaced,
            "kind": kind,
            "verbs": VERBS,
        }
        if short:
            entry["shortNames"] = short
        by_gv.setdefault(gv, []).append(entry)
    groups = sorted({gv.split("/")[0] for gv in by_gv if "/" in gv})

    def group_entry(group: str) -> dict[str, Any]:
        versions = [
            {"groupVersion": gv, "version": gv.split("/")[1]}
            for gv in sorted(by_gv)
            if gv.startswith(f"{group}/")
        ]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            # Plain application/json answers make kubectl fall back from aggregated to legacy discovery.
            if path == "/version":
                self._send(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake"})
            elif path == "/api":
                self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
            elif path == "/apis":
                self._send(
                    200,
                    {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_entry(g) for g in groups]},
                )
            elif (gv := path.removeprefix("/api/").removeprefix("/apis/")) in by_gv and path in (
                f"/api/{gv}",
                f"/apis/{gv}",
            ):
                self._send(
                    200,
                    {
                        "kind": "APIResourceList",
                        "apiVersion": "v1",
                        "groupVersion": gv,
                        "resources": by_gv[gv],
                    },
                )
            else:
                self._send(
                    404,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "NotFound",
                        "code": 404,
                    },
                )

        def do_POST(self) -> None:  # a client dry run must never write
            self._send(405, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 405})

        do_PUT = do_PATCH = do_DELETE = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
