"""An operator generates the webhook's TLS material; the apiserver can verify it."""

from __future__ import annotations

import base64
import ipaddress
import ssl
import stat

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from hyperplace.pki.certificates import (
    generate_ca,
    generate_webhook_certs,
    read_tls_files,
    secret_manifest,
    service_dns_names,
    write_tls_files,
)


def test_serving_cert_names_every_form_of_the_service_and_the_ips():
    certs = generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1", "::1"])
    san = certs.serving.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "hyperplace-webhooks",
        "hyperplace-webhooks.hyperplace-system",
        "hyperplace-webhooks.hyperplace-system.svc",
        "hyperplace-webhooks.hyperplace-system.svc.cluster.local",
    ]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]


def test_serving_cert_is_for_server_auth_only_and_not_a_ca():
    cert = generate_webhook_certs("svc", "ns").serving.certificate
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


def test_ca_signs_the_serving_cert_and_a_tls_client_verifies_the_chain(tmp_path):
    certs = generate_webhook_certs("svc", "ns")
    certs.serving.certificate.verify_directly_issued_by(certs.ca.certificate)
    assert certs.ca.certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    # The pair loads as a server identity.
    paths = write_tls_files(tmp_path, certs)
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(paths["tls.crt"], paths["tls.key"])


def test_keys_are_written_private_and_certificates_readable(tmp_path):
    paths = write_tls_files(tmp_path, generate_webhook_certs("svc", "ns"), write_ca_key=True)
    assert sorted(paths) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    for name, path in paths.items():
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o600 if name.endswith(".key") else 0o644), name
    assert not list(tmp_path.glob(".*.tmp"))


def test_rotation_can_keep_the_ca(tmp_path):
    ca = generate_ca()
    a = generate_webhook_certs("svc", "ns", ca=ca)
    b = generate_webhook_certs("svc", "ns", ca=ca)
    assert a.ca == b.ca and a.serving != b.serving
    b.serving.certificate.verify_directly_issued_by(ca.certificate)


def test_secret_manifest_carries_the_three_files_base64():
    certs = generate_webhook_certs("svc", "ns")
    secret = secret_manifest("hyperplace-webhooks-tls", "hyperplace-system", certs)
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"] == {
        "name": "hyperplace-webhooks-tls",
        "namespace": "hyperplace-system",
        "labels": {
            "app.kubernetes.io/name": "hyperplace-webhooks",
            "app.kubernetes.io/part-of": "hyperplace",
        },
    }
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert data == {
        "tls.crt": certs.serving.cert_pem,
        "tls.key": certs.serving.key_pem,
        "ca.crt": certs.ca.cert_pem,
    }
    assert yaml.safe_load(yaml.safe_dump(secret)) == secret


def test_files_round_trip(tmp_path):
    certs = generate_webhook_certs("svc", "ns")
    write_tls_files(tmp_path, certs)
    back = read_tls_files(tmp_path)
    assert back.serving == certs.serving and back.ca.cert_pem == certs.ca.cert_pem


def test_service_dns_names_honour_a_custom_cluster_domain():
    assert service_dns_names("a", "b", "corp.example")[-1] == "a.b.svc.corp.example"


def test_serving_cert_never_outlives_its_ca():
    ca = generate_ca(days=2)
    cert = generate_webhook_certs("svc", "ns", ca=ca, days=365).serving.certificate
    assert cert.not_valid_after_utc <= ca.certificate.not_valid_after_utc


def test_a_certificate_needs_a_name():
    from hyperplace.pki.certificates import generate_serving_cert

    with pytest.raises(ValueError):
        generate_serving_cert(generate_ca(), [])


def test_a_planted_symlink_at_the_key_is_refused_and_its_target_untouched(tmp_path):
    import pytest

    from hyperplace.pki.certificates import UnsafePathError

    out = tmp_path / "tls"
    out.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (out / "tls.key").symlink_to(victim)
    with pytest.raises(UnsafePathError, match="not a regular file"):
        write_tls_files(out, generate_webhook_certs("svc", "ns"))
    assert victim.read_text() == "precious"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_symlinked_or_shared_directory_is_not_reused(tmp_path):
    import pytest

    from hyperplace.pki.certificates import UnsafePathError

    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(OSError):
        write_tls_files(tmp_path / "link", generate_webhook_certs("svc", "ns"))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafePathError, match="writable by others"):
        write_tls_files(shared, generate_webhook_certs("svc", "ns"))
    assert list(real.iterdir()) == [] and list(shared.iterdir()) == []


def test_a_new_directory_is_created_private(tmp_path):
    import stat

    out = tmp_path / "a" / "tls"
    write_tls_files(out, generate_webhook_certs("svc", "ns"))
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
