"""A Volcano Job from ``kubectl apply`` to its last pod bound, on the real local control plane.

    python bench/e2e_bind.py                      # 1,000 nodes, a 1,000-pod Job
    python bench/e2e_bind.py --large              # 10,000 nodes, a 5,000-pod Job (target <= 30 s)
    python bench/e2e_bind.py --nodes 200 --pods 200 --baseline none   # a quick look
    python bench/e2e_bind.py --workload indexed-job   # + the same gang as an indexed batch Job
    python bench/e2e_bind.py --baseline none --workload jobset   # + as a JobSet (real controller)

Starts ``hyperplace.localup`` (etcd, kube-apiserver, kube-controller-manager, the webhooks, the
fake kubelet, hyperplace-controller and hyperplace-scheduler as separate processes, each as its
ServiceAccount) in a temporary state directory, creates the Nodes (Ready, as a registering
kubelet leaves them) with many creates in flight and a leaf/spine/core HyperNode tree over them,
then for each variant:

* restarts the controller and the scheduler with the variant's flags (and waits until the new
  scheduler holds the Lease and has synced),
* ``kubectl apply``-s a Volcano Job of P pods (1 GPU each, networkTopology hard up to the lowest
  tier whose domain holds the gang) in a fresh namespace,
* watches the namespace's pods and reports: apply -> first pod seen, pod creation (first to last
  pod seen: the controller), binding (first to last pod seen bound: the scheduler) with binds/s,
  and apply -> last pod bound; plus CPU seconds each process spent meanwhile (where the time
  goes: the scheduler, the apiserver, etcd, ...), and every write each component made, by
  resource and verb (the apiserver's audit log, ``bench/audit.py``).

Variants: ``ours`` (the defaults), then the baseline (``--baseline``): ``full-rebuild`` (the
scheduler rebuilds its snapshot every cycle, the path before the incremental state), ``serial``
(one pod create and one bind in flight at a time: the controller's ``--pod-concurrency=1``, the
scheduler's ``--bind-concurrency=1``), ``floor`` (the scheduler's ``--no-status-writes``: binds
only, what the binds themselves cost), or ``none``. Every variant's Job goes to its own namespace
on spare nodes (P pods of 1 GPU fill P/8 nodes), so the runs do not wait for each other's deletion.

Latest figures (2-core machine, load 2-4, everything niced): 1,000 nodes / 1,000 pods: ours all
bound 4.3 s after apply (pods created at 471/s, bound at 581/s), ``--full-rebuild`` 6.9 s in the
same run. ``--large`` (10k nodes, 5,000 pods, target <= 30 s): 59.3 s (created at 188/s, bound at
179/s), MISSED by 2x: the two cores are saturated (117 CPU seconds in the 59 s: apiserver 37,
scheduler 27, controller 27, fake kubelet 8, etcd 7). 10k nodes are created in 22 s and their 666
HyperNodes in 24 s. Earlier runs of every variant had created pods one at a time: local-up starts
the controller with ``--pod-concurrency=1`` (so live placements equal the simulator's preview),
and "ours" inherited it (250 s for ``--large``); "ours" now passes the controller's default, 64.

``--workload indexed-job`` (issue 23) adds the same 1,000-pod gang as an indexed batch/v1 Job after
the Volcano Job: kube-controller-manager's Job controller creates its pods, hyperplace-controller
its PodGroup (``podgroup-<job uid>``, minMember 1,000 from ``scheduling.volcano.sh/group-min-member``)
and names it on each pod. Same run, 1,000 nodes (load 3-5): Volcano Job all bound 6.3 s after
apply; indexed Job 54.0 s, of which 49.6 s is kube-controller-manager creating the pods at 20/s
(its default client QPS), then the whole gang bound in 3.6 s (first bind only once every pod
existed: no partial start).

``--workload jobset`` (issue 23) adds the same gang as a JobSet (jobset.x-k8s.io/v1alpha2: one
replicatedJob of P/8 indexed Jobs of 8 pods, a node's worth each), run by the real JobSet v0.12.0
controller that ``hack/workload-bin.sh`` builds and caches under ~/.cache/hyperplace (started by
local-up ``--with jobset``: its CRD, its webhooks by URL on 127.0.0.1, its own manager process).
The JobSet controller creates the Jobs (restarted with ``--kube-api-qps=500 --kube-api-burst=500``,
its defaults, said explicitly), kube-controller-manager's Job controller their pods (its client:
QPS 20, burst 30, unless ``--kcm-qps N`` restarts it with ``--kube-api-qps/--kube-api-burst N``),
hyperplace-controller one PodGroup over all of them. The split (pod creation vs binding) says
which of them the figure is. Same run, 1,000 nodes, 1,000 pods (load 2-4, ``--baseline none
--workload jobset --workload indexed-job``): Volcano Job all bound 6.3 s after apply (created at
290/s, bound at 410/s); JobSet 64.7 s, of which 60.7 s is pod creation at 16/s (kube-controller-
manager's client, 20/s shared with the 125 Jobs' status updates and Events), then the gang bound
in 3.2 s (314/s, first bind once every pod existed); indexed Job 54.4 s (50.9 s creation at
20/s, 3.0 s binding at 334/s).

``--workload pytorchjob`` adds it as a Kubeflow PyTorchJob (1 Master, P-1 Workers) run by the real
training operator v1.8.1 (``--gang-scheduler-name=volcano``; it has no client-rate flags, so
controller-runtime's QPS 20 / burst 30 apply, and it creates every pod itself, only once its PodGroup
is Inqueue). Measured (1,000 pods, 1,000 nodes, beside the Volcano Job of the same run at 7.1 s):
all bound 62.3 s after apply = first pod 10.3 s (the PodGroup admitted), pod creation 48.6 s (21/s:
the operator's client rate), binding 3.3 s (305/s). The operator's whole-object PodGroup updates,
which restate the status it read, are admitted by hyperplace-webhooks (only a status change is the
scheduler's and the controller's to make).

``--profile`` samples the scheduler with py-spy (when installed) while ``ours`` runs and prints
where its CPU went. Everything the benchmark started is stopped at the end (``local-up down``),
also on failure or Ctrl-C. Run it niced on a shared machine; the load average is printed with
the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import audit
from hyperplace.api.constants import TOPOLOGY_GROUP, TOPOLOGY_VERSION
from hyperplace.localup import __main__ as localup
from hyperplace.localup import workloads
from hyperplace.localup.bringup import spawn
from hyperplace.localup.cluster import LOCAL_UP_LABEL, fake_node
from hyperplace.localup.components import Process
from hyperplace.localup.controlplane import free_port, kube_bin_dir
from hyperplace.localup.fakekubelet import node_ready_status
from hyperplace.localup.kubectl import Kubectl, lease_holder
from hyperplace.localup.state import State, is_ours, stop_processes
from hyperplace.runtime.api import HYPERNODES, NODES, PODS, ApiError, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.kube import connect
from hyperplace.runtime.parallel import run_bounded

REPO = Path(__file__).resolve().parents[1]
GPUS_PER_NODE = 8
NODES_PER_LEAF = 16
LEAVES_PER_SPINE = 16
CREATE_CONCURRENCY = 64
POD_CONCURRENCY = 64  # the controller's default (its Deployment passes none)
BASELINES = {
    "full-rebuild": ([f"--pod-concurrency={POD_CONCURRENCY}"], ["--full-rebuild"]),
    "serial": (["--pod-concurrency=1"], ["--bind-concurrency=1"]),
    # Binds only: no pod conditions, PodGroup/Queue status or Events (what the binds cost).
    "floor": ([f"--pod-concurrency={POD_CONCURRENCY}"], ["--no-status-writes"]),
}


def say(msg: str) -> None:
    print(f"e2e_bind: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the cluster


def topology(names: list[str]) -> list[Obj]:
    """Leaves of NODES_PER_LEAF nodes (tier 1), spines of LEAVES_PER_SPINE leaves (tier 2), one core."""

    def hn(name: str, tier: int, kind: str, members: list[str]) -> Obj:
        return {
            "apiVersion": f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}",
            "kind": "HyperNode",
            "metadata": {"name": name, "labels": {LOCAL_UP_LABEL: "true"}},
            "spec": {
                "tier": tier,
                "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
            },
        }

    leaves = [names[i : i + NODES_PER_LEAF] for i in range(0, len(names), NODES_PER_LEAF)]
    leaf_names = [f"leaf-{i}" for i in range(len(leaves))]
    spines = [leaf_names[i : i + LEAVES_PER_SPINE] for i in range(0, len(leaf_names), LEAVES_PER_SPINE)]
    spine_names = [f"spine-{i}" for i in range(len(spines))]
    out = [hn(n, 1, "Node", m) for n, m in zip(leaf_names, leaves, strict=True)]
    out += [hn(n, 2, "HyperNode", m) for n, m in zip(spine_names, spines, strict=True)]
    out.append(hn("core", 3, "HyperNode", spine_names))
    return out


def highest_tier(pods: int) -> int:
    """The lowest tier whose one domain holds ``pods`` pods of one GPU."""
    per_leaf = NODES_PER_LEAF * GPUS_PER_NODE
    if pods <= per_leaf:
        return 1
    return 2 if pods <= per_leaf * LEAVES_PER_SPINE else 3


def job_manifest(namespace: str, pods: int) -> list[Obj]:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    res = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "gang", "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": pods,
            "networkTopology": {"mode": "hard", "highestTierAllowed": highest_tier(pods)},
            "tasks": [
                {
                    "name": "worker",
                    "replicas": pods,
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
            ],
        },
    }
    return [ns, job]


def indexed_job_manifest(namespace: str, pods: int) -> list[Obj]:
    """``--workload indexed-job``: the same gang as an indexed batch/v1 Job (kube-controller-manager's
    Job controller makes its pods; hyperplace-controller its PodGroup, from the annotations)."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    res = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "gang",
            "namespace": namespace,
            "annotations": {"scheduling.volcano.sh/group-min-member": str(pods)},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "template": {
                "metadata": {
                    "annotations": {
                        "volcano.sh/network-topology-mode": "hard",
                        "volcano.sh/network-topology-highest-tier": str(highest_tier(pods)),
                    }
                },
                "spec": {
                    "schedulerName": "volcano",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "w",
                            "image": "example.com/worker:latest",
                            "resources": {"requests": res, "limits": res},
                        }
                    ],
                },
            },
        },
    }
    return [ns, job]


