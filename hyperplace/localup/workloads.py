"""The real workload controllers on a local control plane: the Kubeflow training operator, JobSet
and LeaderWorkerSet, as built by ``hack/workload-bin.sh``.

For each, :func:`prepare` returns what to apply first (its CRDs and what its manager needs to start)
and how to run it. Their admission webhooks are served by their own managers; with no Service
network here they are registered by URL on 127.0.0.1, with a certificate made for that address,
their pod webhooks only for their own pods. Used by ``hack/local-up.sh --with`` and by
``tests/integration/test_workload_controllers.py``.
"""

from __future__ import annotations

import base64
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hyperplace.pki.certificates import WebhookCerts, generate_ca, generate_serving_cert, write_tls_files

NAMES = ("training-operator", "jobset", "lws")
VERSIONS = {"training-operator": "v1.8.1", "jobset": "v0.12.0", "lws": "v0.10.0"}
# Pods each controller's pod webhook is for (its own), so no other pod waits on it.
POD_SELECTORS = {"jobset": "jobset.sigs.k8s.io/jobset-name", "lws": "leaderworkerset.sigs.k8s.io/name"}
CONFIG_API = {"jobset": "config.jobset.x-k8s.io/v1alpha1", "lws": "config.lws.x-k8s.io/v1alpha1"}
# The training operator's ValidatingWebhookConfiguration: its cert rotator waits to inject a CA
# into it; registered with no webhook (nothing reaches its Service here).
TRAINING_VWC = "validator.training-operator.kubeflow.org"
TRAINING_NAMESPACE = "kubeflow"
# Where the training operator's webhook server reads its certificate (fixed in v1.8; in a cluster
# the kubelet mounts the cert Secret there, and the operator is not ready until files are there).
TRAINING_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")


class Unavailable(Exception):
    """The controller was not built; the message is hack/workload-bin.sh's reason."""


@dataclass
class Plan:
    """How to run one controller: apply ``objects`` (after ``crds``), then ``argv`` with ``env``."""

    name: str
    argv: list[str]
    env: dict[str, str]
    crds: list[Path]
    objects: list[dict[str, Any]] = field(default_factory=list)
    health: str = ""  # URL of its readiness endpoint


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_dir(bin_root: Path, name: str) -> Path:
    """The controller's directory under ``hack/workload-bin.sh``'s cache, or :class:`Unavailable`."""
    d = bin_root / f"{name}-{VERSIONS[name]}"
    if (d / "manager").is_file() and os.access(d / "manager", os.X_OK):
        return d
    reason = bin_root / f"{name}-{VERSIONS[name]}.unavailable"
    why = reason.read_text().strip() if reason.exists() else "not built (run: bash hack/workload-bin.sh)"
    raise Unavailable(f"{name} {VERSIONS[name]}: {why}")


def _webhooks_by_url(path: Path, name: str, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The controller's webhook configurations, called by URL on 127.0.0.1:``port``."""
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        doc["metadata"] = {"name": f"{name}-{doc['metadata']['name']}"}
        for hook in doc.get("webhooks") or []:
            svc = (hook.get("clientConfig") or {}).get("service") or {}
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{svc.get('path', '/')}",
                "caBundle": base64.b64encode(ca_pem).decode(),
            }
            if any("pods" in (r.get("resources") or []) for r in hook.get("rules") or []):
                hook["objectSelector"] = {
                    "matchExpressions": [{"key": POD_SELECTORS[name], "operator": "Exists"}]
                }
        out.append(doc)
    return out


def prepare(name: str, bin_root: Path, kubeconfig: Path, workdir: Path) -> Plan:
    """What running ``name`` takes on the control plane of ``kubeconfig``."""
    d = build_dir(bin_root, name)
    workdir.mkdir(parents=True, exist_ok=True)
    crds = sorted((d / "crds").glob("*.yaml"))
    env = {"KUBECONFIG": str(kubeconfig)}
    probe = _free_port()
    health = f"http://127.0.0.1:{probe}/readyz"
    if name == "training-operator":
        argv = [
            str(d / "manager"),
            f"--kubeconfig={kubeconfig}",
            "--gang-scheduler-name=volcano",
            "--enable-scheme=pytorchjob",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{probe}",
            f"--webhook-server-port={_free_port()}",
        ]
        env["MY_POD_NAMESPACE"] = TRAINING_NAMESPACE
        # Play the kubelet's Secret mount: a certificate on disk (nothing calls its webhooks here).
        ca = generate_ca("hyperplace-local-training-operator-ca")
        serving = generate_serving_cert(
            ca, [f"training-operator.{TRAINING_NAMESPACE}.svc"], ["127.0.0.1"], 365
        )
        write_tls_files(TRAINING_CERT_DIR, WebhookCerts(ca=ca, serving=serving))
        objects: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TRAINING_NAMESPACE}},
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "training-operator-webhook-cert", "namespace": TRAINING_NAMESPACE},
            },
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": TRAINING_VWC},
                "webhooks": [],
            },
        ]
        return Plan(name, argv, env, crds, objects, health)
    port = _free_port()
    ca = generate_ca(f"hyperplace-local-{name}-ca")
    serving = generate_serving_cert(ca, ["localhost"], ["127.0.0.1"], 365)
    cert_dir = workdir / f"{name}-certs"
    write_tls_files(cert_dir, WebhookCerts(ca=ca, serving=serving))
    config = {
        "apiVersion": CONFIG_API[name],
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(cert_dir)},
    }
    cfg = workdir / f"{name}-config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    argv = [str(d / "manager"), f"--kubeconfig={kubeconfig}", f"--config={cfg}"]
    if name == "lws":
        argv.append("--leader-elect=false")
    objects = _webhooks_by_url(d / "webhooks.yaml", name, port, ca.cert_pem)
    return Plan(name, argv, env, crds, objects, health)


def crd_names(plan: Plan) -> list[str]:
    """``plural.group`` of the CRDs a plan applies (to wait for them to be served)."""
    out = []
    for path in plan.crds:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, Mapping) and doc.get("kind") == "CustomResourceDefinition":
                out.append(str(doc["metadata"]["name"]))
    return out
