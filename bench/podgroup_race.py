"""The race (issue 36, item 4): hyperplace-scheduler against the real kube-scheduler v1.37.2 on
Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1), on the shapes of kube-scheduler's own
scheduler_perf configs, one control plane, one run side by side.

    python bench/podgroup_race.py --quick                          # every shape at 1/10 scale
    python bench/podgroup_race.py --shapes tas-750x4,tas-3x1000    # full scale, 5,000 nodes
    python bench/podgroup_race.py --shapes tas-750x4 --schedulers kube,ours,ours-hn

One etcd + kube-apiserver v1.37.2 (``hack/kube-bin.sh``; ``--runtime-config=scheduling.k8s.io/
v1beta1=true``, gates GenericWorkload, TopologyAwareWorkloadScheduling, WorkloadWithJob), no
kube-controller-manager and no kubelet (as scheduler_perf: the Nodes are created Ready with their
allocatable and nothing takes it away; a bound pod stays Pending-phase). Volcano's CRDs and the
default Queue are applied for hyperplace-scheduler. The Nodes are created once; then for each
shape, each scheduler in turn (kube-scheduler first):

* a fresh namespace, the scheduler under test started fresh (the other one is not running), its
  readiness awaited;
* the PodGroups created (not timed: scheduler_perf's ``createPodGroups`` also waits for them to
  reach the scheduler before the pods), then the pods, 64 creates in flight, ``schedulerName`` the
  scheduler under test's;
* measured from the first pod create to the last pod seen bound (a pod watch): the time, pods per
  second, the scheduler's CPU seconds over that span (``/proc/<pid>/stat``) and its peak RSS
  (``VmHWM``: since its start, so the initial sync of the 5,000 nodes counts); per gang the
  distinct rack label values its bound pods landed on, and the gangs never placed or placed in
  part; then the scheduler is stopped and the namespace's pods and PodGroups deleted
  (``deletecollection``, grace 0) before the next run.

Where the numbers come from (kubernetes v1.37.2, ``test/integration/scheduler_perf/podgroup/``,
read from the Go module cache ``k8s.io/kubernetes@v1.37.2``):

* ``tas/templates/node.yaml``: Node ``node-{i}``, labels ``kubernetes.io/hostname``,
  ``topology.kubernetes.io/zone: zone-{i // 100}`` and ``topology.kubernetes.io/rack:
  rack-{i // 100}``; capacity = allocatable ``cpu: "4"``, ``memory: 32Gi``, ``pods: "110"``;
  Ready. Used for every shape here (``gangscheduling`` creates scheduler_perf's default node,
  the same resources without labels; the labels only let us count racks there).
* ``tas/templates/podgroup.yaml``: ``gang-{i}``, ``schedulingPolicy.gang.minCount:
  podsPerGroup``, ``schedulingConstraints.topology: [{key: topology.kubernetes.io/rack}]``;
  ``gangscheduling/templates/podgroup.yaml``: the same without ``schedulingConstraints``.
* ``*/templates/gang-pod.yaml``: ``spec.schedulingGroup.podGroupName: gang-{i // podsPerGroup}``,
  one container ``registry.k8s.io/pause:3.10.1`` requesting ``cpu: 100m``, ``memory: 100Mi``.
* ``tas/performance-config.yaml`` (label ``performance``): 5,000 nodes with 750, 1,500, 2,250
  gangs of 4 and 3, 6, 9 gangs of 1,000 (shapes ``tas-750x4`` ... ``tas-9x1000``).
* ``gangscheduling/performance-config.yaml``: 5,000 nodes with 1,000, 2,000, 3,000 gangs of 3
  (not 4) and 3, 6, 9 gangs of 1,000 (``gang-1000x3`` ... ``gang-9x1000``).

The mixed two-tier shape (``mixed-200x20``, ours, not scheduler_perf's): the same nodes also
carry ``bench.hyperplace.io/rack: r-{i // 10}`` (racks of 10 nodes) and
``bench.hyperplace.io/block: b-{i // 50}`` (blocks of 5 racks); 200 gangs (20 ``--quick``) of 4
partitions of 5 pods, each pod a whole node (``cpu: 4``), labelled ``volcano.sh/task-spec:
worker`` and ``volcano.sh/partition-id`` (its partition). The requirement: the gang in one block
and each partition in one rack (a gang is two racks' worth; a block holds two gangs, which leaves
room to keep every partition in a rack). kube-scheduler's PodGroup has one key: ``kube`` is given
the block key (the gang in one block, the partitions wherever), ``kube-rack`` the rack key (no
gang fits a rack: nothing is bound; given up after 60 s without a bind). ``ours`` gets the same
upstream PodGroup with the block key and no HyperNodes; ``ours-hn`` two tiers of HyperNodes (500
racks by labelMatch, 100 blocks of their racks by name) and, beside the upstream PodGroup, a
Volcano PodGroup of the same name, which the scheduler takes instead (an upstream PodGroup has no
place for partitions or a second tier): ``networkTopology`` hard tier 2, ``subGroupPolicy`` of
partitions of 5 by ``volcano.sh/partition-id``, each hard tier 1. Reported per gang: racks and
blocks used, partitions split over racks, and the gangs that met both tiers.

``--quick`` is 1/10 scale: 500 nodes (5 racks), a tenth of the small gangs (75, 150, 225 gangs of
4; 100, 200, 300 of 3), and the 1,000-pod shapes as 3, 6, 9 gangs of 100 (a tenth of the pods,
the same number of gangs), the mixed shape as 20 gangs on 50 racks in 10 blocks. A 1,000-pod
gang asks 100 CPUs, a quarter of a rack's 400.

kube-scheduler runs with its default profile (its own gang and topology plugins, as the gates turn
them on), no leader election and a client rate of QPS 2000 / burst 2000 (ours' defaults; its own
default, 50/100, would cap it at 50 binds/s; scheduler_perf's clients are not limited either).
hyperplace-scheduler runs with its defaults, no leader election, ``--scheduler-name hyperplace``.
``ours`` runs without HyperNodes (the rack key's label domains become its tree); ``ours-hn``
with 1 tier of HyperNodes, one per rack (labelMatch on the rack label), created before it starts
and deleted after.

Latest figures (2-core machine shared with other work, load 2-4; 2026-11-28), full scale, 5,000
nodes, all bound after the first pod create, ours vs kube-scheduler (ratio), scheduler CPU:

    tas 750 x 4       11.0 s vs  98.3 s (8.9x)   CPU  7.4 vs  88.6 s   (ours-hn 15.5 s)
    tas 1,500 x 4     25.6 s vs 204.3 s (8.0x)   CPU 16.5 vs 202.4 s
    tas 2,250 x 4     38.2 s vs 250.6 s (6.6x)   CPU 25.8 vs 301.6 s
    tas 3 x 1,000     14.2 s vs 102.4 s (7.2x)   CPU  7.1 vs 117.9 s   (ours-hn 16.3 s)
    tas 6 x 1,000     20.9 s vs 185.7 s (8.9x)   CPU 15.0 vs 224.4 s
    tas 9 x 1,000     37.1 s vs 249.5 s (6.7x)   CPU 22.5 vs 313.0 s
    gang 1,000 x 3    15.9 s vs  30.5 s (1.9x)   CPU  9.7 vs  15.7 s
    gang 3 x 1,000    13.8 s vs  29.2 s (2.1x)   CPU  9.0 vs  20.5 s

and in one run from 08:44 to 09:14 UTC, load 7-9 (another engineer's control planes beside it):

    gang 2,000 x 3    93.4 s vs 128.0 s (1.4x)   CPU 26.2 vs  37.0 s
    gang 3,000 x 3    85.1 s vs 157.0 s (1.8x)   CPU 39.0 vs  60.2 s
    gang 6 x 1,000    51.3 s vs 106.5 s (2.1x)   CPU 19.6 vs  49.6 s
    gang 9 x 1,000    80.8 s vs 160.9 s (2.0x)   CPU 30.8 vs  82.8 s
    mixed 200 x 20    43.3 s vs 195.4 s (4.5x)   CPU 11.3 vs 114.6 s   (ours-hn vs kube, block key)

On the mixed shape every gang of ours-hn met both tiers (200 of 200), ours with the block key
alone 198, kube-scheduler with the block key none (every partition over two racks); with the
rack key kube-scheduler bound nothing.

Every TAS gang of both schedulers in one rack; no gang unplaced or partial. Peak RSS ours
308-570 MiB, kube-scheduler 173-754 MiB. The 1/10 scale (``--quick``) runs and the whole
tables: bench/README.md, "The race against kube-scheduler".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.live.cluster import create_all
from bench.live.processes import cpu_seconds, wait_healthy
from hyperplace.api.constants import TOPOLOGY_GROUP, TOPOLOGY_VERSION
from hyperplace.localup.components import MANIFESTS, program
from hyperplace.localup.controlplane import ControlPlane, feature_gate_args, free_port, kube_bin_dir
from hyperplace.runtime.api import HYPERNODES, K8S_PODGROUPS, NAMESPACES, NODES, PODGROUPS, PODS, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.kube import connect

RACK_KEY = "topology.kubernetes.io/rack"
NODES_PER_RACK = 100
# The mixed two-tier shape's own labels on the same nodes: racks of 10 nodes, blocks of 5 racks.
MIXED_RACK_KEY = "bench.hyperplace.io/rack"
MIXED_BLOCK_KEY = "bench.hyperplace.io/block"
MIXED_RACK_NODES = 10
MIXED_BLOCK_RACKS = 5
MIXED_PARTITION = 5  # pods per partition: two partitions fill a rack
MIXED_PARTITIONS = 4  # partitions per gang: 20 pods, two racks' worth, a block holds two gangs
MIXED_CPU = "4"  # a whole node each
TASK_LABEL = "volcano.sh/task-spec"
PARTITION_LABEL = "volcano.sh/partition-id"
CPU_REQUEST = "100m"
MEMORY_REQUEST = "100Mi"
IMAGE = "registry.k8s.io/pause:3.10.1"
KUBE_NAME = "default-scheduler"
OURS_NAME = "hyperplace"
CREATE_CONCURRENCY = 64
KUBE_RACK_STALL = 60.0
SCHEDULERS = ("kube", "kube-rack", "ours", "ours-hn")


def say(msg: str) -> None:
    print(f"podgroup_race [{time.strftime('%H:%M:%S')}]: {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Shape:
    name: str
    tas: bool
    gangs: int
    size: int
    partition: int = 0  # the mixed two-tier shape: pods per partition (each in one rack)

    @property
    def pods(self) -> int:
        return self.gangs * self.size

    @property
    def mixed(self) -> bool:
        return self.partition > 0

    @property
    def kind(self) -> str:
        return "mixed" if self.mixed else "tas" if self.tas else "gang"


def shapes(quick: bool) -> dict[str, Shape]:
    """scheduler_perf's performance workloads (full), or their 1/10 (``--quick``), by name."""
    full = [("tas", True, g, 4) for g in (750, 1500, 2250)] + [
        ("gang", False, g, 3) for g in (1000, 2000, 3000)
    ]
    big = [(k, t, g, 1000) for k, t in (("tas", True), ("gang", False)) for g in (3, 6, 9)]
    out: dict[str, Shape] = {}
    for kind, tas, gangs, size in full + big:
        name = f"{kind}-{gangs}x{size}"
        if quick:
            gangs, size = (gangs // 10, size) if size < 1000 else (gangs, size // 10)
        out[name] = Shape(name, tas, gangs, size)
    # Two tiers: each gang (4 partitions of 5 whole-node pods) in one block, each partition in
    # one rack; two gangs per block (of 10 partitions' room): 200 gangs on 5,000 nodes, 20 on 500.
    mixed = MIXED_PARTITION * MIXED_PARTITIONS
    gangs = 20 if quick else 200
    out["mixed-200x20"] = Shape("mixed-200x20", True, gangs, mixed, MIXED_PARTITION)
    return out


@dataclass
class Result:
    shape: Shape
    scheduler: str
    nodes: int
    seconds: float = float("nan")
    first_bind: float = float("nan")
    bound: int = 0
    cpu: float = 0.0
    rss_mib: float = 0.0
    racks: dict[int, int] = field(default_factory=dict)  # racks used -> gangs
    blocks: dict[int, int] = field(default_factory=dict)  # blocks used -> gangs (mixed)
    split_partitions: int = 0  # partitions over more than one rack (mixed)
    held: int = 0  # gangs whole in one block with every partition in one rack (mixed)
    unplaced: int = 0
    partial: int = 0
    initially_scheduled: int = 0
    timed_out: bool = False
    note: str = ""

    @property
    def rate(self) -> float:
        return self.bound / self.seconds if self.seconds == self.seconds and self.seconds > 0 else 0.0

    def racks_text(self) -> str:
        text = ", ".join(f"{n} rack{'s' * (n != 1)}: {g}" for n, g in sorted(self.racks.items())) or "-"
        if self.shape.mixed:
            blocks = ", ".join(f"{n} block{'s' * (n != 1)}: {g}" for n, g in sorted(self.blocks.items()))
            text += (
                f"; {blocks or '-'}; partitions split {self.split_partitions}; "
                f"two-tier held {self.held}/{self.shape.gangs}"
            )
        return text


# --------------------------------------------------------------------------- objects
def node(i: int) -> Obj:
    """tas/templates/node.yaml, Ready."""
    res = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{i}",
            "labels": {
                "kubernetes.io/hostname": f"node-{i}",
                "topology.kubernetes.io/zone": f"zone-{i // NODES_PER_RACK}",
                RACK_KEY: f"rack-{i // NODES_PER_RACK}",
                MIXED_RACK_KEY: f"r-{i // MIXED_RACK_NODES}",
                MIXED_BLOCK_KEY: f"b-{i // (MIXED_RACK_NODES * MIXED_BLOCK_RACKS)}",
            },
        },
        "status": {
            "capacity": res,
            "allocatable": res,
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "race"}],
        },
    }


