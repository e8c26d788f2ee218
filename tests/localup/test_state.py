"""``local-up down`` stops exactly the processes ``up`` recorded: never a stranger that reused a
recorded pid, and it leaves nothing of its state behind."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from hyperplace.localup.__main__ import main
from hyperplace.localup.components import Process
from hyperplace.localup.state import State, _cmdline, is_ours, stop_processes


def sleeper(tmp_path: Path, name: str) -> Process:
    p = Process(
        name, [sys.executable, "-c", "import time; time.sleep(120)"], tmp_path / f"{name}.log", detached=True
    )
    # Until exec completes, /proc shows an empty command line.
    deadline = time.monotonic() + 10
    while not _cmdline(p.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return p


def test_down_stops_the_recorded_processes_and_removes_the_state(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state = State(state_dir)
    procs = [sleeper(tmp_path, "a"), sleeper(tmp_path, "b")]
    for p in procs:
        state.add(p.name, p.pid, p.argv, p.log)
    assert all(is_ours(e) for e in State.load(state_dir).processes)  # type: ignore[union-attr]

    assert main(["--state-dir", str(state_dir), "down"]) == 0
    for p in procs:
        assert p.proc.wait(5) is not None
    assert not state_dir.exists()
    assert main(["--state-dir", str(state_dir), "down"]) == 0, "a second down has nothing to do"


def test_a_pid_now_running_something_else_is_left_alone(tmp_path: Path) -> None:
    stranger = sleeper(tmp_path, "stranger")
    try:
        state = State(tmp_path / "state")
        # The record says the pid ran etcd; it now runs something else.
        state.add("etcd", stranger.pid, ["/opt/kube/etcd", "--data-dir=/x"], tmp_path / "etcd.log")
        assert not is_ours(state.processes[0])
        assert stop_processes(state, timeout=1) == []
        assert stranger.alive()
    finally:
        stranger.stop()


def test_node_stop_and_start_annotate_the_node_with_the_running_cluster_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hack/local-up.sh node stop NAME`` is ``kubectl annotate`` of the Node with the
    cluster's kubeconfig (the fake kubelet obeys the annotation); ``start`` removes it; with no
    cluster running it says so and fails."""
    bin_dir, record = tmp_path / "bin", tmp_path / "kubectl.args"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    state_dir = tmp_path / "state"
    assert main(["--state-dir", str(state_dir), "node", "stop", "node-03"]) == 1
    state = State(state_dir, kubeconfig=str(tmp_path / "kubeconfig"))
    state.save()
    assert main(["--state-dir", str(state_dir), "node", "stop", "node-03", "node-04"]) == 0
    assert main(["--state-dir", str(state_dir), "node", "start", "node-03"]) == 0
    assert record.read_text().splitlines() == [
        f"--kubeconfig={tmp_path / 'kubeconfig'} annotate --overwrite node node-03 node-04 "
        "hyperplace.io/fake-kubelet=stopped",
        f"--kubeconfig={tmp_path / 'kubeconfig'} annotate --overwrite node node-03 hyperplace.io/fake-kubelet-",
    ]
