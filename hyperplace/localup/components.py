"""The hyperplace processes as they run outside a cluster, with one set of flags, for
``hack/local-up.sh`` and the integration tests alike.

Each process runs from this interpreter's environment (the project's ``.venv``), logs to its own
file and can be stopped (SIGTERM, then SIGKILL) or crashed (SIGKILL). The webhook configurations
come from ``manifests/webhooks`` with the Service reference turned into
``url: https://127.0.0.1:<port>/<path>``: a kube-apiserver outside a cluster cannot reach a
Service (envtest does the same). The caBundle stays out; the webhook server injects it.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from hyperplace.runtime.flags import SYSTEM_NAMESPACE

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
VALIDATING = "hyperplace-validating-webhooks"
MUTATING = "hyperplace-mutating-webhooks"


def program(name: str) -> list[str]:
    """argv prefix of a console script installed next to this interpreter (``.venv/bin``), or of
    its module run with this interpreter when the script is not installed."""
    script = Path(sys.executable).parent / name
    if script.exists():
        return [str(script)]
    modules = {
        "hyperplace-webhooks": "webhooks",
        "hyperplace-controller": "controller",
        "hyperplace-scheduler": "scheduler_plugin",
        "hyperplace-certs": "certs",
    }
    return [sys.executable, "-m", modules[name]]


def controller_argv(
    kubeconfig: Path,
    *,
    lease_namespace: str = SYSTEM_NAMESPACE,
    health_port: int = 0,
    metrics_port: int = 0,
    extra: Sequence[str] = (),
) -> list[str]:
    """``hyperplace-controller`` electing itself through a Lease in ``lease_namespace``, reading
    its discovery ConfigMap from the same namespace (as the Deployment does). ``/metrics`` on
    127.0.0.1:``metrics_port`` (0: not served)."""
    return [
        *program("hyperplace-controller"),
        f"--kubeconfig={kubeconfig}",
        "--leader-elect",
        f"--lease-namespace={lease_namespace}",
        f"--config-namespace={lease_namespace}",
        f"--health-port={health_port}",
        _metrics_flag(metrics_port),
        *extra,
    ]


def scheduler_argv(
    kubeconfig: Path,
    *,
    lease_namespace: str = SYSTEM_NAMESPACE,
    health_port: int = 0,
    metrics_port: int = 0,
    identity: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """``hyperplace-scheduler`` electing itself through a Lease in ``lease_namespace``;
    ``/metrics`` on 127.0.0.1:``metrics_port`` (0: not served)."""
    return [
        *program("hyperplace-scheduler"),
        f"--kubeconfig={kubeconfig}",
        "--leader-elect",
        f"--lease-namespace={lease_namespace}",
        f"--health-port={health_port}",
        _metrics_flag(metrics_port),
        *([f"--identity={identity}"] if identity else []),
        *extra,
    ]


def _metrics_flag(port: int) -> str:
    return f"--metrics-bind-address=127.0.0.1:{port}" if port else "--metrics-bind-address=0"


def webhooks_argv(
    kubeconfig: Path, *, port: int, tls_dir: Path, health_port: int = 0, extra: Sequence[str] = ()
) -> list[str]:
    """``hyperplace-webhooks`` on 127.0.0.1:``port`` with the files ``hyperplace-certs gen`` wrote
    to ``tls_dir``, injecting its CA into both webhook configurations and reading HyperNodes
    through an informer (the tree checks)."""
    return [
        *program("hyperplace-webhooks"),
        "--host=127.0.0.1",
        f"--port={port}",
        f"--tls-cert-file={tls_dir / 'tls.crt'}",
        f"--tls-private-key-file={tls_dir / 'tls.key'}",
        f"--ca-file={tls_dir / 'ca.crt'}",
        f"--health-port={health_port}",
        "--hypernode-cache",
        f"--kubeconfig={kubeconfig}",
        f"--validating-webhook-configuration={VALIDATING}",
        f"--mutating-webhook-configuration={MUTATING}",
        *extra,
    ]


def certs_gen_argv(out_dir: Path) -> list[str]:
    """``hyperplace-certs gen`` for a server reached at 127.0.0.1."""
    return [*program("hyperplace-certs"), "gen", f"--out-dir={out_dir}", "--ip=127.0.0.1"]


def certs_client_argv(out_dir: Path) -> list[str]:
    """``hyperplace-certs client``: the kube-apiserver's webhook client certificate, presented to
    every webhook (``--server=*``: here they are all ours, reached by URL), with the
    AdmissionConfiguration that hands it to the apiserver (``out_dir/admission-config.yaml``)."""
    return [*program("hyperplace-certs"), "client", f"--out-dir={out_dir}", "--server=*"]


def fake_kubelet_argv(kubeconfig: Path) -> list[str]:
    return [sys.executable, "-m", "hyperplace.localup.fakekubelet", f"--kubeconfig={kubeconfig}"]


def webhook_configurations(port: int, namespace_label: str | None = None) -> list[dict[str, Any]]:
    """manifests/webhooks' two configurations pointing at 127.0.0.1:``port`` by URL. With
    ``namespace_label``, namespaced hooks apply only to namespaces carrying that label set to
    "true" (a test that must not block its neighbours while its server is down)."""
    out = []
    for name in ("validating.yaml", "mutating.yaml"):
        (config,) = [d for d in yaml.safe_load_all((MANIFESTS / "webhooks" / name).read_text()) if d]
        config = copy.deepcopy(config)
        for hook in config["webhooks"]:
            cc = hook["clientConfig"]
            service = cc.pop("service")
            cc["url"] = f"https://127.0.0.1:{port}{service['path']}"
            if namespace_label:
                hook.setdefault("namespaceSelector", {}).setdefault("matchLabels", {})[namespace_label] = (
                    "true"
                )
        out.append(config)
    return out


class Process:
    """One running process logging to ``log``; ``stop()`` is SIGTERM then SIGKILL, ``kill()`` a
    crash. ``detached`` processes run in their own session and outlive this interpreter."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO,
        detached: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as fh:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                # INFO unless the caller's environment says otherwise.
                env={"HYPERPLACE_LOG_LEVEL": "INFO", **os.environ, **(env or {})},
                start_new_session=detached,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        """The last ``lines`` of the log; for a process that exited, its ERROR lines and
        tracebacks first, so why it exited survives a report that keeps only the ends."""
        if self.alive():
            return f"--- {self.name} (running), last {lines} log lines ---\n" + log_tail(self.log, lines)
        return (
            f"--- {self.name} (exited {self.proc.returncode}), its errors ---\n"
            + log_errors(self.log)
            + f"\n--- {self.name} (exited {self.proc.returncode}), last {lines} log lines ---\n"
            + log_tail(self.log, lines)
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown path runs (a Lease is not released)."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 15) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def manifest_stream(objs: Iterable[Mapping[str, Any]]) -> str:
    """Objects as one ``kubectl -f -`` stream: a JSON document each, so every string stays a
    string (PyYAML leaves ``80e156`` unquoted, and kubectl's YAML 1.2 reads it as a number)."""
    return "".join(f"---\n{json.dumps(o)}\n" for o in objs)


def log_errors(path: Path, limit: int = 60) -> str:
    """The ERROR/CRITICAL lines of a log with the traceback lines that follow each, at most
    ``limit`` lines (the last ones)."""
    text = _log_lines(path)
    if isinstance(text, str):
        return text
    kept: list[str] = []
    inside = False
    for line in text:
        if " ERROR " in line or " CRITICAL " in line or line.startswith("Traceback"):
            inside = True
        elif line[:4].isdigit():  # the next timestamped record ends a traceback
            inside = False
        if inside:
            kept.append(line)
    return "\n".join(kept[-limit:]) or "<no ERROR lines>"


def log_tail(path: Path, lines: int = 40) -> str:
    text = _log_lines(path)
    return text if isinstance(text, str) else "\n".join(text[-lines:])


def _log_lines(path: Path) -> list[str] | str:
    """The log's lines, or a one-line note saying why it could not be read."""
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"<{path}: {exc}>"
