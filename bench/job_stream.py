"""A seeded stream of gangs on the real local control plane: what the scheduler costs the
apiserver and etcd, write by write.

    python bench/job_stream.py                          # 256 nodes, 8 minutes, ours then the floor
    python bench/job_stream.py --minutes 2 --variants ours   # a quick look
    python bench/job_stream.py --variants ours,floor --json /tmp/js.json
    python bench/job_stream.py --variants ours,volcano       # against Volcano's own scheduler

For each variant a fresh ``hyperplace.localup`` (etcd, kube-apiserver with an audit log of every
write, kube-controller-manager, the webhooks, the fake kubelet, hyperplace-controller and
hyperplace-scheduler, each as its ServiceAccount) is started; 256 Ready nodes of 8 GPUs go under a
leaf/spine HyperNode tree (8 nodes per leaf, 8 leaves per spine). Then the same seeded trace is
played: Volcano Jobs of 1-64 whole-node pods (8 GPUs each) arrive over ``--minutes`` at an offered
load of ``--load`` (GPU-seconds asked / GPU-seconds the cluster has in the window), with the
network topology a typical user sets (``bench.quality.generators.topology_policy``: soft inside a
leaf, hard at tier 2 up to a spine, partitions of 8 pods hard at tier 1 from 16 pods). There is
no kubelet: the fake kubelet marks bound pods Running, and the benchmark ends a job's pods (phase
``Succeeded``) once its run time has passed since its last pod was bound.

Variants: ``ours`` (the scheduler's defaults), ``floor`` (``--no-status-writes``: binds only,
no pod conditions, PodGroup or Queue status, or Events; the cost of the binds themselves) and
``volcano``: Volcano's own scheduler (vc-scheduler v1.15.1, built from a snapshot of
volcano-sh/volcano at its release tag by ``hack/volcano-bin.sh``) in place of hyperplace-scheduler,
with the very configuration ours runs (``manifests/scheduler/configmap.yaml``: Volcano's
network-topology setup with GPU bin-packing) and Volcano's default one-second schedule period; the
rest of the control plane (our controller makes the PodGroups from the Volcano Jobs, as Volcano's
would) stays. It runs as ServiceAccount ``hyperplace-system/volcano-scheduler`` (bound to
cluster-admin: Volcano's chart grants it about as much), so the audit log counts its writes as the
scheduler's.

Reported per variant, over the arrival window:

* writes by component (the audit log's user: scheduler, controller, kube-controller-manager,
  the benchmark and fake kubelet as admin) and resource/verb; leases are not audited;
* the ratios the issue asks for: pending-pod status updates and Events per bound pod, PodGroup
  writes per started job (+ per minute a job waited);
* CPU seconds of kube-apiserver, etcd, the scheduler and the controller (``/proc``), and the
  scheduler's peak RSS;
* placements and waits: jobs started, pods bound, GPU allocation (time average), waits of the
  jobs started (mean, p50, p95, max) and how many were still waiting when the window closed (with
  the longest of them so far, the least it will wait), multi-pod jobs on the fewest leaves
  possible, mean leaves spanned.

Heavy: run it alone (``flock /tmp/hp-heavy.lock``). The audit log costs the apiserver a little
CPU per write in every variant alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import audit
from bench.live.cluster import create_all
from bench.live.metrics import samples
from bench.live.processes import (
    cpu_seconds,
    hack_built,
    restart,
    running,
    wait_healthy,
    wait_leader,
    wait_ready,
)
from bench.quality.generators import topology_policy
from hyperplace.api.constants import TOPOLOGY_GROUP, TOPOLOGY_VERSION
from hyperplace.localup import __main__ as localup
from hyperplace.localup import components
from hyperplace.localup.cluster import LOCAL_UP_LABEL, fake_node
from hyperplace.localup.controlplane import free_port, kube_bin_dir
from hyperplace.localup.fakekubelet import node_ready_status
from hyperplace.localup.kubectl import Kubectl, sa_kubeconfig, wait_for
from hyperplace.localup.state import State, is_ours, stop_processes
from hyperplace.runtime.api import HYPERNODES, JOBS, NODES, PODS, ApiError, Obj, meta
from hyperplace.runtime.flags import SYSTEM_NAMESPACE
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.kube import connect
from hyperplace.runtime.parallel import run_bounded

GPUS = 8
NODES_PER_LEAF = 8
LEAVES_PER_SPINE = 8
NAMESPACE = "stream"
SIZES = (1, 2, 4, 8, 16, 32, 64)
# Share of jobs per size (whole-node pods): most are small, a tail of large gangs holds most GPUs.
WEIGHTS = (0.34, 0.2, 0.16, 0.14, 0.08, 0.05, 0.03)
VARIANTS = {"ours": [], "floor": ["--no-status-writes"], "volcano": []}
REPO = Path(__file__).resolve().parents[1]
VOLCANO = "vc-scheduler"


def say(msg: str) -> None:
    print(f"job_stream: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the trace


@dataclass
class TraceJob:
    name: str
    arrival: float  # seconds after the stream starts
    pods: int
    runtime: float  # seconds from its last pod bound to its pods ending


def trace(seed: int, minutes: float, nodes: int, load: float) -> list[TraceJob]:
    """Poisson arrivals over the window; sizes from WEIGHTS; log-normal run times scaled so the
    whole trace asks ``load`` times the cluster's GPU-seconds in the window."""
    rng = random.Random(seed)
    window = minutes * 60.0
    mean_pods = sum(s * w for s, w in zip(SIZES, WEIGHTS, strict=True))
    median_runtime = 60.0
    mean_runtime = median_runtime * math.exp(0.5**2 / 2)
    rate = load * nodes / (mean_pods * mean_runtime)  # jobs per second
    jobs: list[TraceJob] = []
    t = rng.expovariate(rate)
    while t < window:
        size = rng.choices(SIZES, WEIGHTS)[0]
        jobs.append(
            TraceJob(f"job-{len(jobs):04d}", t, size, rng.lognormvariate(math.log(median_runtime), 0.5))
        )
        t += rng.expovariate(rate)
    asked = sum(j.pods * j.runtime for j in jobs)
    scale = load * nodes * window / asked if asked else 1.0
    for j in jobs:
        j.runtime *= scale  # exactly the offered load the trace names
    return jobs