def _worker_pod_spec(pods: int) -> tuple[Obj, Obj]:
    """The worker pod template's metadata and spec: the same pod as the Volcano Job's, with the
    networkTopology as the pod annotations hyperplace-controller reads for a PodGroup of any owner."""
    res = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    metadata = {
        "annotations": {
            "volcano.sh/network-topology-mode": "hard",
            "volcano.sh/network-topology-highest-tier": str(highest_tier(pods)),
        }
    }
    spec = {
        "schedulerName": "volcano",
        "restartPolicy": "Never",
        "containers": [
            {"name": "w", "image": "example.com/worker:latest", "resources": {"requests": res, "limits": res}}
        ],
    }
    return metadata, spec


def jobset_manifest(namespace: str, pods: int) -> list[Obj]:
    """``--workload jobset``: the same gang as a JobSet (v1alpha2) of indexed Jobs of GPUS_PER_NODE
    pods each (one Job per node's worth, as JobSet users slice a pod set), or one Job when the
    gang does not divide. The JobSet controller creates the Jobs, kube-controller-manager's Job
    controller their pods, hyperplace-controller one PodGroup over all of them
    (``podgroup-<jobset uid>``, minMember = every pod)."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    per_job = GPUS_PER_NODE if pods % GPUS_PER_NODE == 0 else pods
    metadata, spec = _worker_pod_spec(pods)
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "gang", "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": pods // per_job,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": per_job,
                            "parallelism": per_job,
                            "backoffLimit": 0,
                            "template": {"metadata": metadata, "spec": spec},
                        }
                    },
                }
            ]
        },
    }
    return [ns, js]


def pytorchjob_manifest(namespace: str, pods: int) -> list[Obj]:
    """``--workload pytorchjob``: the same gang as a Kubeflow PyTorchJob (1 Master, pods-1
    Workers). The training operator (``--gang-scheduler-name=volcano``) creates the PodGroup
    (minMember = every pod; its networkTopology from the Job's annotations) and the pods."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    metadata, spec = _worker_pod_spec(pods)
    spec = {**spec, "containers": [{**spec["containers"][0], "name": "pytorch"}]}
    tpl = {"metadata": metadata, "spec": spec}
    replicas: dict[str, Obj] = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": tpl}}
    if pods > 1:
        replicas["Worker"] = {"replicas": pods - 1, "restartPolicy": "Never", "template": tpl}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "gang", "namespace": namespace, "annotations": metadata["annotations"]},
        "spec": {"pytorchReplicaSpecs": replicas},
    }
    return [ns, job]


