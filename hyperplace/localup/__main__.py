"""hyperplace local-up: a real control plane with hyperplace running on it, on this machine, with
no container runtime. ``hack/local-up.sh`` is the front door (it sets up .venv and the binaries).

    python -m hyperplace.localup up --bin-dir DIR [--nodes 16] [--gpus-per-node 8] [--topology leaf-spine|none]
    python -m hyperplace.localup status
    python -m hyperplace.localup down

``up`` starts etcd, kube-apiserver and kube-controller-manager (hyperplace.localup.controlplane),
applies the CRDs, the default Queue, RBAC and ConfigMaps from manifests/, writes the webhook
certificates with ``hyperplace-certs``, and starts ``hyperplace-webhooks`` (configurations by
URL), the fake kubelet, ``hyperplace-controller`` and ``hyperplace-scheduler``. The controller and
the scheduler run as their ServiceAccounts (a token from the TokenRequest API), so the manifests'
RBAC is what they get. Then it creates the nodes and HyperNodes and waits until every node is
Ready. Every process runs detached, in its own session, and logs to ``STATE/<name>.log``; their
ids are in ``STATE/state.json``. ``down`` stops exactly those processes and removes STATE.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import yaml

from hyperplace.runtime import flags
from hyperplace.runtime.flags import SYSTEM_NAMESPACE

from . import components, workloads
from .cluster import cluster_objects
from .components import MANIFESTS, Process
from .controlplane import ControlPlane, ControlPlaneError, free_port
from .kubectl import (
    Kubectl,
    LocalUpError,
    crds_established,
    http_ok,
    lease_holder,
    ready_nodes,
    sa_kubeconfig,
    wait_for,
)
from .state import State, default_state_dir, is_ours, stop_processes

READY_TIMEOUT = float(os.environ.get("HYPERPLACE_LOCAL_UP_TIMEOUT", "180"))


def _say(message: str) -> None:
    print(f"local-up: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------- up


_PROBE_JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "local-up-webhook-probe", "namespace": "default"},
    "spec": {
        "minAvailable": 1,
        "tasks": [
            {
                "name": "t",
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            }
        ],
    },
}


def up(args: argparse.Namespace) -> int:
    root: Path = args.state_dir
    previous = State.load(root)
    if previous is not None:
        alive = {e["name"]: is_ours(e) for e in previous.processes}
        if alive and all(alive.values()):
            _say(f"already running (state in {root}); 'hack/local-up.sh down' stops it")
            print(previous.kubeconfig)
            print(f"export KUBECONFIG={previous.kubeconfig}")
            return 0
        if any(alive.values()):
            stopped = [name for name, running in alive.items() if not running]
            _say(
                f"partly running: {', '.join(stopped)} stopped (logs in {root}); "
                "'hack/local-up.sh down' then 'hack/local-up.sh' starts afresh"
            )
            return 1
        shutil.rmtree(root, ignore_errors=True)
    if shutil.which("kubectl") is None:
        _say("kubectl is not on PATH; install it (https://kubernetes.io/docs/tasks/tools/) and try again")
        return 1
    started = time.monotonic()
    state = State(root)
    state.save()
    procs: list[Process] = []
    try:
        kubeconfig = _up(args, state, procs)
    except (LocalUpError, ControlPlaneError, OSError) as exc:
        _say(f"failed: {exc}")
        stopped = stop_processes(state)
        _say(
            f"stopped {', '.join(stopped) or 'nothing'}; logs kept in {root} ('hack/local-up.sh down' removes them)"
        )
        return 1
    except BaseException:
        stop_processes(state)
        raise
    _say(
        f"ready in {time.monotonic() - started:.0f}s: "
        + ", ".join(e["name"] for e in state.processes)
        + f"; logs in {root}/*.log; stop with 'hack/local-up.sh down'"
    )
    print(kubeconfig)
    print(f"export KUBECONFIG={kubeconfig}")
    return 0


def _spawn(state: State, procs: list[Process], name: str, argv: list[str], kubeconfig: Path) -> Process:
    p = Process(
        name,
        argv,
        state.root / f"{name}.log",
        env={"KUBECONFIG": str(kubeconfig), "POD_NAME": name, "POD_NAMESPACE": SYSTEM_NAMESPACE},
        detached=True,
    )
    procs.append(p)
    state.add(name, p.pid, p.argv, p.log)
    return p


def _up(args: argparse.Namespace, state: State, procs: list[Process]) -> Path:
    root = state.root
    timeout = args.timeout
    # The webhook's CA first: with --webhook-mtls the apiserver starts with the client
    # certificate it presents to the webhooks (its AdmissionConfiguration).
    tls = root / "webhook-tls"
    out = subprocess.run(components.certs_gen_argv(tls), capture_output=True, text=True)
    if out.returncode != 0:
        raise LocalUpError(f"hyperplace-certs gen failed:\n{out.stderr}")
    apiserver_args: list[str] = []
    # The key the webhook marks admitted queue Commands with and the controller checks.
    command_key = tls / "command.key"
    command_key.write_text(secrets.token_hex(32))
    command_key.chmod(0o600)
    webhook_args: list[str] = [f"--command-key-file={command_key}"]
    if args.webhook_mtls:
        out = subprocess.run(components.certs_client_argv(tls), capture_output=True, text=True)
        if out.returncode != 0:
            raise LocalUpError(f"hyperplace-certs client failed:\n{out.stderr}")
        apiserver_args.append(f"--admission-control-config-file={tls / 'admission-config.yaml'}")
        webhook_args.append(f"--client-ca-file={tls / 'ca.crt'}")
    _say(f"starting etcd, kube-apiserver from {args.bin_dir}")
    cp = ControlPlane(args.bin_dir, keep_dir=True, root=root, apiserver_args=apiserver_args)

    def record() -> None:
        # Recorded even when a start failed half-way, so 'down' could find a survivor.
        known = {int(e["pid"]) for e in state.processes}
        for name, proc in cp.processes:
            if proc.pid not in known:
                state.add(name, proc.pid, [str(a) for a in proc.args], root / f"{name}.log")  # type: ignore[union-attr]

    try:
        cp.start()
    finally:
        record()
    admin = cp.kubeconfig
    state.kubeconfig = str(admin)
    state.ports["apiserver"] = int(cp.server.rsplit(":", 1)[1])
    state.save()
    kubectl = Kubectl(admin)

    def describe() -> str:
        return "\n".join(p.tail(20) for p in procs) or cp.logs()

    def alive_or_fail() -> None:
        for p in procs:
            if not p.alive():
                raise LocalUpError(f"{p.name} exited\n{p.tail(30)}")

    ports = {
        name: free_port()
        for name in (
            "webhooks",
            "webhooks-health",
            "controller-health",
            "controller-metrics",
            "scheduler-health",
            "scheduler-metrics",
        )
    }
    if args.helm:
        # The chart installs CRDs, the default Queue, RBAC, ConfigMaps and the webhook
        # configurations (calling the local webhook server by URL); its Deployments get no
        # replicas, since the components run here as processes under their ServiceAccounts.
        _say(f"installing charts/hyperplace with {args.helm}")
        helm = subprocess.run(
            [
                str(args.helm),
                "install",
                "hyperplace",
                str(components.REPO / "charts" / "hyperplace"),
                "--namespace",
                SYSTEM_NAMESPACE,
                "--create-namespace",
                "--kubeconfig",
                str(admin),
                "--set",
                f"webhooks.url=https://127.0.0.1:{ports['webhooks']}",
                "--set",
                "webhooks.replicas=0,controller.replicas=0,scheduler.replicas=0",
                "--set",
                "webhooks.podDisruptionBudget.enabled=false",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if helm.returncode != 0:
            raise LocalUpError(f"helm install failed:\n{helm.stderr}")
    else:
        _say("applying namespace, CRDs, default Queue, RBAC, ConfigMaps")
        kubectl.run("apply", "-f", str(MANIFESTS / "namespace.yaml"), "-f", str(MANIFESTS / "crds"))
    wait_for(lambda: crds_established(kubectl), "the CRDs to be Established", timeout, cp.logs)
    # Discovery catches up a moment after Established.
    wait_for(
        lambda: (
            kubectl.run(
                "get", "hypernodes,jobs.batch.volcano.sh,podgroups,queues", "-A", check=False
            ).returncode
            == 0
        ),
        "the CRDs to be served",
        timeout,
        cp.logs,
    )
    _say("starting kube-controller-manager")
    try:
        cp.start_controller_manager(timeout)
    finally:
        record()
    if not args.helm:
        kubectl.run(
            "apply",
            "-f",
            str(MANIFESTS / "default-queue.yaml"),
            *[
                a
                for part in ("webhooks", "controller", "scheduler")
                for a in ("-f", str(MANIFESTS / part / "rbac.yaml"))
            ],
            "-f",
            str(MANIFESTS / "controller" / "configmap.yaml"),
            "-f",
            str(MANIFESTS / "scheduler" / "configmap.yaml"),
        )

    sa = {
        name: sa_kubeconfig(kubectl, cp.server, cp.ca_file, name, root / f"{name}.kubeconfig")
        for name in ("hyperplace-webhooks", "hyperplace-controller", "hyperplace-scheduler")
    }
    state.ports.update(ports)
    state.save()

    _say("starting hyperplace-webhooks")
    webhooks = _spawn(
        state,
        procs,
        "hyperplace-webhooks",
        components.webhooks_argv(
            sa["hyperplace-webhooks"],
            port=ports["webhooks"],
            tls_dir=tls,
            health_port=ports["webhooks-health"],
            extra=webhook_args,
        ),
        sa["hyperplace-webhooks"],
    )
    if not args.helm:  # the chart's configurations already call it by URL
        kubectl.apply_objects(components.webhook_configurations(ports["webhooks"]))

    def answering() -> bool:
        alive_or_fail()
        res = kubectl.run(
            "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(_PROBE_JOB), check=False
        )
        # The mutating webhook's default shows only once the apiserver has the caBundle.
        return res.returncode == 0 and '"maxRetry": 3' in res.stdout

    wait_for(answering, "the webhooks to answer the apiserver", timeout, webhooks.tail)

    _say("starting the fake kubelet, hyperplace-controller, hyperplace-scheduler")
    _spawn(state, procs, "fake-kubelet", components.fake_kubelet_argv(admin), admin)
    ctl = _spawn(
        state,
        procs,
        "hyperplace-controller",
        components.controller_argv(
            sa["hyperplace-controller"],
            health_port=ports["controller-health"],
            metrics_port=ports["controller-metrics"],
            # A Job's pods one at a time, in index order, as the simulator creates them: with
            # parallel creates (the Deployment's default) a gang starts with whichever of its pods
            # exist first, as in Volcano, and the live placement can differ from the preview.
            extra=["--pod-concurrency=1", f"--command-key-file={command_key}"],
        ),
        sa["hyperplace-controller"],
    )
    # As the Deployment mounts it: the scheduler reads its configuration from a file (its RBAC
    # grants no ConfigMap access); editing that file changes the running scheduler.
    if args.helm:
        conf_cm = json.loads(
            kubectl.run(
                "get", "configmap", "hyperplace-scheduler-configmap", "-n", SYSTEM_NAMESPACE, "-o", "json"
            ).stdout
        )
    else:
        conf_cm = yaml.safe_load((MANIFESTS / "scheduler" / "configmap.yaml").read_text())
    conf_file = root / "volcano-scheduler.conf"
    conf_file.write_text(conf_cm["data"]["volcano-scheduler.conf"])
    sch = _spawn(
        state,
        procs,
        "hyperplace-scheduler",
        components.scheduler_argv(
            sa["hyperplace-scheduler"],
            health_port=ports["scheduler-health"],
            metrics_port=ports["scheduler-metrics"],
            identity="hyperplace-scheduler",
            extra=[f"--scheduler-conf={conf_file}"],
        ),
        sa["hyperplace-scheduler"],
    )

    objs = cluster_objects(
        args.nodes,
        args.gpus_per_node,
        args.topology,
        nodes_per_leaf=args.nodes_per_leaf,
        leaves_per_spine=args.leaves_per_spine,
    )
    if objs:
        cluster_file = root / "cluster.yaml"
        cluster_file.write_text(yaml.safe_dump_all(objs))
        hypernodes = sum(1 for o in objs if o["kind"] == "HyperNode")
        _say(f"creating {args.nodes} nodes and {hypernodes} HyperNodes ({cluster_file})")
        kubectl.run("apply", "-f", str(cluster_file))

    def holder(lease: str) -> str | None:
        alive_or_fail()
        return lease_holder(kubectl, lease)

    def all_ready() -> bool:
        alive_or_fail()
        ready, total = ready_nodes(kubectl)
        return ready == total and total >= args.nodes

    for lease, p in (("hyperplace-controller", ctl), ("hyperplace-scheduler", sch)):
        wait_for(partial(holder, lease), f"{lease} to hold its Lease", timeout, p.tail)
    wait_for(
        all_ready,
        "every node to be Ready",
        timeout,
        lambda: kubectl.run("get", "nodes", check=False).stdout + describe(),
    )
    for name in ("controller", "scheduler"):
        for url in (
            f"http://127.0.0.1:{ports[f'{name}-health']}/readyz",
            f"http://127.0.0.1:{ports[f'{name}-metrics']}/metrics",
        ):
            wait_for(partial(http_ok, url), f"{name} {url.rsplit('/', 1)[1]}", timeout, describe)
    for name in args.with_controllers:
        _start_workload_controller(name, args, state, procs, kubectl, admin)
    return admin


def _start_workload_controller(
    name: str, args: argparse.Namespace, state: State, procs: list[Process], kubectl: Kubectl, admin: Path
) -> None:
    """``--with``: a real workload controller (hack/workload-bin.sh), its CRDs and webhooks."""
    if args.workload_bin_dir is None:
        raise LocalUpError(f"--with {name} needs --workload-bin-dir (hack/local-up.sh passes it)")
    try:
        plan = workloads.prepare(name, args.workload_bin_dir, admin, state.root / "workloads")
    except workloads.Unavailable as exc:
        raise LocalUpError(str(exc)) from None
    _say(f"starting {name} (CRDs {', '.join(workloads.crd_names(plan))})")
    for crd in plan.crds:
        kubectl.run("apply", "--server-side", "-f", str(crd))
    if plan.objects:
        kubectl.apply_objects(plan.objects)
    p = Process(name, plan.argv, state.root / f"{name}.log", env=plan.env, detached=True)
    procs.append(p)
    state.add(name, p.pid, p.argv, p.log)
    wait_for(partial(http_ok, plan.health), f"{name} to be ready", args.timeout, p.tail)


# ------------------------------------------------------------------------------- down, status


def down(args: argparse.Namespace) -> int:
    root: Path = args.state_dir
    state = State.load(root)
    if state is None:
        if root.exists():
            shutil.rmtree(root, ignore_errors=True)
            _say(f"removed {root}")
        else:
            _say("nothing to stop")
        return 0
    stopped = stop_processes(state)
    left = [e["name"] for e in state.processes if is_ours(e)]
    if left:
        _say(f"could not stop {', '.join(left)}; state kept in {root}")
        return 1
    shutil.rmtree(root, ignore_errors=True)
    _say(f"stopped {', '.join(stopped) or 'nothing (already stopped)'}; removed {root}")
    return 0


def status(args: argparse.Namespace) -> int:
    state = State.load(args.state_dir)
    if state is None:
        print("not running")
        return 1
    width = max(len(e["name"]) for e in state.processes) if state.processes else 0
    all_up = True
    for e in state.processes:
        alive = is_ours(e)
        all_up &= alive
        print(f"{e['name']:<{width}}  {'running' if alive else 'stopped'}  pid {e['pid']}  log {e['log']}")
    ports = state.ports
    if "apiserver" in ports:
        print(f"kube-apiserver: https://127.0.0.1:{ports['apiserver']}")
    for name in ("webhooks", "controller", "scheduler"):
        if f"{name}-health" in ports:
            print(f"hyperplace-{name} probes: http://127.0.0.1:{ports[f'{name}-health']}/readyz")
        if f"{name}-metrics" in ports:
            print(f"hyperplace-{name} metrics: http://127.0.0.1:{ports[f'{name}-metrics']}/metrics")
    if "webhooks" in ports:
        print(f"hyperplace-webhooks metrics: https://127.0.0.1:{ports['webhooks']}/metrics")
    print(f"export KUBECONFIG={state.kubeconfig}")
    return 0 if all_up else 1


# -------------------------------------------------------------------------------------- main


DESCRIPTION = """hyperplace local-up: etcd, kube-apiserver, kube-controller-manager and hyperplace on this machine.

