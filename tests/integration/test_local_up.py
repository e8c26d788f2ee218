"""docs/local-cluster.md, "Try it on a real control plane", as a newcomer types it:

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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hyperplace.localup.state import State, is_ours
from simulator.cli import app

from ..kube_bin import kube_bin_dir
from .kube import PODGROUPS, REPO, Kubectl, in_namespace, load_yaml, pod_node, wait_for

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
    started: float

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
    started = time.monotonic()
    up = subprocess.run(
        ["bash", str(REPO / "hack" / "local-up.sh"), "--nodes", "4", "--gpus-per-node", "8"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    lines = up.stdout.strip().splitlines()
    lu = LocalUp(state_dir, env, Path(lines[0]) if lines else Path(), up.stdout, up.stderr, started)
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


@dataclass
class Applied:
    """The example applied to local-up, once every pod is Running or Unschedulable."""

    sim: dict[str, Any]
    pods: dict[str, dict[str, Any]]
    waiting: set[str]


@pytest.fixture(scope="module")
def applied(local_up: LocalUp) -> Applied:
    kubectl = local_up.kubectl
    sim = simulated()
    want = {key: pod["node"] for key, pod in sim["pods"].items()}
    waiting = {key for key, node in want.items() if node is None}
    assert len(want) == 18 and len(waiting) == 4, "the example's known outcome"

    out = kubectl.run("apply", "-f", f"{EXAMPLE}/")
    assert "namespace/section-3-3-1 created" in out.stdout

    def settled() -> dict[str, dict[str, Any]] | None:
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

    pods = wait_for(
        settled, "every pod Running or Unschedulable", timeout=120, describe=lambda: describe(local_up)
    )
    return Applied(sim, pods, waiting)


def describe(local_up: LocalUp) -> str:
    rows = [
        f"{k}: node={pod_node(p)} phase={p.get('status', {}).get('phase')} "
        f"{_scheduled_condition(p).get('message', '')}"
        for k, p in sorted(live_pods(local_up.kubectl).items())
    ]
    return "\n".join(rows) + "\n" + local_up.logs()


def test_the_example_binds_exactly_the_pods_the_simulator_binds_to_the_same_nodes(
    local_up: LocalUp, applied: Applied
) -> None:
    want = {key: pod["node"] for key, pod in applied.sim["pods"].items()}
    got = {key: pod_node(p) for key, p in applied.pods.items()}
    assert got == want, describe(local_up)


def test_each_waiting_pod_says_why_in_an_event_and_its_condition(local_up: LocalUp, applied: Applied) -> None:
    kubectl = local_up.kubectl

    # Events are written after the pod's condition: wait for them.
    def failed_scheduling() -> dict[str, str] | None:
        found = {
            f"{e['involvedObject']['namespace']}/{e['involvedObject']['name']}": e["message"]
            for e in kubectl.items("events", "-A", "--field-selector", "reason=FailedScheduling")
            if e["type"] == "Warning"
        }
        return found if applied.waiting <= set(found) else None

    messages = wait_for(
        failed_scheduling, "a FailedScheduling event on every waiting pod", describe=local_up.logs
    )
    for key in applied.waiting:
        assert "within tier <= 1" in messages[key], messages[key]
        message = _scheduled_condition(applied.pods[key])["message"]
        assert "within tier <= 1" in message, f"{key}: {message!r} should name the topology constraint"


def test_the_podgroup_of_a_partly_placed_gang_says_why_the_rest_wait(
    local_up: LocalUp, applied: Applied
) -> None:
    """§3.3.1: the gang minimum (4) runs, so the PodGroup is Running; 4 more pods wait, and a
    condition on the PodGroup says why, as the simulator's does."""
    kubectl = local_up.kubectl
    (pg,) = kubectl.items(PODGROUPS, "-n", "section-3-3-1")
    assert pg["status"]["phase"] == "Running"

    def conditions() -> list[dict[str, Any]] | None:
        (pg,) = kubectl.items(PODGROUPS, "-n", "section-3-3-1")
        found: list[dict[str, Any]] = pg["status"].get("conditions") or []
        return found if any("within tier <= 1" in (c.get("message") or "") for c in found) else None

    live = wait_for(
        conditions,
        "a PodGroup condition saying why 4 pods wait",
        timeout=30,
        describe=lambda: str(kubectl.items(PODGROUPS, "-n", "section-3-3-1")[0]["status"]),
    )
    simulated_pg = next(v for k, v in applied.sim["podgroups"].items() if k.startswith("section-3-3-1/"))
    assert {(c["type"], c["status"], c["reason"]) for c in simulated_pg["conditions"]} <= {
        (c["type"], c["status"], c.get("reason")) for c in live
    }