WORKLOADS = {
    "indexed-job": indexed_job_manifest,
    "jobset": jobset_manifest,
    "pytorchjob": pytorchjob_manifest,
}
# The real controller each workload needs (hyperplace.localup --with; hack/workload-bin.sh builds it).
WORKLOAD_CONTROLLERS = {"jobset": "jobset", "pytorchjob": "training-operator"}
# Client rate limits of the controllers that make the workload's objects, passed explicitly where
# the controller has flags for them. JobSet v0.12.0: --kube-api-qps/--kube-api-burst (its defaults,
# 500/500, passed so the figure says what it ran with); it creates only the Jobs, their pods come
# from kube-controller-manager's Job controller (client QPS 20, burst 30 unless --kcm-qps). The
# training operator v1.8.1 has no such flags: its client runs at controller-runtime's defaults
# (QPS 20, burst 30) and it creates every pod (and its Services) itself, one worker thread
# by default (--controller-threads).
CONTROLLER_FLAGS = {"jobset": ["--kube-api-qps=500", "--kube-api-burst=500"]}


async def create_all(api: Any, res: Any, objs: list[Obj], limit: int = CREATE_CONCURRENCY) -> None:
    """Create ``objs``, ``limit`` at a time; a failed create (a webhook call that timed out on
    a loaded machine) is tried again, twice at most."""
    failed: list[Obj] = []

    async def one(obj: Obj) -> None:
        try:
            await api.create(res, obj)
        except ApiError as exc:
            if not exc.already_exists:
                failed.append(obj)
                raise

    left = list(objs)
    for attempt in range(5):
        failed.clear()
        errors = await run_bounded(left, one, limit)
        if not errors:
            return
        say(f"{len(errors)} {res.plural} creates failed (attempt {attempt + 1}), first: {errors[0]}")
        left = list(failed)
        await asyncio.sleep(2.0)
    raise RuntimeError(f"{len(left)} {res.plural} could not be created")


