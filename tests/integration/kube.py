"""Small helpers for talking to the real test apiserver: kubectl, polling, object builders.

Everything goes through ``kubectl`` with the test kubeconfig, so what the tests do is what a user
would type; no client library stands between the test and the apiserver.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from hyperplace.localup.components import manifest_stream

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")

# Generous on purpose: these tests check outcomes, never speed, and a 2-core CI machine running
# the apiserver, etcd and two Python components can be slow.
DEFAULT_TIMEOUT = 120.0

# Volcano's PodGroups by their full name: on Kubernetes 1.37 with its Workload API on (as the test
# control plane runs), plain ``podgroups`` names Kubernetes' own scheduling.k8s.io PodGroups.
PODGROUPS = "podgroups.scheduling.volcano.sh"


@dataclass(frozen=True)
class Kubectl:
    """``kubectl --kubeconfig <test cluster>``."""

    kubeconfig: Path

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def apply(
        self, objs: Iterable[dict[str, Any]], *, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``kubectl apply -f -`` of the given objects (one multi-document stream)."""
        return self.run("apply", "-f", "-", input=manifest_stream(objs), check=check)

    def create(
        self, objs: Iterable[dict[str, Any]], *, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.run("create", "-f", "-", input=manifest_stream(objs), check=check)

    def get(self, *args: str) -> Any:
        """``kubectl get ... -o json``, parsed."""
        return json.loads(self.run("get", *args, "-o", "json").stdout)

    def items(self, *args: str) -> list[dict[str, Any]]:
        return list(self.get(*args).get("items", []))


def wait_for(
    probe: Callable[[], T | None],
    what: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = 0.5,
    describe: Callable[[], str] | None = None,
) -> T:
    """Poll ``probe`` until it returns something truthy and return that.

    On timeout the assertion names what was awaited and, via ``describe``, what the cluster
    looked like instead; the timeout only bounds a hang and is never the thing under test.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = describe() if describe else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{detail}")
        time.sleep(interval)


def load_yaml(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A copy of ``obj`` moved into ``namespace``, so each test keeps to its own."""
    out = json.loads(json.dumps(obj))
    out.setdefault("metadata", {})["namespace"] = namespace
    return out


def node(
    name: str, labels: dict[str, str] | None = None, *, cpu: str = "4", memory: str = "16Gi"
) -> dict[str, Any]:
    """A Node with allocatable, capacity and Ready=True set on create (the apiserver keeps a
    Node's status on create; nodeStrategy.PrepareForCreate), so no kubelet is needed."""
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "fake node for the real-apiserver tests",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    }


def hypernode(
    name: str, tier: int, members: list[dict[str, Any]], tier_name: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def exact(kind: str, name: str) -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def pod_node(pod: dict[str, Any]) -> str | None:
    return pod.get("spec", {}).get("nodeName") or None


def two_racks(kubectl: Kubectl, tag: str, cpu: str = "8") -> tuple[dict[str, list[str]], str]:
    """Two racks of two nodes (labelled ``hyperplace.io/preempt-test: <tag>``) under a spine,
    and a PriorityClass for the test's pods; returns ``{rack: nodes}`` and the class name."""
    prio = f"prio-{tag}"
    racks = {f"{tag}-rack{r}": [f"{tag}-n{r}{i}" for i in range(2)] for r in range(2)}
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": prio},
            "value": 10,
        }
    ]
    objs += [node(n, {"hyperplace.io/preempt-test": tag}, cpu=cpu) for ns in racks.values() for n in ns]
    objs += [hypernode(r, 1, [exact("Node", n) for n in ns]) for r, ns in racks.items()]
    objs.append(hypernode(f"{tag}-spine", 2, [exact("HyperNode", r) for r in racks]))
    kubectl.create(objs)
    return racks, prio
