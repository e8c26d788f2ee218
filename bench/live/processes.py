"""The local-up processes a benchmark restarts, times and waits for: CPU seconds from ``/proc``,
a restart with more flags, a health endpoint or a Lease awaited, and the binaries ``hack/``
scripts build."""

from __future__ import annotations

import contextlib
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from bench.live import say
from hyperplace.localup import workloads
from hyperplace.localup.bringup import spawn
from hyperplace.localup.components import Process
from hyperplace.localup.controlplane import free_port
from hyperplace.localup.kubectl import Kubectl, lease_holder
from hyperplace.localup.state import State, is_ours, stop_processes

REPO = Path(__file__).resolve().parents[2]


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process ``pid`` has spent (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def running(state: State) -> dict[str, int]:
    """name -> pid of the recorded processes still running (the last record of a name wins)."""
    out = {}
    for e in state.processes:
        if is_ours(e):
            out[str(e["name"])] = int(e["pid"])
    return out


def restart(state: State, name: str, extra: list[str]) -> tuple[int, int]:
    """Stop ``name`` and start it again with its recorded argv plus ``extra`` (argparse: the
    last value of a flag wins). Returns (pid, health port)."""
    (entry,) = [e for e in state.processes if e["name"] == name and is_ours(e)]
    stop_processes(State(state.root, [entry]))
    port = free_port()
    argv = [*entry["argv"], f"--health-port={port}", *extra]
    kubeconfig = state.root / f"{name}.kubeconfig"
    p = spawn(state, [], name, argv, kubeconfig)
    return p.pid, port


def restart_with(state: State, name: str, extra: list[str]) -> State:
    """Stop a recorded process that takes no health-port flag (kube-controller-manager, a workload
    controller) and start it again with its argv plus ``extra`` (Go flags: the last value wins),
    its environment as local-up gave it; wait until it answers its health endpoint again."""
    (entry,) = [e for e in state.processes if e["name"] == name and is_ours(e)]
    stop_processes(State(state.root, [entry]))
    argv = [*entry["argv"], *extra]
    env = {"KUBECONFIG": str(state.kubeconfig)}
    if name == "training-operator":
        env["MY_POD_NAMESPACE"] = workloads.TRAINING_NAMESPACE
    p = Process(name, argv, Path(str(entry["log"])), env=env, detached=True)
    state.add(name, p.pid, p.argv, p.log)
    url, ctx = health_url(argv)
    wait_healthy(
        url,
        lambda: p.proc.poll() is None,
        f"{name} (restarted with {extra}; see {entry['log']})",
        timeout=180,
        context=ctx,
    )
    return state


def health_url(argv: list[str]) -> tuple[str, ssl.SSLContext | None]:
    """Where a restarted process answers: kube-controller-manager's /healthz on its secure port
    (self-signed), a workload controller's readiness probe address (its flag or its config file)."""
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    if "secure-port" in opts:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        return f"https://127.0.0.1:{opts['secure-port']}/healthz", ctx
    if "health-probe-bind-address" in opts:
        return f"http://{opts['health-probe-bind-address']}/readyz", None
    config = yaml.safe_load(Path(opts["config"]).read_text())
    return f"http://{config['health']['healthProbeBindAddress']}/readyz", None


def hack_built(script: str, *args: str, what: str = "") -> Path:
    """The path a ``hack/`` build script prints last (its cache; it builds what is missing)."""
    say(f"finding or building {what or ', '.join(args)} (hack/{script})")
    out = subprocess.run(["bash", str(REPO / "hack" / script), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"hack/{script} failed: {out.stderr.strip()[-400:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def workload_bin_dir(names: list[str]) -> Path:
    """``$HYPERPLACE_WORKLOAD_BIN``, else hack/workload-bin.sh's cache (it builds what is missing)."""
    env = os.environ.get("HYPERPLACE_WORKLOAD_BIN")
    return Path(env) if env else hack_built("workload-bin.sh", *names)


def wait_healthy(
    url: str,
    alive: Callable[[], bool],
    what: str,
    timeout: float = 300.0,
    context: ssl.SSLContext | None = None,
) -> None:
    """Poll ``url`` until it answers 200; fails when ``alive()`` turns false or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(url, timeout=2, context=context) as resp,
        ):
            if resp.status == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{what} not ready within {timeout:.0f}s")


def wait_ready(port: int, pid: int, what: str, timeout: float = 300.0) -> None:
    """A component of ours answers ``/readyz`` on ``port`` while process ``pid`` runs."""
    wait_healthy(f"http://127.0.0.1:{port}/readyz", lambda: Path(f"/proc/{pid}").exists(), what, timeout)


def wait_leader(kubectl: Kubectl, lease: str, identity: str, timeout: float = 120.0) -> None:
    """Until the holder of Lease ``lease`` contains ``identity``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if identity in (lease_holder(kubectl, lease) or ""):
            return
        time.sleep(0.3)
    raise RuntimeError(f"{identity} did not take the {lease} Lease within {timeout:.0f}s")