async def create_cluster(kubeconfig: Path, nodes: int) -> tuple[float, float]:
    """Nodes (Ready) and the HyperNode tree, CREATE_CONCURRENCY creates in flight; their seconds."""
    api, raw = await connect(str(kubeconfig))
    try:
        width = len(str(nodes - 1))
        names = [f"node-{i:0{width}d}" for i in range(nodes)]
        # The HyperNodes first, tier by tier: the validating webhook judges each against the
        # whole tree, and while 10k node events are still reaching its cache it answers
        # slowly (its 5 s timeout then fails creates on a loaded machine).
        t = time.perf_counter()
        tree = topology(names)
        for tier in (1, 2, 3):
            await create_all(api, HYPERNODES, [h for h in tree if h["spec"]["tier"] == tier], limit=8)
        t_hn = time.perf_counter() - t
        objs = []
        for n in names:
            node = fake_node(n, GPUS_PER_NODE)
            node["status"].update(node_ready_status(node))
            objs.append(node)
        t = time.perf_counter()
        await create_all(api, NODES, objs)
        t_nodes = time.perf_counter() - t
        return t_nodes, t_hn
    finally:
        await raw.close()


# ---------------------------------------------------------------------------- processes


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def running(state: State) -> dict[str, int]:
    """name -> pid of the recorded processes still running (the last record of a name wins)."""
    out = {}
    for e in state.processes:
        if is_ours(e):
            out[str(e["name"])] = int(e["pid"])
    return out


def restart(state: State, name: str, extra: list[str]) -> tuple[int, int]:
    """Stop ``name`` and start it again with its recorded argv plus ``extra`` (argparse: the
    last value of a flag wins). Returns (pid, health port)."""
    (entry,) = [e for e in state.processes if e["name"] == name and is_ours(e)]
    stop_processes(State(state.root, [entry]))
    port = free_port()
    argv = [*entry["argv"], f"--health-port={port}", *extra]
    kubeconfig = state.root / f"{name}.kubeconfig"
    p = spawn(state, [], name, argv, kubeconfig)
    return p.pid, port


def restart_with(state: State, name: str, extra: list[str]) -> State:
    """Stop a recorded process that takes no health-port flag (kube-controller-manager, a workload
    controller) and start it again with its argv plus ``extra`` (Go flags: the last value wins),
    its environment as local-up gave it; wait until it answers its health endpoint again."""
    (entry,) = [e for e in state.processes if e["name"] == name and is_ours(e)]
    stop_processes(State(state.root, [entry]))
    argv = [*entry["argv"], *extra]
    env = {"KUBECONFIG": str(state.kubeconfig)}
    if name == "training-operator":
        env["MY_POD_NAMESPACE"] = workloads.TRAINING_NAMESPACE
    p = Process(name, argv, Path(str(entry["log"])), env=env, detached=True)
    state.add(name, p.pid, p.argv, p.log)
    url, ctx = health_url(argv)
    wait_healthy(
        url,
        lambda: p.proc.poll() is None,
        f"{name} (restarted with {extra}; see {entry['log']})",
        timeout=180,
        context=ctx,
    )
    return state


