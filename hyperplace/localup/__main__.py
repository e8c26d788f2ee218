"""hyperplace local-up: a real control plane with hyperplace running on it, on this machine, with
no container runtime. ``hack/local-up.sh`` is the front door (it sets up .venv and the binaries).

    python -m hyperplace.localup up --bin-dir DIR [--nodes 16] [--gpus-per-node 8] [--topology leaf-spine|none]
    python -m hyperplace.localup status
    python -m hyperplace.localup down
    python -m hyperplace.localup node stop|start NAME...

``up`` starts etcd, kube-apiserver and kube-controller-manager (hyperplace.localup.controlplane),
applies the CRDs, the default Queue, RBAC and ConfigMaps from manifests/, writes the webhook
certificates with ``hyperplace-certs``, and starts ``hyperplace-webhooks`` (configurations by
URL), the fake kubelet, ``hyperplace-controller`` and ``hyperplace-scheduler``. The controller and
the scheduler run as their ServiceAccounts (a token from the TokenRequest API), so the manifests'
RBAC is what they get. Then it creates the nodes and HyperNodes and waits until every node is
Ready (the sequence: hyperplace.localup.bringup). Every process runs detached, in its own session, and logs to ``STATE/<name>.log``; their
ids are in ``STATE/state.json``. ``down`` stops exactly those processes and removes STATE.
``node stop NAME`` stops the fake kubelet of a node, as if the machine died (its Lease is no
longer renewed, its pods no longer reported: kube-controller-manager marks it NotReady and taints
it after its node-monitor grace period, 50 s); ``node start NAME`` brings it back.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from hyperplace.runtime import flags

from . import workloads
from .bringup import bring_up, say
from .components import Process
from .controlplane import ControlPlaneError
from .fakekubelet import STOP_ANNOTATION, STOPPED
from .kubectl import Kubectl, LocalUpError
from .state import State, default_state_dir, is_ours, stop_processes

READY_TIMEOUT = float(os.environ.get("HYPERPLACE_LOCAL_UP_TIMEOUT", "180"))


# --------------------------------------------------------------------------------------- up


def up(args: argparse.Namespace) -> int:
    """``up``: start everything (or say it runs already); on failure stop what started."""
    root: Path = args.state_dir
    previous = State.load(root)
    if previous is not None:
        alive = {e["name"]: is_ours(e) for e in previous.processes}
        if alive and all(alive.values()):
            say(f"already running (state in {root}); 'hack/local-up.sh down' stops it")
            print(previous.kubeconfig)
            print(f"export KUBECONFIG={previous.kubeconfig}")
            return 0
        if any(alive.values()):
            stopped = [name for name, running in alive.items() if not running]
            say(
                f"partly running: {', '.join(stopped)} stopped (logs in {root}); "
                "'hack/local-up.sh down' then 'hack/local-up.sh' starts afresh"
            )
            return 1
        shutil.rmtree(root, ignore_errors=True)
    if shutil.which("kubectl") is None:
        say("kubectl is not on PATH; install it (https://kubernetes.io/docs/tasks/tools/) and try again")
        return 1
    started = time.monotonic()
    state = State(root)
    state.save()
    procs: list[Process] = []
    try:
        kubeconfig = bring_up(args, state, procs)
    except (LocalUpError, ControlPlaneError, OSError) as exc:
        say(f"failed: {exc}")
        stopped = stop_processes(state)
        say(
            f"stopped {', '.join(stopped) or 'nothing'}; logs kept in {root} ('hack/local-up.sh down' removes them)"
        )
        return 1
    except BaseException:
        stop_processes(state)
        raise
    say(
        f"ready in {time.monotonic() - started:.0f}s: "
        + ", ".join(e["name"] for e in state.processes)
        + f"; logs in {root}/*.log; stop with 'hack/local-up.sh down'"
    )
    print(kubeconfig)
    print(f"export KUBECONFIG={kubeconfig}")
    return 0


# ------------------------------------------------------------------------------- down, status


def down(args: argparse.Namespace) -> int:
    """``down``: stop every recorded process and remove the state directory."""
    root: Path = args.state_dir
    state = State.load(root)
    if state is None:
        if root.exists():
            shutil.rmtree(root, ignore_errors=True)
            say(f"removed {root}")
        else:
            say("nothing to stop")
        return 0
    stopped = stop_processes(state)
    left = [e["name"] for e in state.processes if is_ours(e)]
    if left:
        say(f"could not stop {', '.join(left)}; state kept in {root}")
        return 1
    shutil.rmtree(root, ignore_errors=True)
    say(f"stopped {', '.join(stopped) or 'nothing (already stopped)'}; removed {root}")
    return 0


def status(args: argparse.Namespace) -> int:
    """``status``: each recorded process, running or not, and the endpoints; 0 when all run."""
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


def node(args: argparse.Namespace) -> int:
    """``node stop|start NAME...``: the fake kubelet of each node stops (its Node annotated
    ``hyperplace.io/fake-kubelet: stopped``) or starts again (the annotation removed)."""
    state = State.load(args.state_dir)
    if state is None:
        say("not running ('hack/local-up.sh' starts it)")
        return 1
    kubectl = Kubectl(Path(state.kubeconfig))
    value = f"{STOP_ANNOTATION}={STOPPED}" if args.action == "stop" else f"{STOP_ANNOTATION}-"
    try:
        kubectl.run("annotate", "--overwrite", "node", *args.names, value)
    except LocalUpError as exc:
        say(str(exc))
        return 1
    what = "stopped" if args.action == "stop" else "started"
    say(f"kubelet of {', '.join(args.names)} {what}")
    return 0


# -------------------------------------------------------------------------------------- main


DESCRIPTION = """hyperplace local-up: etcd, kube-apiserver, kube-controller-manager and hyperplace on this machine.

up      start everything, create fake nodes, print the kubeconfig path and an export line
status  show the processes and their logs
down    stop every process 'up' started and remove the state directory
node    stop a node's fake kubelet, as if the machine died, or start it again"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; ``args.func`` is the command to run."""
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
    n = sub.add_parser(
        "node", help="stop or start a node's fake kubelet", formatter_class=flags.HelpFormatter
    )
    n.add_argument(
        "action",
        choices=["stop", "start"],
        help="stop: no more Lease renewals, node status or pod status from it; start: back",
    )
    n.add_argument("names", metavar="NAME", nargs="+", help="Node names")
    n.set_defaults(func=node)
    args = p.parse_args(argv)
    if args.command is None:
        p.error("name a command: up, status, down or node")
    if args.command == "up" and (args.nodes < 0 or args.gpus_per_node < 0):
        p.error("--nodes and --gpus-per-node must be >= 0")
    unknown = [n for n in getattr(args, "with_controllers", []) if n not in workloads.NAMES]
    if unknown:
        p.error(f"--with: unknown controller(s) {', '.join(unknown)} (known: {', '.join(workloads.NAMES)})")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit code."""
    args = parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
