"""kubectl as ``up`` drives it, and the waits on what the cluster reports: the CRDs Established,
a Lease held, every node Ready, a health endpoint answering. A ServiceAccount's kubeconfig comes
from the TokenRequest API (``kubectl create token``)."""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from hyperplace.runtime.flags import SYSTEM_NAMESPACE

from . import components
from .components import MANIFESTS

T = TypeVar("T")
TOKEN_DURATION = "8760h"


class LocalUpError(RuntimeError):
    """``up`` could not finish; the message says what and shows the relevant log."""


class Kubectl:
    """kubectl with one kubeconfig; a failure (or no answer in 120 s) raises LocalUpError."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def run(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``kubectl ARGS``; with ``check``, a non-zero exit raises LocalUpError with its stderr."""
        try:
            proc = subprocess.run(
                ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
                input=input,
                capture_output=True,
                text=True,
                timeout=120,
            )
        except subprocess.TimeoutExpired as exc:
            raise LocalUpError(f"kubectl {' '.join(args)} did not answer within 120s") from exc
        if check and proc.returncode != 0:
            raise LocalUpError(f"kubectl {' '.join(args)} failed:\n{proc.stderr.strip()}")
        return proc

    def apply_objects(self, objs: list[dict[str, Any]]) -> None:
        """``kubectl apply`` of these objects."""
        self.run("apply", "-f", "-", input=components.manifest_stream(objs))


def wait_for(probe: Callable[[], T | None], what: str, timeout: float, describe: Callable[[], str]) -> T:
    """``probe()`` every half second until it returns a true value; after ``timeout`` LocalUpError
    says what was awaited, with ``describe()`` (a log tail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise LocalUpError(f"timed out after {timeout:.0f}s waiting for {what}\n{describe()}")
        time.sleep(0.5)


def sa_kubeconfig(kubectl: Kubectl, server: str, ca: Path, account: str, out: Path) -> Path:
    """A kubeconfig that authenticates as ServiceAccount hyperplace-system/``account``."""
    token = kubectl.run(
        "create", "token", account, "-n", SYSTEM_NAMESPACE, f"--duration={TOKEN_DURATION}"
    ).stdout.strip()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local-up",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "local-up", "user": account}}],
        "current-context": account,
    }
    out.write_text(yaml.safe_dump(doc))
    out.chmod(0o600)
    return out


def crds_established(kubectl: Kubectl) -> bool:
    """Every CRD of manifests/crds exists and is Established."""
    out = kubectl.run("get", "crd", "-o", "json", check=False)
    if out.returncode != 0:
        return False
    crds = json.loads(out.stdout).get("items") or []
    ours = [c for c in crds if c["spec"]["group"].endswith("volcano.sh")]
    return len(ours) >= len(list((MANIFESTS / "crds").glob("*.yaml"))) and all(
        any(
            x["type"] == "Established" and x["status"] == "True"
            for x in (c.get("status") or {}).get("conditions") or []
        )
        for c in ours
    )


def lease_holder(kubectl: Kubectl, name: str) -> str | None:
    """Who holds Lease hyperplace-system/``name`` (None: no Lease or no holder)."""
    out = kubectl.run(
        "get", "lease", "-n", SYSTEM_NAMESPACE, name, "-o", "jsonpath={.spec.holderIdentity}", check=False
    )
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def ready_nodes(kubectl: Kubectl) -> tuple[int, int]:
    """(nodes Ready, nodes)."""
    nodes = json.loads(kubectl.run("get", "nodes", "-o", "json").stdout).get("items") or []
    ready = sum(
        1
        for n in nodes
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
    )
    return ready, len(nodes)


def http_ok(url: str) -> bool:
    """``url`` answers 200 within 2 s."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