def health_url(argv: list[str]) -> tuple[str, ssl.SSLContext | None]:
    """Where a restarted process answers: kube-controller-manager's /healthz on its secure port
    (self-signed), a workload controller's readiness probe address (its flag or its config file)."""
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    if "secure-port" in opts:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        return f"https://127.0.0.1:{opts['secure-port']}/healthz", ctx
    if "health-probe-bind-address" in opts:
        return f"http://{opts['health-probe-bind-address']}/readyz", None
    config = yaml.safe_load(Path(opts["config"]).read_text())
    return f"http://{config['health']['healthProbeBindAddress']}/readyz", None


def hack_built(script: str, *args: str, what: str = "") -> Path:
    """The path a ``hack/`` build script prints last (its cache; it builds what is missing)."""
    say(f"finding or building {what or ', '.join(args)} (hack/{script})")
    out = subprocess.run(["bash", str(REPO / "hack" / script), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"hack/{script} failed: {out.stderr.strip()[-400:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def workload_bin_dir(names: list[str]) -> Path:
    """``$HYPERPLACE_WORKLOAD_BIN``, else hack/workload-bin.sh's cache (it builds what is missing)."""
    env = os.environ.get("HYPERPLACE_WORKLOAD_BIN")
    return Path(env) if env else hack_built("workload-bin.sh", *names)


def wait_healthy(
    url: str,
    alive: Callable[[], bool],
    what: str,
    timeout: float = 300.0,
    context: ssl.SSLContext | None = None,
) -> None:
    """Poll ``url`` until it answers 200; fails when ``alive()`` turns false or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(url, timeout=2, context=context) as resp,
        ):
            if resp.status == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{what} not ready within {timeout:.0f}s")


def wait_ready(port: int, pid: int, what: str, timeout: float = 300.0) -> None:
    """A component of ours answers ``/readyz`` on ``port`` while process ``pid`` runs."""
    wait_healthy(f"http://127.0.0.1:{port}/readyz", lambda: Path(f"/proc/{pid}").exists(), what, timeout)


def wait_leader(kubectl: Kubectl, lease: str, identity: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if identity in (lease_holder(kubectl, lease) or ""):
            return
        time.sleep(0.3)
    raise RuntimeError(f"{identity} did not take the {lease} Lease within {timeout:.0f}s")


class Profiler:
    """py-spy sampling one process (non-blocking) into collapsed stacks."""

    def __init__(self, pid: int, out: Path) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.out = out
        self.proc: subprocess.Popen[bytes] | None = None
        if Path(exe).exists():
            self.proc = subprocess.Popen(
                [
                    exe,
                    "record",
                    "--pid",
                    str(pid),
                    "--rate",
                    "200",
                    "--format",
                    "raw",
                    "--nonblocking",
                    "--threads",
                    "-o",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        else:
            say("py-spy is not installed (pip install py-spy): no profile")

    def stop(self) -> str:
        if self.proc is None:
            return ""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return summarize_profile(self.out)


CATEGORIES = [
    (
        "session (decision)",
        (
            "run_session",
            "scheduler_plugin/framework",
            "scheduler_plugin/actions",
            "scheduler_plugin/plugins",
            "scheduler_plugin/algorithms",
            "scheduler_plugin/cycle",
        ),
    ),
    ("snapshot / cluster state", ("scheduler_plugin/cache", "scheduler_plugin/model")),
    ("JSON encode/decode", ("json/", "sanitize_for_serialization")),
    ("TLS / socket", ("ssl.py", "selector_events.py", "sslproto.py")),
    ("HTTP client (aiohttp)", ("aiohttp/",)),
    ("informer events", ("informer.py",)),
    ("status / events writing", ("runtime/status.py", "runtime/events.py", "runtime/reporter.py")),
    ("bind path", ("runtime/binder.py", "assume.py", "_apply")),
]


def summarize_profile(path: Path, top: int = 12) -> str:
    """Self time per function and time per category (a sample counts once per category)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return "(no profile written)"
    self_time: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        self_time[frames[-1]] += n
        for cat, needles in CATEGORIES:
            if any(nd in f for f in frames for nd in needles):
                cats[cat] += n
    if not total:
        return "(no samples)"
    out = [f"scheduler CPU samples: {total} (200/s while running)", "by category (inclusive):"]
    out += [f"  {c:<28} {100 * cats[c] / total:5.1f} %" for c, _ in CATEGORIES]
    out.append("top self time:")
    out += [f"  {100 * n / total:5.1f} %  {f[:110]}" for f, n in self_time.most_common(top)]
    return "\n".join(out)


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), float(s.value))
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    ]


