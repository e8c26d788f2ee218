"""User stories end to end: ``kubectl apply`` a topology and a Volcano Job against a real apiserver,
with the real ``hyperplace-controller`` and ``hyperplace-scheduler`` processes running.

There is no kubelet: Nodes are created with their status (allocatable, Ready), and "scheduled"
means ``spec.nodeName`` is set by a ``pods/binding`` POST, as in kube-scheduler's own integration
tests. Each story gets its own namespace, its own nodes (a unique label its Job selects) and its own
HyperNode tree, so stories cannot take each other's capacity.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperplace.kube import milli_value
from hyperplace.localup.fakekubelet import running_status

from . import components
from .conftest import Cluster
from .kube import (
    PODGROUPS,
    REPO,
    Kubectl,
    exact,
    hypernode,
    in_namespace,
    load_yaml,
    node,
    pod_node,
    wait_for,
)

pytestmark = pytest.mark.apiserver

EXAMPLES = REPO / "examples" / "user-guide-3.3"
SELECT_LABEL = "hyperplace.io/e2e-cluster"
LEASE_NAMESPACE = "hyperplace-system"


@dataclass
class Running:
    controller: components.Component
    scheduler: components.Component
    log_dir: Path

    def describe(self) -> str:
        return f"{self.controller.tail()}\n{self.scheduler.tail()}"


@pytest.fixture(scope="module")
def running(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """The controller and the scheduler, each electing itself leader through a real Lease."""
    kubectl = cluster.kubectl
    if kubectl.run("get", "namespace", LEASE_NAMESPACE, check=False).returncode != 0:
        kubectl.run("create", "namespace", LEASE_NAMESPACE)
    log_dir = tmp_path_factory.mktemp("components")
    ctl = components.controller(cluster.kubeconfig, log_dir / "controller.log", LEASE_NAMESPACE)
    sch = components.scheduler(cluster.kubeconfig, log_dir / "scheduler.log", LEASE_NAMESPACE)
    r = Running(ctl, sch, log_dir)
    try:
        for lease in ("hyperplace-controller", "hyperplace-scheduler"):
            wait_for(
                partial(_lease_holder, kubectl, lease),
                f"the {lease} Lease to be held",
                describe=r.describe,
            )
        yield r
    finally:
        sch.stop()
        ctl.stop()


def _lease_holder(kubectl: Kubectl, name: str) -> str | None:
    out = kubectl.run(
        "get", "lease", "-n", LEASE_NAMESPACE, name, "-o", "jsonpath={.spec.holderIdentity}", check=False
    )
    return out.stdout.strip() if out.returncode == 0 else None


@dataclass
class Topology:
    """Two tier-1 HyperNodes of ``per_leaf`` nodes each under one tier-2 HyperNode (user guide §3.3)."""

    label: str
    leaves: dict[str, list[str]]
    root: str

    def leaf_of(self, node_name: str) -> str:
        return next(leaf for leaf, nodes in self.leaves.items() if node_name in nodes)


def make_topology(kubectl: Kubectl, *, per_leaf: int = 4, cpu: str = "4") -> Topology:
    label = f"c{uuid.uuid4().hex[:6]}"
    leaves = {
        f"{label}-hn{i}": [f"{label}-node{i * per_leaf + j}" for j in range(per_leaf)] for i in range(2)
    }
    objs: list[dict[str, Any]] = [
        node(n, {SELECT_LABEL: label}, cpu=cpu) for ns in leaves.values() for n in ns
    ]
    objs += [hypernode(leaf, 1, [exact("Node", n) for n in ns]) for leaf, ns in leaves.items()]
    root = f"{label}-hn2"
    objs.append(hypernode(root, 2, [exact("HyperNode", leaf) for leaf in leaves]))
    kubectl.create(objs)
    return Topology(label, leaves, root)


def guide_job(path: Path, namespace: str, topo: Topology) -> dict[str, Any]:
    """The example Job, moved to this test's namespace and nodes."""
    job = in_namespace(load_yaml(path)[0], namespace)
    job["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] = {SELECT_LABEL: topo.label}
    return job


def pods_of(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    return kubectl.items("pods", "-n", namespace)


def pods_when(kubectl: Kubectl, namespace: str, count: int, *, bound: bool) -> list[dict[str, Any]] | None:
    """The namespace's pods once there are ``count`` of them (and all bound, if asked), else None."""
    pods = pods_of(kubectl, namespace)
    if len(pods) != count or (bound and not all(pod_node(p) for p in pods)):
        return None
    return pods


def job_status_when_running(
    kubectl: Kubectl, namespace: str, name: str, running: int
) -> dict[str, Any] | None:
    status: dict[str, Any] = kubectl.get("jobs.batch.volcano.sh", "-n", namespace, name).get("status") or {}
    if status.get("state", {}).get("phase") == "Running" and status.get("running") == running:
        return status
    return None


def index_of(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"]["volcano.sh/task-index"])


def placement(kubectl: Kubectl, namespace: str) -> str:
    """Where every pod is, for failure messages."""
    lines = []
    for p in sorted(pods_of(kubectl, namespace), key=lambda p: p["metadata"]["name"]):
        conds = {c["type"]: c for c in p.get("status", {}).get("conditions", [])}
        sched = conds.get("PodScheduled", {})
        lines.append(
            f"{p['metadata']['name']}: node={pod_node(p)} {sched.get('reason', '')} {sched.get('message', '')}"
        )
    return "\n".join(lines)


def fake_kubelet_start(kubectl: Kubectl, pod: dict[str, Any]) -> None:
    """What a kubelet reports once a pod's containers run (the fake kubelet's status), written
    to pods/status."""
    kubectl.run(
        "patch",
        "pod",
        "-n",
        pod["metadata"]["namespace"],
        pod["metadata"]["name"],
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": running_status(pod)}),
    )


def assert_no_node_overcommitted(kubectl: Kubectl, node_names: list[str]) -> None:
    """Sum of bound pods' cpu/memory requests <= allocatable, on every node."""
    nodes = {n["metadata"]["name"]: n for n in kubectl.items("nodes") if n["metadata"]["name"] in node_names}
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in kubectl.items("pods", "-A"):
        where = pod_node(p)
        if where is not None and where in nodes:
            for c in p["spec"]["containers"]:
                for res, q in c.get("resources", {}).get("requests", {}).items():
                    used[where][res] += milli_value(q)
            used[where]["pods"] += 1000
    for name, usage in used.items():
        alloc = nodes[name]["status"]["allocatable"]
        for res, amount in usage.items():
            assert amount <= milli_value(alloc[res]), (
                f"{name} over-committed on {res}: {dict(usage)} > {alloc}"
            )


def test_partitioned_job_puts_each_partition_in_its_own_tier1_hypernode(
    running: Running, kubectl: Kubectl, namespace: str
) -> None:
    """User guide §3.3.2: 8 pods in 2 partitions of 4; the job may span tier 2, each partition
    must stay inside one tier-1 HyperNode of 4 nodes."""
    topo = make_topology(kubectl)
    kubectl.apply([guide_job(EXAMPLES / "20-job-3.3.2.yaml", namespace, topo)])
    job = kubectl.get("jobs.batch.volcano.sh", "-n", namespace, "network-topology-job")

    # The controller turns the Job into a PodGroup named <job>-<uid> with the partition policy.
    pg_name = f"network-topology-job-{job['metadata']['uid']}"
    pg = wait_for(
        lambda: next(
            (g for g in kubectl.items(PODGROUPS, "-n", namespace) if g["metadata"]["name"] == pg_name), None
        ),
        f"PodGroup {pg_name}",
        describe=running.describe,
    )
    (sub,) = pg["spec"]["subGroupPolicy"]
    assert sub["subGroupSize"] == 4
    assert sub["matchLabelKeys"] == ["volcano.sh/partition-id"]
    assert sub["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}

    # ... and 8 pods, stamped with task, index and partition.
    pods = wait_for(
        lambda: pods_when(kubectl, namespace, 8, bound=False),
        "8 pods",
        describe=running.describe,
    )
    for p in pods:
        labels = p["metadata"]["labels"]
        assert labels["volcano.sh/task-spec"] == "t0"
        assert labels["volcano.sh/partition-id"] == str(index_of(p) // 4)
        assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == pg_name
    assert sorted(index_of(p) for p in pods) == list(range(8))

    # The scheduler binds all 8: partition 0 in one tier-1 HyperNode, partition 1 in the other.
    bound = wait_for(
        lambda: pods_when(kubectl, namespace, 8, bound=True),
        "all 8 pods bound",
        describe=lambda: placement(kubectl, namespace) + "\n" + running.describe(),
    )
    leaf_of_partition = defaultdict(set)
    for p in bound:
        leaf_of_partition[index_of(p) // 4].add(topo.leaf_of(pod_node(p) or ""))
    assert len(leaf_of_partition[0]) == 1, placement(kubectl, namespace)
    assert len(leaf_of_partition[1]) == 1, placement(kubectl, namespace)
    assert leaf_of_partition[0] != leaf_of_partition[1], placement(kubectl, namespace)
    assert_no_node_overcommitted(kubectl, [n for ns in topo.leaves.values() for n in ns])

    # Play the kubelet: the bound pods start. The controller then reports the Job Running.
    for p in bound:
        fake_kubelet_start(kubectl, p)
    status = wait_for(
        lambda: job_status_when_running(kubectl, namespace, "network-topology-job", 8),
        "the Job to be Running with 8 running pods",
        describe=lambda: (
            str(kubectl.get("jobs.batch.volcano.sh", "-n", namespace, "network-topology-job").get("status"))
            + "\n"
            + running.describe()
        ),
    )
    assert status["pending"] == 0


def test_hard_tier1_job_runs_half_and_explains_why_the_rest_wait(
    running: Running, kubectl: Kubectl, namespace: str
) -> None:
    """User guide §3.3.1: hard tier 1, minAvailable 4, 8 replicas of cpu 4 on two tier-1
    HyperNodes of 4 nodes (cpu 4): 4 pods run in one tier-1 HyperNode, 4 wait, with the reason."""
    topo = make_topology(kubectl)
    kubectl.apply([guide_job(EXAMPLES / "10-job-3.3.1.yaml", namespace, topo)])

    def settled() -> list[dict[str, Any]] | None:
        pods = pods_of(kubectl, namespace)
        if len(pods) != 8:
            return None
        waiting = [p for p in pods if not pod_node(p)]
        if len(waiting) == 8:
            return None
        for p in waiting:
            conds = {c["type"]: c for c in p.get("status", {}).get("conditions", [])}
            if conds.get("PodScheduled", {}).get("reason") != "Unschedulable":
                return None
        return pods

    pods = wait_for(
        settled,
        "some pods bound and every other pod marked Unschedulable",
        describe=lambda: placement(kubectl, namespace) + "\n" + running.describe(),
    )
    bound = [p for p in pods if pod_node(p)]
    waiting = [p for p in pods if not pod_node(p)]
    assert len(bound) == 4, placement(kubectl, namespace)
    assert len({topo.leaf_of(pod_node(p) or "") for p in bound}) == 1, placement(kubectl, namespace)
    assert len(waiting) == 4
    for p in waiting:
        (cond,) = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond["status"] == "False"
        assert cond["message"], "an Unschedulable pod must say why"
    assert p["status"]["phase"] == "Pending"
    waiting_names = {p["metadata"]["name"] for p in waiting}
    event = wait_for(
        lambda: next(
            (
                e
                for e in kubectl.items("events", "-n", namespace)
                if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] in waiting_names
            ),
            None,
        ),
        "a FailedScheduling event for a waiting pod",
    )
    assert event["type"] == "Warning"
    assert event["message"]
    # The gang minimum is placed; its PodGroup says why the other 4 wait, as the pods do.
    pending = wait_for(
        lambda: next(
            (
                c
                for pg in kubectl.items("podgroups.scheduling.volcano.sh", "-n", namespace)
                for c in pg.get("status", {}).get("conditions") or []
                if c["type"] == "PodsPending"
            ),
            None,
        ),
        "the PodGroup's PodsPending condition",
    )
    assert pending["status"] == "True" and pending["message"].startswith("4 of 8 pods wait: ")

    def pods_agree() -> str | None:
        # A pod says the kind of reason and where it blocks; the numbers are the PodGroup's
        # (and `hyperplace explain`'s), so the pod is not rewritten as they move.
        for p in pods_of(kubectl, namespace):
            if pod_node(p):
                continue
            (c,) = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
            if not c["message"].startswith(
                "gang minimum placed; this pod waits beyond it: no domain within tier <= 1"
            ):
                return None
        return "agree"

    wait_for(pods_agree, "every waiting pod saying why in kind, the PodGroup with the numbers")
    assert "fits" in pending["message"], pending["message"]
    # While the Job controller created the 8 pods one by one, nothing said "not enough pods".
    assert not [
        e for e in kubectl.items("events", "-n", namespace) if "not enough valid tasks" in e["message"]
    ]
    assert_no_node_overcommitted(kubectl, [n for ns in topo.leaves.values() for n in ns])


def test_hypernode_status_counts_the_nodes_of_the_tree(running: Running, kubectl: Kubectl) -> None:
    """The HyperNode controller sets status.nodeCount; ``kubectl get hn`` shows it."""
    topo = make_topology(kubectl)
    expected = {leaf: "4" for leaf in topo.leaves} | {topo.root: "8"}

    def counts() -> dict[str, str] | None:
        # Read the column by its header's position: the empty TIERNAME column defeats split().
        header, *rows = kubectl.run("get", "hn", *expected).stdout.splitlines()
        start = header.index("NODECOUNT")
        got = {row.split()[0]: row[start:].split()[0] if row[start:].strip() else "" for row in rows}
        return got if got == expected else None

    wait_for(
        counts,
        f"NodeCount column {expected}",
        describe=lambda: kubectl.run("get", "hn", *expected).stdout + running.describe(),
    )


def test_a_scheduler_killed_while_binding_a_gang_is_replaced_without_overcommit(
    running: Running, cluster: Cluster, kubectl: Kubectl, namespace: str
) -> None:
    """SIGKILL the scheduler half-way through binding a 24-pod gang; a new scheduler takes the
    Lease over and finishes. Every pod ends bound, no node holds more than it can, and the gang
    stays in one tier-1 HyperNode although the other one is just as free.

    These schedulers serve their own scheduler name and Lease, so the module's scheduler leaves
    this Job alone. The first one is throttled to 2 writes a second so that the kill lands while
    binds are still outstanding; the test checks that it did, rather than assuming it.
    """
    size = 24
    topo = make_topology(kubectl, per_leaf=size, cpu="1")
    name, lease = f"crash-{uuid.uuid4().hex[:6]}", "crash-test-scheduler"
    extra = [f"--scheduler-name={name}", f"--lease-name={lease}"]
    first = components.scheduler(
        cluster.kubeconfig,
        running.log_dir / "crash-first.log",
        LEASE_NAMESPACE,
        *extra,
        "--kube-api-qps=2",
        "--kube-api-burst=1",
        "--bind-concurrency=1",
        name="crash-first",
    )
    second: components.Component | None = None
    try:
        wait_for(
            lambda: _lease_holder(kubectl, lease) == "crash-first", "crash-first to lead", describe=first.tail
        )
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "gang", "namespace": namespace},
            "spec": {
                "schedulerName": name,
                "minAvailable": size,
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": size,
                        "template": {
                            "spec": {
                                "nodeSelector": {SELECT_LABEL: topo.label},
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "busybox",
                                        "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
                                    }
                                ],
                            }
                        },
                    }
                ],
            },
        }
        kubectl.apply([job])
        wait_for(
            lambda: any(pod_node(p) for p in pods_of(kubectl, namespace)),
            "the first bind",
            describe=lambda: placement(kubectl, namespace) + "\n" + first.tail() + running.controller.tail(),
        )
        first.kill()
        bound_at_kill = sum(1 for p in pods_of(kubectl, namespace) if pod_node(p))
        print(f"{bound_at_kill} of {size} pods were bound when the scheduler was killed")
        assert 0 < bound_at_kill < size, f"the kill did not land mid-gang ({bound_at_kill} bound)"

        second = components.scheduler(
            cluster.kubeconfig,
            running.log_dir / "crash-second.log",
            LEASE_NAMESPACE,
            *extra,
            name="crash-second",
        )
        # The dead leader never released its Lease: the new one waits out the lease duration.
        pods = wait_for(
            lambda: pods_when(kubectl, namespace, size, bound=True),
            f"all {size} pods bound after the restart",
            timeout=240,
            describe=lambda: placement(kubectl, namespace) + "\n" + (second.tail() if second else ""),
        )
        assert _lease_holder(kubectl, lease) == "crash-second"
        leaves = {topo.leaf_of(pod_node(p) or "") for p in pods}
        assert len(leaves) == 1, f"the gang was split across {leaves}:\n{placement(kubectl, namespace)}"
        assert len({pod_node(p) for p in pods}) == size
        assert_no_node_overcommitted(kubectl, [n for ns in topo.leaves.values() for n in ns])
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_label_discovery_builds_and_follows_the_hypernode_tree(running: Running, kubectl: Kubectl) -> None:
    """Volcano's label discovery (ConfigMap volcano-controller-configmap): nodes labelled with a
    zone and a rack become a tier-2 zone HyperNode over tier-1 rack HyperNodes, and relabelling a
    node moves it. The ConfigMap is created after the controller started, as an operator would."""
    prefix = f"e2e-{uuid.uuid4().hex[:6]}"
    zone_key, rack_key = f"{prefix}.hyperplace.io/zone", f"{prefix}.hyperplace.io/rack"
    racks = {f"{prefix}-n{i}": f"r{i // 2}" for i in range(4)}
    kubectl.create([node(n, {zone_key: "z0", rack_key: r}) for n, r in racks.items()])
    conf = {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "interval": "10m",
                "config": {
                    "networkTopologyTypes": {
                        prefix: [
                            {"nodeLabel": zone_key},
                            {"nodeLabel": rack_key},
                            {"nodeLabel": "kubernetes.io/hostname"},
                        ]
                    }
                },
            }
        ]
    }
    kubectl.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "volcano-controller-configmap", "namespace": LEASE_NAMESPACE},
                "data": {"volcano-controller.conf": yaml.safe_dump(conf)},
            }
        ]
    )

    def tree() -> dict[int, list[frozenset[str]]]:
        """Tier -> member sets of the HyperNodes discovered for this test's label type."""
        out: dict[int, list[frozenset[str]]] = defaultdict(list)
        names: dict[str, frozenset[str]] = {}
        hns = [
            h for h in kubectl.items("hypernodes") if h["metadata"]["name"].startswith(f"hypernode-{prefix}-")
        ]
        for h in sorted(hns, key=lambda h: h["spec"]["tier"]):
            members = frozenset(m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"])
            names[h["metadata"]["name"]] = members
            # Spell a parent by its children's node sets, so the result does not depend on the
            # generated names.
            out[h["spec"]["tier"]].append(frozenset().union(*(names.get(m, {m}) for m in members)))
        return {t: sorted(v, key=sorted) for t, v in out.items()}

    n0, n1, n2, n3 = racks
    expected = {1: [frozenset({n0, n1}), frozenset({n2, n3})], 2: [frozenset({n0, n1, n2, n3})]}
    wait_for(
        lambda: tree() == expected,
        f"the discovered tree {expected}",
        describe=lambda: f"{tree()}\n{running.describe()}",
    )

    kubectl.run("label", "node", n3, f"{rack_key}=r0", "--overwrite")
    moved = {1: [frozenset({n0, n1, n3}), frozenset({n2})], 2: [frozenset({n0, n1, n2, n3})]}
    wait_for(
        lambda: tree() == moved,
        f"the tree after relabelling {n3}: {moved}",
        describe=lambda: f"{tree()}\n{running.describe()}",
    )


def test_a_lost_pod_is_recreated_and_placed_back_in_its_partitions_hypernode(
    running: Running, kubectl: Kubectl, namespace: str
) -> None:
    """A bound pod of the §3.3.2 Job disappears (force-deleted, as when its node is lost). The
    controller recreates it and the scheduler puts it where its partition is, next to the three
    pods still bound there. Each tier-1 HyperNode has a fifth node, so the other HyperNode has
    room too and only the partition constraint decides."""
    topo = make_topology(kubectl, per_leaf=5)
    kubectl.apply([guide_job(EXAMPLES / "20-job-3.3.2.yaml", namespace, topo)])
    describe = lambda: placement(kubectl, namespace) + "\n" + running.describe()  # noqa: E731
    bound = wait_for(
        lambda: pods_when(kubectl, namespace, 8, bound=True),
        "all 8 pods bound",
        describe=describe,
    )
    victim = next(p for p in bound if index_of(p) == 1)
    leaf = topo.leaf_of(pod_node(victim) or "")
    kubectl.run("delete", "pod", "-n", namespace, victim["metadata"]["name"], "--grace-period=0", "--force")

    def replaced() -> dict[str, Any] | None:
        for p in pods_of(kubectl, namespace):
            if index_of(p) == 1 and p["metadata"]["uid"] != victim["metadata"]["uid"] and pod_node(p):
                return p
        return None

    new = wait_for(replaced, "the recreated pod of index 1 to be bound", describe=describe)
    assert topo.leaf_of(pod_node(new) or "") == leaf, placement(kubectl, namespace)
    assert new["metadata"]["labels"]["volcano.sh/partition-id"] == "0"
    assert_no_node_overcommitted(kubectl, [n for ns in topo.leaves.values() for n in ns])
