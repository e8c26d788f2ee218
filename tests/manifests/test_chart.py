"""The Helm chart (charts/hyperplace) installs what manifests/ holds.

``test_default_render_matches_manifests`` renders the chart with its default values and compares
every object with manifests/, after a normalisation that drops only Helm's own bookkeeping (its
standard labels and the keep annotation) and compares ConfigMap payloads as parsed YAML. Intended
differences are listed, with their reason, in ALLOWED_DIFFERENCES; anything else is a failure
with a diff. When manifests/ changes, re-run this test: it names each object whose chart
template must follow (or the entry to add to ALLOWED_DIFFERENCES, with its reason).
"""

from __future__ import annotations

import base64
import difflib
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from tests.helm_bin import helm_bin

# Every test here runs helm (hack/helm-bin.sh).
pytestmark = pytest.mark.gobuilt

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "hyperplace"
MANIFESTS = REPO / "manifests"
NAMESPACE = "hyperplace-system"

Key = tuple[str, str, str]  # kind, namespace, name

# Objects of manifests/ the default render does not hold (or holds and manifests/ does not), and why.
ALLOWED_DIFFERENCES: dict[Key, str] = {
    ("Namespace", "", NAMESPACE): (
        "Helm creates the release namespace (`helm install -n hyperplace-system --create-namespace`) "
        "and does not own it; label it pod-security.kubernetes.io/enforce=restricted as manifests/namespace.yaml does"
    ),
    ("Secret", NAMESPACE, "hyperplace-command-key"): (
        "the chart generates the queue-Command key (commands.keySecret.create) that manifests/README.md's "
        "install makes with kubectl create secret; the Deployments mount it under the same name either way"
    ),
}
HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
)
HELM_ANNOTATIONS = ("helm.sh/resource-policy",)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(helm_bin()), *args], capture_output=True, text=True, timeout=120)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def render(*args: str) -> list[dict[str, Any]]:
    out = helm("template", "hyperplace", str(CHART), "-n", NAMESPACE, *args)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    obj = yaml.safe_load(yaml.safe_dump(obj))  # a deep copy
    meta = obj["metadata"]
    for field, drop in (("labels", HELM_LABELS), ("annotations", HELM_ANNOTATIONS)):
        values = {k: v for k, v in (meta.get(field) or {}).items() if k not in drop}
        if values:
            meta[field] = values
        else:
            meta.pop(field, None)
    if obj["kind"] == "ConfigMap":
        obj["data"] = {k: yaml.safe_load(v) for k, v in (obj.get("data") or {}).items()}
    return obj


def manifest_objects(*paths: Path) -> dict[Key, dict[str, Any]]:
    out = {}
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") != "Kustomization":
                out[key(doc)] = doc
    return out


def compare(chart: list[dict[str, Any]], manifests: dict[Key, dict[str, Any]]) -> list[str]:
    """Differences other than the allowed ones, each with a diff."""
    rendered = {key(o): o for o in chart}
    problems = []
    for k in sorted(set(rendered) | set(manifests)):
        if k in ALLOWED_DIFFERENCES:
            continue
        if k not in rendered:
            problems.append(f"{k}: in manifests/, not rendered by the chart")
        elif k not in manifests:
            problems.append(f"{k}: rendered by the chart, not in manifests/")
        else:
            a, b = (
                yaml.safe_dump(normalise(x), sort_keys=True).splitlines() for x in (manifests[k], rendered[k])
            )
            if a != b:
                diff = "\n".join(difflib.unified_diff(a, b, "manifests", "chart", lineterm=""))
                problems.append(f"{k} differs:\n{diff}")
    return problems