def apiserver_stats(kubectl: Kubectl) -> dict[str, float]:
    """Sums and counts of the apiserver's own latency of pod binds and creates, and of the time
    requests waited in its priority-and-fairness queues."""
    out: dict[str, float] = {}
    text = kubectl.run("get", "--raw", "/metrics", check=False).stdout
    for name, labels, value in samples(text):
        key = None
        if (
            name.startswith("apiserver_request_duration_seconds_")
            and labels.get("resource") == "pods"
            and labels.get("verb") == "POST"
            and labels.get("subresource") in ("", "binding")
        ):
            key = "bind_" if labels.get("subresource") == "binding" else "create_"
        elif name.startswith("apiserver_flowcontrol_request_wait_duration_seconds_"):
            key = "apf_"
        if key is not None and name.endswith(("_sum", "_count")):
            key += name.rsplit("_", 1)[1]
            out[key] = out.get(key, 0.0) + value
    return out


def scheduler_stats(port: int) -> dict[str, float]:
    """The scheduler's own view of its bind requests (sum and count of their durations)."""
    out: dict[str, float] = {}
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r,
    ):
        for name, _labels, value in samples(r.read().decode()):
            if name.startswith("hyperplace_scheduler_bind_request_duration_seconds_"):
                out[name.rsplit("_", 1)[1]] = value
    return out


def mean_ms(stats: dict[str, float], before: dict[str, float], prefix: str) -> str:
    s = stats.get(f"{prefix}sum", 0.0) - before.get(f"{prefix}sum", 0.0)
    n = stats.get(f"{prefix}count", 0.0) - before.get(f"{prefix}count", 0.0)
    return f"{1000 * s / n:.1f} ms (n={n:.0f})" if n else "-"


# ---------------------------------------------------------------------------- one variant


@dataclass
class Run:
    variant: str
    pods: int
    apply_s: float = 0.0
    first_pod: float = 0.0
    last_pod: float = 0.0
    first_bind: float = 0.0
    last_bind: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    ok: bool = False
    profile: str = ""
    latency: str = ""
    writes: Counter[tuple[str, str, str]] = field(default_factory=Counter)


async def watch_job(
    kubeconfig: Path,
    kubectl: Kubectl,
    namespace: str,
    pods: int,
    timeout: float,
    manifest_of: Any = job_manifest,
) -> Run:
    """Apply the Job and time its pods; timestamps are seconds after ``kubectl apply`` began."""
    api, raw = await connect(str(kubeconfig))
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    done = asyncio.Event()
    t0 = 0.0

    def seen(p: Obj) -> None:
        now = time.perf_counter() - t0
        key = f"{meta(p).get('namespace')}/{meta(p).get('name')}"
        created.setdefault(key, now)
        if (p.get("spec") or {}).get("nodeName") and key not in bound:
            bound[key] = now
            if len(bound) >= pods:
                done.set()

    kubectl.run("create", "namespace", namespace)
    inf = Informer(api, PODS, namespace)
    inf.add_handler(seen, lambda _o, n: seen(n))
    task = asyncio.create_task(inf.run())
    run = Run(namespace, pods)
    try:
        await inf.synced.wait()
        manifest = yaml.safe_dump_all(manifest_of(namespace, pods)[1:])
        t0 = time.perf_counter()
        await asyncio.to_thread(kubectl.run, "apply", "-f", "-", input=manifest)
        run.apply_s = time.perf_counter() - t0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await done.wait()
        run.ok = len(bound) >= pods
        if created:
            run.first_pod, run.last_pod = min(created.values()), max(created.values())
        if bound:
            run.first_bind, run.last_bind = min(bound.values()), max(bound.values())
        if not run.ok:
            say(f"{namespace}: only {len(created)} pods created and {len(bound)} bound within {timeout:.0f}s")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await raw.close()
    return run