@pytest.mark.parametrize("name", ["binpack-2.5", "volcano-e2e", "topograph-discovery"])
def test_other_examples_apply_as_is(local_up: LocalUp, applied: Applied, name: str) -> None:
    """The smaller examples, applied as a user would, namespaces and all. (The two large ones,
    256 and 64 nodes, take a minute each to create on 2 cores; they are left out here.)"""
    out = local_up.kubectl.run("apply", "-f", f"{REPO / 'examples' / name}/", check=False)
    assert out.returncode == 0, out.stderr
    if name == "topograph-discovery":
        # Its ConfigMap turns on label discovery in the namespace hyperplace-controller reads.
        wait_for(
            lambda: [h for h in local_up.kubectl.items("hypernodes") if "topograph" in h["metadata"]["name"]],
            "HyperNodes discovered from the topograph labels",
            describe=local_up.logs,
        )


def test_deleting_a_job_or_a_namespace_cleans_up_after_it(local_up: LocalUp) -> None:
    """kube-controller-manager's garbage collector and namespace controller, with the fake
    kubelet confirming that the pods' containers stopped. (A copy of the §3.3.3 Job in a
    namespace of its own: re-applying the example's Job would be refused, as Volcano refuses it.)"""
    kubectl = local_up.kubectl
    ns = "cleanup"
    kubectl.run("create", "namespace", ns)
    job = in_namespace(load_yaml(EXAMPLE / "30-job-3.3.3.yaml")[0], ns)
    # Onto the generated nodes, which have cpu to spare.
    job["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] = {"hyperplace.io/local-up": "true"}
    kubectl.create([job])
    running = wait_for(
        lambda: (
            [p for p in kubectl.items("pods", "-n", ns) if p.get("status", {}).get("phase") == "Running"]
            if len(kubectl.items("pods", "-n", ns)) == 2
            else None
        ),
        "the Job's 2 pods Running",
        describe=local_up.logs,
    )
    assert len(running) == 2
    kubectl.run("delete", "jobs.batch.volcano.sh", "network-topology-job", "-n", ns, "--wait=false")
    wait_for(
        lambda: not kubectl.items("pods", "-n", ns) and not kubectl.items(PODGROUPS, "-n", ns),
        "the Job's pods and PodGroup to be garbage-collected",
        describe=lambda: (
            kubectl.run("get", "pods,podgroups.scheduling.volcano.sh", "-n", ns, check=False).stdout
            + local_up.logs()
        ),
    )
    kubectl.create([job])
    wait_for(lambda: len(kubectl.items("pods", "-n", ns)) == 2, "the new Job's pods", describe=local_up.logs)
    kubectl.run("delete", "namespace", ns, "--wait=false")
    wait_for(
        lambda: kubectl.run("get", "namespace", ns, check=False).returncode != 0,
        f"namespace {ns} to be gone",
        describe=lambda: (
            kubectl.run("get", "namespace", ns, "-o", "yaml", check=False).stdout + local_up.logs()
        ),
    )


def test_nodes_stay_ready_past_the_node_monitor_grace_period(local_up: LocalUp) -> None:
    """kube-controller-manager marks a node whose Lease is not renewed within 50 s NotReady and
    taints it; the fake kubelet's heartbeats keep every node, generated or applied, Ready."""
    time.sleep(max(0.0, local_up.started + 75 - time.monotonic()))
    nodes = local_up.kubectl.items("nodes")
    assert len(nodes) > 4
    for n in nodes:
        (ready,) = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready["status"] == "True", (n["metadata"]["name"], ready)
        # (volcano-e2e's nodes carry kwok's own taint, as in Volcano's test cluster.)
        lifecycle = [t for t in n["spec"].get("taints") or [] if t["key"].startswith("node.kubernetes.io/")]
        assert not lifecycle, (n["metadata"]["name"], lifecycle)


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