def job_manifest(job: TraceJob) -> Obj:
    topo, psize, ptopo = topology_policy(job.pods, NODES_PER_LEAF, NODES_PER_LEAF * LEAVES_PER_SPINE)
    res = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(GPUS)}
    task: dict[str, Any] = {
        "name": "worker",
        "replicas": job.pods,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "w",
                        "image": "example.com/worker:latest",
                        "resources": {"requests": res, "limits": res},
                    }
                ]
            }
        },
    }
    if psize is not None and ptopo is not None:
        task["partitionPolicy"] = {
            "totalPartitions": job.pods // psize,
            "partitionSize": psize,
            "networkTopology": {"mode": ptopo.mode, "highestTierAllowed": ptopo.highest_tier},
        }
    spec: dict[str, Any] = {"schedulerName": "volcano", "minAvailable": job.pods, "tasks": [task]}
    if topo is not None:
        nt: dict[str, Any] = {"mode": topo.mode}
        if topo.highest_tier is not None:
            nt["highestTierAllowed"] = topo.highest_tier
        spec["networkTopology"] = nt
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": job.name, "namespace": NAMESPACE},
        "spec": spec,
    }


# ---------------------------------------------------------------------------- the cluster


def tree(names: list[str]) -> list[Obj]:
    def hn(name: str, tier: int, kind: str, members: list[str]) -> Obj:
        return {
            "apiVersion": f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}",
            "kind": "HyperNode",
            "metadata": {"name": name, "labels": {LOCAL_UP_LABEL: "true"}},
            "spec": {
                "tier": tier,
                "tierName": "leaf" if tier == 1 else "spine",
                "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
            },
        }

    leaves = [names[i : i + NODES_PER_LEAF] for i in range(0, len(names), NODES_PER_LEAF)]
    leaf_names = [f"leaf-{i:02d}" for i in range(len(leaves))]
    spines = [leaf_names[i : i + LEAVES_PER_SPINE] for i in range(0, len(leaf_names), LEAVES_PER_SPINE)]
    out = [hn(n, 1, "Node", m) for n, m in zip(leaf_names, leaves, strict=True)]
    out += [hn(f"spine-{i}", 2, "HyperNode", m) for i, m in enumerate(spines)]
    return out


