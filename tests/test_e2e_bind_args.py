"""bench/e2e_bind.py's command line and the workloads it applies (bench/live): a user asking for
the JobSet or PyTorchJob variant gets the real controller started and the same gang as the Volcano
Job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench import e2e_bind
from bench.live.cluster import GPUS_PER_NODE
from bench.live.gangs import WORKLOAD_CONTROLLERS, highest_tier, jobset_manifest, pytorchjob_manifest
from bench.live.processes import health_url
from hyperplace.localup import workloads


def test_jobset_and_pytorchjob_variants_are_asked_for_by_name_and_need_their_real_controllers() -> None:
    args = e2e_bind.parser().parse_args(
        ["--workload", "jobset", "--workload", "pytorchjob", "--kcm-qps", "200", "--baseline", "none"]
    )
    assert args.workload == ["jobset", "pytorchjob"]
    assert args.kcm_qps == 200
    assert {WORKLOAD_CONTROLLERS[w] for w in args.workload} <= set(workloads.NAMES)
    assert e2e_bind.parser().parse_args([]).kcm_qps == 0  # kube-controller-manager's own rate


def test_an_unknown_workload_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        e2e_bind.parser().parse_args(["--workload", "mpijob"])
    assert "invalid choice: 'mpijob'" in capsys.readouterr().err


def _pods_of(template: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return template["metadata"], template["spec"]


def test_the_jobset_is_the_same_gang_in_jobs_of_one_node_each() -> None:
    ns, js = jobset_manifest("e2e-jobset", 1000)
    assert ns["metadata"]["name"] == js["metadata"]["namespace"] == "e2e-jobset"
    [rj] = js["spec"]["replicatedJobs"]
    job = rj["template"]["spec"]
    assert rj["replicas"] * job["completions"] == 1000
    assert job["completions"] == job["parallelism"] == GPUS_PER_NODE
    meta, spec = _pods_of(job["template"])
    assert spec["schedulerName"] == "volcano"
    assert meta["annotations"]["volcano.sh/network-topology-highest-tier"] == str(highest_tier(1000))
    # A gang that does not divide into nodes is one Job.
    [rj] = jobset_manifest("x", 13)[1]["spec"]["replicatedJobs"]
    assert (rj["replicas"], rj["template"]["spec"]["completions"]) == (1, 13)


def test_the_pytorchjob_is_one_master_and_the_rest_workers() -> None:
    _, job = pytorchjob_manifest("e2e-pytorchjob", 1000)
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert (specs["Master"]["replicas"], specs["Worker"]["replicas"]) == (1, 999)
    assert job["metadata"]["annotations"]["volcano.sh/network-topology-mode"] == "hard"
    assert "Worker" not in pytorchjob_manifest("x", 1)[1]["spec"]["pytorchReplicaSpecs"]


def test_a_restarted_process_is_awaited_where_it_answers(tmp_path: Path) -> None:
    url, ctx = health_url(["kube-controller-manager", "--secure-port=4431", "--v=1"])
    assert url == "https://127.0.0.1:4431/healthz" and ctx is not None
    assert health_url(["manager", "--health-probe-bind-address=127.0.0.1:81"]) == (
        "http://127.0.0.1:81/readyz",
        None,
    )
    cfg = tmp_path / "jobset-config.yaml"
    cfg.write_text(yaml.safe_dump({"health": {"healthProbeBindAddress": "127.0.0.1:82"}}))
    assert health_url(["manager", f"--config={cfg}", "--kube-api-qps=500"])[0] == (
        "http://127.0.0.1:82/readyz"
    )