def test_helm_lint_is_clean():
    out = helm("lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out.stdout
    for values in CHART.glob("values-*.yaml"):
        helm("lint", "--strict", str(CHART), "-f", str(values))


def test_default_render_matches_manifests():
    paths = [p for p in sorted(MANIFESTS.glob("*.yaml")) if p.name != "kustomization.yaml"]
    for d in ("webhooks", "controller", "scheduler", "crds"):
        paths += sorted((MANIFESTS / d).glob("*.yaml"))
    problems = compare(render("--include-crds"), manifest_objects(*paths))
    assert problems == [], "\n\n".join(problems)


def test_network_policy_matches_the_optional_manifest():
    cidrs = "{192.0.2.10/32,192.0.2.11/32,192.0.2.12/32}"  # the manifest's example addresses
    objs = render(
        "--set",
        "metrics.networkPolicy.enabled=true",
        "--set",
        f"metrics.networkPolicy.apiserverCIDRs={cidrs}",
    )
    chart = [o for o in objs if o["kind"] == "NetworkPolicy"]
    assert compare(chart, manifest_objects(MANIFESTS / "optional" / "networkpolicy.yaml")) == []


def test_chart_crds_are_the_generated_ones():
    # Regenerate with: python hack/gen_crds.py --out-dir charts/hyperplace/crds
    #                  python hack/gen_crds.py --volcano-compatible --out-dir charts/hyperplace/files/volcano-crds
    for path in sorted((MANIFESTS / "crds").glob("*.yaml")):
        assert (CHART / "crds" / path.name).read_text() == path.read_text(), path.name
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, str(REPO / "hack" / "gen_crds.py"), "--volcano-compatible", "--out-dir", tmp],
            check=True,
            capture_output=True,
            cwd=REPO,
        )
        for path in sorted(Path(tmp).glob("*.yaml")):
            assert (CHART / "files" / "volcano-crds" / path.name).read_text() == path.read_text(), path.name


