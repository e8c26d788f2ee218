"""The deployable processes (``hyperplace-controller``, ``hyperplace-scheduler``) run as
subprocesses against the test apiserver, each logging to its own file, with the same flags
``hack/local-up.sh`` gives them (hyperplace.localup.components)."""

from __future__ import annotations

from pathlib import Path

from hyperplace.localup import components
from hyperplace.localup.components import Process as Component

__all__ = ["Component", "controller", "scheduler"]


def controller(kubeconfig: Path, log: Path, lease_namespace: str, *extra: str) -> Component:
    return Component(
        "hyperplace-controller",
        components.controller_argv(kubeconfig, lease_namespace=lease_namespace, extra=extra),
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