def run_variant(
    state: State,
    kubectl: Kubectl,
    name: str,
    flags: tuple[list[str], list[str]],
    pods: int,
    timeout: float,
    profile: bool,
    manifest_of: Any = job_manifest,
) -> Run:
    ctl_extra, sch_extra = flags
    identity = f"e2e-{name}"
    say(f"{name}: restarting the controller {ctl_extra or ''} and the scheduler {sch_extra or ''}")
    cpid, cport = restart(state, "hyperplace-controller", ctl_extra)
    spid, sport = restart(state, "hyperplace-scheduler", [f"--identity={identity}", *sch_extra])
    wait_ready(cport, cpid, "hyperplace-controller")
    wait_leader(kubectl, "hyperplace-controller", f"_{cpid}")  # identity: <POD_NAME>_<pid>
    wait_leader(kubectl, "hyperplace-scheduler", identity)
    wait_ready(sport, spid, "hyperplace-scheduler")
    time.sleep(2.0)  # the controller's Lease and first reconciles of the restart settle
    pids = running(state)
    before = {n: cpu_seconds(p) for n, p in pids.items()}
    api_before, sch_before = apiserver_stats(kubectl), scheduler_stats(sport)
    prof = Profiler(spid, state.root / f"profile-{name}.txt") if profile else None
    t_from = time.time()
    run = asyncio.run(watch_job(Path(state.kubeconfig), kubectl, f"e2e-{name}", pods, timeout, manifest_of))
    time.sleep(2.0)  # the writes that follow the last bind (Events, PodGroup status) and the audit batch
    run.writes = audit.count_writes(state.root / "audit.log", t_from, time.time())
    run.variant = name
    run.cpu = {n: cpu_seconds(p) - before.get(n, 0.0) for n, p in pids.items()}
    api_after, sch_after = apiserver_stats(kubectl), scheduler_stats(sport)
    run.latency = (
        f"bind as the scheduler saw it {mean_ms(sch_after, sch_before, '')}, in the apiserver "
        f"{mean_ms(api_after, api_before, 'bind_')}; pod create in the apiserver "
        f"{mean_ms(api_after, api_before, 'create_')}; priority-and-fairness queue wait "
        f"{mean_ms(api_after, api_before, 'apf_')}"
    )
    if prof is not None:
        run.profile = prof.stop()
    return run


# ---------------------------------------------------------------------------- report


def table(runs: list[Run], load: str) -> str:
    head = (
        f"{'variant':<14} {'pods':>6} {'apply':>7} {'1st pod':>8} {'creation':>9} {'pods/s':>8}"
        f" {'1st bind':>9} {'binding':>8} {'binds/s':>8} {'all bound':>10}"
    )
    out = [head, "-" * len(head)]
    for r in runs:
        creation = r.last_pod - r.first_pod
        binding = r.last_bind - r.first_bind
        out.append(
            f"{r.variant:<14} {r.pods:>6} {r.apply_s:>6.2f}s {r.first_pod:>7.2f}s {creation:>8.2f}s"
            f" {r.pods / creation if creation > 0 else 0:>8.0f} {r.first_bind:>8.2f}s {binding:>7.2f}s"
            f" {r.pods / binding if binding > 0 else 0:>8.0f} {r.last_bind:>9.2f}s"
            + ("" if r.ok else "  (NOT all bound)")
        )
    out.append("")
    out.append("CPU seconds per process from apply to the last bind (the window in brackets):")
    for r in runs:
        parts = [
            f"{n.replace('hyperplace-', '')} {s:.1f}" for n, s in sorted(r.cpu.items(), key=lambda x: -x[1])
        ]
        out.append(f"  {r.variant:<12} [{r.last_bind:.1f}s] " + ", ".join(parts))
    out.append("")
    out.append("mean request latencies during the run:")
    for r in runs:
        out.append(f"  {r.variant:<12} {r.latency}")
    out.append("")
    out.append("writes from apply to 2 s after the last bind (apiserver audit log):")
    for r in runs:
        out.append(f"  {r.variant}:")
        out += audit.lines(r.writes, "    ")
    out.append(f"load average at the end: {load}")
    return "\n".join(out)


