"""The admission webhooks, served by the real ``hyperplace-webhooks`` process over TLS and called by
a real kube-apiserver, refuse bad objects with the field named and fill in Volcano's defaults.

The webhook configurations are manifests/webhooks, rewritten the way envtest does it (and
``hack/local-up.sh``, with the same code): the ``service`` reference becomes
``url: https://127.0.0.1:<port>/<path>`` (an apiserver outside a cluster cannot reach a Service). The caBundle is left out, as in the manifests, and the server
injects it at start-up, so the deployable injection path is exercised too. Namespaced hooks are
narrowed to namespaces labelled for this module, because ``failurePolicy: Fail`` would otherwise
block every other test while the server is down.
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

from .conftest import Cluster
from .kube import REPO, Kubectl, exact, hypernode, in_namespace, load_yaml, wait_for

pytestmark = pytest.mark.apiserver

FIXTURES = REPO / "tests" / "webhooks" / "fixtures"
NS_LABEL = "hyperplace.io/webhook-test"
VALIDATING = "hyperplace-validating-webhooks"
MUTATING = "hyperplace-mutating-webhooks"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebhookServer:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    def log_tail(self) -> str:
        return "--- hyperplace-webhooks log ---\n" + "\n".join(
            self.log.read_text(errors="replace").splitlines()[-40:]
        )


def _job(namespace: str, index: int) -> dict[str, Any]:
    job = in_namespace(load_yaml(FIXTURES / "user_guide_jobs.yaml")[index], namespace)
    job["metadata"]["name"] = f"job-{uuid.uuid4().hex[:6]}"
    return job


@pytest.fixture(scope="module")
def webhooks(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    kubectl = cluster.kubectl
    tls = tmp_path_factory.mktemp("webhook-tls")
    write_tls_files(tls, generate_webhook_certs("hyperplace-webhooks", "hyperplace-system", ["127.0.0.1"]))
    port = _free_port()
    log = tls / "webhooks.log"
    # Namespaced hooks only for labelled namespaces: failurePolicy Fail would otherwise block
    # every other test while this module's server is down.
    configs = webhook_configurations(port, namespace_label=NS_LABEL)
    for config in configs:
        for hook in config["webhooks"]:
            assert "caBundle" not in hook["clientConfig"], "the manifests ship without caBundle"
    kubectl.apply(configs)
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            webhooks_argv(cluster.kubeconfig, port=port, tls_dir=tls),
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        )
    server = WebhookServer(proc, log)
    try:
        probe_ns = f"wh-probe-{uuid.uuid4().hex[:6]}"
        kubectl.run("create", "namespace", probe_ns)
        kubectl.run("label", "namespace", probe_ns, f"{NS_LABEL}=true")

        def answering() -> bool:
            # The configurations reach the apiserver's admission plugin through an informer,
            # and the caBundle arrives only once the server has injected it: poll a dry-run
            # create until the mutating webhook's default shows in the answer.
            assert proc.poll() is None, (
                f"hyperplace-webhooks exited with {proc.returncode}\n{server.log_tail()}"
            )
            out = kubectl.run(
                "create",
                "--dry-run=server",
                "-o",
                "json",
                "-f",
                "-",
                input=_dump(_job(probe_ns, 0)),
                check=False,
            )
            return out.returncode == 0 and '"maxRetry": 3' in out.stdout

        wait_for(answering, "the webhooks to answer the apiserver", describe=server.log_tail)
        yield server
    finally:
        # failurePolicy Fail: leaving the configurations behind would block later tests.
        kubectl.run(
            "delete",
            f"validatingwebhookconfiguration/{VALIDATING}",
            f"mutatingwebhookconfiguration/{MUTATING}",
            "--ignore-not-found",
        )
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _dump(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj)


@pytest.fixture
def wh_namespace(kubectl: Kubectl, namespace: str) -> str:
    kubectl.run("label", "namespace", namespace, f"{NS_LABEL}=true")
    return namespace


def test_the_server_injected_its_ca_into_both_configurations(
    webhooks: WebhookServer, kubectl: Kubectl
) -> None:
    for kind, name in (
        ("validatingwebhookconfiguration", VALIDATING),
        ("mutatingwebhookconfiguration", MUTATING),
    ):
        config = kubectl.get(kind, name)
        for hook in config["webhooks"]:
            assert hook["clientConfig"].get("caBundle"), f"{name}/{hook['name']} has no caBundle"


def test_a_hypernode_with_a_lookahead_regex_is_refused_with_go_re2s_message(
    webhooks: WebhookServer, kubectl: Kubectl
) -> None:
    name = f"lookahead-{uuid.uuid4().hex[:6]}"
    member = {"type": "Node", "selector": {"regexMatch": {"pattern": "^node(?=1)"}}}
    out = kubectl.apply([hypernode(name, 1, [member])], check=False)
    assert out.returncode != 0
    assert "validatehypernodes.hyperplace.io" in out.stderr
    assert "spec.members[0].selector.regexMatch.pattern" in out.stderr
    assert "invalid or unsupported Perl syntax: `(?=`" in out.stderr
    assert kubectl.run("get", "hypernode", name, check=False).returncode != 0


def test_a_valid_hypernode_passes_the_webhook(webhooks: WebhookServer, kubectl: Kubectl) -> None:
    name = f"valid-{uuid.uuid4().hex[:6]}"
    member = {"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[0-9]+$"}}}
    try:
        kubectl.apply([hypernode(name, 1, [member])])
    finally:
        kubectl.run("delete", "hypernode", name, "--ignore-not-found")


def test_a_hypernode_with_a_regex_member_of_hypernodes_is_refused(
    webhooks: WebhookServer, kubectl: Kubectl
) -> None:
    # Only exactMatch can name a child HyperNode; a schema-valid object the webhook alone refuses.
    name = f"regex-child-{uuid.uuid4().hex[:6]}"
    member = {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^s[0-9]$"}}}
    out = kubectl.apply([hypernode(name, 2, [member, exact("HyperNode", "s0")])], check=False)
    assert out.returncode != 0
    assert "spec.members[0].selector.regexMatch" in out.stderr


def test_a_job_whose_replicas_do_not_fill_its_partitions_is_refused_with_volcanos_message(
    webhooks: WebhookServer, kubectl: Kubectl, wh_namespace: str
) -> None:
    job = _job(wh_namespace, 1)
    job["spec"]["tasks"][0]["replicas"] = 7
    out = kubectl.apply([job], check=False)
    assert out.returncode != 0
    assert "validatejobs.hyperplace.io" in out.stderr
    assert "spec.tasks[0].replicas: 'Replicas' are not equal to TotalPartitions*PartitionSize" in out.stderr
    assert f"in task: t0, job: {job['metadata']['name']}" in out.stderr


def test_a_valid_job_is_stored_with_volcanos_defaults(
    webhooks: WebhookServer, kubectl: Kubectl, wh_namespace: str
) -> None:
    job = _job(wh_namespace, 1)
    # Leave out what the mutating webhook is meant to fill in.
    del job["spec"]["schedulerName"]
    del job["spec"]["networkTopology"]["mode"]
    kubectl.apply([job])
    stored = kubectl.get("jobs.batch.volcano.sh", "-n", wh_namespace, job["metadata"]["name"])
    spec = stored["spec"]
    assert spec["maxRetry"] == 3
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    task = spec["tasks"][0]
    assert task["minAvailable"] == 8
    assert task["maxRetry"] == 3


def test_a_namespace_outside_the_hooks_scope_is_not_mutated(
    webhooks: WebhookServer, kubectl: Kubectl, namespace: str
) -> None:
    # The control for the test above: the same Job in an unlabelled namespace never reaches the
    # webhook, so the stored defaults there come from the webhook and not from the CRD schema.
    job = _job(namespace, 1)
    kubectl.apply([job])
    stored = kubectl.get("jobs.batch.volcano.sh", "-n", namespace, job["metadata"]["name"])
    assert "maxRetry" not in stored["spec"]


def test_the_tree_checks_see_hypernodes_through_the_servers_informer(
    webhooks: WebhookServer, kubectl: Kubectl
) -> None:
    # The webhook server watches HyperNodes on the real apiserver (--hypernode-cache). A parent
    # whose tier is not above its child's is schema-valid; only the tree check, which needs the
    # stored child, refuses it.
    child, parent = f"tree-child-{uuid.uuid4().hex[:6]}", f"tree-parent-{uuid.uuid4().hex[:6]}"
    kubectl.apply([hypernode(child, 2, [exact("Node", "n0")])])
    try:
        bad_parent = hypernode(parent, 1, [exact("HyperNode", child)])

        def refused() -> str | None:
            out = kubectl.run("create", "--dry-run=server", "-f", "-", input=_dump(bad_parent), check=False)
            # Until the informer has the child, the webhook only warns that it does not exist yet.
            return out.stderr if out.returncode != 0 else None

        message = wait_for(refused, "the webhook's informer to see the child", describe=webhooks.log_tail)
        assert "spec.members[0].selector.exactMatch.name" in message
        assert (
            f'member HyperNode "{child}" has tier 2, which is not lower than this HyperNode\'s tier 1'
            in message
        )
    finally:
        kubectl.run("delete", "hypernode", child, parent, "--ignore-not-found")


def test_a_hypernode_naming_a_missing_child_is_admitted_with_a_warning(
    webhooks: WebhookServer, kubectl: Kubectl
) -> None:
    name, missing = f"warn-{uuid.uuid4().hex[:6]}", f"missing-{uuid.uuid4().hex[:6]}"
    try:
        out = kubectl.apply([hypernode(name, 2, [exact("HyperNode", missing)])])
        # kubectl prints admission warnings on stderr as "Warning: ...".
        assert (
            f'Warning: spec.members[0].selector.exactMatch.name: HyperNode "{missing}" does not exist yet'
            in out.stderr
        )
    finally:
        kubectl.run("delete", "hypernode", name, "--ignore-not-found")


def test_a_pod_of_a_partitioned_task_is_stamped_with_its_partition(
    webhooks: WebhookServer, kubectl: Kubectl, wh_namespace: str
) -> None:
    # A pod made by something other than our Job controller (an older Volcano controller, by
    # hand) still joins the right partition: task index 5 with partitions of 4 is partition 1.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "hand-made-t0-5",
            "namespace": wh_namespace,
            "labels": {
                "volcano.sh/job-name": "hand-made",
                "volcano.sh/task-spec": "t0",
                "volcano.sh/task-index": "5",
            },
            "annotations": {"volcano.sh/partition-size": "4"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    kubectl.create([pod])
    stored = kubectl.get("pod", "-n", wh_namespace, "hand-made-t0-5")
    assert stored["metadata"]["labels"]["volcano.sh/partition-id"] == "1"


def test_a_pod_without_the_job_label_never_reaches_the_webhook(
    webhooks: WebhookServer, kubectl: Kubectl, wh_namespace: str
) -> None:
    # The objectSelector keeps ordinary pods away from a failurePolicy Fail hook: the same pod
    # without volcano.sh/job-name is stored untouched.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "plain",
            "namespace": wh_namespace,
            "labels": {"volcano.sh/task-spec": "t0", "volcano.sh/task-index": "5"},
            "annotations": {"volcano.sh/partition-size": "4"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    kubectl.create([pod])
    assert (
        "volcano.sh/partition-id" not in kubectl.get("pod", "-n", wh_namespace, "plain")["metadata"]["labels"]
    )


def test_job_updates_may_change_only_what_volcano_allows(
    webhooks: WebhookServer, kubectl: Kubectl, wh_namespace: str
) -> None:
    # An UPDATE reaches the webhook with the stored object (CRD defaults applied, managedFields
    # and all) as oldObject; only real spec changes may be refused.
    job = _job(wh_namespace, 0)
    name = job["metadata"]["name"]
    kubectl.apply([job])
    kind = "jobs.batch.volcano.sh"

    def patch(body: str) -> Any:
        return kubectl.run("patch", kind, name, "-n", wh_namespace, "--type=merge", "-p", body, check=False)

    assert kubectl.run("label", kind, name, "-n", wh_namespace, "team=a").returncode == 0
    allowed = patch('{"spec": {"minAvailable": 2}}')
    assert allowed.returncode == 0, allowed.stderr
    refused = patch('{"spec": {"maxRetry": 7}}')
    assert refused.returncode != 0
    assert "spec.maxRetry: job updates may not change fields other than" in refused.stderr
    stored = kubectl.get(kind, "-n", wh_namespace, name)
    assert stored["spec"]["minAvailable"] == 2
    assert stored["spec"]["maxRetry"] == 3
