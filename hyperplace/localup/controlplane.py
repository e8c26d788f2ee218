"""A throw-away etcd + kube-apiserver (+ kube-controller-manager) on 127.0.0.1, the way envtest
does it.

    python hack/control-plane.py start [--bin-dir DIR] [--controller-manager]   # Ctrl-C stops

The binaries come from ``bash hack/kube-bin.sh`` (or ``--bin-dir`` / ``$HYPERPLACE_KUBE_BIN``).
Everything lives in one directory (a temporary one unless given): the PKI (own CA, apiserver
serving certificate with SAN IP:127.0.0.1 + DNS:localhost, an ``admin`` client certificate in
``system:masters``, the service-account signing key), etcd's data, each process's log and the
kubeconfig. Stopping kills the processes and removes the directory. Without ``controller_manager`` there is no
kube-controller-manager, so no namespace deletion, garbage collection or default ServiceAccounts;
with it, those work, and its node lifecycle controller marks a Node NotReady when nothing renews
its Lease (hyperplace.localup.fakekubelet does). There is never a kubelet or kube-scheduler.

    with control_plane(bin_dir) as cp:
        cp.kubeconfig   # path to an admin kubeconfig
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import functools
import ipaddress
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

START_TIMEOUT = float(os.environ.get("HYPERPLACE_CONTROL_PLANE_TIMEOUT", "90"))

# The Workload API of Kubernetes 1.37 (issue 36), off by default there, so each component turns it on:
# GenericWorkload (beta, default off) serves scheduling.k8s.io Workloads and PodGroups and gives
# kube-scheduler its GangScheduling plugin; TopologyAwareWorkloadScheduling (alpha) the PodGroup's
# topology constraint; WorkloadWithJob (alpha) Job.spec.scheduling and the Job controller's
# Workloads. Every component gets the same gates (kube-apiserver, kube-controller-manager and, in
# tests/oracle, kube-scheduler), as a cluster would run them.
FEATURE_GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,WorkloadWithJob=true"
# scheduling.k8s.io/v1beta1 (Workload, PodGroup) is a beta API, off by default; v1alpha3 serves the
# same two kinds (and CompositePodGroup, whose own alpha gate stays off).
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"
# The first minor release with that API; older ones (``K8S_VERSION=v1.34.10 bash hack/kube-bin.sh``)
# know neither the gates nor the versions and would refuse to start with them, so they get neither.
WORKLOAD_API_MINOR = 37


@functools.cache
def kube_minor(bin_dir: Path) -> int | None:
    """The minor release of the Kubernetes binaries in ``bin_dir`` (``kube-apiserver --version``,
    which hack/kube-bin.sh stamps), or None when it says none (then taken as the newest)."""
    try:
        out = subprocess.run(
            [str(bin_dir / "kube-apiserver"), "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"\bv1\.(\d+)\.", out)
    return int(m.group(1)) if m else None


def has_workload_api(bin_dir: Path) -> bool:
    """Whether the binaries in ``bin_dir`` are Kubernetes 1.37 or newer (None: assumed so)."""
    minor = kube_minor(bin_dir)
    return minor is None or minor >= WORKLOAD_API_MINOR


def feature_gate_args(bin_dir: Path) -> list[str]:
    """``--feature-gates`` for kube-apiserver, kube-controller-manager and kube-scheduler."""
    return [f"--feature-gates={FEATURE_GATES}"] if has_workload_api(bin_dir) else []


def runtime_config_args(bin_dir: Path) -> list[str]:
    """``--runtime-config`` for kube-apiserver."""
    return [f"--runtime-config={RUNTIME_CONFIG}"] if has_workload_api(bin_dir) else []


LOG_TAIL_LINES = 40


class ControlPlaneError(RuntimeError):
    """The control plane did not come up; the message carries both log tails."""


# ---------------------------------------------------------------------------------------- PKI


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    eku: list[x509.ObjectIdentifier] | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    # Back-date by an hour so a little clock skew between processes never matters.
    now = dt.datetime.now(dt.UTC)
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
    if eku:
        builder = builder.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


@dataclass(frozen=True)
class Pki:
    """Paths of the files the apiserver and the kubeconfig use."""

    ca_crt: Path
    serving_crt: Path
    serving_key: Path
    client_ca_crt: Path
    admin_crt: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def write_pki(directory: Path) -> Pki:
    """One CA signs the apiserver's serving certificate and the admin client certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hyperplace-test-ca")]), ca_key, None, ca=True
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _cert(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        serving_key,
        (ca, ca_key),
        eku=[ExtendedKeyUsageOID.SERVER_AUTH],
        # Go ignores the CN; the SANs are what a client checks.
        sans=[x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
    )
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin = _cert(
        x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
                # O=system:masters bypasses RBAC, like envtest's admin user.
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            ]
        ),
        admin_key,
        (ca, ca_key),
        eku=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pki = Pki(
        ca_crt=directory / "ca.crt",
        serving_crt=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        client_ca_crt=directory / "ca.crt",
        admin_crt=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
    pem = serialization.Encoding.PEM
    pki.ca_crt.write_bytes(ca.public_bytes(pem))
    pki.serving_crt.write_bytes(serving.public_bytes(pem))
    pki.serving_key.write_bytes(_key_pem(serving_key))
    pki.admin_crt.write_bytes(admin.public_bytes(pem))
    pki.admin_key.write_bytes(_key_pem(admin_key))
    pki.sa_key.write_bytes(_key_pem(sa_key))
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    for key_file in (pki.serving_key, pki.admin_key, pki.sa_key):
        key_file.chmod(0o600)
    return pki


def kubeconfig_text(server: str, pki: Pki) -> str:
    """A single-context admin kubeconfig with the certificates inlined."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    return f"""apiVersion: v1
kind: Config
clusters:
- name: hyperplace-test
  cluster:
    server: {server}
    certificate-authority-data: {b64(pki.ca_crt)}
users:
- name: admin
  user:
    client-certificate-data: {b64(pki.admin_crt)}
    client-key-data: {b64(pki.admin_key)}
contexts:
- name: hyperplace-test
  context:
    cluster: hyperplace-test
    user: admin
current-context: hyperplace-test
"""


# -------------------------------------------------------------------------------- processes


def free_port() -> int:
    """A port that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"<{path}: {exc}>"
    return "\n".join(text[-lines:])


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver (+ kube-controller-manager); ``stop()`` undoes everything
    ``start()`` did. With ``root`` the state lives there instead of a new temporary directory."""

    bin_dir: Path
    keep_dir: bool = False
    controller_manager: bool = False
    root: Path | None = None
    # More kube-apiserver flags (e.g. --admission-control-config-file for webhook client certs).
    apiserver_args: list[str] = field(default_factory=list)
    # More kube-controller-manager flags (e.g. a short --node-monitor-grace-period), after ours.
    controller_manager_args: list[str] = field(default_factory=list)
    # The controllers kube-controller-manager runs (its --controllers; a repeated flag would add
    # to the list, not replace it).
    controllers: str = "*"
    kubeconfig: Path = field(init=False)
    server: str = field(init=False)
    etcd_log: Path = field(init=False)
    apiserver_log: Path = field(init=False)
    controller_manager_log: Path | None = field(init=False, default=None)
    ca_file: Path = field(init=False)
    pki: Pki = field(init=False)
    _procs: list[tuple[str, subprocess.Popen[bytes]]] = field(init=False, default_factory=list)

    def start(self, timeout: float = START_TIMEOUT) -> ControlPlane:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="hyperplace-cp-"))
        else:
            self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as fh:
            # A new session, so Ctrl-C in the foreground `start` reaches only us and we stop
            # the children in order.
            proc = subprocess.Popen(
                argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self._procs.append((Path(argv[0]).name, proc))
        return proc

    @property
    def processes(self) -> list[tuple[str, subprocess.Popen[bytes]]]:
        """(name, process) in start order."""
        return list(self._procs)

    def _start(self, timeout: float) -> None:
        assert self.root is not None
        etcd_bin, apiserver_bin = self.bin_dir / "etcd", self.bin_dir / "kube-apiserver"
        for b in (etcd_bin, apiserver_bin):
            if not os.access(b, os.X_OK):
                raise ControlPlaneError(f"{b} is missing or not executable (run: bash hack/kube-bin.sh)")
        pki = self.pki = write_pki(self.root / "pki")
        self.ca_file = pki.ca_crt
        self.etcd_log = self.root / "etcd.log"
        self.apiserver_log = self.root / "kube-apiserver.log"
        deadline = time.monotonic() + timeout

        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        etcd = self._spawn(
            [
                str(etcd_bin),
                "--name=t",
                f"--data-dir={self.root / 'etcd'}",
                # Test data need not survive a power cut; fsync dominates etcd's latency on CI disks.
                "--unsafe-no-fsync",
                "--log-level=warn",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=t=http://127.0.0.1:{peer_port}",
            ],
            self.etcd_log,
        )
        self._wait_http(f"{etcd_url}/health", etcd, self.etcd_log, deadline, None)

        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        apiserver = self._spawn(
            [
                str(apiserver_bin),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.root / 'pki'}",
                f"--tls-cert-file={pki.serving_crt}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.client_ca_crt}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.server}/",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                # No controller-manager creates default ServiceAccounts and no node controller
                # removes the not-ready taint, so neither admission plugin could work.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                # Keep the apiserver from writing its loopback address into the kubernetes Endpoints.
                "--endpoint-reconciler-type=none",
                *feature_gate_args(self.bin_dir),
                *runtime_config_args(self.bin_dir),
                "--v=1",
                *self.apiserver_args,
                # Benchmarks add flags here (bench/job_stream.py: an audit log of every write).
                *shlex.split(os.environ.get("HYPERPLACE_APISERVER_EXTRA_ARGS", "")),
            ],
            self.apiserver_log,
        )
        ctx = ssl.create_default_context(cafile=str(pki.ca_crt))
        self._wait_http(f"{self.server}/readyz", apiserver, self.apiserver_log, deadline, ctx)
        self.kubeconfig = self.root / "kubeconfig"
        self.kubeconfig.write_text(kubeconfig_text(self.server, pki))
        self.kubeconfig.chmod(0o600)
        if self.controller_manager:
            self._start_controller_manager(deadline)

    def start_controller_manager(self, timeout: float = START_TIMEOUT) -> None:
        """Start kube-controller-manager now, on a control plane started without it.

        Starting it after the CRDs are served spares its garbage collector half a minute of
        "unable to get REST mapping" for the custom kinds (it re-reads discovery every 30 s)."""
        try:
            self._start_controller_manager(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise

    def _start_controller_manager(self, deadline: float) -> None:
        assert self.root is not None
        kcm_bin, pki = self.bin_dir / "kube-controller-manager", self.pki
        if not os.access(kcm_bin, os.X_OK):
            raise ControlPlaneError(f"{kcm_bin} is missing or not executable (run: bash hack/kube-bin.sh)")
        self.controller_manager_log = self.root / "kube-controller-manager.log"
        port = free_port()
        kcm = self._spawn(
            [
                str(kcm_bin),
                f"--kubeconfig={self.kubeconfig}",
                # Serves /healthz over HTTPS with a self-signed certificate written here; /healthz
                # needs no authentication (--authorization-always-allow-paths' default).
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.root / 'kcm-certs'}",
                "--leader-elect=false",
                # The token controller signs ServiceAccount tokens with the apiserver's key.
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_crt}",
                "--use-service-account-credentials=false",
                # Everything a cluster runs by default (garbage collector, namespace deletion,
                # node lifecycle, ServiceAccounts...); no cloud, no CIDR allocation.
                f"--controllers={self.controllers}",
                *feature_gate_args(self.bin_dir),
                "--v=1",
                *self.controller_manager_args,
            ],
            self.controller_manager_log,
        )
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self._wait_http(f"https://127.0.0.1:{port}/healthz", kcm, self.controller_manager_log, deadline, ctx)

    def _wait_http(
        self,
        url: str,
        proc: subprocess.Popen[bytes],
        log: Path,
        deadline: float,
        ctx: ssl.SSLContext | None,
    ) -> None:
        last = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(f"{log.stem} exited with {proc.returncode}\n{self.logs()}")
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise ControlPlaneError(f"{url} not ready before the deadline ({last})\n{self.logs()}")

    def logs(self) -> str:
        """The tails of both logs, for failure messages."""
        parts = []
        for name in ("etcd_log", "apiserver_log", "controller_manager_log"):
            path = getattr(self, name, None)
            if path is not None:
                parts.append(f"--- {path.name} (last {LOG_TAIL_LINES} lines) ---\n{tail(path)}")
        return "\n".join(parts)

    def stop(self) -> None:
        # The apiserver first, so it never logs a storm of etcd connection errors.
        for _, proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._procs.clear()
        if not self.keep_dir and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def control_plane(
    bin_dir: str | Path,
    *,
    timeout: float = START_TIMEOUT,
    controller_manager: bool = False,
    apiserver_args: list[str] | None = None,
    controller_manager_args: list[str] | None = None,
) -> Iterator[ControlPlane]:
    """Run etcd + kube-apiserver (+ kube-controller-manager, with ``controller_manager_args``
    after its usual flags) for the ``with`` block."""
    cp = ControlPlane(
        Path(bin_dir),
        controller_manager=controller_manager,
        apiserver_args=list(apiserver_args or []),
        controller_manager_args=list(controller_manager_args or []),
    ).start(timeout)
    try:
        yield cp
    finally:
        cp.stop()


def kube_bin_dir() -> Path:
    """``$HYPERPLACE_KUBE_BIN``, else whatever ``hack/kube-bin.sh`` prints (building if needed)."""
    env = os.environ.get("HYPERPLACE_KUBE_BIN")
    if env:
        return Path(env)
    script = Path(__file__).resolve().parents[2] / "hack" / "kube-bin.sh"
    out = subprocess.run(["bash", str(script)], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="control-plane.py", description="A throw-away etcd + kube-apiserver on 127.0.0.1."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="run in the foreground; print the kubeconfig path; Ctrl-C stops")
    s.add_argument(
        "--bin-dir", metavar="DIR", help="directory with etcd and kube-apiserver (default: hack/kube-bin.sh)"
    )
    s.add_argument(
        "--controller-manager",
        action="store_true",
        help="also run kube-controller-manager (garbage collection, namespace deletion)",
    )
    s.add_argument("--timeout", metavar="SECONDS", type=float, default=START_TIMEOUT)
    args = p.parse_args(argv)
    bin_dir = Path(args.bin_dir) if args.bin_dir else kube_bin_dir()
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    try:
        with control_plane(bin_dir, timeout=args.timeout, controller_manager=args.controller_manager) as cp:
            print(cp.kubeconfig, flush=True)
            print(f"# export KUBECONFIG={cp.kubeconfig}   (logs in {cp.root}; Ctrl-C stops)", file=sys.stderr)
            while not stop:
                for name, proc in cp._procs:
                    if proc.poll() is not None:
                        print(f"{name} exited with {proc.returncode}\n{cp.logs()}", file=sys.stderr)
                        return 1
                time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    except ControlPlaneError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
