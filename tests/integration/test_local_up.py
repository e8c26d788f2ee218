"""The README's "Try it on a real control plane", as a newcomer types it:

    hack/local-up.sh
    kubectl apply -f examples/user-guide-3.3/
    ...
    hack/local-up.sh down

The real etcd, kube-apiserver and kube-controller-manager run, with hyperplace's webhooks,
controller and scheduler, and the fake kubelet. The live cluster binds exactly the pods the
simulator binds on the same directory, to the same nodes; the pods left waiting say why in events
and on their PodGroup; the garbage collector and namespace deletion work; and ``down`` leaves no
process behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hyperplace.localup.__main__ import State, is_ours
from simulator.cli import app

from ..kube_bin import kube_bin_dir
from .kube import REPO, Kubectl, pod_node, wait_for

pytestmark = pytest.mark.apiserver

EXAMPLE = REPO / "examples" / "user-guide-3.3"
SCHEDULER_CONF = REPO / "manifests" / "scheduler" / "configmap.yaml"


@dataclass
class LocalUp:
    state_dir: Path
    env: dict[str, str]
    kubeconfig: Path
    up_stdout: str
    up_stderr: str

    @property
    def kubectl(self) -> Kubectl:
        return Kubectl(self.kubeconfig)

    def script(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(REPO / "hack" / "local-up.sh"), *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=REPO,
            timeout=600,
        )

    def logs(self) -> str:
        out = []
        for log in sorted(self.state_dir.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-25:]
            out.append(f"--- {log.name} ---\n" + "\n".join(lines))
        return "\n".join(out)


def _script_env(state_dir: Path, bin_dir: Path) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "HYPERPLACE_LOCAL_UP_DIR": str(state_dir),
        "HYPERPLACE_KUBE_BIN": str(bin_dir),
        # This interpreter's environment, so the script does not set up another one.
        "VIRTUAL_ENV": str(Path(sys.executable).parent.parent),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
    }


@pytest.fixture(scope="module")
def local_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalUp]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH")
    bin_dir = kube_bin_dir()
    state_dir = tmp_path_factory.mktemp("local-up") / "state"
    env = _script_env(state_dir, bin_dir)
    # A few generated nodes beside the example's own: their nodeSelectors keep the example's
    # jobs off them, so the outcome must still be the simulator's.
    up = subprocess.run(
        ["bash", str(REPO / "hack" / "local-up.sh"), "--nodes", "4", "--gpus-per-node", "8"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    lines = up.stdout.strip().splitlines()
    lu = LocalUp(state_dir, env, Path(lines[0]) if lines else Path(), up.stdout, up.stderr)
    try:
        assert up.returncode == 0, f"hack/local-up.sh failed:\n{up.stderr}\n{lu.logs()}"
        yield lu
    finally:
        if state_dir.exists():
            lu.script("down")


def simulated() -> dict[str, Any]:
    """The simulator's outcome on the example, with the scheduler configuration local-up uses."""
    res = CliRunner().invoke(
        app,
        ["simulate", str(EXAMPLE), "--scheduler-config", str(SCHEDULER_CONF), "--output", "json"],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.stderr
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def live_pods(kubectl: Kubectl) -> dict[str, dict[str, Any]]:
    return {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p
        for p in kubectl.items("pods", "-A")
        if p["metadata"]["namespace"].startswith("section-3-3-")
    }


def _scheduled_condition(pod: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})


def test_local_up_prints_the_kubeconfig_and_one_export_line(local_up: LocalUp) -> None:
    lines = local_up.up_stdout.strip().splitlines()
    assert lines == [str(local_up.kubeconfig), f"export KUBECONFIG={local_up.kubeconfig}"]
    assert local_up.kubeconfig.is_file()
    assert str(local_up.kubeconfig).startswith(str(local_up.state_dir))


