"""The deployable processes (``hyperplace-controller``, ``hyperplace-scheduler``) run as
subprocesses against the test apiserver, each logging to its own file."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from .kube import REPO


class Component:
    """One running component; ``stop()`` is SIGTERM then SIGKILL, ``kill()`` is a crash."""

    def __init__(self, name: str, argv: list[str], log: Path, kubeconfig: Path) -> None:
        self.name = name
        self.log = log
        with log.open("ab") as fh:
            self.proc = subprocess.Popen(
                argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env={
                    **os.environ,
                    "KUBECONFIG": str(kubeconfig),
                    "POD_NAME": name,
                    "HYPERPLACE_LOG_LEVEL": "INFO",
                },
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"<{self.log}: {exc}>"
        state = "running" if self.alive() else f"exited {self.proc.returncode}"
        return f"--- {self.name} ({state}), last {lines} log lines ---\n" + "\n".join(text[-lines:])

    def kill(self) -> None:
        """SIGKILL: no shutdown path runs, the Lease is not released."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def controller(kubeconfig: Path, log: Path, lease_namespace: str, *extra: str) -> Component:
    return Component(
        "hyperplace-controller",
        [
            "hyperplace-controller",
            f"--kubeconfig={kubeconfig}",
            "--leader-elect",
            f"--namespace={lease_namespace}",
            f"--config-namespace={lease_namespace}",
            "--health-port=0",
            *extra,
        ],
        log,
        kubeconfig,
    )


def scheduler(
    kubeconfig: Path, log: Path, lease_namespace: str, *extra: str, name: str = "hyperplace-scheduler"
) -> Component:
    return Component(
        name,
        [
            "hyperplace-scheduler",
            f"--kubeconfig={kubeconfig}",
            "--leader-elect",
            f"--lease-namespace={lease_namespace}",
            "--health-port=0",
            f"--identity={name}",
            *extra,
        ],
        log,
        kubeconfig,
    )
