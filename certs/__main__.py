"""``hyperplace-certs``: make the webhook's TLS material and wire its CA into the cluster.

    hyperplace-certs gen --service hyperplace-webhooks --namespace hyperplace-system --out-dir DIR [--ip 127.0.0.1]
    hyperplace-certs secret --service ... --namespace ... [--from-dir DIR] [--name hyperplace-webhooks-tls] [-o FILE]
    hyperplace-certs inject --ca-file DIR/ca.crt (--validating NAME | --mutating NAME)... [--kubeconfig F]
    hyperplace-certs inject --ca-file DIR/ca.crt --config-file webhooks.yaml   # offline: print patched YAML
    hyperplace-certs renew --out-dir DIR [--fraction 0.667] [--force]   # new serving pair when due
    hyperplace-certs client --out-dir DIR [--server NAME]... [--kubeconfig-path PATH]   # apiserver mTLS

``client`` issues, with the CA in ``--out-dir``, the client certificate the kube-apiserver
presents to a webhook that requires one (``hyperplace-webhooks --client-ca-file``), and writes
the two files the apiserver needs for it: ``webhook-client.kubeconfig`` (the certificate
inlined, one user per ``--server``) and ``admission-config.yaml`` (pass it as
``--admission-control-config-file``; it names the kubeconfig by ``--kubeconfig-path``).

``gen`` keeps an existing CA in ``--out-dir`` (``ca.crt`` + ``ca.key``) and only renews
the serving pair, so rotating does not require re-injecting the bundle. ``renew`` does the
same only once ``--fraction`` (default two-thirds) of the serving certificate's lifetime has
passed, keeping its names and lifetime: run it from cron, or let the webhook server renew
in memory (``hyperplace-webhooks`` with the CA key, see webhooks/README.md). Keys are
written symlink-safely into a directory we own (see ``hyperplace.pki.certificates``).
Exit status: 0 on success, 1 on failure, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import yaml

from hyperplace.pki.cabundle import ConfigKind, inject_ca_bundle
from hyperplace.pki.certificates import (
    CLIENT_NAME,
    RENEW_FRACTION,
    SERVING_DAYS,
    KeyPair,
    WebhookCerts,
    admission_configuration,
    generate_client_cert,
    generate_webhook_certs,
    read_tls_files,
    renew_serving_cert,
    renewal_due,
    renewal_time,
    secret_manifest,
    service_dns_names,
    webhook_client_kubeconfig,
    write_client_files,
    write_private_file,
    write_tls_files,
)
from hyperplace.runtime import flags
from hyperplace.runtime.cabundle import inject_with_kubeconfig

DESCRIPTION = """hyperplace-certs: make the webhook's TLS material and wire its CA into the cluster.

