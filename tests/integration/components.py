"""The deployable processes (``hyperplace-controller``, ``hyperplace-scheduler``) run as
subprocesses against the test apiserver, each logging to its own file, with the same flags
``hack/local-up.sh`` gives them (hyperplace.localup.components)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hyperplace.localup import components, controlplane
from hyperplace.localup.components import Process as Component

from ..kube_bin import kube_bin_dir
from .kube import REPO, Kubectl, wait_for

__all__ = ["COMMAND_KEY", "Component", "Plane", "controller", "plane_with_kcm", "scheduler"]


# The key the controllers here check queue Commands' admission markers with
# (hyperplace.pki.commandmark); a test that creates a queue Command marks it with it, as the
# admission webhook would (tests/integration/test_command_admission.py runs the webhook itself).
COMMAND_KEY = b"hyperplace-integration-tests-command-key"


def controller(kubeconfig: Path, log: Path, lease_namespace: str, *extra: str) -> Component:
    key_file = log.parent / "command.key"
    key_file.write_bytes(COMMAND_KEY)
    return Component(
        "hyperplace-controller",
        components.controller_argv(
            kubeconfig, lease_namespace=lease_namespace, extra=(f"--command-key-file={key_file}", *extra)
        ),
        log,
        env={"KUBECONFIG": str(kubeconfig), "POD_NAME": "hyperplace-controller"},
    )


def scheduler(
    kubeconfig: Path, log: Path, lease_namespace: str, *extra: str, name: str = "hyperplace-scheduler"
) -> Component:
    return Component(
        name,
        components.scheduler_argv(kubeconfig, lease_namespace=lease_namespace, identity=name, extra=extra),
        log,
        env={"KUBECONFIG": str(kubeconfig), "POD_NAME": name},
    )


@dataclass
class Plane:
    """A control plane with kube-controller-manager, a fake kubelet, and our controller and
    scheduler on it."""

    kubectl: Kubectl
    procs: list[Component]
    cp: Any

    def describe(self) -> str:
        procs = sorted(self.procs, key=lambda p: not p.alive())
        return str(self.cp.logs()) + "\n" + "\n".join(p.tail(40) for p in procs)


@contextlib.contextmanager
def plane_with_kcm(
    logs: Path,
    *,
    kcm_args: Sequence[str] = (),
    kubelet_args: Sequence[str] = (),
    controller_args: Sequence[str] = (),
    lease_namespace: str = "hyperplace-system",
) -> Iterator[Plane]:
    """etcd, kube-apiserver and kube-controller-manager (with ``kcm_args``), our CRDs and the
    default Queue, the fake kubelet, our controller and our scheduler, for the ``with`` block."""
    try:
        cm = controlplane.control_plane(
            kube_bin_dir(), controller_manager=True, controller_manager_args=list(kcm_args)
        )
        cp = cm.__enter__()
    except controlplane.ControlPlaneError as exc:
        pytest.fail(f"the control plane did not start:\n{exc}")
    procs: list[Component] = []
    try:
        kubectl = Kubectl(cp.kubeconfig)
        kubectl.run("apply", "-f", str(REPO / "manifests" / "crds"))
        wait_for(
            lambda: (
                kubectl.run(
                    "get",
                    "podgroups.scheduling.volcano.sh,hypernodes,queues,jobs.batch.volcano.sh",
                    "-A",
                    check=False,
                ).returncode
                == 0
            ),
            "the CRDs to be served",
        )
        kubectl.run("apply", "-f", str(REPO / "manifests" / "default-queue.yaml"))
        kubectl.run("create", "namespace", lease_namespace)
        env = {"KUBECONFIG": str(cp.kubeconfig)}
        kubelet_argv = [*components.fake_kubelet_argv(cp.kubeconfig), *kubelet_args]
        procs.append(Component("fake-kubelet", kubelet_argv, logs / "fake-kubelet.log", env=env))
        procs.append(controller(cp.kubeconfig, logs / "controller.log", lease_namespace, *controller_args))
        procs.append(scheduler(cp.kubeconfig, logs / "scheduler.log", lease_namespace))
        yield Plane(kubectl, procs, cp)
    except BaseException:
        print(cp.logs(), file=sys.stderr)
        raise
    finally:
        for p in reversed(procs):
            p.stop()
        cm.__exit__(None, None, None)
