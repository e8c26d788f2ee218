"""What each deployable component asks of the API server, recorded, and what its RBAC grants.

Each component is run through its own entry point (``run(args)`` with the flags parsed from the
environment its Deployment sets) against the in-memory API server, through the code paths a
cluster exercises: leading and releasing the Lease, placing a gang, reporting an unplaceable one,
restarting onto its predecessor's Events, scaling a Job down, discovering HyperNodes from labels,
injecting the CA bundle. ``FakeApi.accesses`` records every request as the RBAC authorizer sees
it. The grants are read from ``manifests/<component>/rbac.yaml`` and bound to the component's
ServiceAccount as the apiserver would (ClusterRoleBinding: everywhere; RoleBinding: in the
Role's namespace).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
import socket
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from hyperplace.runtime.api import (
    COMMANDS,
    CONFIGMAPS,
    DEVICE_CLASSES,
    HYPERNODES,
    JOBS,
    K8S_PODGROUPS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    STORAGE_CLASSES,
    Resource,
)
from hyperplace.runtime.fakeapi import Access, FakeApi, access_of

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
COMPONENTS = ("scheduler", "controller", "webhooks")
SYSTEM_NS = "hyperplace-system"

VALIDATING_CONFIGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
MUTATING_CONFIGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)


# -- the manifests ----------------------------------------------------------------------------


def documents(component: str, kind: str) -> list[dict[str, Any]]:
    """The ``kind`` objects of ``manifests/<component>/*.yaml``."""
    out: list[dict[str, Any]] = []
    for path in sorted((MANIFESTS / component).glob("*.yaml")):
        out += [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == kind]
    return out


def deployment_env(component: str) -> dict[str, str]:
    """The container environment the Deployment sets (fieldRefs resolved as the kubelet would)."""
    (dep,) = documents(component, "Deployment")
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    ns = dep["metadata"]["namespace"]
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        else:
            path = var["valueFrom"]["fieldRef"]["fieldPath"]
            env[var["name"]] = {"metadata.namespace": ns, "metadata.name": f"{component}-0"}[path]
    return env


def service_account(component: str) -> tuple[str, str]:
    """(namespace, name) of the ServiceAccount the Deployment runs as."""
    (dep,) = documents(component, "Deployment")
    return dep["metadata"]["namespace"], dep["spec"]["template"]["spec"]["serviceAccountName"]


@dataclass(frozen=True)
class Grant:
    """One (apiGroup, resource, verb) of one rule, where it applies (None: every namespace)."""

    group: str
    resource: str
    verb: str
    namespace: str | None
    names: frozenset[str]  # resourceNames; empty: any name
    role: str  # "ClusterRole/x" or "Role/ns/x", for messages

    def allows(self, a: Access) -> bool:
        """Whether this grant authorizes ``a`` (RBAC's RuleAllows plus the binding's scope)."""
        if (a.group, a.resource_path, a.verb) != (self.group, self.resource, self.verb):
            return False
        if self.namespace is not None and a.namespace != self.namespace:
            return False
        # resourceNames never match a request without a name (list, watch, create).
        return not self.names or (a.name is not None and a.name in self.names)


def grants(component: str) -> list[Grant]:
    """Every grant the component's ServiceAccount holds from its own rbac.yaml."""
    sa_ns, sa = service_account(component)
    docs = [d for d in yaml.safe_load_all((MANIFESTS / component / "rbac.yaml").read_text()) if d]
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs}
    out: list[Grant] = []
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == sa and s.get("namespace") == sa_ns
            for s in b["subjects"]
        ):
            continue
        bound_ns = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
        ref = b["roleRef"]
        role = roles[(ref["kind"], bound_ns if ref["kind"] == "Role" else None, ref["name"])]
        label = f"{ref['kind']}/{bound_ns + '/' if bound_ns else ''}{ref['name']}"
        for rule in role["rules"]:
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        out.append(
                            Grant(g, r, v, bound_ns, frozenset(rule.get("resourceNames") or ()), label)
                        )
    return out


# -- running the components -------------------------------------------------------------------


async def eventually(cond: Callable[[], Any], what: str, timeout: float = 20.0) -> None:
    """Wait until ``cond()`` holds (a hang fails with ``what``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def as_user(api: FakeApi, call: Awaitable[Any]) -> Any:
    """A request of the test itself (a user or kubelet), left out of the component's record.

    The fake server never suspends inside a call, so nothing else runs in between."""
    n = len(api.accesses)
    try:
        return await call
    finally:
        del api.accesses[n:]


def _used(api: FakeApi, verb: str, resource: str, name: str | None = None) -> bool:
    return any(
        a.verb == verb and a.resource_path == resource and (name is None or a.name == name)
        for a in api.accesses
    )


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _cluster(api: FakeApi) -> None:
    """Two racks of two 4-cpu nodes, their HyperNodes, the default Queue (seeded: unrecorded)."""
    from tests.scheduler.builders import hypernode, node

    for r in range(2):
        names = [f"n{r}-{i}" for i in range(2)]
        for n in names:
            api.seed(NODES, node(n, cpu=4, labels={"example.com/rack": f"r{r}", "example.com/spine": "s0"}))
        api.seed(HYPERNODES, hypernode(f"rack{r}", 1, nodes=names).to_dict())
    api.seed(
        QUEUES,
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}},
    )


async def scheduler_usage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeApi:
    """The scheduler leads, binds a gang, reports an unplaceable one, restarts onto its Events."""
    from scheduler_plugin.__main__ import parse_args, run
    from tests.scheduler.builders import job_pods, podgroup

    env = deployment_env("scheduler")
    # The configuration file is the ConfigMap mounted at HYPERPLACE_SCHEDULER_CONF.
    (cm,) = documents("scheduler", "ConfigMap")
    conf = tmp_path / "volcano-scheduler.conf"
    # The deployed configuration plus the preempt action, so evictions are recorded too.
    text = cm["data"]["volcano-scheduler.conf"]
    with_preempt = re.sub(r'actions: "([^"]*)allocate', r'actions: "\1allocate, preempt', text, count=1)
    assert with_preempt != text, "the scheduler configuration has no allocate action"
    conf.write_text(with_preempt)
    env["HYPERPLACE_SCHEDULER_CONF"] = str(conf)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    args = parse_args(
        [
            "--health-port",
            "0",
            "--metrics-bind-address",
            "0",
            "--schedule-period",
            "0.05",
            # No PersistentVolume controller here: PreBind gives the claims back (get, update).
            "--volume-bind-timeout",
            "0.2",
        ]
    )
    lease = env["HYPERPLACE_LEADER_ELECTION_LEASE"]

    api = FakeApi()
    _cluster(api)
    _storage(api)
    _devices(api)
    # The default Queue learns run times: the leader keeps them in its ConfigMap.
    api.objects["queues"]["default"]["metadata"]["annotations"] = {
        "hyperplace.io/runtime-estimate": "history"
    }
    topology = {"mode": "hard", "highestTierAllowed": 1}
    api.seed(PODGROUPS, podgroup("fits", 4, topology=topology).to_dict())
    for p in job_pods("fits", 4, cpu=2):
        api.seed(PODS, p)
    api.seed(PODGROUPS, podgroup("too-big", 6, topology=topology).to_dict())
    for p in job_pods("too-big", 6, cpu=2):
        api.seed(PODS, p)
    # A low-priority gang fills every node; a high-priority one preempts it (pods/status for
    # DisruptionTarget, pods/eviction), and "fits" then takes the other rack.
    for name, value in (("low", 10), ("high", 1000)):
        api.seed(PRIORITY_CLASSES, {"metadata": {"name": name}, "value": value})
    api.seed(PODGROUPS, podgroup("lowrun", 4, priority_class="low").to_dict())
    for p, n in zip(job_pods("lowrun", 4, cpu=4), ["n0-0", "n0-1", "n1-0", "n1-1"], strict=True):
        p["spec"].update(nodeName=n, priorityClassName="low")
        p["status"].update(phase="Running", startTime="2026-01-01T00:00:00Z")
        api.seed(PODS, p)
    api.seed(PODGROUPS, podgroup("urgent", 2, topology=topology, priority_class="high").to_dict())
    # Kubernetes' own PodGroup (scheduling.k8s.io/v1beta1), a gang no node can hold: its
    # PodGroupInitiallyScheduled=False goes through its /status.
    api.seed(
        K8S_PODGROUPS,
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "k8s-gang", "namespace": "default"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]},
            },
        },
    )
    for p in job_pods("k8s-gang", 2, cpu=8):
        p["metadata"].get("annotations", {}).pop("scheduling.k8s.io/group-name", None)
        p["spec"]["schedulingGroup"] = {"podGroupName": "k8s-gang"}
        api.seed(PODS, p)
    for p in job_pods("urgent", 2, cpu=4):
        p["spec"]["priorityClassName"] = "high"
        api.seed(PODS, p)

    for incarnation in range(2):  # the second finds its predecessor's Events
        stop = asyncio.Event()
        task = asyncio.create_task(run(args, api=api, stop=stop))
        await eventually(lambda: _used(api, "create", "pods/binding"), "the gang's binds")
        if incarnation == 0:
            # VolumeBinding's PreBind: a claimRef, a selected node, then both given back.
            await eventually(lambda: _used(api, "update", "persistentvolumes"), "a volume's claimRef")
            await eventually(
                lambda: _used(api, "update", "persistentvolumeclaims"), "a claim's selected node"
            )
            await eventually(lambda: _used(api, "get", "persistentvolumeclaims"), "claims given back")
            # DynamicResources' PreBind: the finalizer, then allocation and reservation (a
            # conflict makes it read the claim again).
            await eventually(lambda: _used(api, "update", "resourceclaims"), "a ResourceClaim's finalizer")
            await eventually(
                lambda: _used(api, "patch", "resourceclaims/status"), "a ResourceClaim's allocation"
            )
            await eventually(lambda: _used(api, "get", "resourceclaims"), "a ResourceClaim read again")
        if incarnation == 0:
            await eventually(lambda: _used(api, "create", "pods/eviction"), "the preemption's evictions")
        await eventually(lambda: _used(api, "patch", "pods/status"), "the unplaceable pods' conditions")
        await eventually(lambda: _used(api, "patch", "podgroups"), "the allocated-HyperNode annotation")
        await eventually(lambda: _used(api, "patch", "podgroups/status"), "PodGroup status")
        if incarnation == 0:
            await eventually(
                lambda: any(
                    a.verb == "patch"
                    and a.group == "scheduling.k8s.io"
                    and a.resource_path == "podgroups/status"
                    for a in api.accesses
                ),
                "PodGroupInitiallyScheduled on Kubernetes' own PodGroup",
            )
        await eventually(lambda: _used(api, "patch", "queues/status"), "Queue status.allocated")
        if incarnation == 0:
            await eventually(lambda: _used(api, "create", "events"), "Events")
        else:
            await eventually(lambda: _used(api, "patch", "events"), "counting on the predecessor's Events")
            # The preemptor's gang runs and ends: a run the next leader should know.
            await _run_and_end(api, "urgent")
        stop.set()
        await asyncio.wait_for(task, 20)
        # The evicted gang (first leader), the urgent one (second): each run is written.
        verb = "create" if incarnation == 0 else "update"
        assert _used(api, verb, "configmaps"), f"the learned run times are kept ({verb})"
        assert _used(api, "update", "leases", lease), "the Lease is renewed and released"
    return api


def _storage(api: FakeApi) -> None:
    """A node of its own for two pods with claims: one matched to a local volume, one to be
    provisioned there (seeded: unrecorded)."""
    from tests.scheduler.builders import node, pod
    from tests.volumes.builders import claim, mounts, storage_class, volume

    api.seed(NODES, node("n-storage", cpu=4))
    api.seed(STORAGE_CLASSES, storage_class("local"))
    api.seed(STORAGE_CLASSES, storage_class("lvm", provisioner="lvm.csi.example.com"))
    api.seed(PERSISTENT_VOLUMES, volume("local-n-storage", on={"kubernetes.io/hostname": ["n-storage"]}))
    for name, cls in (("dataset", "local"), ("scratch", "lvm")):
        api.seed(PERSISTENT_VOLUME_CLAIMS, claim(name, cls=cls))
        api.seed(PODS, pod(f"uses-{name}", None, cpu=1, extra_spec=mounts(name)))


def _devices(api: FakeApi) -> None:
    """A node of its own with one DRA GPU, and a pod whose claim (made from a template) gets
    it; the claim's first status write meets a conflict (seeded: unrecorded)."""
    from tests.devices.builders import claim, claim_spec, device_class, gpu_slice, template, uses_template
    from tests.scheduler.builders import node, pod

    api.seed(NODES, node("n-gpu", cpu=4))
    api.seed(DEVICE_CLASSES, device_class())
    api.seed(RESOURCE_SLICES, gpu_slice("n-gpu", 1))
    api.seed(RESOURCE_CLAIM_TEMPLATES, template("one-gpu", claim_spec(1)))
    p = pod("uses-gpu", None, cpu=1)
    name = uses_template(p, "one-gpu")
    api.seed(PODS, p)
    owner = api.objects["pods"]["default/uses-gpu"]  # as stored: the uid the claim's owner names
    api.seed(RESOURCE_CLAIMS, claim(name, claim_spec(1), owner_pod=owner))
    api.fail_next("patch/status", 409, "Conflict", name=name)


async def _run_and_end(api: FakeApi, group: str) -> None:
    """The kubelet runs a bound gang's pods, then they succeed (requests of the test)."""
    pods = [p for p in api.objects["pods"].values() if p["metadata"]["name"].startswith(f"{group}-")]
    assert pods and all(p["spec"].get("nodeName") for p in pods), f"{group} is bound"
    for phase in ("Running", "Succeeded"):
        for p in pods:
            status = {"phase": phase, "startTime": "2026-01-01T00:00:00Z"}
            await as_user(
                api,
                api.patch(PODS, p["metadata"]["name"], {"status": status}, "default", subresource="status"),
            )
        await asyncio.sleep(0.3)  # a few cycles see it


async def controller_usage(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    """The controller leads, turns a Job into a PodGroup and pods, scales it down, keeps
    HyperNode status, serves queue Commands, and discovers HyperNodes from node labels and
    from UFM."""
    from controller.__main__ import parse_args, run
    from tests.controller.test_manager import design_job

    env = deployment_env("controller")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    args = parse_args(["--health-port", "0", "--metrics-bind-address", "0"])
    lease = env["HYPERPLACE_LEADER_ELECTION_LEASE"]
    config_ns = env["KUBE_POD_NAMESPACE"]
    api = FakeApi()
    _cluster(api)
    task = asyncio.create_task(run(args, api=api))
    try:
        job = await as_user(api, api.create(JOBS, design_job(), "default"))
        await eventually(lambda: len(api.objects.get("pods", {})) == 14, "the Job's pods")
        await eventually(lambda: _used(api, "patch", "jobs/status"), "Job status")
        await eventually(lambda: _used(api, "patch", "hypernodes/status"), "HyperNode status")
        await eventually(lambda: _used(api, "patch", "queues/status"), "Queue state and counts")
        # Scale task1 down: fewer pods, a smaller minMember in the PodGroup.
        spec = copy.deepcopy(job["spec"])
        spec["tasks"][1]["replicas"] = 4
        spec["tasks"][1]["partitionPolicy"]["totalPartitions"] = 2
        spec["minAvailable"] = 2
        await as_user(api, api.patch(JOBS, job["metadata"]["name"], {"spec": spec}, "default"))
        await eventually(lambda: _used(api, "delete", "pods"), "scale-down")
        await eventually(lambda: _used(api, "update", "podgroups"), "the PodGroup update")
        await _queue_commands(api)
        await _discovery(api, config_ns)
        await _podgroups_of_any_owner(api)
    finally:
        await _stop(task)
    assert _used(api, "update", "leases", lease), "the Lease is renewed and released"
    return api


async def _podgroups_of_any_owner(api: FakeApi) -> None:
    """A StatefulSet with a bad group-min-member: its pods get a PodGroup (with the
    InvalidAnnotation condition) and the group-name annotation, each pod a Warning Event; scaled
    to zero, its PodGroup is deleted."""
    # lazy: as the other stories here, the test helpers load only when this story runs
    from hyperplace.runtime.api import STATEFULSETS

    # lazy: as above
    from tests.controller.test_podgroup_controller import owner_ref, pod, statefulset

    sts = statefulset("db", 2, {"scheduling.volcano.sh/group-min-member": "many"})
    sts["metadata"]["namespace"] = "default"
    sts = await as_user(api, api.create(STATEFULSETS, sts, "default"))
    for i in range(2):
        p = pod(f"db-{i}", owner_ref("StatefulSet", sts, "apps/v1"))
        p["metadata"]["namespace"] = "default"
        await as_user(api, api.create(PODS, p, "default"))
    await eventually(lambda: _used(api, "patch", "pods"), "the pods named their PodGroup")
    await eventually(lambda: _used(api, "create", "events"), "the Warning Event")
    await eventually(lambda: _used(api, "patch", "podgroups/status"), "the InvalidAnnotation condition")
    await as_user(api, api.patch(STATEFULSETS, "db", {"spec": {"replicas": 0}}, "default"))
    await eventually(lambda: _used(api, "delete", "podgroups"), "the scaled-to-zero PodGroup deleted")


async def _queue_commands(api: FakeApi) -> None:
    """``vcctl queue operate --action close`` on the default queue, and a Command naming a
    queue that does not exist (looked up before it is dropped)."""
    from tests.controller.test_queue_commands import command_for, vcctl_command

    default = api.peek(QUEUES, "default")
    assert default is not None
    await as_user(api, api.create(COMMANDS, vcctl_command(default, "CloseQueue"), "default"))
    await as_user(api, api.create(COMMANDS, command_for("gone", "OpenQueue"), "default"))
    await eventually(lambda: not api.objects.get("commands"), "both Commands served")
    await eventually(lambda: _used(api, "get", "queues", "gone"), "the missing queue looked up")


async def _discovery(api: FakeApi, config_ns: str) -> None:
    conf = {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "config": {
                    "networkTopologyTypes": {
                        "rdma": [
                            {"nodeLabel": "example.com/spine"},
                            {"nodeLabel": "example.com/rack"},
                            {"nodeLabel": "kubernetes.io/hostname"},
                        ]
                    }
                },
            }
        ]
    }
    cm = {
        "metadata": {"name": "volcano-controller-configmap", "namespace": config_ns},
        "data": {"volcano-controller.conf": yaml.safe_dump(conf)},
    }
    await as_user(api, api.create(CONFIGMAPS, cm, config_ns))
    await eventually(lambda: _used(api, "create", "hypernodes"), "discovered HyperNodes")
    # Both nodes of rack r1 move to r0: the r1 HyperNode goes, r0's members change.
    for i in range(2):
        patch = {"metadata": {"labels": {"example.com/rack": "r0"}}}
        await as_user(api, api.patch(NODES, f"n1-{i}", patch))
    await eventually(lambda: _used(api, "delete", "hypernodes"), "a vanished HyperNode deleted")
    await eventually(lambda: _used(api, "update", "hypernodes"), "a HyperNode's members updated")
    # UFM discovery too: it reads its credentials Secret (the fabric itself is out of reach here,
    # which only makes the fetch fail after the read).
    conf["networkTopologyDiscovery"].append(
        {
            "source": "ufm",
            "enabled": True,
            "interval": "1h",
            "credentials": {"secretRef": {"name": "ufm-credentials", "namespace": config_ns}},
            "config": {"endpoint": "https://127.0.0.1:1"},
        }
    )
    cm["data"] = {"volcano-controller.conf": yaml.safe_dump(conf)}
    await as_user(api, api.replace(CONFIGMAPS, cm, config_ns))
    await eventually(lambda: _used(api, "get", "secrets", "ufm-credentials"), "the UFM credentials read")


class _AdmissionApi:
    """``kubernetes_asyncio``'s AdmissionregistrationV1Api, served by the fake (what
    ``certs.inject`` calls), recording get/patch as the authorizer sees them."""

    api: FakeApi  # set per test

    def __init__(self, _client: object) -> None:
        pass

    async def _read(self, res: Resource, name: str) -> dict[str, Any]:
        return await self.api.get(res, name)

    async def _patch(self, res: Resource, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        self.api.accesses.append(access_of("patch", res, None, name))
        obj = self.api.peek(res, name)
        assert obj is not None
        for op in ops:  # the JSON patch inject sends: a resourceVersion test, then adds
            parts = op["path"].strip("/").split("/")
            target: Any = obj
            for p in parts[:-1]:
                target = target[int(p)] if isinstance(target, list) else target[p]
            if op["op"] == "test":
                assert target[parts[-1]] == op["value"]
            else:
                target[parts[-1]] = op["value"]
        return obj

    async def read_validating_webhook_configuration(self, name: str) -> dict[str, Any]:
        return await self._read(VALIDATING_CONFIGS, name)

    async def read_mutating_webhook_configuration(self, name: str) -> dict[str, Any]:
        return await self._read(MUTATING_CONFIGS, name)

    async def patch_validating_webhook_configuration(self, name: str, body: Any) -> dict[str, Any]:
        return await self._patch(VALIDATING_CONFIGS, name, body)

    async def patch_mutating_webhook_configuration(self, name: str, body: Any) -> dict[str, Any]:
        return await self._patch(MUTATING_CONFIGS, name, body)


class _AuthorizationApi:
    """kubernetes-asyncio's AuthorizationV1Api as the queue-Command check calls it, recording the
    SubjectAccessReview create as the authorizer sees it (and allowing)."""

    api: FakeApi

    def __init__(self, _client: object) -> None:
        pass

    async def create_subject_access_review(self, body: Any) -> Any:
        self.api.accesses.append(
            Access("create", "authorization.k8s.io", "subjectaccessreviews", None, None, None)
        )
        status = type("Status", (), {"allowed": True, "denied": False, "reason": "test"})()
        return type("Review", (), {"status": status})()


def _command_review() -> bytes:
    """An AdmissionReview of ``vcctl queue operate --name default --action close``'s Command."""
    from tests.controller.test_queue_commands import vcctl_command

    cmd = vcctl_command({"metadata": {"name": "default", "uid": "u"}}, "CloseQueue", signed=False)
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "r1",
            "operation": "CREATE",
            "namespace": "default",
            "object": cmd,
            "userInfo": {"username": "lead", "groups": ["system:authenticated"]},
        },
    }
    return json.dumps(review).encode()


async def webhooks_usage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeApi:
    """The webhook server starts as deployed: HyperNode cache on, caBundle self-injection."""
    import kubernetes_asyncio.client

    import hyperplace.runtime.kube
    from webhooks.__main__ import _parser, serve

    env = deployment_env("webhooks")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")  # in a cluster: the cache is on
    tls = tmp_path / "tls"
    tls.mkdir()
    (tls / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    api = FakeApi()
    _cluster(api)
    for res, d in (
        (VALIDATING_CONFIGS, documents("webhooks", "ValidatingWebhookConfiguration")),
        (MUTATING_CONFIGS, documents("webhooks", "MutatingWebhookConfiguration")),
    ):
        for obj in d:
            api.seed(res, obj)

    async def no_config(*_a: Any, **_k: Any) -> None:
        return None

    _AdmissionApi.api = api
    monkeypatch.setattr(hyperplace.runtime.kube, "load_client_config", no_config)
    monkeypatch.setattr(hyperplace.runtime.kube, "KubeApiClient", lambda _raw: api)
    monkeypatch.setattr(kubernetes_asyncio.client, "AdmissionregistrationV1Api", _AdmissionApi)
    _AuthorizationApi.api = api
    monkeypatch.setattr(kubernetes_asyncio.client, "AuthorizationV1Api", _AuthorizationApi)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = ["--insecure-http", "--host", "127.0.0.1", "--port", str(port), "--metrics-port", "0"]
    args = _parser().parse_args([*argv, "--ca-file", str(tls / "ca.crt")])
    task = asyncio.create_task(serve(args))
    try:
        names = [
            env["HYPERPLACE_VALIDATING_WEBHOOK_CONFIGURATION"],
            env["HYPERPLACE_MUTATING_WEBHOOK_CONFIGURATION"],
        ]
        await eventually(
            lambda: all(
                _used(api, "patch", r, n)
                for r, n in zip(
                    ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"), names, strict=True
                )
            ),
            "caBundle injected into both configurations",
        )
        await eventually(lambda: _used(api, "watch", "hypernodes"), "the HyperNode cache")
        await eventually(lambda: _used(api, "watch", "queues"), "the Queue cache")
        # A queue Command: its creator's permission on the Queue is asked of the apiserver.
        await eventually(lambda: _serving(port), "the webhook port")
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://127.0.0.1:{port}/commands/validate", data=_command_review()) as resp,
        ):
            assert (await resp.json())["response"]["allowed"] is True
        assert _used(api, "create", "subjectaccessreviews")
    finally:
        await _stop(task)
    return api


def _serving(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


USAGE: Mapping[str, Callable[..., Awaitable[FakeApi]]] = {
    "scheduler": scheduler_usage,
    "controller": controller_usage,
    "webhooks": webhooks_usage,
}


async def record(component: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Access]:
    """Every request ``component`` made while running its scenario."""
    fn = USAGE[component]
    api = await (fn(monkeypatch) if component == "controller" else fn(monkeypatch, tmp_path))
    return api.accesses


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """The components log every step at INFO; the scenarios do not need it."""
    import logging

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.setLevel(level)