def topology_key(shape: Shape, scheduler: str) -> str:
    """The PodGroup's one key: the rack; on the mixed shape the block (what holds the gang),
    or the rack for ``kube-rack`` (what holds a partition)."""
    if not shape.mixed:
        return RACK_KEY
    return MIXED_RACK_KEY if scheduler == "kube-rack" else MIXED_BLOCK_KEY


def podgroup(i: int, shape: Shape, key: str = RACK_KEY) -> Obj:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": shape.size}}}
    if shape.tas:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": f"gang-{i}"},
        "spec": spec,
    }


def volcano_podgroup(i: int, shape: Shape) -> Obj:
    """The mixed shape's two tiers for hyperplace-scheduler, which an upstream PodGroup cannot
    carry (one key; no partitions): a Volcano PodGroup of the same name, which the scheduler
    takes instead of the upstream one (docs/scheduling.md). The gang within tier 2 (a block),
    each partition (the pods of one ``volcano.sh/partition-id``) within tier 1 (a rack)."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": f"gang-{i}"},
        "spec": {
            "minMember": shape.size,
            "queue": "default",
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
            "subGroupPolicy": [
                {
                    "name": "worker",
                    "subGroupSize": shape.partition,
                    "labelSelector": {"matchLabels": {TASK_LABEL: "worker"}},
                    "matchLabelKeys": [PARTITION_LABEL],
                    "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                }
            ],
        },
    }


def pod(i: int, shape: Shape, scheduler_name: str) -> Obj:
    cpu = MIXED_CPU if shape.mixed else CPU_REQUEST
    metadata: dict[str, Any] = {"name": f"test-{shape.kind}-scheduling-{i}"}
    if shape.mixed:  # the same pods for every scheduler; only ours reads these labels
        metadata["labels"] = {TASK_LABEL: "worker", PARTITION_LABEL: str((i % shape.size) // shape.partition)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulerName": scheduler_name,
            "schedulingGroup": {"podGroupName": f"gang-{i // shape.size}"},
            "containers": [
                {
                    "image": IMAGE,
                    "name": "pause",
                    "resources": {"requests": {"cpu": cpu, "memory": MEMORY_REQUEST}},
                }
            ],
        },
    }


def rack_hypernodes(nodes: int) -> list[Obj]:
    racks = (nodes + NODES_PER_RACK - 1) // NODES_PER_RACK
    return [
        {
            "apiVersion": f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}",
            "kind": "HyperNode",
            "metadata": {"name": f"rack-{r}"},
            "spec": {
                "tier": 1,
                "tierName": "rack",
                "members": [
                    {"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK_KEY: f"rack-{r}"}}}}
                ],
            },
        }
        for r in range(racks)
    ]


def mixed_hypernodes(nodes: int) -> list[Obj]:
    """Two tiers on the mixed shape's labels: racks (tier 1, labelMatch) and blocks of
    ``MIXED_BLOCK_RACKS`` racks (tier 2, their racks by name)."""
    racks = (nodes + MIXED_RACK_NODES - 1) // MIXED_RACK_NODES
    version = f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}"
    out: list[Obj] = [
        {
            "apiVersion": version,
            "kind": "HyperNode",
            "metadata": {"name": f"r-{r}"},
            "spec": {
                "tier": 1,
                "tierName": "rack",
                "members": [
                    {"type": "Node", "selector": {"labelMatch": {"matchLabels": {MIXED_RACK_KEY: f"r-{r}"}}}}
                ],
            },
        }
        for r in range(racks)
    ]
    for b in range((racks + MIXED_BLOCK_RACKS - 1) // MIXED_BLOCK_RACKS):
        members = range(b * MIXED_BLOCK_RACKS, min(racks, (b + 1) * MIXED_BLOCK_RACKS))
        out.append(
            {
                "apiVersion": version,
                "kind": "HyperNode",
                "metadata": {"name": f"b-{b}"},
                "spec": {
                    "tier": 2,
                    "tierName": "block",
                    "members": [
                        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"r-{r}"}}} for r in members
                    ],
                },
            }
        )
    return out


def hypernodes_for(shape: Shape, nodes: int) -> list[Obj]:
    return mixed_hypernodes(nodes) if shape.mixed else rack_hypernodes(nodes)


# --------------------------------------------------------------------------- processes
def peak_rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class BindWatch:
    """A watch on a namespace's pods: when each was first seen bound (seconds after
    :meth:`start`) and on which node, and ``done`` once ``want`` of them are."""

    def __init__(self, api: Any, ns: str, want: int) -> None:
        self.bound_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.done = asyncio.Event()
        self.t0 = 0.0
        self.want = want
        self._informer = Informer(api, PODS, ns)
        self._informer.add_handler(self._seen, lambda _o, n: self._seen(n))
        self._task: asyncio.Task[None] | None = None

    def _seen(self, p: Obj) -> None:
        nn = (p.get("spec") or {}).get("nodeName")
        nm = str(meta(p).get("name"))
        if nn and nm not in self.bound_at:
            self.bound_at[nm] = time.perf_counter() - self.t0
            self.node_of[nm] = nn
            if len(self.bound_at) >= self.want:
                self.done.set()

    async def __aenter__(self) -> BindWatch:
        self._task = asyncio.create_task(self._informer.run())
        await self._informer.synced.wait()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def start(self) -> None:
        """The clock starts (as the first pod is created)."""
        self.t0 = time.perf_counter()


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_kube_scheduler(cp: ControlPlane, workdir: Path) -> subprocess.Popen[bytes]:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cp.kubeconfig), "qps": 2000, "burst": 2000},
        "leaderElection": {"leaderElect": False},
    }
    path = workdir / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    kc = str(cp.kubeconfig)
    log = (workdir / "kube-scheduler.log").open("ab")
    proc = subprocess.Popen(
        [
            str(cp.bin_dir / "kube-scheduler"),
            f"--config={path}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--authentication-skip-lookup",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={workdir / 'ks-certs'}",
            *feature_gate_args(cp.bin_dir),
            "--v=2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    wait_healthy(f"https://127.0.0.1:{port}/readyz", lambda: proc.poll() is None, "kube-scheduler", 120, ctx)
    return proc


def start_ours(cp: ControlPlane, workdir: Path) -> subprocess.Popen[bytes]:
    port = free_port()
    log = (workdir / "hyperplace-scheduler.log").open("ab")
    proc = subprocess.Popen(
        [
            *program("hyperplace-scheduler"),
            f"--kubeconfig={cp.kubeconfig}",
            "--no-leader-elect",
            f"--scheduler-name={OURS_NAME}",
            f"--health-port={port}",
            "--metrics-bind-address=0",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_healthy(f"http://127.0.0.1:{port}/readyz", lambda: proc.poll() is None, "hyperplace-scheduler", 300)
    return proc


# --------------------------------------------------------------------------- one run
async def delete_collection(raw: Any, namespace: str) -> None:
    from kubernetes_asyncio import client as kclient

    body = kclient.V1DeleteOptions(grace_period_seconds=0)
    await kclient.CoreV1Api(raw).delete_collection_namespaced_pod(
        namespace, body=body, grace_period_seconds=0
    )
    for group in ("scheduling.k8s.io", "scheduling.volcano.sh"):
        await kclient.CustomObjectsApi(raw).delete_collection_namespaced_custom_object(
            group, "v1beta1", namespace, "podgroups", grace_period_seconds=0
        )


async def drop_protection(api: Any, namespace: str) -> None:
    """kube-apiserver 1.37 stamps ``scheduling.k8s.io/podgroup-protection`` on each PodGroup
    (admission) and kube-controller-manager's PodGroupProtection controller lifts it; there is
    no kube-controller-manager here, so the deleted PodGroups would stay, Terminating, and the
    next run's scheduler would still see them (their topology keys among them)."""
    groups, _ = await api.list(K8S_PODGROUPS, namespace)
    for group in groups:
        if meta(group).get("finalizers"):
            with contextlib.suppress(Exception):
                await api.patch(
                    K8S_PODGROUPS, str(meta(group)["name"]), {"metadata": {"finalizers": None}}, namespace
                )