def test_the_fake_nodes_are_ready_with_gpus_under_a_leaf_spine_tree(local_up: LocalUp) -> None:
    kubectl = local_up.kubectl
    nodes = {n["metadata"]["name"]: n for n in kubectl.items("nodes", "-l", "hyperplace.io/local-up=true")}
    assert sorted(nodes) == ["node-0", "node-1", "node-2", "node-3"]
    for n in nodes.values():
        assert n["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        (ready,) = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready["status"] == "True"
        # No taint from the node lifecycle controller: the fake kubelet renews the node Lease.
        assert not n["spec"].get("taints"), n["spec"]
    hns = {h["metadata"]["name"]: h["spec"]["tier"] for h in kubectl.items("hypernodes")}
    assert {"leaf-0": 1, "spine-0": 2}.items() <= hns.items()


def test_the_example_binds_exactly_what_the_simulator_binds_and_says_why_the_rest_wait(
    local_up: LocalUp,
) -> None:
    kubectl = local_up.kubectl
    sim = simulated()
    want_node = {key: pod["node"] for key, pod in sim["pods"].items()}
    waiting = {key for key, node in want_node.items() if node is None}
    assert len(want_node) == 18 and len(waiting) == 4, "the example's known outcome"

    out = kubectl.run("apply", "-f", f"{EXAMPLE}/")
    assert "namespace/section-3-3-1 created" in out.stdout

    def settled() -> dict[str, dict[str, Any]] | None:
        pods = live_pods(kubectl)
        if set(pods) != set(want_node):
            return None
        for key, pod in pods.items():
            if key in waiting:
                if _scheduled_condition(pod).get("reason") != "Unschedulable":
                    return None
            elif pod.get("status", {}).get("phase") != "Running":
                return None
        return pods

    def describe() -> str:
        rows = [
            f"{k}: node={pod_node(p)} phase={p.get('status', {}).get('phase')} "
            f"{_scheduled_condition(p).get('message', '')}"
            for k, p in sorted(live_pods(kubectl).items())
        ]
        return "\n".join(rows) + "\n" + local_up.logs()

    pods = wait_for(settled, "every pod Running or Unschedulable", timeout=120, describe=describe)
    got_node = {key: pod_node(p) for key, p in pods.items()}
    assert got_node == want_node, describe()

    # Why the rest wait: a FailedScheduling event on each waiting pod, and the same reason on
    # the pod's PodScheduled condition.
    events = kubectl.items("events", "-A")
    for key in waiting:
        ns, name = key.split("/")
        reasons = [
            e
            for e in events
            if e["involvedObject"]["name"] == name and e["involvedObject"]["namespace"] == ns
        ]
        assert any(e["reason"] == "FailedScheduling" and e["type"] == "Warning" for e in reasons), key
        message = _scheduled_condition(pods[key])["message"]
        assert "tier" in message, f"{key}: {message!r} should name the topology constraint"

    # ... and on the PodGroup: the gang minimum ran, so it is Running, yet it carries a condition
    # explaining the 4 pods that wait.
    (pg,) = kubectl.items("podgroups", "-n", "section-3-3-1")
    assert pg["status"]["phase"] == "Running"
    conditions = pg["status"].get("conditions") or []
    explained = [c for c in conditions if "tier" in (c.get("message") or "") and c["type"] != "Scheduled"]
    assert explained, f"no PodGroup condition says why 4 pods wait: {conditions}"
    simulated_pg = next(v for k, v in sim["podgroups"].items() if k.startswith("section-3-3-1/"))
    assert {(c["type"], c["status"], c["reason"]) for c in simulated_pg["conditions"]} <= {
        (c["type"], c["status"], c.get("reason")) for c in conditions
    }


def test_deleting_a_job_or_a_namespace_cleans_up_after_it(local_up: LocalUp) -> None:
    """kube-controller-manager's garbage collector and namespace controller, with the fake
    kubelet confirming that pods on nodes stopped."""
    kubectl = local_up.kubectl
    kubectl.run("apply", "-f", f"{EXAMPLE}/")
    wait_for(
        lambda: len(kubectl.items("pods", "-n", "section-3-3-3")) == 2,
        "the 3.3.3 pods",
        describe=local_up.logs,
    )
    kubectl.run(
        "delete", "jobs.batch.volcano.sh", "network-topology-job", "-n", "section-3-3-3", "--wait=false"
    )
    wait_for(
        lambda: (
            not kubectl.items("pods", "-n", "section-3-3-3")
            and not kubectl.items("podgroups", "-n", "section-3-3-3")
        ),
        "the Job's pods and PodGroup to be garbage-collected",
        describe=lambda: (
            kubectl.run("get", "pods,podgroups", "-n", "section-3-3-3", check=False).stdout + local_up.logs()
        ),
    )
    kubectl.run("delete", "namespace", "section-3-3-2", "--wait=false")
    wait_for(
        lambda: kubectl.run("get", "namespace", "section-3-3-2", check=False).returncode != 0,
        "namespace section-3-3-2 to be gone",
        describe=lambda: (
            kubectl.run("get", "namespace", "section-3-3-2", "-o", "yaml", check=False).stdout
            + local_up.logs()
        ),
    )


def test_down_leaves_no_process_and_no_state_behind(local_up: LocalUp) -> None:
    state = State.load(local_up.state_dir)
    assert state is not None
    names = [e["name"] for e in state.processes]
    assert names == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "hyperplace-webhooks",
        "fake-kubelet",
        "hyperplace-controller",
        "hyperplace-scheduler",
    ]
    assert all(is_ours(e) for e in state.processes), "everything runs until down"
    out = local_up.script("down")
    assert out.returncode == 0, out.stderr
    assert not [e["name"] for e in state.processes if is_ours(e)]
    assert not local_up.state_dir.exists()
    # Nothing else that mentions the state directory either (a child a process left behind).
    strays = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(local_up.state_dir) in cmdline:
                strays.append(f"{proc.name}: {cmdline.replace(chr(0), ' ')}")
    assert not strays, strays
