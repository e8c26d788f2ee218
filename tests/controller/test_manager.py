"""The controller manager drives a fake API server the way the real controllers would."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.aiohttp import make_aiohttp_handler

from controller.__main__ import health_app, parse_args
from controller.manager import ControllerManager, ManagerConfig
from hyperplace.runtime.api import CONFIGMAPS, HYPERNODES, JOBS, NODES, PODGROUPS, PODS, ApiError
from hyperplace.runtime.fakeapi import FakeApi
from hyperplace.runtime.serving import MetricsServer, MetricsServing

from .test_job_reconcile import DESIGN_DOC_JOB

NS = "default"
JOB_KEY = "default/network-topology-job"


async def eventually(cond: Callable[[], bool], timeout: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


def design_job() -> dict[str, Any]:
    raw = yaml.safe_load(DESIGN_DOC_JOB)
    raw["metadata"].pop("uid")
    return raw


def pods_of(api: FakeApi) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in api.objects.get("pods", {}).values()}


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakeApi, ControllerManager]]:
    api = FakeApi()
    mgr = ControllerManager(
        api, ManagerConfig(workers=2, config_namespace="volcano-system", seed=0), now=lambda: "T"
    )
    task = asyncio.create_task(mgr.run())
    yield api, mgr
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_new_job_gets_its_podgroup_pods_and_pending_status(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    job = await api.create(JOBS, design_job(), NS)
    pg_name = f"network-topology-job-{job['metadata']['uid']}"
    await eventually(lambda: len(pods_of(api)) == 14 and api.peek(PODGROUPS, f"{NS}/{pg_name}") is not None)
    pg = api.peek(PODGROUPS, f"{NS}/{pg_name}")
    assert pg is not None and pg["spec"]["minMember"] == 3
    assert [p["name"] for p in pg["spec"]["subGroupPolicy"]] == ["task0", "task1"]
    pod = pods_of(api)["network-topology-job-task0-3"]
    assert pod["metadata"]["labels"]["volcano.sh/partition-id"] == "1"
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == pg_name
    await eventually(lambda: (api.peek(JOBS, JOB_KEY) or {}).get("status", {}).get("pending") == 14)
    status = api.peek(JOBS, JOB_KEY)["status"]  # type: ignore[index]
    assert status["state"]["phase"] == "Pending"
    assert ("patch/status", "jobs", "network-topology-job") in api.calls


async def test_running_pods_move_the_job_to_running_and_scale_down_deletes_pods(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    await api.create(JOBS, design_job(), NS)
    await eventually(lambda: len(pods_of(api)) == 14)
    for name in (
        "network-topology-job-task0-0",
        "network-topology-job-task0-1",
        "network-topology-job-task0-2",
    ):
        await api.patch(
            PODS, name, {"status": {"phase": "Running"}}, NS, subresource="status"
        )  # as a kubelet does
    await eventually(
        lambda: (api.peek(JOBS, JOB_KEY) or {}).get("status", {}).get("state", {}).get("phase") == "Running"
    )
    job = api.peek(JOBS, JOB_KEY)
    assert job is not None and job["status"]["running"] == 3
    assert job["status"]["state"]["lastTransitionTime"] == "T"

    await api.patch(JOBS, "network-topology-job", {"spec": {"tasks": _tasks_with_task1_replicas(job, 6)}}, NS)
    await eventually(lambda: len(pods_of(api)) == 12)
    assert "network-topology-job-task1-7" not in pods_of(api)


def _tasks_with_task1_replicas(job: dict[str, Any], replicas: int) -> list[dict[str, Any]]:
    tasks = copy.deepcopy(job["spec"]["tasks"])
    tasks[1]["replicas"] = replicas
    return tasks


async def test_a_deleted_pod_is_recreated(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, _ = cluster
    await api.create(JOBS, design_job(), NS)
    await eventually(lambda: len(pods_of(api)) == 14)
    await api.delete(PODS, "network-topology-job-task1-4", NS)
    await eventually(lambda: "network-topology-job-task1-4" in pods_of(api))


async def test_failed_writes_are_retried_with_backoff(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, mgr = cluster
    api.fail_next("create", 500, "InternalError", times=2)
    api.seed(JOBS, design_job())  # seeding bypasses faults: they hit the controller's creates
    await eventually(lambda: len(pods_of(api)) == 14)
    assert mgr.metrics.reconciles.labels("job", "retry")._value.get() >= 1


async def test_podgroup_conflict_is_retried_against_the_fresh_object(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    job = await api.create(JOBS, design_job(), NS)
    key = f"{NS}/network-topology-job-{job['metadata']['uid']}"
    await eventually(lambda: api.peek(PODGROUPS, key) is not None and len(pods_of(api)) == 14)
    api.fail_next("replace", 409, "Conflict")
    await api.patch(JOBS, "network-topology-job", {"spec": {"minAvailable": 5}}, NS)
    await eventually(lambda: (api.peek(PODGROUPS, key) or {})["spec"]["minMember"] == 5)


async def test_hypernode_status_counts_nodes_and_follows_node_changes(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    for i in range(3):
        await api.create(NODES, {"metadata": {"name": f"n{i}", "labels": {"rack": "r1"}}})
    leaf = {
        "metadata": {"name": "leaf"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}}],
        },
    }
    spine = {
        "metadata": {"name": "spine"},
        "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf"}}}]},
    }
    await api.create(HYPERNODES, leaf)
    await api.create(HYPERNODES, spine)

    def count(name: str) -> Any:
        return ((api.peek(HYPERNODES, name) or {}).get("status") or {}).get("nodeCount")

    await eventually(lambda: count("leaf") == 3 and count("spine") == 3)
    ready = api.peek(HYPERNODES, "spine")["status"]["conditions"][0]  # type: ignore[index]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "MembersResolved")
    await api.create(NODES, {"metadata": {"name": "n3", "labels": {"rack": "r1"}}})
    await eventually(lambda: count("spine") == 4)
    # Steady state: no further status writes once counts are right.
    writes = sum(c[0] == "patch/status" for c in api.calls)
    await asyncio.sleep(0.1)
    assert sum(c[0] == "patch/status" for c in api.calls) == writes


async def test_discovery_configmap_creates_updates_and_deletes_hypernodes(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, _ = cluster
    for i in range(4):
        labels = {
            "kubernetes.io/hostname": f"n{i}",
            "example.com/leaf": f"l{i // 2}",
            "example.com/spine": "s0",
        }
        await api.create(NODES, {"metadata": {"name": f"n{i}", "labels": labels}})
    conf = {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "config": {
                    "networkTopologyTypes": {
                        "rdma": [
                            {"nodeLabel": "example.com/spine"},
                            {"nodeLabel": "example.com/leaf"},
                            {"nodeLabel": "kubernetes.io/hostname"},
                        ]
                    }
                },
            }
        ]
    }
    await api.create(
        CONFIGMAPS,
        {
            "metadata": {"name": "volcano-controller-configmap", "namespace": "volcano-system"},
            "data": {"volcano-controller.conf": yaml.safe_dump(conf)},
        },
        "volcano-system",
    )
    await eventually(lambda: len(api.objects.get("hypernodes", {})) == 3)
    hns = api.objects["hypernodes"]
    spine = next(h for h in hns.values() if h["spec"]["tier"] == 2)
    assert spine["metadata"]["labels"]["volcano.sh/network-topology-source"] == "label"
    await eventually(
        lambda: (
            (api.peek(HYPERNODES, spine["metadata"]["name"]) or {}).get("status", {}).get("nodeCount") == 4
        )
    )

    # Both nodes of leaf l1 move to l0: l1 disappears, l0 grows.
    for i in (2, 3):
        await api.patch(NODES, f"n{i}", {"metadata": {"labels": {"example.com/leaf": "l0"}}})
    await eventually(lambda: len(api.objects["hypernodes"]) == 2)
    leaf = next(h for h in api.objects["hypernodes"].values() if h["spec"]["tier"] == 1)
    assert len(leaf["spec"]["members"]) == 4


async def test_health_endpoints_report_sync_and_metrics(cluster: tuple[FakeApi, ControllerManager]) -> None:
    _, mgr = cluster
    await eventually(mgr.synced)
    async with TestClient(TestServer(health_app(mgr, None))) as client:
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/readyz")).status == 200
        assert (await client.get("/metrics")).status == 404  # served apart, on localhost
    metrics = MetricsServer(MetricsServing("127.0.0.1", 1), make_aiohttp_handler(mgr.registry))
    async with TestClient(TestServer(metrics.app)) as client:
        text = await (await client.get("/metrics")).text()
        assert "hyperplace_controller_queue_depth" in text


async def test_not_ready_until_caches_sync() -> None:
    mgr = ControllerManager(FakeApi())
    async with TestClient(TestServer(health_app(mgr, None))) as client:
        assert (await client.get("/readyz")).status == 503


def test_flags_default_from_the_deployment_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "hyperplace-system")
    monkeypatch.setenv("HYPERPLACE_HEALTH_PORT", "9091")
    monkeypatch.setenv("HYPERPLACE_LEADER_ELECT", "false")
    monkeypatch.setenv("HYPERPLACE_LEADER_ELECTION_LEASE", "lease-x")
    args = parse_args([])
    assert (args.lease_namespace, args.health_port, args.leader_elect, args.lease_name) == (
        "hyperplace-system",
        9091,
        False,
        "lease-x",
    )
    assert args.config_namespace == "hyperplace-system"
    assert parse_args(["--leader-elect", "--metrics-port", "1"]).leader_elect is True
    assert MetricsServing.from_args(parse_args(["--metrics-port", "9100"])) == MetricsServing(
        "127.0.0.1", 9100
    )


async def test_jobs_are_reconciled_even_if_priority_classes_cannot_be_listed() -> None:
    api = FakeApi()
    mgr = ControllerManager(api, ManagerConfig(workers=1))
    mgr.priority_classes.list_once = _forbidden  # type: ignore[method-assign]
    task = asyncio.create_task(mgr.run())
    try:
        await api.create(JOBS, design_job(), NS)
        await eventually(lambda: len(pods_of(api)) == 14)
        assert mgr.synced() and not mgr.priority_classes.synced.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _forbidden(*, consistent: bool = False) -> None:
    raise ApiError(403, "Forbidden", "priorityclasses is forbidden")


async def test_entry_point_leads_reconciles_and_releases_the_lease_on_shutdown() -> None:
    from controller.__main__ import run
    from hyperplace.runtime.api import LEASES

    api = FakeApi()
    args = parse_args(
        [
            "--leader-elect",
            "--health-port",
            "0",
            "--metrics-bind-address",
            "0",
            "--namespace",
            "hs",
            "--lease-name",
            "ctl",
        ]
    )
    task = asyncio.create_task(run(args, api=api))
    await api.create(JOBS, design_job(), NS)
    await eventually(lambda: len(pods_of(api)) == 14)
    holder = (api.peek(LEASES, "hs/ctl") or {})["spec"]["holderIdentity"]
    assert holder
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert (api.peek(LEASES, "hs/ctl") or {})["spec"]["holderIdentity"] == ""


@pytest.mark.parametrize("volcano_crds", [False, True])
async def test_job_updates_reach_the_podgroup_and_keep_its_status(volcano_crds: bool) -> None:
    # Volcano's job controller keeps minMember, minTaskMember, minResources and priorityClassName
    # in sync; on Volcano's PodGroup CRD (no status subresource) the update must not wipe the
    # status the scheduler wrote.
    api = FakeApi()
    if volcano_crds:
        api.no_status_subresource = {"podgroups"}
    mgr = ControllerManager(api, ManagerConfig(workers=2, seed=0), now=lambda: "T")
    task = asyncio.create_task(mgr.run())
    try:
        job = await api.create(JOBS, design_job(), NS)
        pg_key = f"{NS}/network-topology-job-{job['metadata']['uid']}"
        await eventually(lambda: api.peek(PODGROUPS, pg_key) is not None)
        await api.patch(
            PODGROUPS,
            pg_key.split("/")[1],
            {"status": {"phase": "Inqueue"}},
            NS,
            subresource=None if volcano_crds else "status",
        )
        current = api.peek(JOBS, JOB_KEY)
        assert current is not None
        updated = copy.deepcopy(current)
        updated["spec"]["minAvailable"] = 6
        updated["spec"]["priorityClassName"] = "high"
        updated["spec"]["tasks"][0]["minAvailable"] = 6
        updated["spec"]["tasks"][1]["replicas"] = 10
        await api.replace(JOBS, updated, NS)

        def synced() -> bool:
            pg = api.peek(PODGROUPS, pg_key) or {}
            spec = pg.get("spec") or {}
            return spec.get("minMember") == 6 and spec.get("priorityClassName") == "high"

        await eventually(synced)
        pg = api.peek(PODGROUPS, pg_key)
        assert pg is not None
        assert pg["spec"]["minTaskMember"] == {"task0": 6, "task1": 10}
        assert pg["status"]["phase"] == "Inqueue"
        assert len([k for k in api.objects.get("podgroups", {})]) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_podgroup_under_the_legacy_name_is_updated_not_duplicated(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    # Volcano before v1.5 named the PodGroup after the job; its controller still finds it.
    api, _ = cluster
    api.seed(
        PODGROUPS,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "network-topology-job", "namespace": NS},
            "spec": {"minMember": 1, "queue": "default"},
            "status": {"phase": "Running"},
        },
    )
    await api.create(JOBS, design_job(), NS)
    await eventually(lambda: len(pods_of(api)) == 14)
    await eventually(
        lambda: (
            (api.peek(PODGROUPS, f"{NS}/network-topology-job") or {}).get("spec", {}).get("minMember") == 3
        )
    )
    assert list(api.objects["podgroups"]) == [f"{NS}/network-topology-job"]
    pod = pods_of(api)["network-topology-job-task0-0"]
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "network-topology-job"


def test_status_patches_remove_stale_nested_keys() -> None:
    """A merge patch merges nested objects: a phase count gone from the desired status must
    be nulled where it sits, or the stored status never matches and the writes never stop."""
    from controller.kube_io import merge_patch_to
    from hyperplace.runtime.fakeapi import merge_patch

    old = {"taskStatusCount": {"worker": {"phase": {"Pending": 4}}}, "pending": 4, "gone": 1}
    new = {"taskStatusCount": {"worker": {"phase": {"Running": 4}}}, "pending": 0}
    assert merge_patch(old, merge_patch_to(old, new)) == new
    assert merge_patch_to(new, new) == new  # nothing to remove: the patch is the status


async def test_job_status_settles_once_its_pods_run(cluster: tuple[FakeApi, ControllerManager]) -> None:
    api, mgr = cluster
    await api.create(JOBS, design_job(), NS)
    await eventually(lambda: len(pods_of(api)) == 14)
    for name in pods_of(api):
        await api.patch(PODS, name, {"status": {"phase": "Running"}}, NS, subresource="status")
    await eventually(lambda: (api.peek(JOBS, JOB_KEY) or {}).get("status", {}).get("running") == 14)
    assert all(await asyncio.gather(*(q.drain(5.0) for q in mgr.queues)))  # every queue drained
    counts = (api.peek(JOBS, JOB_KEY) or {})["status"]["taskStatusCount"]
    assert counts == {"task0": {"phase": {"Running": 6}}, "task1": {"phase": {"Running": 8}}}
    writes = sum(c[0] == "patch/status" and c[1] == "jobs" for c in api.calls)
    await asyncio.sleep(0.2)
    assert sum(c[0] == "patch/status" and c[1] == "jobs" for c in api.calls) == writes


class _SlowCreates(FakeApi):
    """Pod creates take a moment, so how many are in flight at once can be seen."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = self.most_in_flight = 0
        self.attempts: list[str] = []  # pod names in the order their creates were sent

    async def create(self, res: Any, obj: Any, namespace: str | None = None, **kw: Any) -> Any:
        if res is not PODS or kw.get("subresource"):
            return await super().create(res, obj, namespace, **kw)
        self.attempts.append(obj["metadata"]["name"])
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            return await super().create(res, obj, namespace, **kw)
        finally:
            self.in_flight -= 1


