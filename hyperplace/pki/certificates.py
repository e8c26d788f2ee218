"""A private CA and the webhook's serving certificate, made with ``cryptography``.

The apiserver reaches the webhook through its Service, so the serving certificate names
every form of the Service's DNS name (``svc``, ``svc.ns``, ``svc.ns.svc``,
``svc.ns.svc.cluster.local``) plus any IP addresses asked for (for a webhook reached by
URL, as in tests). Keys are ECDSA P-256: small, fast to handshake, and accepted by Go's
TLS stack in the apiserver. The CA lives 10 years like Volcano's
``gen-admission-secret.sh``; the serving certificate 1 year by default, rotated by
re-running ``hyperplace-certs`` (the server reloads it without a restart), or renewed
before expiry (``renewal_due``, ``renew_serving_cert``: same names, same lifetime, same CA)
by ``hyperplace-certs renew`` or by the webhook server itself when it holds the CA key.

Files are written so that nobody else's file can be overwritten through them: into a
directory we own that no one else can write (created 0700 when new), through a fresh
temporary name opened with ``O_CREAT | O_EXCL | O_NOFOLLOW`` relative to the directory's
descriptor, then renamed over the target; a pre-planted symlink at a target is refused.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ipaddress
import os
import secrets
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_FRACTION = 2 / 3  # renew once two-thirds of the lifetime has passed
# Backdated so a node whose clock lags a little still accepts a fresh certificate.
CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        """The parsed certificate."""
        return x509.load_pem_x509_certificate(self.cert_pem)

    def private_key(self) -> ec.EllipticCurvePrivateKey:
        """The parsed private key."""
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TypeError("expected an EC private key")
        return key


def service_dns_names(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    """The names a Service is reached by, shortest first."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{cluster_domain}",
    ]


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def generate_ca(common_name: str = "hyperplace-webhook-ca", days: int = CA_DAYS) -> KeyPair:
    """A self-signed CA allowed to sign serving certificates only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def generate_serving_cert(
    ca: KeyPair,
    dns_names: Sequence[str],
    ip_addresses: Iterable[str] = (),
    days: int = SERVING_DAYS,
) -> KeyPair:
    """A TLS server certificate (EKU serverAuth) for ``dns_names`` and ``ip_addresses``,
    signed by ``ca``. The first DNS name is also the subject CN, for older tooling."""
    if not dns_names:
        raise ValueError("a serving certificate needs at least one DNS name")
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(dns_names)]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in dict.fromkeys(ip_addresses)]
    return _leaf(ca, dns_names[0], ExtendedKeyUsageOID.SERVER_AUTH, days, sans)


CLIENT_NAME = "hyperplace-webhook-client"


def generate_client_cert(ca: KeyPair, common_name: str = CLIENT_NAME, days: int = SERVING_DAYS) -> KeyPair:
    """A TLS client certificate (EKU clientAuth only) with subject CN ``common_name``, signed
    by ``ca``: what the kube-apiserver presents to a webhook that requires client
    certificates (``hyperplace-webhooks --client-ca-file``). It cannot serve TLS, and the
    serving certificate (serverAuth only) cannot authenticate a client."""
    return _leaf(ca, common_name, ExtendedKeyUsageOID.CLIENT_AUTH, days, None)


def _leaf(
    ca: KeyPair,
    common_name: str,
    usage: x509.ObjectIdentifier,
    days: int,
    sans: list[x509.GeneralName] | None,
) -> KeyPair:
    """A certificate signed by ``ca`` for one extended key usage (serverAuth or clientAuth),
    valid no longer than the CA itself; ``sans``: its subject alternative names, if any."""
    key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = ca.certificate
    ca_key = ca.private_key()
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
    ).sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def webhook_client_kubeconfig(client: KeyPair, servers: Sequence[str]) -> dict[str, Any]:
    """The kubeconfig the kube-apiserver's admission plugins read (``kubeConfigFile`` in its
    AdmissionConfiguration) to present ``client`` to the webhooks named by ``servers``: each
    user entry is named after the server it authenticates to, as the apiserver matches it
    (``svc.ns.svc`` for a Service on port 443, ``host:port`` for a URL, ``*`` for every
    webhook). The certificate and key are inlined, so the file is all the apiserver needs."""
    user = {
        "client-certificate-data": base64.b64encode(client.cert_pem).decode(),
        "client-key-data": base64.b64encode(client.key_pem).decode(),
    }
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "users": [{"name": name, "user": dict(user)} for name in dict.fromkeys(servers)],
    }


def admission_configuration(kubeconfig_path: str | Path) -> dict[str, Any]:
    """The kube-apiserver's ``--admission-control-config-file``: both webhook admission
    plugins authenticate to webhooks with the kubeconfig at ``kubeconfig_path``."""
    plugin = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": str(kubeconfig_path),
    }
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {"name": name, "configuration": dict(plugin)}
            for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
        ],
    }


def write_client_files(out_dir: str | Path, client: KeyPair) -> dict[str, Path]:
    """Write ``client.crt`` and ``client.key`` (0600) symlink-safely; returns name -> path."""
    out = Path(out_dir)
    dir_fd = _safe_dir(out)
    try:
        _write(dir_fd, "client.key", client.key_pem, 0o600, out)
        _write(dir_fd, "client.crt", client.cert_pem, 0o644, out)
    finally:
        os.close(dir_fd)
    return {"client.key": out / "client.key", "client.crt": out / "client.crt"}


def write_private_file(out_dir: str | Path, name: str, data: bytes) -> Path:
    """Write one file (mode 0600) symlink-safely into ``out_dir``."""
    out = Path(out_dir)
    dir_fd = _safe_dir(out)
    try:
        _write(dir_fd, name, data, 0o600, out)
    finally:
        os.close(dir_fd)
    return out / name


@dataclass(frozen=True)
class WebhookCerts:
    """Everything the webhook Secret holds."""

    ca: KeyPair
    serving: KeyPair


def generate_webhook_certs(
    service: str,
    namespace: str,
    ip_addresses: Iterable[str] = (),
    *,
    ca: KeyPair | None = None,
    cluster_domain: str = "cluster.local",
    days: int = SERVING_DAYS,
) -> WebhookCerts:
    """A CA (new unless given, so rotation can keep the CA) and a serving certificate
    for the Service ``service`` in ``namespace``."""
    ca = ca or generate_ca()
    serving = generate_serving_cert(
        ca, service_dns_names(service, namespace, cluster_domain), ip_addresses, days
    )
    return WebhookCerts(ca=ca, serving=serving)


class UnsafePathError(OSError):
    """A target directory or file that is not safely ours to write."""


def _safe_dir(out: Path) -> int:
    """An O_DIRECTORY descriptor of ``out``, created 0700 if missing; refuses a symlink,
    a directory owned by someone else, or one others may write into."""
    if not os.path.lexists(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(out, 0o700)
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    st = os.fstat(fd)
    problem = None
    if st.st_uid != os.geteuid():
        problem = f"is owned by uid {st.st_uid}, not by us (uid {os.geteuid()})"
    elif st.st_mode & 0o022 and not st.st_mode & 0o1000:
        problem = f"is writable by others (mode {st.st_mode & 0o7777:o})"
    if problem is not None:
        os.close(fd)
        raise UnsafePathError(f"{out} {problem}; refusing to write keys there")
    return fd


def _write(dir_fd: int, name: str, data: bytes, mode: int, where: Path) -> None:
    # A fresh name (O_EXCL: never an existing file, O_NOFOLLOW: never through a link),
    # then an atomic rename, so a server polling the directory never reads half a file.
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{where / name} exists and is not a regular file (a symlink?); refusing")
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def write_tls_files(
    out_dir: str | Path, certs: WebhookCerts, *, write_ca_key: bool = False
) -> dict[str, Path]:
    """Write ``tls.crt``, ``tls.key`` (mode 0600) and ``ca.crt`` (and ``ca.key`` if asked,
    to sign later rotations with the same CA). Returns name -> path.

    Raises UnsafePathError for a directory that is not safely ours or a symlink planted
    at a target (see the module docstring)."""
    out = Path(out_dir)
    files = {
        "tls.crt": (certs.serving.cert_pem, 0o644),
        "tls.key": (certs.serving.key_pem, 0o600),
        "ca.crt": (certs.ca.cert_pem, 0o644),
    }
    if write_ca_key:
        files["ca.key"] = (certs.ca.key_pem, 0o600)
    # The key first and the certificate last: a reader seeing a new tls.crt finds its key.
    order = ["ca.crt", "ca.key", "tls.key", "tls.crt"]
    paths = {}
    dir_fd = _safe_dir(out)
    try:
        for name in order:
            if name in files:
                data, mode = files[name]
                _write(dir_fd, name, data, mode, out)
                paths[name] = out / name
    finally:
        os.close(dir_fd)
    return paths


def renewal_due(
    cert: x509.Certificate, fraction: float = RENEW_FRACTION, now: dt.datetime | None = None
) -> bool:
    """True once ``fraction`` of the certificate's lifetime has passed (or it expired)."""
    now = now or _now()
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return now >= start + (end - start) * fraction