def test_volcano_shaped_crds_are_kept_on_uninstall():
    crds = [
        o
        for o in render("--skip-crds", "--set", "crds.volcanoShaped=true")
        if o["kind"] == "CustomResourceDefinition"
    ]
    assert len(crds) == 5
    assert all(c["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for c in crds)
    assert not [o for o in render("--skip-crds") if o["kind"] == "CustomResourceDefinition"]


def test_next_to_volcano_renders_only_our_scheduler_under_its_own_name():
    objs = render("-f", str(CHART / "values-next-to-volcano.yaml"))
    names = {o["metadata"]["name"] for o in objs}
    assert "hyperplace-webhooks" not in names and "hyperplace-controller" not in names
    assert not [
        o
        for o in objs
        if o["kind"] in ("Queue", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    ]
    [dep] = [o for o in objs if o["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HYPERPLACE_SCHEDULER_NAME"] == "hyperplace"


def test_values_reach_the_deployments():
    objs = render(
        "-n", "batch-system",
        "--set", "image.repository=registry.example.com/hyperplace,image.tag=1.2.3",
        "--set", "scheduler.replicas=2,scheduler.resources.requests.cpu=2",
        "--set", "controller.leaderElection.lease=my-ctl",
        "--set", "metrics.https.enabled=true",
    )  # fmt: skip
    deps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"}
    sched = deps["hyperplace-scheduler"]
    assert sched["spec"]["replicas"] == 2
    container = sched["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/hyperplace:1.2.3"
    assert container["resources"]["requests"]["cpu"] == 2
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HYPERPLACE_METRICS_BIND_ADDRESS"] == ":9090"
    ctl_env = {
        e["name"]: e.get("value")
        for e in deps["hyperplace-controller"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert ctl_env["HYPERPLACE_LEADER_ELECTION_LEASE"] == "my-ctl"
    [role] = [o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == "hyperplace-controller"]
    assert ["my-ctl"] in [r.get("resourceNames") for r in role["rules"]]
    services = {o["metadata"]["name"] for o in objs if o["kind"] == "Service"}
    assert {"hyperplace-scheduler-metrics", "hyperplace-controller-metrics"} <= services
    # Everything namespaced lands in the release namespace, and the webhooks exclude it.
    assert {
        o["metadata"].get("namespace")
        for o in objs
        if o["kind"]
        not in (
            "ClusterRole",
            "ClusterRoleBinding",
            "Queue",
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        )
    } == {"batch-system"}
    [vwc] = [o for o in objs if o["kind"] == "ValidatingWebhookConfiguration"]
    assert vwc["webhooks"][0]["clientConfig"]["service"]["namespace"] == "batch-system"
    assert "batch-system" in vwc["webhooks"][1]["namespaceSelector"]["matchExpressions"][0]["values"]


def test_discovery_presets_reach_the_controller_configmap():
    values = {"controller": {"discovery": {"configMapName": "volcano-controller-configmap", "networkTopologyDiscovery": [
        {"source": "label", "enabled": True, "interval": "10m", "config": {"presets": ["nvidia-clique", "gke"]}}]}}}  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(values, f)
        f.flush()
        objs = render("-f", f.name)
    [cm] = [
        o
        for o in objs
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "volcano-controller-configmap"
    ]
    # The controller's own parser accepts it and selects the presets.
    from controller.hypernode.discovery import parse_discovery_config
    from controller.hypernode.presets import selected_presets

    source = parse_discovery_config(cm).enabled("label")
    assert source is not None and [p.name for p in selected_presets(source.config)] == [
        "nvidia-clique",
        "gke",
    ]


def test_bad_values_are_refused_with_a_message():
    out = helm(
        "template",
        "x",
        str(CHART),
        "--set",
        "scheduler.replicas=2,scheduler.leaderElection.enabled=false",
        check=False,
    )
    assert (
        out.returncode != 0
        and "scheduler.replicas is 2 but scheduler.leaderElection.enabled is false" in out.stderr
    )
    out = helm("template", "x", str(CHART), "--set", "webhooks.certs.mode=vault", check=False)
    assert out.returncode != 0 and "webhooks.certs.mode must be external, certManager or helm" in out.stderr


def test_generated_certificates_cover_the_webhook_service():
    objs = render("--set", "webhooks.certs.mode=helm")
    [secret] = [o for o in objs if o["kind"] == "Secret" and o["type"] == "kubernetes.io/tls"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert f"hyperplace-webhooks.{NAMESPACE}.svc" in sans
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert.verify_directly_issued_by(ca)
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        [cfg] = [o for o in objs if o["kind"] == kind]
        assert {h["clientConfig"]["caBundle"] for h in cfg["webhooks"]} == {secret["data"]["ca.crt"]}


def test_cert_manager_issues_and_injects():
    objs = render("--set", "webhooks.certs.mode=certManager")
    certs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Certificate"}
    assert certs["hyperplace-webhooks"]["spec"]["secretName"] == "hyperplace-webhooks-tls"
    assert f"hyperplace-webhooks.{NAMESPACE}.svc" in certs["hyperplace-webhooks"]["spec"]["dnsNames"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        [cfg] = [o for o in objs if o["kind"] == kind]
        assert (
            cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            == f"{NAMESPACE}/hyperplace-webhooks"
        )


@pytest.mark.parametrize("values", sorted(p.name for p in CHART.glob("values*.yaml")))
def test_every_values_file_renders(values: str):
    assert render("-f", str(CHART / values))


def _deployments(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objs if o["kind"] == "Deployment"}


def _env(pod: dict[str, Any]) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}


def _secret_volume(pod: dict[str, Any], name: str) -> str:
    [vol] = [v for v in pod["volumes"] if v["name"] == name]
    return str(vol["secret"]["secretName"])


def test_the_chart_makes_the_command_key_both_components_mount():
    objs = render()
    [secret] = [
        o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == "hyperplace-command-key"
    ]
    key = base64.b64decode(secret["data"]["key"])
    assert len(key) == 64 and key.isalnum()
    from hyperplace.pki.commandmark import load_key

    assert load_key(key) == key
    # helm template has no cluster to look up, so each render draws a new key (upgrades keep it).
    [again] = [
        o for o in render() if o["kind"] == "Secret" and o["metadata"]["name"] == "hyperplace-command-key"
    ]
    assert again["data"]["key"] != secret["data"]["key"]
    pods = _deployments(objs)
    for name in ("hyperplace-webhooks", "hyperplace-controller"):
        assert _secret_volume(pods[name], "command-key") == "hyperplace-command-key"
        assert _env(pods[name])["HYPERPLACE_COMMAND_KEY_FILE"] == "/etc/hyperplace/command-key/key"


def test_an_existing_command_key_secret_is_used_and_not_made():
    objs = render("--set", "commands.keySecret.create=false,commands.keySecret.name=my-command-key")
    assert not [o for o in objs if o["kind"] == "Secret"]
    pods = _deployments(objs)
    for name in ("hyperplace-webhooks", "hyperplace-controller"):
        assert _secret_volume(pods[name], "command-key") == "my-command-key"


def test_volcanos_command_behaviour_is_an_explicit_choice():
    objs = render("--set", "commands.authorization=false")
    pods = _deployments(objs)
    assert pods["hyperplace-webhooks"]["containers"][0]["args"] == ["--no-command-authorization"]
    assert _env(pods["hyperplace-controller"])["HYPERPLACE_ACCEPT_UNADMITTED_COMMANDS"] == "true"
    # No SubjectAccessReviews are asked for, so the webhooks may not create them.
    [role] = [
        o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "hyperplace-webhooks"
    ]
    assert not [r for r in role["rules"] if "subjectaccessreviews" in r["resources"]]
    # The binaries parse what the chart passes.
    from controller.__main__ import parse_args as controller_args
    from webhooks.__main__ import _parser

    assert (
        _parser().parse_args(pods["hyperplace-webhooks"]["containers"][0]["args"]).command_authorization
        is False
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HYPERPLACE_ACCEPT_UNADMITTED_COMMANDS", "true")
        assert controller_args([]).accept_unadmitted_commands is True
    default = _deployments(render())
    assert "args" not in default["hyperplace-webhooks"]["containers"][0]
    assert "HYPERPLACE_ACCEPT_UNADMITTED_COMMANDS" not in _env(default["hyperplace-controller"])


def test_mtls_takes_the_serving_ca_or_a_client_ca_secret():
    pod = _deployments(render("--set", "webhooks.clientCA.enabled=true"))["hyperplace-webhooks"]
    env = _env(pod)
    assert env["HYPERPLACE_WEBHOOK_CLIENT_CA_FILE"] == "/etc/hyperplace/tls/ca.crt"
    assert "HYPERPLACE_WEBHOOK_CLIENT_NAMES" not in env  # the server's default CN
    pod = _deployments(
        render(
            "--set", "webhooks.clientCA.enabled=true,webhooks.clientCA.secretName=apiserver-client-ca",
            "--set", "webhooks.clientCA.names={hyperplace-webhook-client,prometheus}",
        )
    )["hyperplace-webhooks"]  # fmt: skip
    env = _env(pod)
    assert env["HYPERPLACE_WEBHOOK_CLIENT_CA_FILE"] == "/etc/hyperplace/client-ca/ca.crt"
    assert env["HYPERPLACE_WEBHOOK_CLIENT_NAMES"] == "hyperplace-webhook-client,prometheus"
    assert _secret_volume(pod, "client-ca") == "apiserver-client-ca"
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "client-ca"]
    assert mount["mountPath"] == "/etc/hyperplace/client-ca"


def test_extra_podgroup_status_writers_keep_ours():
    from webhooks.__main__ import _parser, _status_writers

    volcano = "system:serviceaccount:volcano-system:volcano-scheduler"
    objs = render("-n", "batch-system", "--set", f"webhooks.podGroupStatusWriters={{{volcano}}}")
    env = _env(_deployments(objs)["hyperplace-webhooks"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HYPERPLACE_PODGROUP_STATUS_WRITERS", str(env["HYPERPLACE_PODGROUP_STATUS_WRITERS"]))
        assert _status_writers(_parser().parse_args([])) == {
            "system:serviceaccount:batch-system:hyperplace-scheduler",
            "system:serviceaccount:batch-system:hyperplace-controller",
            volcano,
        }
    # Without extra writers the server's default (ours, in POD_NAMESPACE) applies.
    assert "HYPERPLACE_PODGROUP_STATUS_WRITERS" not in _env(_deployments(render())["hyperplace-webhooks"])


def test_a_network_policy_needs_the_apiservers_addresses():
    out = helm("template", "x", str(CHART), "--set", "metrics.networkPolicy.enabled=true", check=False)
    assert out.returncode != 0 and "metrics.networkPolicy.apiserverCIDRs" in out.stderr
