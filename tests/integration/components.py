"""The deployable processes (``hyperplace-controller``, ``hyperplace-scheduler``) run as
subprocesses against the test apiserver, each logging to its own file, with the same flags
``hack/local-up.sh`` gives them (hyperplace.localup.components)."""

from __future__ import annotations

from pathlib import Path

from hyperplace.localup import components
from hyperplace.localup.components import Process as Component

__all__ = ["COMMAND_KEY", "Component", "controller", "scheduler"]


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
