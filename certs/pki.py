"""A private CA and the webhook's serving certificate, made with ``cryptography``.

The apiserver reaches the webhook through its Service, so the serving certificate names
every form of the Service's DNS name (``svc``, ``svc.ns``, ``svc.ns.svc``,
``svc.ns.svc.cluster.local``) plus any IP addresses asked for (for a webhook reached by
URL, as in tests). Keys are ECDSA P-256: small, fast to handshake, and accepted by Go's
TLS stack in the apiserver. The CA lives 10 years like Volcano's
``gen-admission-secret.sh``; the serving certificate 1 year by default, rotated by
re-running ``hyperplace-certs`` (the server reloads it without a restart).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
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
    key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = ca.certificate
    ca_key = ca.private_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(dns_names)]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in dict.fromkeys(ip_addresses)]
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
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
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


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


def _write(path: Path, data: bytes, mode: int) -> None:
    # Write beside the target and rename, so a server polling the directory never
    # reads a half-written file.
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_tls_files(
    out_dir: str | Path, certs: WebhookCerts, *, write_ca_key: bool = False
) -> dict[str, Path]:
    """Write ``tls.crt``, ``tls.key`` (mode 0600) and ``ca.crt`` (and ``ca.key`` if asked,
    to sign later rotations with the same CA). Returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
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
    for name in order:
        if name in files:
            data, mode = files[name]
            paths[name] = out / name
            _write(paths[name], data, mode)
    return paths


def read_tls_files(directory: str | Path) -> WebhookCerts:
    """Read a directory written by ``write_tls_files``; the CA key is optional (empty)."""
    d = Path(directory)
    ca_key = (d / "ca.key").read_bytes() if (d / "ca.key").exists() else b""
    return WebhookCerts(
        ca=KeyPair((d / "ca.crt").read_bytes(), ca_key),
        serving=KeyPair((d / "tls.crt").read_bytes(), (d / "tls.key").read_bytes()),
    )


def secret_manifest(name: str, namespace: str, certs: WebhookCerts) -> dict[str, Any]:
    """The ``kubernetes.io/tls`` Secret (with ``ca.crt``) the webhook Deployment mounts."""
    return {
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