def renewal_time(cert: x509.Certificate, fraction: float = RENEW_FRACTION) -> dt.datetime:
    """When ``renewal_due`` becomes true."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * fraction


def renew_serving_cert(ca: KeyPair, current: x509.Certificate) -> KeyPair:
    """A new key and certificate with the names and lifetime of ``current``, signed by ``ca``."""
    san = current.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = san.get_values_for_type(x509.DNSName)
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    lifetime = current.not_valid_after_utc - current.not_valid_before_utc - CLOCK_SKEW
    days = max(1, round(lifetime / dt.timedelta(days=1)))
    if not dns:
        dns = [str(a.value) for a in current.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return generate_serving_cert(ca, dns, ips, days)


def read_tls_files(directory: str | Path) -> WebhookCerts:
    """Read a directory written by ``write_tls_files``; the CA key is optional (empty)."""
    d = Path(directory)
    ca_key = (d / "ca.key").read_bytes() if (d / "ca.key").exists() else b""
    return WebhookCerts(
        ca=KeyPair((d / "ca.crt").read_bytes(), ca_key),
        serving=KeyPair((d / "tls.crt").read_bytes(), (d / "tls.key").read_bytes()),
    )


def secret_manifest(
    name: str, namespace: str, certs: WebhookCerts, *, with_ca_key: bool = False
) -> dict[str, Any]:
    """The ``kubernetes.io/tls`` Secret (with ``ca.crt``) the webhook Deployment mounts.

    ``with_ca_key`` adds ``ca.key``, so the webhook server can renew its own serving
    certificate before expiry (the CA signs nothing but this webhook's certificates)."""
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": "hyperplace-webhooks",
                "app.kubernetes.io/part-of": "hyperplace",
            },
        },
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(certs.serving.cert_pem).decode(),
            "tls.key": base64.b64encode(certs.serving.key_pem).decode(),
            "ca.crt": base64.b64encode(certs.ca.cert_pem).decode(),
        },
    }
    if with_ca_key:
        if not certs.ca.key_pem:
            raise ValueError("no CA key to put in the Secret (ca.key missing)")
        secret["data"]["ca.key"] = base64.b64encode(certs.ca.key_pem).decode()
    return secret
