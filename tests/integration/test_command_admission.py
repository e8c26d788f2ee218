"""On a real apiserver, a queue is opened and closed only by those who may change it: a namespace
user's ``vcctl queue operate --action close`` on a shared queue is refused with the missing
permission named, a queue admin's works end to end (webhook marks it, controller obeys), and a
Command that bypassed the webhook is ignored. A plain user's forged PodGroup status is refused.

Runs ``hyperplace-webhooks`` (over TLS, called by the apiserver) and ``hyperplace-controller``
with the same command key; users are impersonated (``kubectl --as``) with RBAC made here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperplace.localup.components import webhook_configurations, webhooks_argv
from hyperplace.pki.certificates import generate_webhook_certs, write_tls_files

from . import components
from .conftest import Cluster
from .kube import PODGROUPS, REPO, Kubectl, wait_for

pytestmark = pytest.mark.apiserver

NS_LABEL = "hyperplace.io/command-test"
LEASE_NAMESPACE = "hyperplace-command-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(queue: str, uid: str, action: str, namespace: str) -> dict[str, Any]:
    """What ``vcctl queue operate --name <queue> --action <action>`` creates."""
    ref = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": queue,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": f"{queue}-{action.lower()}-", "namespace": namespace},
        "target": ref,
        "action": action,
    }


class Setup:
    def __init__(self, kubectl: Kubectl, namespace: str, webhook_log: Path, controller: Any) -> None:
        self.kubectl = kubectl
        self.namespace = namespace
        self.webhook_log = webhook_log
        self.controller = controller

    def describe(self) -> str:
        tail = "\n".join(self.webhook_log.read_text(errors="replace").splitlines()[-20:])
        return f"--- webhooks ---\n{tail}\n{self.controller.tail(30)}"

    def queue(self, name: str) -> str:
        self.kubectl.apply(
            [
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": name},
                    "spec": {"weight": 1},
                }
            ]
        )
        wait_for(lambda: self.state(name) == "Open", f"queue {name} Open", describe=self.describe)
        return str(self.kubectl.get("queues", name)["metadata"]["uid"])

    def state(self, queue: str) -> str | None:
        return (self.kubectl.get("queues", queue).get("status") or {}).get("state")

    def create_as(self, user: str, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return self.kubectl.run("create", f"--as={user}", "-f", "-", input=yaml.safe_dump(obj), check=False)

    def commands(self, namespace: str) -> list[str]:
        return [c["metadata"]["name"] for c in self.kubectl.items("commands", "-n", namespace)]


@pytest.fixture(scope="module")
def setup(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    kubectl = cluster.kubectl
    tmp = tmp_path_factory.mktemp("command-admission")
    write_tls_files(
        tmp / "tls", generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"])
    )
    key_file = tmp / "command.key"
    key_file.write_bytes(components.COMMAND_KEY)  # the key the controller below checks with
    ns = f"cmd-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", ns)
    kubectl.run("label", "namespace", ns, f"{NS_LABEL}=true")
    if kubectl.run("get", "namespace", LEASE_NAMESPACE, check=False).returncode != 0:
        kubectl.run("create", "namespace", LEASE_NAMESPACE)
    # A tenant: may create Commands and update PodGroups in its namespace, nothing on queues.
    # A queue admin: the same, and may update the one queue it administers.
    kubectl.apply(
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "tenant", "namespace": ns},
                "rules": [
                    {
                        "apiGroups": ["bus.volcano.sh"],
                        "resources": ["commands"],
                        "verbs": ["create", "get", "list"],
                    },
                    {
                        "apiGroups": ["scheduling.volcano.sh"],
                        "resources": ["podgroups"],
                        "verbs": ["create", "get", "update", "patch"],
                    },
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "tenant", "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
                "subjects": [
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "tenant"},
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "queue-admin"},
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": f"{ns}-queue-admin"},
                "rules": [
                    {
                        "apiGroups": ["scheduling.volcano.sh"],
                        "resources": ["queues"],
                        "resourceNames": [f"{ns}-team"],
                        "verbs": ["get", "update", "patch"],
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{ns}-queue-admin"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": f"{ns}-queue-admin",
                },
                "subjects": [
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "queue-admin"}
                ],
            },
        ]
    )
    port = _free_port()
    webhook_log = tmp / "webhooks.log"
    kubectl.apply(webhook_configurations(port, namespace_label=NS_LABEL))
    with webhook_log.open("wb") as fh:
        proc = subprocess.Popen(
            webhooks_argv(
                cluster.kubeconfig, port=port, tls_dir=tmp / "tls", extra=[f"--command-key-file={key_file}"]
            ),
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        )
    ctl = components.controller(cluster.kubeconfig, tmp / "controller.log", LEASE_NAMESPACE)
    s = Setup(kubectl, ns, webhook_log, ctl)
    try:
        # The webhooks answer once the apiserver has the configurations and the caBundle: a
        # Command for no queue (not judged) passes the mutating webhook then.
        probe = command("none", "u", "CloseQueue", ns)
        probe["target"] = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "u"}

        def answering() -> bool:
            assert proc.poll() is None, s.describe()
            out = kubectl.run(
                "create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(probe), check=False
            )
            return out.returncode == 0

        wait_for(answering, "the webhooks to answer the apiserver", describe=s.describe)
        yield s
    finally:
        kubectl.run(
            "delete",
            "validatingwebhookconfiguration/hyperplace-validating-webhooks",
            "mutatingwebhookconfiguration/hyperplace-mutating-webhooks",
            "--ignore-not-found",
        )
        ctl.stop()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_namespace_user_cannot_close_a_shared_queue(setup: Setup) -> None:
    shared = f"{setup.namespace}-shared"
    uid = setup.queue(shared)
    out = setup.create_as("tenant", command(shared, uid, "CloseQueue", setup.namespace))
    assert out.returncode != 0
    assert "commands.hyperplace.io" in out.stderr
    assert f"CloseQueue on queue '{shared}' needs permission to update it" in out.stderr
    assert (
        'user \'tenant\' cannot update resource "queues" in API group "scheduling.volcano.sh"' in out.stderr
    )
    assert setup.commands(setup.namespace) == []
    assert setup.state(shared) == "Open"


def test_a_queue_admin_closes_and_opens_their_queue(setup: Setup) -> None:
    team = f"{setup.namespace}-team"
    uid = setup.queue(team)
    out = setup.create_as("queue-admin", command(team, uid, "CloseQueue", setup.namespace))
    assert out.returncode == 0, out.stderr
    wait_for(lambda: setup.state(team) == "Closed", f"queue {team} Closed", describe=setup.describe)
    wait_for(lambda: setup.commands(setup.namespace) == [], "the Command served and deleted")
    assert setup.create_as("queue-admin", command(team, uid, "OpenQueue", setup.namespace)).returncode == 0
    wait_for(lambda: setup.state(team) == "Open", f"queue {team} Open again", describe=setup.describe)


def test_a_command_that_bypassed_the_webhook_is_ignored(setup: Setup) -> None:
    """A namespace the webhooks do not cover stands for a webhook disabled or bypassed."""
    shared = f"{setup.namespace}-bypassed"
    uid = setup.queue(shared)
    other = f"nohook-{uuid.uuid4().hex[:6]}"
    setup.kubectl.run("create", "namespace", other)
    setup.kubectl.create([command(shared, uid, "CloseQueue", other)])
    wait_for(lambda: setup.commands(other) == [], "the Command deleted", describe=setup.describe)
    assert setup.state(shared) == "Open"
    assert "not admitted: no hyperplace.io/command-admission annotation" in setup.controller.log.read_text()


def test_a_plain_user_cannot_forge_podgroup_status(setup: Setup) -> None:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "forged", "namespace": setup.namespace},
        "spec": {"minMember": 5, "queue": "default"},
    }
    assert setup.create_as("tenant", pg).returncode == 0
    stored = setup.kubectl.get(PODGROUPS, "forged", "-n", setup.namespace)
    stored["status"] = {"phase": "Inqueue", "running": 5}
    out = setup.kubectl.run("replace", "--as=tenant", "-f", "-", input=yaml.safe_dump(stored), check=False)
    assert out.returncode != 0
    assert "validatepodgroups.hyperplace.io" in out.stderr
    assert "status: a PodGroup's status is written only by the scheduler and the controller" in out.stderr
    assert "user 'tenant' may not set it" in out.stderr
    assert not (setup.kubectl.get(PODGROUPS, "forged", "-n", setup.namespace).get("status") or {}).get(
        "running"
    )