'gen' keeps an existing CA in --out-dir (ca.crt + ca.key) and only renews the serving pair, so
rotating does not require re-injecting the bundle. Exit status: 0 on success, 1 on failure,
2 on usage errors."""

DEFAULT_SERVICE = "hyperplace-webhooks"
DEFAULT_NAMESPACE = "hyperplace-system"
DEFAULT_SECRET = "hyperplace-webhooks-tls"


def _existing_ca(out_dir: Path) -> KeyPair | None:
    crt, key = out_dir / "ca.crt", out_dir / "ca.key"
    if crt.exists() and key.exists():
        return KeyPair(crt.read_bytes(), key.read_bytes())
    return None


def _generate(args: argparse.Namespace, out_dir: Path | None) -> WebhookCerts:
    ca = _existing_ca(out_dir) if out_dir is not None else None
    return generate_webhook_certs(args.service, args.namespace, args.ip, ca=ca, days=args.days)


def _cmd_gen(args: argparse.Namespace) -> int:
    out_dir = Path(args.out_dir)
    certs = _generate(args, out_dir)
    paths = write_tls_files(out_dir, certs, write_ca_key=True)
    for name, path in paths.items():
        print(f"wrote {path}" + (" (keep private)" if name.endswith(".key") else ""))
    return 0


def _cmd_renew(args: argparse.Namespace) -> int:
    out_dir = Path(args.out_dir)
    certs = read_tls_files(out_dir)
    if not certs.ca.key_pem:
        print(f"renew: {out_dir / 'ca.key'} is missing; cannot sign a new certificate", file=sys.stderr)
        return 1
    current = certs.serving.certificate
    if not args.force and not renewal_due(current, args.fraction):
        print(f"not due: renews after {renewal_time(current, args.fraction).isoformat()}")
        return 0
    serving = renew_serving_cert(certs.ca, current)
    write_tls_files(out_dir, WebhookCerts(ca=certs.ca, serving=serving))
    print(f"renewed {out_dir / 'tls.crt'}: valid until {serving.certificate.not_valid_after_utc.isoformat()}")
    return 0


def _cmd_client(args: argparse.Namespace) -> int:
    out_dir = Path(args.out_dir)
    ca = _existing_ca(out_dir)
    if ca is None:
        print(f"client: {out_dir} holds no ca.crt + ca.key (run 'gen' first)", file=sys.stderr)
        return 1
    client = generate_client_cert(ca, args.name, args.days)
    for path in write_client_files(out_dir, client).values():
        print(f"wrote {path}")
    # The apiserver matches a Service webhook on port 443 by "svc.ns.svc".
    servers = args.server or [service_dns_names(args.service, args.namespace)[2]]
    kubeconfig = write_private_file(
        out_dir,
        "webhook-client.kubeconfig",
        yaml.safe_dump(webhook_client_kubeconfig(client, servers), sort_keys=False).encode(),
    )
    print(f"wrote {kubeconfig} (keep private: it holds the client key)")
    config = write_private_file(
        out_dir,
        "admission-config.yaml",
        yaml.safe_dump(
            admission_configuration(args.kubeconfig_path or kubeconfig.resolve()), sort_keys=False
        ).encode(),
    )
    print(f"wrote {config} (kube-apiserver --admission-control-config-file)")
    return 0


def _cmd_secret(args: argparse.Namespace) -> int:
    certs = read_tls_files(args.from_dir) if args.from_dir else _generate(args, None)
    text = yaml.safe_dump(
        secret_manifest(args.name, args.namespace, certs, with_ca_key=args.with_ca_key), sort_keys=False
    )
    if args.output and args.output != "-":
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_inject(args: argparse.Namespace) -> int:
    ca_pem = Path(args.ca_file).read_bytes()
    if args.config_file:
        docs: list[Any] = [d for d in yaml.safe_load_all(Path(args.config_file).read_text()) if d]
        out = []
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind") in (
                "ValidatingWebhookConfiguration",
                "MutatingWebhookConfiguration",
            ):
                doc = inject_ca_bundle(doc, ca_pem)[1]
            out.append(doc)
        sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False))
        return 0
    names: list[tuple[ConfigKind, str]] = [("validating", n) for n in args.validating]
    names += [("mutating", n) for n in args.mutating]
    if not names:
        print(
            "inject: name at least one --validating or --mutating configuration, or --config-file",
            file=sys.stderr,
        )
        return 2
    patched = asyncio.run(
        inject_with_kubeconfig(
            names, ca_pem, kubeconfig=args.kubeconfig, context=args.context, wait_seconds=args.wait_seconds
        )
    )
    for _kind, name in names:
        print(f"{name}: {'patched' if name in patched else 'unchanged'}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = flags.parser("hyperplace-certs", DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=flags.HelpFormatter)

    def naming(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--service", metavar="NAME", default=DEFAULT_SERVICE, help="webhook Service name")
        sp.add_argument(
            "--namespace", metavar="NAMESPACE", default=DEFAULT_NAMESPACE, help="webhook Service namespace"
        )
        sp.add_argument(
            "--ip", metavar="IP", action="append", default=[], help="an IP address SAN; repeatable"
        )
        sp.add_argument(
            "--days", metavar="N", type=int, default=SERVING_DAYS, help="serving certificate lifetime"
        )

    gen = command("gen", "write ca.crt, ca.key, tls.crt, tls.key to a directory")
    naming(gen)
    gen.add_argument("--out-dir", metavar="DIR", required=True, help="where to write them")
    gen.set_defaults(func=_cmd_gen)

    sec = command("secret", "print the TLS Secret manifest (YAML)")
    naming(sec)
    sec.add_argument("--name", metavar="NAME", default=DEFAULT_SECRET, help="Secret name")
    sec.add_argument("--from-dir", metavar="DIR", help="use the files 'gen' wrote instead of new ones")
    sec.add_argument(
        "--with-ca-key",
        action="store_true",
        help="include ca.key so the webhook server renews its certificate itself",
    )
    sec.add_argument("-o", "--output", metavar="FILE", help="write to this file instead of stdout")
    sec.set_defaults(func=_cmd_secret)

    ren = command("renew", "re-issue the serving pair in a directory once it is due")
    ren.add_argument("--out-dir", metavar="DIR", required=True, help="a directory 'gen' wrote (with ca.key)")
    ren.add_argument(
        "--fraction",
        metavar="F",
        type=float,
        default=RENEW_FRACTION,
        help="renew once this fraction of the lifetime has passed",
    )
    ren.add_argument("--force", action="store_true", help="renew now")
    ren.set_defaults(func=_cmd_renew)

    cli = command("client", "issue the apiserver's webhook client certificate and its admission config")
    naming(cli)
    cli.add_argument("--out-dir", metavar="DIR", required=True, help="a directory 'gen' wrote (with ca.key)")
    cli.add_argument("--name", metavar="CN", default=CLIENT_NAME, help="the certificate's subject CN")
    cli.add_argument(
        "--server",
        metavar="NAME",
        action="append",
        default=[],
        help="webhook server the apiserver authenticates to, as it matches them: svc.ns.svc, "
        "host:port for a URL webhook, or * for all; repeatable (default: the Service's svc.ns.svc)",
    )
    cli.add_argument(
        "--kubeconfig-path",
        metavar="PATH",
        help="where the apiserver will read webhook-client.kubeconfig (default: its path here)",
    )
    cli.set_defaults(func=_cmd_client)

    inj = command("inject", "set caBundle in webhook configurations where it differs")
    inj.add_argument("--ca-file", metavar="FILE", required=True, help="the CA certificate (PEM)")
    inj.add_argument(
        "--validating",
        metavar="NAME",
        action="append",
        default=[],
        help="ValidatingWebhookConfiguration name; repeatable",
    )
    inj.add_argument(
        "--mutating", metavar="NAME", action="append", default=[], help="MutatingWebhookConfiguration name"
    )
    inj.add_argument(
        "--config-file", metavar="FILE", help="patch this manifest file offline and print it instead"
    )
    inj.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (env KUBECONFIG)")
    inj.add_argument("--context", metavar="NAME", help="kubeconfig context")
    inj.add_argument(
        "--wait-seconds",
        metavar="SECONDS",
        type=float,
        default=300.0,
        help="wait this long for a configuration to exist",
    )
    inj.set_defaults(func=_cmd_inject)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``hyperplace-certs``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except (OSError, ValueError, TimeoutError) as exc:
        print(f"hyperplace-certs {args.command}: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