up      start everything, create fake nodes, print the kubeconfig path and an export line
status  show the processes and their logs
down    stop every process 'up' started and remove the state directory"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = flags.parser("local-up", DESCRIPTION)
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        type=Path,
        default=default_state_dir(),
        help="kubeconfig, PKI, etcd data, logs and process ids",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    u = sub.add_parser("up", help="start", formatter_class=flags.HelpFormatter)
    u.add_argument("--bin-dir", metavar="DIR", type=Path, required=True, help="output of hack/kube-bin.sh")
    u.add_argument("--nodes", metavar="N", type=int, default=16, help="fake nodes to create (0: none)")
    u.add_argument("--gpus-per-node", metavar="G", type=int, default=8, help="nvidia.com/gpu per node")
    u.add_argument(
        "--topology",
        choices=["leaf-spine", "none"],
        default="leaf-spine",
        help="HyperNodes over the fake nodes: leaves (tier 1), spines (tier 2), a core (tier 3); or none",
    )
    u.add_argument("--nodes-per-leaf", metavar="N", type=int, default=4, help="nodes under each leaf")
    u.add_argument("--leaves-per-spine", metavar="N", type=int, default=2, help="leaves under each spine")
    u.add_argument(
        "--with",
        dest="with_controllers",
        metavar="NAMES",
        type=lambda v: [n for n in v.split(",") if n],
        default=[],
        help=f"also run these real workload controllers (comma-separated: {', '.join(workloads.NAMES)})",
    )
    u.add_argument(
        "--workload-bin-dir", metavar="DIR", type=Path, default=None, help="output of hack/workload-bin.sh"
    )
    u.add_argument(
        "--webhook-mtls",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the webhooks require the kube-apiserver's client certificate (hyperplace-certs client)",
    )
    u.add_argument(
        "--helm",
        metavar="HELM",
        type=Path,
        default=None,
        help="install through charts/hyperplace with this helm binary (hack/local-up.sh --helm builds it)",
    )
    u.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=READY_TIMEOUT,
        help="give up on a step after this long",
    )
    u.set_defaults(func=up)
    sub.add_parser("status", help="show the processes").set_defaults(func=status)
    sub.add_parser("down", help="stop and remove everything").set_defaults(func=down)
    args = p.parse_args(argv)
    if args.command is None:
        p.error("name a command: up, status or down")
    if args.command == "up" and (args.nodes < 0 or args.gpus_per_node < 0):
        p.error("--nodes and --gpus-per-node must be >= 0")
    unknown = [n for n in getattr(args, "with_controllers", []) if n not in workloads.NAMES]
    if unknown:
        p.error(f"--with: unknown controller(s) {', '.join(unknown)} (known: {', '.join(workloads.NAMES)})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