async def test_a_jobs_pods_are_created_in_parallel_within_the_limit_and_a_failure_stops_none() -> None:
    api = _SlowCreates()
    # One pod's create fails once: the other 13 are still sent in the same reconcile, and
    # the retry creates the missing one.
    failing = "network-topology-job-task1-2"
    api.fail_next("create", 500, "InternalError", name=failing)
    mgr = ControllerManager(
        api, ManagerConfig(workers=1, config_namespace="volcano-system", pod_concurrency=4), now=lambda: "T"
    )
    task = asyncio.create_task(mgr.run())
    try:
        await api.create(JOBS, design_job(), NS)
        await eventually(lambda: len(pods_of(api)) == 14)
        retry = [i for i, name in enumerate(api.attempts) if name == failing][1]
        assert set(api.attempts[:retry]) == set(pods_of(api))  # every pod sent before the retry
        assert 1 < api.most_in_flight <= 4
        assert mgr.metrics.reconciles.labels("job", "retry")._value.get() >= 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_pod_concurrency_flag_defaults_to_parallel_creates() -> None:
    assert parse_args([]).pod_concurrency == 64
    assert parse_args(["--pod-concurrency", "1"]).pod_concurrency == 1


async def test_hypernode_models_are_parsed_once_until_a_hypernode_changes(
    cluster: tuple[FakeApi, ControllerManager],
) -> None:
    api, mgr = cluster

    def leaf(name: str) -> dict[str, Any]:
        member = {"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}
        return {"metadata": {"name": name}, "spec": {"tier": 1, "members": [member]}}

    await api.create(HYPERNODES, leaf("leaf"))
    await eventually(lambda: "leaf" in mgr.hypernode_ctl.hypernode_models())
    first = mgr.hypernode_ctl.hypernode_models()
    assert mgr.hypernode_ctl.hypernode_models() is first  # every reconcile of a pass shares one parse
    await api.create(HYPERNODES, leaf("leaf2"))
    await eventually(lambda: "leaf2" in mgr.hypernode_ctl.hypernode_models())
    assert mgr.hypernode_ctl.hypernode_models() is not first and "leaf2" not in first
