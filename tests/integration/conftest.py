"""A real etcd + kube-apiserver for the whole session, with the project's CRDs installed.

The binaries come from ``$HYPERPLACE_KUBE_BIN`` (hack/test.sh exports it) or else from
``bash hack/kube-bin.sh``. When they cannot be had (no Go, module proxy down), every test here is
skipped with the reason, never failed: the rest of the suite does not depend on them.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperplace.localup import controlplane

from ..kube_bin import kube_bin_dir
from .kube import REPO, Kubectl, wait_for

CRDS = [
    "hypernodes.topology.volcano.sh",
    "jobs.batch.volcano.sh",
    "podgroups.scheduling.volcano.sh",
    "queues.scheduling.volcano.sh",
    "commands.bus.volcano.sh",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A larger per-test timeout here: pytest-timeout counts fixture setup, and the first test
    may wait for a cold ``hack/kube-bin.sh`` build (about 8.5 min on 2 idle cores) when pytest is run
    directly rather than through hack/test.sh, which builds first."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.timeout(1800))


class Cluster:
    """The running control plane as the tests see it."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.kubeconfig: Path = cp.kubeconfig
        self.kubectl = Kubectl(cp.kubeconfig)

    def logs(self) -> str:
        return str(self.cp.logs())


def _established(kubectl: Kubectl) -> bool:
    crds = {c["metadata"]["name"]: c for c in kubectl.items("crd")}
    for name in CRDS:
        conditions = (crds.get(name) or {}).get("status", {}).get("conditions") or []
        if not any(x["type"] == "Established" and x["status"] == "True" for x in conditions):
            return False
    return True


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """etcd + kube-apiserver with manifests/crds (Established) and the default Queue."""
    if shutil.which("kubectl") is None:
        pytest.skip("real-apiserver tests skipped: kubectl is not on PATH")
    bin_dir = kube_bin_dir()
    try:
        cm = controlplane.control_plane(bin_dir)
        cp = cm.__enter__()
    except controlplane.ControlPlaneError as exc:
        pytest.fail(f"the control plane did not start:\n{exc}")
    try:
        c = Cluster(cp)
        c.kubectl.run("apply", "-f", str(REPO / "manifests" / "crds"))
        # Poll rather than `kubectl wait --for=condition=Established`: kubectl 1.32 gives up at
        # once ("accessor error: <nil>") when it reads a CRD before the apiserver set any condition.
        wait_for(lambda: _established(c.kubectl), f"the CRDs {CRDS} to be Established", describe=cp.logs)
        # Established is set before discovery has caught up; kubectl would then not know the
        # kinds, so wait until `kubectl get` of every kind works.
        wait_for(
            lambda: (
                c.kubectl.run(
                    "get",
                    "hypernodes,jobs.batch.volcano.sh,podgroups.scheduling.volcano.sh,queues,commands",
                    "-A",
                    check=False,
                ).returncode
                == 0
            ),
            "the CRDs to be served",
        )
        c.kubectl.run("apply", "-f", str(REPO / "manifests" / "default-queue.yaml"))
        yield c
    except BaseException:
        print(cp.logs(), file=sys.stderr)
        raise
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test.

    The namespace itself is left behind (with no namespace controller it would stay Terminating
    anyway, and the control plane is thrown away with the session), but its Jobs, PodGroups and
    pods are deleted: a Job left here would otherwise get pods from the next test's controller,
    and those pods would compete for that test's nodes."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl.run("create", "namespace", name)
    yield name
    cluster.kubectl.run(
        "delete",
        "jobs.batch.volcano.sh,podgroups.scheduling.volcano.sh",
        "--all",
        "-n",
        name,
        "--wait=false",
        check=False,
    )
    # Bound pods are deleted only by "the kubelet" (grace 0); there is none, so force it.
    cluster.kubectl.run(
        "delete", "pods", "--all", "-n", name, "--grace-period=0", "--force", "--wait=false", check=False
    )


@pytest.fixture
def kubectl(cluster: Cluster) -> Kubectl:
    return cluster.kubectl
