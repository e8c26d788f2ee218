"""``hyperplace-certs``: the commands an operator (or an init Job) runs."""

from __future__ import annotations

import base64

import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.__main__ import main
from hyperplace.pki.certificates import read_tls_files


def test_gen_writes_the_four_files_and_keeps_the_ca_on_rerun(tmp_path, capsys):
    assert main(["gen", "--out-dir", str(tmp_path), "--ip", "10.0.0.7"]) == 0
    first = read_tls_files(tmp_path)
    assert "tls.key (keep private)" in capsys.readouterr().out
    assert main(["gen", "--out-dir", str(tmp_path)]) == 0
    second = read_tls_files(tmp_path)
    assert second.ca.cert_pem == first.ca.cert_pem  # rotation keeps the CA
    assert second.serving.cert_pem != first.serving.cert_pem
    second.serving.certificate.verify_directly_issued_by(first.ca.certificate)


def test_secret_from_a_directory_prints_a_tls_secret(tmp_path, capsys):
    main(["gen", "--out-dir", str(tmp_path)])
    capsys.readouterr()
    assert main(["secret", "--from-dir", str(tmp_path), "--namespace", "ops"]) == 0
    secret = yaml.safe_load(capsys.readouterr().out)
    assert secret["kind"] == "Secret" and secret["metadata"]["namespace"] == "ops"
    assert base64.b64decode(secret["data"]["ca.crt"]) == (tmp_path / "ca.crt").read_bytes()


def test_secret_to_a_file(tmp_path):
    out = tmp_path / "secret.yaml"
    assert main(["secret", "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["metadata"]["name"] == "hyperplace-webhooks-tls"


def test_inject_offline_patches_only_webhook_configurations(tmp_path, capsys):
    main(["gen", "--out-dir", str(tmp_path)])
    capsys.readouterr()
    manifest = tmp_path / "webhooks.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                {
                    "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": "v"},
                    "webhooks": [{"name": "a", "clientConfig": {}}],
                },
                {"kind": "Service", "metadata": {"name": "s"}},
            ]
        )
    )
    assert main(["inject", "--ca-file", str(tmp_path / "ca.crt"), "--config-file", str(manifest)]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    bundle = docs[0]["webhooks"][0]["clientConfig"]["caBundle"]
    assert base64.b64decode(bundle) == (tmp_path / "ca.crt").read_bytes()
    assert docs[1] == {"kind": "Service", "metadata": {"name": "s"}}


def test_inject_without_targets_is_a_usage_error(tmp_path, capsys):
    main(["gen", "--out-dir", str(tmp_path)])
    assert main(["inject", "--ca-file", str(tmp_path / "ca.crt")]) == 2


def test_unreadable_ca_file_fails_with_a_message(tmp_path, capsys):
    assert main(["inject", "--ca-file", str(tmp_path / "missing.crt"), "--validating", "v"]) == 1
    assert "missing.crt" in capsys.readouterr().err


def test_renew_does_nothing_until_due_then_keeps_the_ca_and_names(tmp_path, capsys):
    from cryptography import x509

    assert main(["gen", "--out-dir", str(tmp_path), "--ip", "127.0.0.1"]) == 0
    before = (tmp_path / "tls.crt").read_bytes()
    ca_before = (tmp_path / "ca.crt").read_bytes()
    capsys.readouterr()
    assert main(["renew", "--out-dir", str(tmp_path)]) == 0
    assert "not due" in capsys.readouterr().out
    assert (tmp_path / "tls.crt").read_bytes() == before
    assert main(["renew", "--out-dir", str(tmp_path), "--fraction", "0"]) == 0
    assert "renewed" in capsys.readouterr().out
    after = (tmp_path / "tls.crt").read_bytes()
    assert after != before and (tmp_path / "ca.crt").read_bytes() == ca_before
    san = x509.SubjectAlternativeName
    old_san = x509.load_pem_x509_certificate(before).extensions.get_extension_for_class(san)
    assert x509.load_pem_x509_certificate(after).extensions.get_extension_for_class(san) == old_san


def test_secret_can_carry_the_ca_key_for_self_renewal(tmp_path, capsys):
    import base64

    import yaml

    assert main(["gen", "--out-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["secret", "--from-dir", str(tmp_path), "--with-ca-key"]) == 0
    data = yaml.safe_load(capsys.readouterr().out)["data"]
    assert base64.b64decode(data["ca.key"]) == (tmp_path / "ca.key").read_bytes()


def test_client_issues_the_apiservers_webhook_certificate_and_its_admission_config(tmp_path, capsys):
    assert main(["gen", "--out-dir", str(tmp_path)]) == 0
    assert (
        main(["client", "--out-dir", str(tmp_path), "--kubeconfig-path", "/etc/kubernetes/wh.kubeconfig"])
        == 0
    )
    out = capsys.readouterr().out
    assert "admission-config.yaml" in out and "keep private" in out
    cert = x509.load_pem_x509_certificate((tmp_path / "client.crt").read_bytes())
    cert.verify_directly_issued_by(read_tls_files(tmp_path).ca.certificate)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "hyperplace-webhook-client"
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    assert (tmp_path / "client.key").stat().st_mode & 0o777 == 0o600
    kubeconfig = yaml.safe_load((tmp_path / "webhook-client.kubeconfig").read_text())
    # The apiserver matches a Service webhook on port 443 by "svc.ns.svc".
    assert [u["name"] for u in kubeconfig["users"]] == ["hyperplace-webhooks.hyperplace-system.svc"]
    user = kubeconfig["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == (tmp_path / "client.crt").read_bytes()
    config = yaml.safe_load((tmp_path / "admission-config.yaml").read_text())
    assert config["kind"] == "AdmissionConfiguration"
    assert {p["name"]: p["configuration"]["kubeConfigFile"] for p in config["plugins"]} == {
        "ValidatingAdmissionWebhook": "/etc/kubernetes/wh.kubeconfig",
        "MutatingAdmissionWebhook": "/etc/kubernetes/wh.kubeconfig",
    }


def test_client_without_a_ca_says_so(tmp_path, capsys):
    assert main(["client", "--out-dir", str(tmp_path)]) == 1
    assert "run 'gen' first" in capsys.readouterr().err
