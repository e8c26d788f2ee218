"""The sequence ``up`` runs: the webhook certificates, etcd and kube-apiserver, the CRDs, RBAC and
ConfigMaps (from manifests/ or through charts/hyperplace), kube-controller-manager, the webhooks,
the fake kubelet, hyperplace-controller and hyperplace-scheduler (each as its ServiceAccount), the
fake nodes and HyperNodes, and any ``--with`` workload controllers. Each process is recorded in the
State as it starts, so ``down`` finds it even when a later step fails."""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
from functools import partial
from pathlib import Path

import yaml

from hyperplace.runtime.flags import SYSTEM_NAMESPACE

from . import components, workloads
from .cluster import cluster_objects
from .components import MANIFESTS, Process
from .controlplane import ControlPlane, free_port
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
from .state import State


def say(message: str) -> None:
    """One line of progress on stderr."""
    print(f"local-up: {message}", file=sys.stderr, flush=True)


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


# The ports of the hyperplace processes: the webhook server, and each process's probes and metrics.
PORTS = (
    "webhooks",
    "webhooks-health",
    "controller-health",
    "controller-metrics",
    "scheduler-health",
    "scheduler-metrics",
)
ACCOUNTS = ("hyperplace-webhooks", "hyperplace-controller", "hyperplace-scheduler")


def spawn(state: State, procs: list[Process], name: str, argv: list[str], kubeconfig: Path) -> Process:
    """Start a hyperplace process detached, with ``kubeconfig`` and its pod identity, and record it."""
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


def bring_up(args: argparse.Namespace, state: State, procs: list[Process]) -> Path:
    """Everything ``up`` starts, in order, recorded in ``state``; returns the admin kubeconfig.
    Raises LocalUpError (or ControlPlaneError, OSError) when a step fails."""
    return _BringUp(args, state, procs).run()