async def race_one(
    cp: ControlPlane,
    workdir: Path,
    shape: Shape,
    scheduler: str,
    nodes: int,
    timeout: float,
    stall: float,
    k: int,
) -> Result:
    api, raw = await connect(str(cp.kubeconfig), pool_size=CREATE_CONCURRENCY + 8)
    ns = f"race-{k}-{shape.kind}-{shape.gangs}-{shape.size}-{scheduler}"
    res = Result(shape, scheduler, nodes)
    if scheduler == "kube-rack":
        stall = min(stall, KUBE_RACK_STALL)  # no gang fits a rack: nothing will be bound
    kube = scheduler.startswith("kube")
    name = KUBE_NAME if kube else OURS_NAME
    proc: subprocess.Popen[bytes] | None = None
    try:
        await api.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        if scheduler == "ours-hn":
            await create_all(api, HYPERNODES, hypernodes_for(shape, nodes), limit=16)
        say(f"{shape.name} / {scheduler}: starting the scheduler")
        start = start_kube_scheduler if kube else start_ours
        proc = await asyncio.to_thread(start, cp, workdir)
        await asyncio.sleep(3.0)  # informers past their first list
        pgs = [podgroup(i, shape, topology_key(shape, scheduler)) for i in range(shape.gangs)]
        for pg in pgs:
            pg["metadata"]["namespace"] = ns
        await create_all(api, K8S_PODGROUPS, pgs)
        if shape.mixed and scheduler == "ours-hn":
            vpgs = [volcano_podgroup(i, shape) for i in range(shape.gangs)]
            for pg in vpgs:
                pg["metadata"]["namespace"] = ns
            await create_all(api, PODGROUPS, vpgs)
        await asyncio.sleep(2.0)
        pods = [pod(i, shape, name) for i in range(shape.pods)]
        for p in pods:
            p["metadata"]["namespace"] = ns
        async with BindWatch(api, ns, shape.pods) as watch:
            cpu0 = cpu_seconds(proc.pid)
            watch.start()
            await create_all(api, PODS, pods)
            say(
                f"{shape.name} / {scheduler}: {shape.pods} pods created in {time.perf_counter() - watch.t0:.1f}s"
            )
            last, last_change = -1, time.perf_counter()
            while not watch.done.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(watch.done.wait(), 2.0)
                now = time.perf_counter()
                if len(watch.bound_at) != last:
                    last, last_change = len(watch.bound_at), now
                if proc.poll() is not None:
                    res.note = f"scheduler exited with {proc.returncode}"
                    break
                if now - watch.t0 > timeout or now - last_change > stall:
                    res.timed_out = True
                    say(f"{shape.name} / {scheduler}: gave up with {len(watch.bound_at)}/{shape.pods} bound")
                    break
            res.cpu = cpu_seconds(proc.pid) - cpu0
            res.rss_mib = peak_rss_mib(proc.pid)
            res.bound = len(watch.bound_at)
            if watch.bound_at:
                elapsed = time.perf_counter() - watch.t0
                res.seconds = max(watch.bound_at.values()) if not res.timed_out else elapsed
                res.first_bind = min(watch.bound_at.values())
        node_of = watch.node_of
        rack_nodes = MIXED_RACK_NODES if shape.mixed else NODES_PER_RACK
        racks: dict[int, set[int]] = defaultdict(set)
        blocks: dict[int, set[int]] = defaultdict(set)
        part_racks: dict[tuple[int, int], set[int]] = defaultdict(set)
        count: dict[int, int] = defaultdict(int)
        for nm, nn in node_of.items():
            i = int(nm.rsplit("-", 1)[1])
            g = i // shape.size
            rack = int(nn.split("-", 1)[1]) // rack_nodes
            racks[g].add(rack)
            blocks[g].add(rack // MIXED_BLOCK_RACKS)
            if shape.mixed:
                part_racks[(g, (i % shape.size) // shape.partition)].add(rack)
            count[g] += 1
        for g in range(shape.gangs):
            if count[g] == 0:
                res.unplaced += 1
            elif count[g] < shape.size:
                res.partial += 1
            if count[g]:
                res.racks[len(racks[g])] = res.racks.get(len(racks[g]), 0) + 1
                res.blocks[len(blocks[g])] = res.blocks.get(len(blocks[g]), 0) + 1
            if shape.mixed:
                split = sum(
                    1 for p in range(shape.size // shape.partition) if len(part_racks.get((g, p), ())) > 1
                )
                res.split_partitions += split
                if count[g] == shape.size and len(blocks[g]) == 1 and split == 0:
                    res.held += 1
        groups, _ = await api.list(K8S_PODGROUPS, ns)
        for group in groups:
            for c in (group.get("status") or {}).get("conditions") or []:
                if c.get("type") == "PodGroupInitiallyScheduled" and c.get("status") == "True":
                    res.initially_scheduled += 1
        say(
            f"{shape.name} / {scheduler}: {res.bound}/{shape.pods} bound in {res.seconds:.1f}s "
            f"({res.rate:.0f}/s), cpu {res.cpu:.1f}s, rss {res.rss_mib:.0f} MiB, racks {res.racks_text()}, "
            f"unplaced {res.unplaced}, partial {res.partial}, PodGroupInitiallyScheduled {res.initially_scheduled}"
        )
    finally:
        if proc is not None:
            await asyncio.to_thread(stop, proc)
        with contextlib.suppress(Exception):
            await delete_collection(raw, ns)
            await drop_protection(api, ns)
            for _ in range(120):
                left, _ = await api.list(PODS, ns)
                if not left:
                    break
                await asyncio.sleep(1.0)
        if scheduler == "ours-hn":
            for h in hypernodes_for(shape, nodes):
                with contextlib.suppress(Exception):
                    await api.delete(HYPERNODES, h["metadata"]["name"])
        await raw.close()
    return res


# --------------------------------------------------------------------------- report
def table(results: list[Result]) -> str:
    head = (
        f"{'shape':<13} {'scheduler':<9} {'nodes':>5} {'pods':>5} {'bound':>5} {'seconds':>8} {'pods/s':>7} "
        f"{'cpu s':>6} {'rss MiB':>7} {'unplaced':>8} {'partial':>7} {'PGsched':>7}  racks per gang"
    )
    lines = [head]
    for r in results:
        lines.append(
            f"{r.shape.name:<13} {r.scheduler:<9} {r.nodes:>5} {r.shape.pods:>5} {r.bound:>5} "
            f"{r.seconds:>8.1f} {r.rate:>7.0f} {r.cpu:>6.1f} {r.rss_mib:>7.0f} {r.unplaced:>8} {r.partial:>7} "
            f"{r.initially_scheduled:>7}  {r.racks_text()}{' TIMED OUT' if r.timed_out else ''}"
            f"{' ' + r.note if r.note else ''}"
        )
    by_shape: dict[str, dict[str, Result]] = defaultdict(dict)
    for r in results:
        by_shape[r.shape.name][r.scheduler] = r
    lines.append("")
    lines.append("ratio kube-scheduler / ours (time; > 1: ours faster), and CPU")
    for name, rs in by_shape.items():
        kube = rs.get("kube")
        for ours in ("ours", "ours-hn"):
            o = rs.get(ours)
            if kube and o and o.seconds > 0 and kube.bound == kube.shape.pods:
                lines.append(
                    f"  {name:<13} {ours:<8} time {kube.seconds / o.seconds:5.2f}x   "
                    f"cpu {kube.cpu / o.cpu if o.cpu else float('nan'):5.2f}x"
                )
    return "\n".join(lines)


def install_ours(cp: ControlPlane) -> None:
    """Our namespace, Volcano's CRDs (served before we go on) and the default Queue."""
    env = dict(os.environ, KUBECONFIG=str(cp.kubeconfig))
    for f in ("namespace.yaml", "crds"):
        subprocess.run(
            ["kubectl", "apply", "-f", str(MANIFESTS / f)], env=env, check=True, capture_output=True
        )
    subprocess.run(
        ["kubectl", "wait", "--for=condition=Established", "crd", "--all", "--timeout=120s"],
        env=env,
        check=True,
        capture_output=True,
    )
    for _ in range(30):
        if (
            subprocess.run(
                ["kubectl", "apply", "-f", str(MANIFESTS / "default-queue.yaml")],
                env=env,
                capture_output=True,
            ).returncode
            == 0
        ):
            break
        time.sleep(1)


async def create_nodes(cp: ControlPlane, nodes: int) -> float:
    api, raw = await connect(str(cp.kubeconfig), pool_size=CREATE_CONCURRENCY + 8)
    try:
        t = time.perf_counter()
        await create_all(api, NODES, [node(i) for i in range(nodes)])
        return time.perf_counter() - t
    finally:
        await raw.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1/10 scale: 500 nodes, a tenth of the pods")
    ap.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    ap.add_argument("--schedulers", default="kube,ours", help=f"comma-separated, of {','.join(SCHEDULERS)}")
    ap.add_argument(
        "--nodes", type=int, default=0, help="override the node count (default 5,000; 500 --quick)"
    )
    ap.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    ap.add_argument("--stall", type=float, default=120.0, help="give up after this long without a new bind")
    ap.add_argument("--json", metavar="FILE", help="also write the results here")
    ap.add_argument("--keep-dir", action="store_true", help="keep the logs and the control plane's files")
    args = ap.parse_args()
    table_of = shapes(args.quick)
    names = [s for s in args.shapes.split(",") if s] or list(table_of)
    bad = [s for s in names if s not in table_of]
    if bad:
        ap.error(f"unknown shapes {bad}; known: {', '.join(table_of)}")
    scheds = [s for s in args.schedulers.split(",") if s]
    if any(s not in SCHEDULERS for s in scheds):
        ap.error(f"schedulers are {SCHEDULERS}")
    nodes = args.nodes or (500 if args.quick else 5000)
    workdir = Path(tempfile.mkdtemp(prefix="hyperplace-race-"))
    say(f"work directory {workdir}")
    cp = ControlPlane(kube_bin_dir(), keep_dir=args.keep_dir, root=workdir / "cp")
    results: list[Result] = []
    try:
        cp.start()
        install_ours(cp)
        t = asyncio.run(create_nodes(cp, nodes))
        say(f"{nodes} nodes created in {t:.1f}s")
        for k, name in enumerate(names):
            for s in scheds:
                if s == "ours-hn" and not table_of[name].tas:
                    continue  # no topology constraint: HyperNodes change nothing
                if s == "kube-rack" and not table_of[name].mixed:
                    continue  # the rack key is what "kube" is given there
                results.append(
                    asyncio.run(race_one(cp, workdir, table_of[name], s, nodes, args.timeout, args.stall, k))
                )
                print(table(results), file=sys.stderr, flush=True)
    finally:
        cp.stop()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(
        f"\npodgroup race: {nodes} nodes of 4 CPU in racks of {NODES_PER_RACK}, pods of {CPU_REQUEST} CPU; load {load}"
    )
    print(table(results))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    {
                        "shape": r.shape.name,
                        "gangs": r.shape.gangs,
                        "size": r.shape.size,
                        "scheduler": r.scheduler,
                        "nodes": r.nodes,
                        "bound": r.bound,
                        "seconds": r.seconds,
                        "first_bind": r.first_bind,
                        "cpu": r.cpu,
                        "rss_mib": r.rss_mib,
                        "racks": r.racks,
                        "blocks": r.blocks,
                        "split_partitions": r.split_partitions,
                        "two_tier_held": r.held,
                        "unplaced": r.unplaced,
                        "partial": r.partial,
                        "initially_scheduled": r.initially_scheduled,
                        "timed_out": r.timed_out,
                        "note": r.note,
                    }
                    for r in results
                ],
                indent=1,
            )
        )
    say(f"logs in {workdir}" if args.keep_dir else "done")
    # kube-rack cannot place the mixed shape's gangs (bigger than a rack): that is its result
    return 0 if all(r.bound == r.shape.pods for r in results if r.scheduler != "kube-rack") else 1


if __name__ == "__main__":
    sys.exit(main())