async def create_cluster(kubeconfig: Path, nodes: int) -> None:
    api, raw = await connect(str(kubeconfig))
    try:
        names = [f"node-{i:03d}" for i in range(nodes)]
        hns = tree(names)
        for tier in (1, 2):
            await create_all(api, HYPERNODES, [h for h in hns if h["spec"]["tier"] == tier], limit=8)
        objs = []
        for n in names:
            node = fake_node(n, GPUS)
            node["status"].update(node_ready_status(node))
            objs.append(node)
        await create_all(api, NODES, objs)
    finally:
        await raw.close()


# ---------------------------------------------------------------------------- Volcano's scheduler


def token_kubeconfig(kubectl: Kubectl, state: State, account: str) -> Path:
    """A kubeconfig of the local cluster as ServiceAccount hyperplace-system/``account``, made
    cluster-admin first, so the audit log names the component."""
    ns = SYSTEM_NAMESPACE
    kubectl.run("create", "serviceaccount", account, "-n", ns)
    kubectl.run(
        "create",
        "clusterrolebinding",
        account,
        "--clusterrole=cluster-admin",
        f"--serviceaccount={ns}:{account}",
    )
    (cluster,) = yaml.safe_load(Path(state.kubeconfig).read_text())["clusters"]
    return sa_kubeconfig(
        kubectl,
        cluster["cluster"]["server"],
        state.root / "pki" / "ca.crt",  # the local control plane's CA (controlplane.write_pki)
        account,
        state.root / f"{account}.kubeconfig",
    )


def start_volcano(state: State, kubectl: Kubectl) -> int:
    """Stop hyperplace-scheduler and start vc-scheduler under the scheduler name ``volcano`` with
    our default configuration; returns its pid once it answers /healthz."""
    vc = hack_built("volcano-bin.sh", what="vc-scheduler")
    have = {
        c["metadata"]["name"] for c in json.loads(kubectl.run("get", "crd", "-o", "json").stdout)["items"]
    }
    for path in sorted((vc.parent / "crds").glob("*.yaml")):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        if name not in have:  # Volcano's CRDs ours do not ship but vc-scheduler watches
            kubectl.run("apply", "--server-side", "-f", str(path))
            wait_for(
                lambda n=name: (
                    kubectl.run(  # type: ignore[misc]
                        "wait", "--for=condition=Established", f"crd/{n}", "--timeout=5s", check=False
                    ).returncode
                    == 0
                ),
                f"CRD {name} Established",
                60,
                lambda: "",
            )
    (entry,) = [e for e in state.processes if e["name"] == "hyperplace-scheduler" and is_ours(e)]
    stop_processes(State(state.root, [entry]))
    kubeconfig = token_kubeconfig(kubectl, state, audit.VOLCANO_ACCOUNT)
    # In a directory of its own: vc-scheduler reloads on any change in the configuration's directory.
    conf_dir = state.root / "vc-conf"
    conf_dir.mkdir(exist_ok=True)
    configmap = yaml.safe_load((REPO / "manifests" / "scheduler" / "configmap.yaml").read_text())
    (conf_dir / "volcano-scheduler.conf").write_text(configmap["data"]["volcano-scheduler.conf"])
    health = free_port()
    argv = [
        str(vc),
        f"--kubeconfig={kubeconfig}",
        "--scheduler-name=volcano",
        f"--scheduler-conf={conf_dir / 'volcano-scheduler.conf'}",
        "--leader-elect=false",
        f"--listen-address=127.0.0.1:{free_port()}",
        "--enable-healthz",
        f"--healthz-address=127.0.0.1:{health}",
        "--logtostderr",
        "-v=1",
    ]
    p = components.Process(VOLCANO, argv, state.root / f"{VOLCANO}.log", detached=True)
    state.add(VOLCANO, p.proc.pid, argv, p.log)
    try:
        wait_healthy(f"http://127.0.0.1:{health}/healthz", lambda: p.proc.poll() is None, VOLCANO, 120)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}:\n{_tail(p.log)}") from None
    return p.proc.pid