class _BringUp:
    """One ``up``: its steps in order, sharing the control plane, kubectl, the ports and the
    processes started so far."""

    cp: ControlPlane
    kubectl: Kubectl
    ports: dict[str, int]
    sa: dict[str, Path]

    def __init__(self, args: argparse.Namespace, state: State, procs: list[Process]) -> None:
        self.args = args
        self.state = state
        self.procs = procs
        self.root = state.root
        self.timeout: float = args.timeout
        self.tls = self.root / "webhook-tls"
        # The key the webhook marks admitted queue Commands with and the controller checks.
        self.command_key = self.tls / "command.key"

    def run(self) -> Path:
        """The steps in order; returns the admin kubeconfig."""
        apiserver_args, webhook_args = self.write_webhook_certificates()
        self.start_control_plane(apiserver_args)
        self.ports = {name: free_port() for name in PORTS}
        self.install_crds()
        self.start_controller_manager()
        if not self.args.helm:
            self.apply_manifests()
        self.sa = {
            name: sa_kubeconfig(
                self.kubectl, self.cp.server, self.cp.ca_file, name, self.root / f"{name}.kubeconfig"
            )
            for name in ACCOUNTS
        }
        self.state.ports.update(self.ports)
        self.state.save()
        self.start_webhooks(webhook_args)
        ctl, sch = self.start_components()
        self.create_cluster()
        self.wait_running(ctl, sch)
        for name in self.args.with_controllers:
            self.start_workload_controller(name)
        return self.cp.kubeconfig

    # ------------------------------------------------------------------------------ helpers

    def record(self) -> None:
        """Record the control plane's processes; even when a start failed half-way, so 'down'
        could find a survivor."""
        known = {int(e["pid"]) for e in self.state.processes}
        for name, proc in self.cp.processes:
            if proc.pid not in known:
                self.state.add(name, proc.pid, [str(a) for a in proc.args], self.root / f"{name}.log")  # type: ignore[union-attr]

    def describe(self) -> str:
        """The tails of the processes' logs (the control plane's before any started)."""
        return "\n".join(p.tail(20) for p in self.procs) or self.cp.logs()

    def alive_or_fail(self) -> None:
        """LocalUpError with its log tail when a started process has exited."""
        for p in self.procs:
            if not p.alive():
                raise LocalUpError(f"{p.name} exited\n{p.tail(30)}")

    # -------------------------------------------------------------------------------- steps

    def write_webhook_certificates(self) -> tuple[list[str], list[str]]:
        """The webhook's CA and serving certificate, the Command key and, with --webhook-mtls, the
        apiserver's client certificate; returns the apiserver's and the webhooks' extra flags."""
        # The webhook's CA first: with --webhook-mtls the apiserver starts with the client
        # certificate it presents to the webhooks (its AdmissionConfiguration).
        tls = self.tls
        out = subprocess.run(components.certs_gen_argv(tls), capture_output=True, text=True)
        if out.returncode != 0:
            raise LocalUpError(f"hyperplace-certs gen failed:\n{out.stderr}")
        apiserver_args: list[str] = []
        command_key = self.command_key
        command_key.write_text(secrets.token_hex(32))
        command_key.chmod(0o600)
        webhook_args: list[str] = [f"--command-key-file={command_key}"]
        if self.args.webhook_mtls:
            out = subprocess.run(components.certs_client_argv(tls), capture_output=True, text=True)
            if out.returncode != 0:
                raise LocalUpError(f"hyperplace-certs client failed:\n{out.stderr}")
            apiserver_args.append(f"--admission-control-config-file={tls / 'admission-config.yaml'}")
            webhook_args.append(f"--client-ca-file={tls / 'ca.crt'}")
        return apiserver_args, webhook_args

    def start_control_plane(self, apiserver_args: list[str]) -> None:
        """etcd and kube-apiserver; the admin kubeconfig and the apiserver's port go to the state."""
        say(f"starting etcd, kube-apiserver from {self.args.bin_dir}")
        self.cp = ControlPlane(
            self.args.bin_dir, keep_dir=True, root=self.root, apiserver_args=apiserver_args
        )
        try:
            self.cp.start()
        finally:
            self.record()
        admin = self.cp.kubeconfig
        self.state.kubeconfig = str(admin)
        self.state.ports["apiserver"] = int(self.cp.server.rsplit(":", 1)[1])
        self.state.save()
        self.kubectl = Kubectl(admin)

    def install_crds(self) -> None:
        """The namespace and the CRDs (with --helm the whole chart), until the CRDs are served."""
        args, kubectl, cp, timeout = self.args, self.kubectl, self.cp, self.timeout
        if args.helm:
            # The chart installs CRDs, the default Queue, RBAC, ConfigMaps and the webhook
            # configurations (calling the local webhook server by URL); its Deployments get no
            # replicas, since the components run here as processes under their ServiceAccounts.
            say(f"installing charts/hyperplace with {args.helm}")
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
                    str(cp.kubeconfig),
                    "--set",
                    f"webhooks.url=https://127.0.0.1:{self.ports['webhooks']}",
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
            say("applying namespace, CRDs, default Queue, RBAC, ConfigMaps")
            kubectl.run("apply", "-f", str(MANIFESTS / "namespace.yaml"), "-f", str(MANIFESTS / "crds"))
        wait_for(lambda: crds_established(kubectl), "the CRDs to be Established", timeout, cp.logs)
        # Discovery catches up a moment after Established.
        wait_for(
            lambda: (
                kubectl.run(
                    "get",
                    "hypernodes,jobs.batch.volcano.sh,podgroups.scheduling.volcano.sh,queues",
                    "-A",
                    check=False,
                ).returncode
                == 0
            ),
            "the CRDs to be served",
            timeout,
            cp.logs,
        )

    def start_controller_manager(self) -> None:
        """kube-controller-manager (namespace deletion, garbage collection, Job pods)."""
        say("starting kube-controller-manager")
        try:
            self.cp.start_controller_manager(self.timeout)
        finally:
            self.record()

    def apply_manifests(self) -> None:
        """The default Queue, each component's RBAC and the ConfigMaps, from manifests/."""
        self.kubectl.run(
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

    def start_webhooks(self, webhook_args: list[str]) -> None:
        """hyperplace-webhooks and its configurations, until the apiserver gets its answers."""
        args, kubectl, ports, sa = self.args, self.kubectl, self.ports, self.sa
        say("starting hyperplace-webhooks")
        webhooks = spawn(
            self.state,
            self.procs,
            "hyperplace-webhooks",
            components.webhooks_argv(
                sa["hyperplace-webhooks"],
                port=ports["webhooks"],
                tls_dir=self.tls,
                health_port=ports["webhooks-health"],
                extra=webhook_args,
            ),
            sa["hyperplace-webhooks"],
        )
        if not args.helm:  # the chart's configurations already call it by URL
            kubectl.apply_objects(components.webhook_configurations(ports["webhooks"]))

        def answering() -> bool:
            self.alive_or_fail()
            res = kubectl.run(
                "create",
                "--dry-run=server",
                "-o",
                "json",
                "-f",
                "-",
                input=json.dumps(_PROBE_JOB),
                check=False,
            )
            # The mutating webhook's default shows only once the apiserver has the caBundle.
            return res.returncode == 0 and '"maxRetry": 3' in res.stdout

        wait_for(answering, "the webhooks to answer the apiserver", self.timeout, webhooks.tail)

    def start_components(self) -> tuple[Process, Process]:
        """The fake kubelet, hyperplace-controller and hyperplace-scheduler; returns the last two."""
        args, kubectl, ports, sa = self.args, self.kubectl, self.ports, self.sa
        state, procs, admin = self.state, self.procs, self.cp.kubeconfig
        say("starting the fake kubelet, hyperplace-controller, hyperplace-scheduler")
        spawn(state, procs, "fake-kubelet", components.fake_kubelet_argv(admin), admin)
        ctl = spawn(
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
                extra=["--pod-concurrency=1", f"--command-key-file={self.command_key}"],
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
        conf_file = self.root / "volcano-scheduler.conf"
        conf_file.write_text(conf_cm["data"]["volcano-scheduler.conf"])
        sch = spawn(
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
        return ctl, sch

    def create_cluster(self) -> None:
        """The fake nodes and their HyperNodes (``--nodes``, ``--topology``), through cluster.yaml."""
        args = self.args
        objs = cluster_objects(
            args.nodes,
            args.gpus_per_node,
            args.topology,
            nodes_per_leaf=args.nodes_per_leaf,
            leaves_per_spine=args.leaves_per_spine,
        )
        if objs:
            cluster_file = self.root / "cluster.yaml"
            cluster_file.write_text(yaml.safe_dump_all(objs))
            hypernodes = sum(1 for o in objs if o["kind"] == "HyperNode")
            say(f"creating {args.nodes} nodes and {hypernodes} HyperNodes ({cluster_file})")
            self.kubectl.run("apply", "-f", str(cluster_file))

    def wait_running(self, ctl: Process, sch: Process) -> None:
        """The controller and the scheduler hold their Leases, every node is Ready, and both
        answer their readiness probe and metrics."""
        kubectl, ports, timeout = self.kubectl, self.ports, self.timeout

        def holder(lease: str) -> str | None:
            self.alive_or_fail()
            return lease_holder(kubectl, lease)

        def all_ready() -> bool:
            self.alive_or_fail()
            ready, total = ready_nodes(kubectl)
            return ready == total and total >= self.args.nodes

        for lease, p in (("hyperplace-controller", ctl), ("hyperplace-scheduler", sch)):
            wait_for(partial(holder, lease), f"{lease} to hold its Lease", timeout, p.tail)
        wait_for(
            all_ready,
            "every node to be Ready",
            timeout,
            lambda: kubectl.run("get", "nodes", check=False).stdout + self.describe(),
        )
        for name in ("controller", "scheduler"):
            for url in (
                f"http://127.0.0.1:{ports[f'{name}-health']}/readyz",
                f"http://127.0.0.1:{ports[f'{name}-metrics']}/metrics",
            ):
                wait_for(partial(http_ok, url), f"{name} {url.rsplit('/', 1)[1]}", timeout, self.describe)

    def start_workload_controller(self, name: str) -> None:
        """``--with``: a real workload controller (hack/workload-bin.sh), its CRDs and webhooks."""
        args, state, kubectl = self.args, self.state, self.kubectl
        if args.workload_bin_dir is None:
            raise LocalUpError(f"--with {name} needs --workload-bin-dir (hack/local-up.sh passes it)")
        try:
            plan = workloads.prepare(
                name, args.workload_bin_dir, self.cp.kubeconfig, state.root / "workloads"
            )
        except workloads.Unavailable as exc:
            raise LocalUpError(str(exc)) from None
        say(f"starting {name} (CRDs {', '.join(workloads.crd_names(plan))})")
        for crd in plan.crds:
            kubectl.run("apply", "--server-side", "-f", str(crd))
        if plan.objects:
            kubectl.apply_objects(plan.objects)
        p = Process(name, plan.argv, state.root / f"{name}.log", env=plan.env, detached=True)
        self.procs.append(p)
        state.add(name, p.pid, p.argv, p.log)
        wait_for(partial(http_ok, plan.health), f"{name} to be ready", args.timeout, p.tail)
