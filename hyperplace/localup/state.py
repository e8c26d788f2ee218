"""The state directory of a local-up run and the processes it records.

``STATE/state.json`` holds what ``down`` needs: every process ``up`` started (name, pid, argv, log),
the admin kubeconfig and the ports. A recorded pid is only signalled while it still runs the
recorded command line, so ``down`` never stops a stranger that reused the pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/hyperplace/local-up`` (``~/.local/state`` without it)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hyperplace" / "local-up"


@dataclass
class State:
    """What ``down`` needs: the processes ``up`` started, in start order."""

    root: Path
    processes: list[dict[str, Any]] = field(default_factory=list)
    kubeconfig: str = ""
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.root / STATE_FILE

    def add(self, name: str, pid: int, argv: list[str], log: Path) -> None:
        self.processes.append({"name": name, "pid": pid, "argv": argv, "log": str(log)})
        self.save()

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        doc = {"processes": self.processes, "kubeconfig": self.kubeconfig, "ports": self.ports}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(self.path)

    @classmethod
    def load(cls, root: Path) -> State | None:
        try:
            doc = json.loads((root / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        return cls(
            root, list(doc.get("processes") or []), str(doc.get("kubeconfig") or ""), doc.get("ports") or {}
        )


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def is_ours(entry: dict[str, Any]) -> bool:
    """The recorded process still runs under its pid (not a stranger that reused the pid)."""
    pid = int(entry["pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    cmd = _cmdline(pid)
    if cmd is None:
        # No /proc (not Linux): the pid is alive; trust the record.
        return True
    if not cmd:
        # Empty: a zombie (dead, not yet reaped), or a child of ours between fork and exec.
        return _proc_state(pid) not in ("Z", "X", None)
    # A script's cmdline starts with the interpreter its #! line names, so compare the end.
    argv = list(entry["argv"])
    return cmd[-len(argv) :] == argv


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[0]


def stop_processes(state: State, timeout: float = 15.0) -> list[str]:
    """SIGTERM each recorded process (last started first), SIGKILL what is left after ``timeout``.
    Returns the names of the processes that were running."""
    running = [e for e in reversed(state.processes) if is_ours(e)]
    for e in running:
        # Each runs in its own session, as its group's leader: signal the group, so anything it
        # started goes too.
        try:
            os.killpg(int(e["pid"]), signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(e["pid"]), signal.SIGTERM)
        # The apiserver before etcd, and hyperplace before the apiserver: wait for each, so no
        # process spends its shutdown logging connection errors.
        _wait_gone(e, min(timeout, 10.0))
    deadline = time.monotonic() + timeout
    for e in running:
        if not _wait_gone(e, max(0.0, deadline - time.monotonic())):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(e["pid"]), signal.SIGKILL)
            _wait_gone(e, 5.0)
    return [str(e["name"]) for e in reversed(running)]


def _wait_gone(entry: dict[str, Any], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while is_ours(entry):
        # Our own child (the tests run ``up`` in-process): reap it, or it stays a zombie.
        with contextlib.suppress(ChildProcessError):
            os.waitpid(int(entry["pid"]), os.WNOHANG)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
