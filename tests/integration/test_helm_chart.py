"""The Helm chart against a real kube-apiserver: every object it renders is accepted (server-side
dry-run, so schema, CRDs and admission all look at it), and ``hack/local-up.sh --helm`` installs
through it with ``helm install`` and then schedules the user guide's example as the simulator does."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..helm_bin import helm_bin
from ..kube_bin import kube_bin_dir
from .conftest import Cluster
from .kube import REPO, Kubectl, wait_for
from .test_local_up import EXAMPLE, _scheduled_condition, _script_env, live_pods, simulated

pytestmark = pytest.mark.apiserver

CHART = REPO / "charts" / "hyperplace"
NAMESPACE = "hyperplace-system"


def rendered(*args: str) -> str:
    out = subprocess.run(
        [str(helm_bin()), "template", "hyperplace", str(CHART), "-n", NAMESPACE, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize(
    "values",
    [
        ("--set", "webhooks.certs.mode=helm"),
        (
            "--set",
            "metrics.https.enabled=true,metrics.networkPolicy.enabled=true",
            "--set",
            "metrics.networkPolicy.apiserverCIDRs={10.0.0.10/32}",
        ),
        ("-f", str(CHART / "values-next-to-volcano.yaml")),
        ("--skip-crds", "--set", "crds.volcanoShaped=true"),
        (
            "--set",
            "commands.authorization=false,webhooks.clientCA.enabled=true,webhooks.clientCA.secretName=client-ca",
            "--set",
            "webhooks.clientCA.names={hyperplace-webhook-client,prometheus},webhooks.podGroupStatusWriters={alice}",
        ),
    ],
    ids=["generated-certs", "metrics", "next-to-volcano", "volcano-shaped-crds", "commands-and-mtls"],
)
def test_every_rendered_object_is_accepted_by_the_apiserver(
    cluster: Cluster, values: tuple[str, ...]
) -> None:
    kubectl = cluster.kubectl
    if kubectl.run("get", "namespace", NAMESPACE, check=False).returncode != 0:
        kubectl.run("create", "namespace", NAMESPACE)
    manifest = rendered(*values)
    out = kubectl.run("apply", "--dry-run=server", "-f", "-", input=manifest, check=False)
    assert out.returncode == 0, f"{out.stderr}\n{out.stdout}"
    kinds = manifest.count("\nkind: ")
    assert out.stdout.count("(server dry run)") >= kinds - 1, out.stdout


@pytest.fixture(scope="module")
def helm_local_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, str]]]:
    bin_dir = kube_bin_dir()
    helm = helm_bin()
    state_dir = tmp_path_factory.mktemp("local-up-helm") / "state"
    env = {**_script_env(state_dir, bin_dir), "HYPERPLACE_HELM": str(helm)}
    up = subprocess.run(
        ["bash", str(REPO / "hack" / "local-up.sh"), "--helm", "--nodes", "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    try:
        logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(state_dir.glob("*.log")))
        assert up.returncode == 0, f"hack/local-up.sh --helm failed:\n{up.stderr}\n{logs}"
        kubeconfig = Path(up.stdout.strip().splitlines()[0])
        yield Kubectl(kubeconfig), env
    finally:
        if state_dir.exists():
            subprocess.run(
                ["bash", str(REPO / "hack" / "local-up.sh"), "down"], env=env, cwd=REPO, timeout=120
            )


def test_local_up_helm_installs_a_release(helm_local_up: tuple[Kubectl, dict[str, str]]) -> None:
    kubectl, env = helm_local_up
    out = subprocess.run(
        [
            env["HYPERPLACE_HELM"],
            "list",
            "-n",
            NAMESPACE,
            "--kubeconfig",
            str(kubectl.kubeconfig),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
    )
    assert '"name":"hyperplace"' in out.stdout and '"status":"deployed"' in out.stdout, (
        out.stdout + out.stderr
    )
    # What the chart made is what the running components use.
    assert kubectl.get("queue", "default")["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    vwc = kubectl.get("validatingwebhookconfiguration", "hyperplace-validating-webhooks")
    assert vwc["webhooks"][0]["clientConfig"]["url"].startswith("https://127.0.0.1:")


def test_helm_installed_suite_places_the_user_guide_as_the_simulator(
    helm_local_up: tuple[Kubectl, dict[str, str]],
) -> None:
    kubectl, _ = helm_local_up
    sim = simulated()
    want = {key: pod["node"] for key, pod in sim["pods"].items()}
    waiting = {key for key, node in want.items() if node is None}
    kubectl.run("apply", "-f", f"{EXAMPLE}/")

    def settled() -> dict[str, dict[str, object]] | None:
        pods = live_pods(kubectl)
        if set(pods) != set(want):
            return None
        for key, pod in pods.items():
            if key in waiting:
                if _scheduled_condition(pod).get("reason") != "Unschedulable":
                    return None
            elif pod.get("status", {}).get("phase") != "Running":
                return None
        return pods

    started = time.monotonic()
    pods = wait_for(settled, "every pod Running or Unschedulable", timeout=120)
    got = {key: pod["spec"].get("nodeName") for key, pod in pods.items()}
    assert got == want, f"after {time.monotonic() - started:.0f}s"


def _upgrade(kubectl: Kubectl, env: dict[str, str], *values: str) -> None:
    out = subprocess.run(
        [
            env["HYPERPLACE_HELM"],
            *("upgrade", "hyperplace", str(CHART), "-n", NAMESPACE),
            *("--kubeconfig", str(kubectl.kubeconfig), "--reuse-values", *values),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr


def test_the_command_key_survives_an_upgrade(helm_local_up: tuple[Kubectl, dict[str, str]]) -> None:
    kubectl, env = helm_local_up
    key = kubectl.get("secret", "hyperplace-command-key", "-n", NAMESPACE)["data"]["key"]
    _upgrade(kubectl, env)
    # A new key would orphan every Command the webhooks marked with the old one.
    assert kubectl.get("secret", "hyperplace-command-key", "-n", NAMESPACE)["data"]["key"] == key


def test_a_command_key_made_with_kubectl_is_used_as_it_is(
    helm_local_up: tuple[Kubectl, dict[str, str]],
) -> None:
    kubectl, env = helm_local_up
    kubectl.run("-n", NAMESPACE, "create", "secret", "generic", "own-key", "--from-literal=key=" + "k" * 32)
    try:
        # No ownership conflict: the chart does not render a Secret it did not make.
        _upgrade(kubectl, env, "--set", "commands.keySecret.name=own-key")
        secret = kubectl.get("secret", "own-key", "-n", NAMESPACE)
        assert "meta.helm.sh/release-name" not in (secret["metadata"].get("annotations") or {})
        dep = kubectl.get("deployment", "hyperplace-controller", "-n", NAMESPACE)
        vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        assert vols["command-key"]["secret"]["secretName"] == "own-key"
    finally:
        _upgrade(kubectl, env, "--set", "commands.keySecret.name=hyperplace-command-key")
        kubectl.run("-n", NAMESPACE, "delete", "secret", "own-key")
