"""The deployable manifests: well-formed, wired together (names, ports, volumes, scripts), least
privilege RBAC that still grants what each component needs, and the hack scripts."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from .fake_discovery import fake_discovery
from .kube_schema import REPO

MANIFESTS = REPO / "manifests"
NS = "hyperplace-system"
YAML_FILES = sorted(p for p in MANIFESTS.rglob("*.yaml") if p.name != "kustomization.yaml")
KUBECTL = shutil.which("kubectl")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@cache
def _all() -> list[dict[str, Any]]:
    """Every object in manifests/, parsed once (the tests only read it)."""
    return [d for p in YAML_FILES for d in _docs(p)]


def _one(kind: str, name: str) -> dict[str, Any]:
    [doc] = [d for d in _all() if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _console_scripts() -> dict[str, str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


# --------------------------------------------------------------------------------------------
# Well-formed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", YAML_FILES, ids=[str(p.relative_to(MANIFESTS)) for p in YAML_FILES])
def test_every_manifest_parses_and_names_itself(path: Path) -> None:
    docs = _docs(path)
    assert docs, f"{path} holds no object"
    for doc in docs:
        assert isinstance(doc.get("apiVersion"), str) and doc["apiVersion"]
        assert isinstance(doc.get("kind"), str) and doc["kind"]
        assert isinstance(doc.get("metadata", {}).get("name"), str) and doc["metadata"]["name"]


def test_no_two_objects_share_kind_namespace_and_name() -> None:
    keys = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in _all()]
    assert len(keys) == len(set(keys))


CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "Queue",
}


def test_namespaced_objects_live_in_hyperplace_system() -> None:
    for doc in _all():
        if doc["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in doc["metadata"], doc["metadata"]["name"]
        else:
            assert doc["metadata"].get("namespace") == NS, (doc["kind"], doc["metadata"]["name"])


def test_kustomization_lists_every_manifest_but_the_default_queue() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    for entry in listed:
        assert (MANIFESTS / entry).is_file(), entry
    expected = {str(p.relative_to(MANIFESTS)) for p in YAML_FILES if p.parent.name != "optional"}
    expected -= {"default-queue.yaml"}
    assert set(listed) == expected
    # Namespace first so a plain `kubectl apply -f` of the list in order works too.
    assert listed[0] == "namespace.yaml"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_kustomize_builds_the_whole_set() -> None:
    out = subprocess.run(
        [str(KUBECTL), "kustomize", str(MANIFESTS)], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    built = [d for d in yaml.safe_load_all(out.stdout) if d]
    kinds = sorted(d["kind"] for d in built)
    assert kinds.count("CustomResourceDefinition") == 5
    assert kinds.count("Deployment") == 3
    assert len(built) == sum(
        len(_docs(MANIFESTS / e))
        for e in yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"]
    )
    for dep in (d for d in built if d["kind"] == "Deployment"):
        assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "hyperplace:0.1.0"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_client_dry_run_accepts_every_manifest(tmp_path: Path) -> None:
    """`kubectl apply --dry-run=client --validate=false` decodes and maps every object. kubectl
    needs API discovery for that even in a client dry run, so a local fake serves it (real
    group/version/resource names for built-ins, the committed CRDs for ours)."""
    crds = [d for d in _all() if d["kind"] == "CustomResourceDefinition"]
    with fake_discovery(crds) as url:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": url}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                    "users": [{"name": "fake", "user": {}}],
                    "current-context": "fake",
                }
            )
        )
        base = [str(KUBECTL), "apply", "--dry-run=client", "--validate=false"]
        env = {"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        files = [arg for path in YAML_FILES for arg in ("-f", str(path))]
        out = subprocess.run(
            [*base, *files], capture_output=True, text=True, timeout=60, check=False, env=env
        )
        # The kustomization as users apply it, too.
        kust = subprocess.run(
            [*base, "-k", str(MANIFESTS)], capture_output=True, text=True, timeout=60, check=False, env=env
        )
    assert kust.returncode == 0, kust.stderr
    assert (
        "validatingwebhookconfiguration.admissionregistration.k8s.io/hyperplace-validating-webhooks"
        in kust.stdout
    )
    assert out.returncode == 0, out.stderr
    created = [line for line in out.stdout.splitlines() if line.endswith(" created (dry run)")]
    assert len(created) == len(_all()), out.stdout
    assert "hypernodes.topology.volcano.sh" in out.stdout
    assert "queue.scheduling.volcano.sh/default created (dry run)" in out.stdout


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------

DEPLOYMENTS = {"hyperplace-webhooks": 2, "hyperplace-controller": 1, "hyperplace-scheduler": 1}


@pytest.mark.parametrize(("name", "replicas"), sorted(DEPLOYMENTS.items()))
def test_deployment_shape(name: str, replicas: int) -> None:
    dep = _one("Deployment", name)
    assert dep["spec"]["replicas"] == replicas
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    _one("ServiceAccount", pod["serviceAccountName"])
    [container] = pod["containers"]
    assert container["image"] == "hyperplace:0.1.0"
    assert container["command"] == [name]
    assert name in _console_scripts(), f"{name} is not a console script in pyproject.toml"
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert get["port"] in ports
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    quota = _one("ResourceQuota", "hyperplace-critical-pods")
    assert quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"] == ["system-cluster-critical"]
    assert container["resources"]["limits"]["memory"]
    env = {e["name"]: e for e in container.get("env", [])}
    if replicas == 1:
        assert env["HYPERPLACE_LEADER_ELECT"]["value"] == "true"
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        vol = volumes[mount["name"]]
        if "configMap" in vol:
            _one("ConfigMap", vol["configMap"]["name"])


def test_webhook_service_routes_443_to_the_tls_port() -> None:
    svc = _one("Service", "hyperplace-webhooks")
    dep = _one("Deployment", "hyperplace-webhooks")
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    [container] = dep["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    by_port = {p["port"]: p["targetPort"] for p in svc["spec"]["ports"]}
    assert ports[by_port[443]] == 9443  # webhooks and /metrics, both over TLS
    assert set(by_port) == {443}  # the plain-HTTP probe port is not exposed
    secret = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if "secret" in v)
    assert secret["secret"]["secretName"] == "hyperplace-webhooks-tls"


@pytest.mark.parametrize("name", ["hyperplace-controller", "hyperplace-scheduler"])
def test_only_the_probe_port_leaves_the_pod_and_metrics_stay_on_localhost(name: str) -> None:
    """/metrics is served on 127.0.0.1 inside the pod (manifests/README.md says how to serve it
    over HTTPS); no Service exposes it, and the process accepts what the Deployment sets."""
    parse = pytest.importorskip(
        f"{'controller' if name.endswith('controller') else 'scheduler_plugin'}.__main__"
    )
    serving = pytest.importorskip("hyperplace.runtime.serving")
    dep = _one("Deployment", name)
    [container] = dep["spec"]["template"]["spec"]["containers"]
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [("health", 8080)]
    assert not any(d["kind"] == "Service" and d["metadata"]["name"] == f"{name}-metrics" for d in _all())
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    with pytest.MonkeyPatch.context() as mp:
        for k in ("HYPERPLACE_METRICS_BIND_ADDRESS", "HYPERPLACE_HEALTH_PORT"):
            mp.delenv(k, raising=False)
        for k, v in env.items():
            mp.setenv(k, v)
        args = parse.parse_args([])
    assert args.health_port == 8080
    assert serving.MetricsServing.from_args(args) == serving.MetricsServing("127.0.0.1", 9090)


def test_scheduler_configmap_is_the_built_in_default() -> None:
    conf_mod = pytest.importorskip("scheduler_plugin.config.scheduler_conf")
    cm = _one("ConfigMap", "hyperplace-scheduler-configmap")
    config = conf_mod.load_scheduler_config(cm["data"]["volcano-scheduler.conf"], source="configmap")
    assert config.plugin("network-topology-aware") is not None
    assert config.unknown_plugins == [] and config.unknown_actions == [] and config.warnings == []
    assert config == conf_mod.DEFAULT_CONFIG
    dep = _one("Deployment", "hyperplace-scheduler")
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    mount = next(
        m
        for m in dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        if m["name"] == "scheduler-config"
    )
    assert env["HYPERPLACE_SCHEDULER_CONF"] == f"{mount['mountPath']}/volcano-scheduler.conf"


def test_controller_configmap_holds_disabled_label_and_ufm_discovery() -> None:
    discovery = pytest.importorskip("controller.hypernode.discovery")
    cm = _one("ConfigMap", discovery.CONFIGMAP_NAME)
    config = discovery.parse_discovery_config(cm)
    source, ufm = config.sources
    assert (source.source, source.enabled) == ("label", False)
    # UFM discovery, disabled, with the Secret the controller's Role lets it read.
    assert (ufm.source, ufm.enabled) == ("ufm", False)
    assert ufm.credentials == {"secretRef": {"name": "ufm-credentials", "namespace": NS}}
    tiers, warnings = discovery.label_tiers(source.config)
    assert warnings == []
    assert tiers == {"topologyA2": ["volcano.sh/hypernode", "volcano.sh/hypercluster"]}


# --------------------------------------------------------------------------------------------
# Admission webhook configurations
# --------------------------------------------------------------------------------------------

HOOKS = {
    # name: (configuration kind, path, group, resource, operations)
    "validatehypernodes.hyperplace.io": (
        "Validating",
        "/hypernodes/validate",
        "topology.volcano.sh",
        "hypernodes",
        ["CREATE", "UPDATE"],
    ),
    "validatejobs.hyperplace.io": (
        "Validating",
        "/jobs/validate",
        "batch.volcano.sh",
        "jobs",
        ["CREATE", "UPDATE"],
    ),
    "mutatejobs.hyperplace.io": ("Mutating", "/jobs/mutate", "batch.volcano.sh", "jobs", ["CREATE"]),
    "mutatepods.hyperplace.io": ("Mutating", "/pods/mutate", "", "pods", ["CREATE"]),
    "validatecommands.hyperplace.io": (
        "Validating",
        "/commands/validate",
        "bus.volcano.sh",
        "commands",
        ["CREATE", "UPDATE"],
    ),
    "mutatecommands.hyperplace.io": (
        "Mutating",
        "/commands/mutate",
        "bus.volcano.sh",
        "commands",
        ["CREATE", "UPDATE"],
    ),
    # The status subresource too, should the CRD ever get one.
    "validatepodgroups.hyperplace.io": (
        "Validating",
        "/podgroups/validate",
        "scheduling.volcano.sh",
        ["podgroups", "podgroups/status"],
        ["CREATE", "UPDATE"],
    ),
}


def _webhooks() -> dict[str, tuple[str, dict[str, Any]]]:
    out = {}
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for doc in (d for d in _all() if d["kind"] == kind):
            for hook in doc["webhooks"]:
                out[hook["name"]] = (kind.removesuffix("WebhookConfiguration"), hook)
    return out


def test_exactly_the_expected_webhooks() -> None:
    assert sorted(_webhooks()) == sorted(HOOKS)
    _one("ValidatingWebhookConfiguration", "hyperplace-validating-webhooks")
    _one("MutatingWebhookConfiguration", "hyperplace-mutating-webhooks")


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_webhook(name: str) -> None:
    kind, hook = _webhooks()[name]
    want_kind, path, group, resource, operations = HOOKS[name]
    assert kind == want_kind
    assert hook["failurePolicy"] == "Fail"
    assert hook["timeoutSeconds"] == 5
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    client = hook["clientConfig"]
    # Injected later by `hyperplace-certs inject`; present-but-empty would be reset by re-applying.
    assert "caBundle" not in client and "url" not in client
    assert client["service"] == {"name": "hyperplace-webhooks", "namespace": NS, "path": path, "port": 443}
    [rule] = hook["rules"]
    assert rule["apiGroups"] == [group]
    assert rule["resources"] == (resource if isinstance(resource, list) else [resource])
    assert rule["operations"] == operations
    excluded = hook["namespaceSelector"]["matchExpressions"]
    assert {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": [NS, "kube-system"],
    } in excluded
    if resource == "pods":
        # Only the Job controller's pods may reach a Fail-closed pod webhook.
        assert hook["objectSelector"] == {
            "matchExpressions": [{"key": "volcano.sh/job-name", "operator": "Exists"}]
        }


# --------------------------------------------------------------------------------------------
# RBAC: a small evaluator, then what each component must and must not be able to do
# --------------------------------------------------------------------------------------------


def _rules_for(sa: str, namespace: str | None) -> Iterable[dict[str, Any]]:
    docs = _all()
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs}
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = binding.get("subjects") or []
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == sa and s["namespace"] == NS for s in subjects
        ):
            continue
        bns = binding["metadata"].get("namespace")
        if binding["kind"] == "RoleBinding" and bns != namespace:
            continue
        ref = binding["roleRef"]
        role = roles[(ref["kind"], bns if ref["kind"] == "Role" else None, ref["name"])]
        yield from role.get("rules") or []


def can(
    sa: str, verb: str, group: str, resource: str, namespace: str | None = None, name: str | None = None
) -> bool:
    """Whether ServiceAccount ``sa`` in hyperplace-system may ``verb`` the resource (in
    ``namespace``, or cluster-wide when None), per the RBAC objects in manifests/."""
    for rule in _rules_for(sa, namespace):
        if group not in rule.get("apiGroups", []) or resource not in rule.get("resources", []):
            continue
        if verb not in rule.get("verbs", []) and "*" not in rule.get("verbs", []):
            continue
        names = rule.get("resourceNames")
        if names and name not in names:
            continue
        return True
    return False


WEBHOOKS_SA, CONTROLLER_SA, SCHEDULER_SA = (
    "hyperplace-webhooks",
    "hyperplace-controller",
    "hyperplace-scheduler",
)
VWC, MWC = "hyperplace-validating-webhooks", "hyperplace-mutating-webhooks"
ADM = "admissionregistration.k8s.io"

# The exact set is derived from the code in tests/rbac (recorded requests vs. these manifests);
# these spot checks keep the intent readable and name what the issue found too broad.
MUST = [
    (CONTROLLER_SA, "get", "", "secrets", NS, "ufm-credentials"),  # UFM discovery's credentials
    (WEBHOOKS_SA, "get", ADM, "validatingwebhookconfigurations", None, VWC),
    (WEBHOOKS_SA, "patch", ADM, "validatingwebhookconfigurations", None, VWC),
    (WEBHOOKS_SA, "patch", ADM, "mutatingwebhookconfigurations", None, MWC),
    (WEBHOOKS_SA, "watch", "topology.volcano.sh", "hypernodes", None, None),
    *(
        (CONTROLLER_SA, verb, group, res, None, None)
        for group, res, verbs in [
            ("batch.volcano.sh", "jobs", ["list", "watch"]),
            ("batch.volcano.sh", "jobs/status", ["patch"]),
            ("scheduling.volcano.sh", "podgroups", ["create", "update", "list", "watch"]),
            ("", "pods", ["create", "delete", "list", "watch"]),
            ("topology.volcano.sh", "hypernodes", ["create", "update", "delete", "list", "watch"]),
            ("topology.volcano.sh", "hypernodes/status", ["patch"]),
            ("", "nodes", ["list", "watch"]),
            ("scheduling.volcano.sh", "queues", ["list", "watch", "get"]),
            ("scheduling.volcano.sh", "queues/status", ["patch"]),
            ("bus.volcano.sh", "commands", ["list", "watch", "delete"]),
            # PodGroups for pods of any owner (controller.podgroup), as Volcano's controller.
            ("batch", "jobs", ["list", "watch"]),
            ("apps", "statefulsets", ["list", "watch"]),
            ("apps", "replicasets", ["list", "watch"]),
            ("", "pods", ["patch"]),
            ("scheduling.volcano.sh", "podgroups", ["delete"]),
            ("", "events", ["create"]),
        ]
        for verb in verbs
    ),
    (CONTROLLER_SA, "watch", "", "configmaps", NS, None),
    (CONTROLLER_SA, "update", "coordination.k8s.io", "leases", NS, "hyperplace-controller"),
    (CONTROLLER_SA, "create", "coordination.k8s.io", "leases", NS, None),
    *(
        (SCHEDULER_SA, verb, group, res, None, None)
        for group, res, verbs in [
            ("", "pods", ["list", "watch"]),
            ("", "pods/status", ["patch"]),
            ("", "pods/binding", ["create"]),
            ("", "events", ["create", "patch"]),
            ("", "nodes", ["list", "watch"]),
            ("scheduling.volcano.sh", "podgroups", ["list", "watch", "patch"]),
            ("scheduling.volcano.sh", "podgroups/status", ["patch"]),
            ("scheduling.volcano.sh", "queues", ["list", "watch"]),
            ("scheduling.volcano.sh", "queues/status", ["patch"]),
            ("topology.volcano.sh", "hypernodes", ["list", "watch"]),
            ("scheduling.k8s.io", "priorityclasses", ["list", "watch"]),
        ]
        for verb in verbs
    ),
    # The Job webhook's queue checks read queues through an informer.
    (WEBHOOKS_SA, "list", "scheduling.volcano.sh", "queues", None, None),
    (WEBHOOKS_SA, "watch", "scheduling.volcano.sh", "queues", None, None),
    (SCHEDULER_SA, "update", "coordination.k8s.io", "leases", NS, "hyperplace-scheduler"),
    # Learned run times, kept in one ConfigMap named after the Lease.
    (SCHEDULER_SA, "create", "", "configmaps", NS, None),
    (SCHEDULER_SA, "get", "", "configmaps", NS, "hyperplace-scheduler-runtime-history"),
    (SCHEDULER_SA, "update", "", "configmaps", NS, "hyperplace-scheduler-runtime-history"),
]

MUST_NOT = [
    # Webhooks: no Secret at all (the certificate is a mounted volume), queues read-only, and
    # only their own configurations, each under its own kind.
    (WEBHOOKS_SA, "get", "", "secrets", NS, "hyperplace-webhooks-tls"),
    (WEBHOOKS_SA, "list", "", "secrets", NS, None),
    (WEBHOOKS_SA, "patch", "scheduling.volcano.sh", "queues/status", None, None),
    (WEBHOOKS_SA, "update", "scheduling.volcano.sh", "queues", None, None),
    # Neither the scheduler nor the controller edits a queue's spec.
    (SCHEDULER_SA, "update", "scheduling.volcano.sh", "queues", None, None),
    (CONTROLLER_SA, "patch", "scheduling.volcano.sh", "queues", None, None),
    (WEBHOOKS_SA, "get", "topology.volcano.sh", "hypernodes", None, "any"),
    (WEBHOOKS_SA, "patch", ADM, "validatingwebhookconfigurations", None, "someone-elses"),
    (WEBHOOKS_SA, "patch", ADM, "validatingwebhookconfigurations", None, MWC),
    (WEBHOOKS_SA, "patch", ADM, "mutatingwebhookconfigurations", None, VWC),
    (WEBHOOKS_SA, "update", ADM, "validatingwebhookconfigurations", None, VWC),
    (WEBHOOKS_SA, "delete", ADM, "validatingwebhookconfigurations", None, VWC),
    (WEBHOOKS_SA, "create", ADM, "validatingwebhookconfigurations", None, None),
    (WEBHOOKS_SA, "create", "", "pods", None, None),
    # Controller: never binds, never edits pod specs (its pod patch only names the PodGroup) or
    # Job specs, no Secret but the UFM credentials; leases only in its namespace and its own.
    (CONTROLLER_SA, "create", "", "pods/binding", None, None),
    (CONTROLLER_SA, "update", "", "pods", None, None),
    (CONTROLLER_SA, "update", "batch.volcano.sh", "jobs", None, None),
    (CONTROLLER_SA, "patch", "batch.volcano.sh", "jobs", None, None),
    (CONTROLLER_SA, "update", "batch", "jobs", None, None),
    (CONTROLLER_SA, "update", "apps", "statefulsets", None, None),
    (CONTROLLER_SA, "get", "", "secrets", NS, None),
    (CONTROLLER_SA, "get", "", "secrets", NS, "hyperplace-webhooks-tls"),
    # Queue Commands are served (deleted), never issued or edited by the controller.
    (CONTROLLER_SA, "create", "bus.volcano.sh", "commands", None, None),
    (CONTROLLER_SA, "patch", "bus.volcano.sh", "commands", None, None),
    (CONTROLLER_SA, "update", "coordination.k8s.io", "leases", "kube-system", None),
    (CONTROLLER_SA, "update", "coordination.k8s.io", "leases", NS, "hyperplace-scheduler"),
    (CONTROLLER_SA, "get", "", "configmaps", "default", None),
    # Scheduler: no ConfigMap but its run-time history (not its configuration's, not elsewhere).
    (SCHEDULER_SA, "update", "", "configmaps", NS, "hyperplace-scheduler-configmap"),
    (SCHEDULER_SA, "get", "", "configmaps", NS, "hyperplace-controller-configmap"),
    (SCHEDULER_SA, "list", "", "configmaps", NS, None),
    (SCHEDULER_SA, "create", "", "configmaps", "default", None),
    (SCHEDULER_SA, "update", "", "configmaps", "default", "hyperplace-scheduler-runtime-history"),
    # Scheduler: never creates, deletes or patches pods (only pods/status and pods/binding),
    # never edits specs of jobs or HyperNodes.
    (SCHEDULER_SA, "patch", "", "pods", None, None),
    (SCHEDULER_SA, "update", "", "pods/status", None, None),
    (SCHEDULER_SA, "create", "", "pods", None, None),
    (SCHEDULER_SA, "delete", "", "pods", None, None),
    (SCHEDULER_SA, "update", "batch.volcano.sh", "jobs", None, None),
    (SCHEDULER_SA, "create", "topology.volcano.sh", "hypernodes", None, None),
    (SCHEDULER_SA, "get", "", "secrets", NS, None),
    (SCHEDULER_SA, "list", "", "configmaps", NS, None),
    (SCHEDULER_SA, "update", "coordination.k8s.io", "leases", NS, "hyperplace-controller"),
]


@pytest.mark.parametrize("perm", MUST, ids=lambda p: f"{p[0]}-{p[1]}-{p[3]}")
def test_rbac_grants(perm: tuple[str, str, str, str, str | None, str | None]) -> None:
    assert can(*perm), perm


@pytest.mark.parametrize("perm", MUST_NOT, ids=lambda p: f"{p[0]}-{p[1]}-{p[3]}-{p[4]}-{p[5]}")
def test_rbac_denies(perm: tuple[str, str, str, str, str | None, str | None]) -> None:
    assert not can(*perm), perm


def test_no_wildcards_in_rbac() -> None:
    for doc in _all():
        for rule in doc.get("rules") or []:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule.get(key, []), (doc["metadata"]["name"], rule)


# --------------------------------------------------------------------------------------------
# Dockerfile and hack scripts
# --------------------------------------------------------------------------------------------


def test_dockerfile_builds_a_non_root_image_of_the_package() -> None:
    text = (REPO / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert any(line.startswith("RUN pip install .") for line in lines)
    users = [line for line in lines if line.startswith("USER ")]
    assert users and users[-1].split()[1].split(":")[0].isdigit() and not users[-1].startswith("USER 0")
    # runAsUser in the Deployments matches the image's user.
    uid = int(users[-1].split()[1].split(":")[0])
    for name in DEPLOYMENTS:
        assert _one("Deployment", name)["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid


SCRIPTS = sorted((REPO / "hack").glob("*.sh"))
# The deployment scripts this suite owns; the others only have to parse.
OWN_SCRIPTS = {"kind-up.sh", "e2e-kind.sh", "verify.sh", "crdcheck.sh"}


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_hack_script_syntax(script: Path) -> None:
    out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    if script.name in OWN_SCRIPTS:
        assert script.read_text().startswith("#!/usr/bin/env bash\n")
        assert "set -euo pipefail" in script.read_text()


def test_e2e_kind_skips_cleanly_without_docker(tmp_path: Path) -> None:
    """On a machine without docker/kind the opt-in e2e says why and exits 0 without side effects."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname",):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    out = subprocess.run(
        ["/bin/bash", str(REPO / "hack" / "e2e-kind.sh")],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("SKIP e2e-kind: docker not installed")


def test_custom_resources_in_manifests_pass_their_crd() -> None:
    from .kube_schema import CRD_FILES, errors

    found = [d for d in _all() if d["kind"] in CRD_FILES]
    assert [(d["kind"], d["metadata"]["name"]) for d in found] == [("Queue", "default")]
    for doc in found:
        assert errors(doc["kind"], doc) == ([], [])


def test_certs_fit_the_manifests() -> None:
    """hyperplace-certs' defaults name the Service, namespace and Secret the manifests use, its
    serving certificate covers the name the apiserver dials, and offline injection fills every
    webhook's caBundle in the shipped configurations (which carry none)."""
    import base64

    certs_main = pytest.importorskip("certs.__main__")
    from cryptography import x509

    from hyperplace.pki.cabundle import inject_ca_bundle
    from hyperplace.pki.certificates import generate_webhook_certs

    assert (certs_main.DEFAULT_SERVICE, certs_main.DEFAULT_NAMESPACE) == ("hyperplace-webhooks", NS)
    volumes = _one("Deployment", "hyperplace-webhooks")["spec"]["template"]["spec"]["volumes"]
    assert certs_main.DEFAULT_SECRET in [v.get("secret", {}).get("secretName") for v in volumes]
    # Mounted as a volume: the webhooks never read the Secret through the API.
    assert not can(WEBHOOKS_SA, "get", "", "secrets", NS, certs_main.DEFAULT_SECRET)

    generated = generate_webhook_certs(certs_main.DEFAULT_SERVICE, certs_main.DEFAULT_NAMESPACE)
    cert = x509.load_pem_x509_certificate(generated.serving.cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    for _, hook in _webhooks().values():
        service = hook["clientConfig"]["service"]
        assert f"{service['name']}.{service['namespace']}.svc" in sans

    for kind, name in (("ValidatingWebhookConfiguration", VWC), ("MutatingWebhookConfiguration", MWC)):
        changed, injected = inject_ca_bundle(_one(kind, name), generated.ca.cert_pem)
        assert changed
        for hook in injected["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == generated.ca.cert_pem


def test_the_example_network_policy_admits_only_listed_addresses_to_the_webhook_port() -> None:
    """The webhook port is open to the control plane's addresses only (never to every pod): each
    ingress rule for it names its sources."""
    [policy] = [
        d
        for d in _docs(MANIFESTS / "optional" / "networkpolicy.yaml")
        if d["metadata"]["name"] == "hyperplace-webhooks-ingress"
    ]
    rules = policy["spec"]["ingress"]
    assert rules
    for rule in rules:
        assert rule.get("from"), "a rule without `from` admits every pod"
        assert all("ipBlock" in peer for peer in rule["from"])