def _tail(log: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


# ---------------------------------------------------------------------------- one variant


@dataclass
class Result:
    variant: str
    minutes: float
    jobs: int = 0
    started: int = 0
    bound: int = 0
    waits: list[float] = field(default_factory=list)  # started jobs: arrival -> last pod bound
    # Jobs still waiting when the window closed: arrival -> window end, the least they will wait
    # (a max over ``waits`` alone would flatter a scheduler that leaves its hardest jobs unstarted).
    unstarted_waits: list[float] = field(default_factory=list)
    waiting_minutes: float = 0.0  # sum over jobs of minutes waited within the window
    alloc_share: float = 0.0  # time-averaged share of GPUs held by bound, unfinished pods
    min_leaves: int = 0  # multi-pod started jobs on the fewest leaves possible
    spread: Counter[int] = field(default_factory=Counter)  # pods of the multi-pod jobs above it
    multi: int = 0
    leaves: list[int] = field(default_factory=list)
    writes: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    cpu: dict[str, float] = field(default_factory=dict)
    scheduler_rss_mib: float = 0.0
    scheduler_metrics: dict[str, float] = field(default_factory=dict)

    def component(self, who: str) -> Counter[str]:
        return audit.by_component(self.writes).get(who, Counter())

    def ratios(self) -> dict[str, float]:
        s = self.component("scheduler")
        pod_status = s["pods/status patch"] + s["pods/status update"]
        events = sum(n for k, n in s.items() if k.startswith("events "))
        pg = sum(n for k, n in s.items() if k.startswith("podgroups"))
        binds = max(s["pods/binding create"], 1)
        return {
            "binds": float(s["pods/binding create"]),
            "pod_status_per_bound_pod": pod_status / binds,
            "events_per_bound_pod": events / binds,
            "podgroup_writes": float(pg),
            "podgroup_budget": 2 * self.started + self.waiting_minutes,
            "control_plane_cpu": self.cpu.get("kube-apiserver", 0.0) + self.cpu.get("etcd", 0.0),
        }


def vm_hwm_mib(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def scheduler_metrics(port: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r,
    ):
        for name, labels, value in samples(r.read().decode()):
            if name.startswith("hyperplace_scheduler_status_queue") or name.startswith(
                "hyperplace_scheduler_api_writes_total"
            ):
                key = name + (
                    "{" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}" if labels else ""
                )
                out[key] = value
    return out


async def play(kubeconfig: Path, jobs: list[TraceJob], nodes: int, result: Result) -> None:
    """Create the trace's Jobs at their arrival times and end their pods after their run time."""
    api, raw = await connect(str(kubeconfig), pool_size=64)
    by_name = {j.name: j for j in jobs}
    arrived: dict[str, float] = {}
    started: dict[str, float] = {}
    bound_at: dict[str, dict[str, float]] = {}
    node_of: dict[str, str] = {}
    ending: set[asyncio.Task[None]] = set()
    held = 0  # GPUs of bound, unfinished pods
    area = 0.0
    last_t = 0.0
    t0 = 0.0
    finished: set[str] = set()

    def tick(now: float) -> None:
        nonlocal area, last_t
        area += held * (now - last_t)
        last_t = now

    async def end_job(name: str, delay: float) -> None:
        nonlocal held
        await asyncio.sleep(delay)
        keys = list(bound_at.get(name, {}))

        async def one(key: str) -> None:
            ns, pod = key.split("/", 1)
            with contextlib.suppress(ApiError):
                await api.patch(PODS, pod, {"status": {"phase": "Succeeded"}}, ns, subresource="status")

        await run_bounded(keys, one, 16)

    def seen(p: Obj) -> None:
        nonlocal held
        labels = meta(p).get("labels") or {}
        job = labels.get("volcano.sh/job-name")
        if job not in by_name or t0 == 0.0:
            return
        key = f"{meta(p).get('namespace')}/{meta(p).get('name')}"
        now = time.monotonic() - t0
        node = (p.get("spec") or {}).get("nodeName")
        phase = (p.get("status") or {}).get("phase")
        if node and key not in node_of:
            node_of[key] = node
            tick(now)
            held += GPUS
            bound_at.setdefault(job, {})[key] = now
            if len(bound_at[job]) >= by_name[job].pods and job not in started:
                started[job] = now
                task = asyncio.create_task(end_job(job, by_name[job].runtime))
                ending.add(task)
                task.add_done_callback(ending.discard)
        if node and phase in ("Succeeded", "Failed") and key not in finished:
            finished.add(key)
            tick(now)
            held -= GPUS

    inf = Informer(api, PODS, NAMESPACE)
    inf.add_handler(seen, lambda _o, n: seen(n))
    task = asyncio.create_task(inf.run())
    try:
        await inf.synced.wait()
        window = result.minutes * 60.0
        t0 = time.monotonic()

        async def create(job: TraceJob) -> None:
            delay = job.arrival - (time.monotonic() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            arrived[job.name] = time.monotonic() - t0
            for attempt in range(5):
                try:
                    await api.create(JOBS, job_manifest(job), NAMESPACE)
                    return
                except ApiError as exc:
                    if exc.already_exists:
                        return
                    say(f"{job.name}: create failed ({exc}), attempt {attempt + 1}")
                    await asyncio.sleep(1.0)

        creators = [asyncio.create_task(create(j)) for j in jobs]
        await asyncio.sleep(max(0.0, window - (time.monotonic() - t0)))
        tick(window)
        for c in creators:
            c.cancel()
        await asyncio.gather(*creators, return_exceptions=True)
    finally:
        task.cancel()
        for t in list(ending):
            t.cancel()
        await asyncio.gather(task, *ending, return_exceptions=True)
        await raw.close()
    result.jobs = len(arrived)
    result.started = len(started)
    result.bound = len(node_of)
    result.waits = sorted(started[j] - arrived[j] for j in started if j in arrived)
    result.unstarted_waits = sorted(window - a for j, a in arrived.items() if j not in started)
    result.waiting_minutes = sum(
        (min(started.get(j, window), window) - a) / 60.0
        for j, a in arrived.items()
        if started.get(j, window) > a
    )
    result.alloc_share = area / (window * nodes * GPUS)
    for j in started:
        n = by_name[j].pods
        if n < 2:
            continue
        leaves = {int(node_of[k].split("-")[1]) // NODES_PER_LEAF for k in bound_at[j]}
        result.multi += 1
        result.leaves.append(len(leaves))
        if len(leaves) == math.ceil(n / NODES_PER_LEAF):
            result.min_leaves += 1
        else:
            result.spread[n] += 1


def run_variant(name: str, flags: list[str], args: argparse.Namespace, jobs: list[TraceJob]) -> Result:
    root = Path(tempfile.mkdtemp(prefix=f"hyperplace-job-stream-{name}-"))
    log = audit.enable(root)
    state_args = ["--state-dir", str(root)]
    result = Result(name, args.minutes)
    say(f"{name}: starting the local control plane in {root}")
    try:
        if (
            localup.up(localup.parse_args([*state_args, "up", f"--bin-dir={kube_bin_dir()}", "--nodes=0"]))
            != 0
        ):
            raise RuntimeError("local-up failed")
        state = State.load(root)
        assert state is not None
        kubectl = Kubectl(Path(state.kubeconfig))
        asyncio.run(create_cluster(Path(state.kubeconfig), args.nodes))
        kubectl.run("create", "namespace", NAMESPACE)
        identity = f"stream-{name}"
        cpid, cport = restart(state, "hyperplace-controller", ["--pod-concurrency=64"])
        if name == "volcano":
            spid = start_volcano(state, kubectl)
        else:
            spid, sport = restart(state, "hyperplace-scheduler", [f"--identity={identity}", *flags])
        wait_ready(cport, cpid, "hyperplace-controller")
        wait_leader(kubectl, "hyperplace-controller", f"_{cpid}")
        if name != "volcano":
            wait_leader(kubectl, "hyperplace-scheduler", identity)
            wait_ready(sport, spid, "hyperplace-scheduler")
        time.sleep(3.0)
        pids = running(state)
        before = {n: cpu_seconds(p) for n, p in pids.items()}
        offset = log.stat().st_size if log.exists() else 0
        t_from = time.time()
        say(f"{name}: playing {len(jobs)} jobs over {args.minutes:g} min")
        asyncio.run(play(Path(state.kubeconfig), jobs, args.nodes, result))
        t_to = time.time()
        result.cpu = {n: cpu_seconds(p) - before.get(n, 0.0) for n, p in pids.items()}
        result.scheduler_rss_mib = vm_hwm_mib(spid)
        if name != "volcano":
            result.scheduler_metrics = scheduler_metrics(state.ports["scheduler-metrics"])
        time.sleep(2.0)  # the batched audit backend flushes
        result.writes = audit.count_writes(log, t_from, t_to, offset)
    finally:
        localup.down(localup.parse_args([*state_args, "down"]))
    return result


# ---------------------------------------------------------------------------- report


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _still_waiting(r: Result) -> str:
    """How many jobs were still waiting when the window closed, and the longest of them so far."""
    u = r.unstarted_waits
    return f"{len(u)}, >= {u[-1]:.0f}s" if u else "0"


def report(results: list[Result]) -> str:
    out = ["placements and waits (arrival window):", ""]
    head = f"{'variant':<8} {'jobs':>5} {'started':>8} {'pods bound':>10} {'GPU alloc':>9} {'wait mean':>9} {'p50':>6} {'p95':>6} {'max':>6} {'waiting at end':>15} {'min leaves':>11} {'leaves/job':>10}"
    out += [head, "-" * len(head)]
    for r in results:
        w = r.waits
        out.append(
            f"{r.variant:<8} {r.jobs:>5} {r.started:>8} {r.bound:>10} {100 * r.alloc_share:>8.1f}% "
            f"{statistics.fmean(w) if w else float('nan'):>8.1f}s {pct(w, 0.5):>5.0f}s {pct(w, 0.95):>5.0f}s "
            f"{(w[-1] if w else float('nan')):>5.0f}s {_still_waiting(r):>15} {r.min_leaves:>5}/{r.multi:<5} "
            f"{statistics.fmean(r.leaves) if r.leaves else float('nan'):>10.2f}"
        )
    for r in results:
        if r.spread:
            sizes = ", ".join(f"{n} of {p} pods" for p, n in sorted(r.spread.items()))
            out.append(f"  {r.variant}: multi-pod jobs above the fewest leaves, by size: {sizes}")
    out += ["", "control-plane cost:", ""]
    head = f"{'variant':<8} {'binds':>6} {'pod status/bound':>16} {'events/bound':>12} {'PG writes':>9} {'PG budget':>9} {'apiserver+etcd CPU':>18} {'sched CPU':>9} {'sched RSS':>9} {'ctl CPU':>8}"
    out += [head, "-" * len(head)]
    floor = next((r for r in results if r.variant == "floor"), None)
    for r in results:
        x = r.ratios()
        ratio = ""
        if floor is not None and floor.ratios()["control_plane_cpu"] > 0:
            ratio = f" ({x['control_plane_cpu'] / floor.ratios()['control_plane_cpu']:.2f}x floor)"
        out.append(
            f"{r.variant:<8} {x['binds']:>6.0f} {x['pod_status_per_bound_pod']:>16.2f} {x['events_per_bound_pod']:>12.2f} "
            f"{x['podgroup_writes']:>9.0f} {x['podgroup_budget']:>9.0f} "
            f"{x['control_plane_cpu']:>7.1f}s{ratio:<12} {r.cpu.get('hyperplace-scheduler', r.cpu.get(VOLCANO, 0)):>8.1f}s "
            f"{r.scheduler_rss_mib:>6.0f}MiB {r.cpu.get('hyperplace-controller', 0):>7.1f}s"
        )
    out += ["", "writes by component, resource and verb:"]
    for r in results:
        out.append(f"  {r.variant}:")
        out += audit.lines(r.writes, "    ")
        out.append(
            "    CPU s: "
            + ", ".join(
                f"{n.replace('hyperplace-', '')} {s:.1f}"
                for n, s in sorted(r.cpu.items(), key=lambda kv: -kv[1])
            )
        )
        if r.scheduler_metrics:
            out.append(
                "    scheduler metrics: "
                + ", ".join(f"{k} {v:.0f}" for k, v in sorted(r.scheduler_metrics.items()))
            )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=256, help="nodes of 8 GPUs (a multiple of 64; default 256)")
    ap.add_argument("--minutes", type=float, default=8.0, help="arrival window (default 8)")
    ap.add_argument("--load", type=float, default=1.05, help="offered load (default 1.05)")
    ap.add_argument("--seed", type=int, default=22, help="trace seed (default 22)")
    ap.add_argument("--variants", default="ours,floor", help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--scheduler-flags", default="", help="extra flags for the scheduler in every variant")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in names:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}")
    jobs = trace(args.seed, args.minutes, args.nodes, args.load)
    say(
        f"trace: {len(jobs)} jobs, {sum(j.pods for j in jobs)} pods, seed {args.seed}, "
        f"offered load {args.load} over {args.minutes:g} min on {args.nodes} nodes"
    )
    extra = args.scheduler_flags.split()
    results = [run_variant(v, [*VARIANTS[v], *extra], args, jobs) for v in names]
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(
        f"\njob stream: {args.nodes} nodes x {GPUS} GPUs (leaf {NODES_PER_LEAF} nodes, spine {LEAVES_PER_SPINE} leaves), "
        f"{len(jobs)} jobs of 1-64 whole-node pods over {args.minutes:g} min, offered load {args.load}, seed {args.seed}"
    )
    print(report(results))
    print(f"load average at the end: {load}")
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "variant": r.variant,
                        "jobs": r.jobs,
                        "started": r.started,
                        "bound": r.bound,
                        "waits": r.waits,
                        "unstarted_waits": r.unstarted_waits,
                        "alloc_share": r.alloc_share,
                        "min_leaves": [r.min_leaves, r.multi],
                        "above_min_leaves_by_pods": dict(r.spread),
                        "ratios": r.ratios(),
                        "cpu": r.cpu,
                        "scheduler_rss_mib": r.scheduler_rss_mib,
                        "writes": {" ".join(k): n for k, n in r.writes.items()},
                        "scheduler_metrics": r.scheduler_metrics,
                    }
                    for r in results
                ],
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