def parser() -> argparse.ArgumentParser:
    """The benchmark's command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000, help="fake nodes (default 1,000)")
    ap.add_argument("--pods", type=int, default=1000, help="pods of the Job (default 1,000)")
    ap.add_argument("--large", action="store_true", help="10,000 nodes and a 5,000-pod Job")
    ap.add_argument("--baseline", choices=[*BASELINES, "none"], default="full-rebuild")
    ap.add_argument("--profile", action="store_true", help="py-spy the scheduler during 'ours'")
    ap.add_argument("--timeout", type=float, default=300.0, help="per Job, until every pod is bound")
    ap.add_argument(
        "--long-leases",
        action="store_true",
        help="controller and scheduler Leases of 120 s (renew deadline 90 s): a starved machine "
        "does not cost them their Lease mid-run",
    )
    ap.add_argument(
        "--keep", action="store_true", help="leave the control plane running (local-up down stops it)"
    )
    ap.add_argument(
        "--workload",
        choices=sorted(WORKLOADS),
        action="append",
        default=[],
        help="after the Volcano Job variants, the same gang as this workload: an indexed batch Job, "
        "a JobSet (the real JobSet v0.12.0 controller) or a PyTorchJob (the real training operator "
        "v1.8.1), both built and cached by hack/workload-bin.sh; repeatable",
    )
    ap.add_argument(
        "--kcm-qps",
        type=int,
        default=0,
        help="restart kube-controller-manager with --kube-api-qps and --kube-api-burst of this "
        "(default: its own, 20 and 30): the rate its Job controller creates the pods of an indexed "
        "Job or a JobSet",
    )
    return ap


def main() -> int:
    ap = parser()
    args = ap.parse_args()
    if args.large:
        args.nodes, args.pods = 10000, 5000
    variants = 1 + (args.baseline != "none") + len(args.workload)
    if args.pods * variants > args.nodes * GPUS_PER_NODE:
        ap.error(
            f"{variants} Jobs of {args.pods} one-GPU pods do not fit {args.nodes} nodes of {GPUS_PER_NODE}"
        )

    root = Path(tempfile.mkdtemp(prefix="hyperplace-e2e-bind-"))
    audit.enable(root)
    state_args = ["--state-dir", str(root)]
    controllers = sorted({WORKLOAD_CONTROLLERS[w] for w in args.workload if w in WORKLOAD_CONTROLLERS})
    with_args = (
        [f"--with={','.join(controllers)}", f"--workload-bin-dir={workload_bin_dir(controllers)}"]
        if controllers
        else []
    )
    up_args = localup.parse_args([*state_args, "up", f"--bin-dir={kube_bin_dir()}", "--nodes=0", *with_args])
    say(f"starting the local control plane in {root}")
    runs: list[Run] = []
    try:
        t = time.perf_counter()
        if localup.up(up_args) != 0:
            return 1
        say(f"control plane up in {time.perf_counter() - t:.0f}s")
        state = State.load(root)
        assert state is not None
        kubectl = Kubectl(Path(state.kubeconfig))
        for name in controllers:
            if CONTROLLER_FLAGS.get(name):
                say(f"restarting {name} with {' '.join(CONTROLLER_FLAGS[name])}")
                restart_with(state, name, CONTROLLER_FLAGS[name])
        if args.kcm_qps:
            kcm_flags = [f"--kube-api-qps={args.kcm_qps}", f"--kube-api-burst={args.kcm_qps}"]
            say(f"restarting kube-controller-manager with {' '.join(kcm_flags)}")
            restart_with(state, "kube-controller-manager", kcm_flags)
        t_nodes, t_hn = asyncio.run(create_cluster(Path(state.kubeconfig), args.nodes))
        say(
            f"{args.nodes} nodes created in {t_nodes:.1f}s ({args.nodes / t_nodes:.0f}/s), "
            f"HyperNodes in {t_hn:.1f}s"
        )
        # local-up starts the controller with --pod-concurrency=1 (pods in index order, so a
        # live placement equals the simulator's preview); "ours" is the Deployment's default.
        plan: list[tuple[str, tuple[list[str], list[str]]]] = [
            ("ours", ([f"--pod-concurrency={POD_CONCURRENCY}"], []))
        ]
        if args.baseline != "none":
            plan.append((args.baseline, BASELINES[args.baseline]))
        if args.long_leases:
            longer = [
                "--leader-elect-lease-duration=120",
                "--leader-elect-renew-deadline=90",
                "--leader-elect-retry-period=5",
            ]
            plan = [(n, ([*c, *longer], [*sch, *longer])) for n, (c, sch) in plan]
        for name, flags in plan:
            runs.append(
                run_variant(
                    state, kubectl, name, flags, args.pods, args.timeout, args.profile and name == "ours"
                )
            )
            say(f"{name}: all bound {runs[-1].last_bind:.1f}s after apply")
        for w in args.workload:
            runs.append(
                run_variant(
                    state,
                    kubectl,
                    w,
                    ([f"--pod-concurrency={POD_CONCURRENCY}"], []),
                    args.pods,
                    args.timeout,
                    False,
                    WORKLOADS[w],
                )
            )
            say(f"{w}: all bound {runs[-1].last_bind:.1f}s after apply")
    finally:
        if args.keep:
            say(f"left running; stop with: python -m hyperplace.localup --state-dir {root} down")
        else:
            localup.down(localup.parse_args([*state_args, "down"]))
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"\ne2e bind: {args.nodes} nodes, a Job of {args.pods} pods (1 GPU each), networkTopology hard "
        f"tier <= {highest_tier(args.pods)}; times after `kubectl apply` began"
    )
    print(table(runs, " ".join(load)))
    for r in runs:
        if r.profile:
            print(f"\nprofile of the scheduler during '{r.variant}':\n{r.profile}")
    if args.large:
        ours = runs[0]
        verdict = "met" if ours.ok and ours.last_bind <= 30 else "MISSED"
        print(
            f"\ntarget (5,000 pods at 10k nodes bound <= 30 s after apply): {verdict} ({ours.last_bind:.1f}s)"
        )
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
