"""``hyperplace-controller``: the Job and HyperNode controllers as one process.

Flags default from the environment the Deployment sets (``manifests/controller``), so
the manifest needs no arguments. Serves ``/healthz`` (alive and, when leading, the
lease is fresh) and ``/readyz`` (every informer synced) on the health port, and ``/metrics``
on localhost, or over HTTPS with a serving certificate (``hyperplace.runtime.serving``).
On SIGTERM/SIGINT: stop taking work, finish in-flight reconciles, release the Lease.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from controller.job.node_failure import DEFAULT_DAMAGED_RESTART_AFTER, DEFAULT_NOT_READY_GRACE
from hyperplace.api.constants import DEFAULT_SCHEDULER_NAME
from hyperplace.pki.commandmark import load_key
from hyperplace.runtime import flags
from hyperplace.runtime.api import ApiClient
from hyperplace.runtime.leader import LeaderElector
from hyperplace.runtime.serving import (
    check_metrics_serving,
    default_identity,
    leader_elector,
    probes_app,
    run_served,
)

from .manager import ControllerManager, ManagerConfig

log = logging.getLogger("hyperplace.controller")


DESCRIPTION = """hyperplace-controller: the Job and HyperNode controllers as one process.

Turns Volcano Jobs into PodGroups and pods, gives pods of any other owner the PodGroup Volcano's
podgroup controller would, keeps HyperNode status, and discovers HyperNodes from node labels.
Serves /healthz and /readyz on --health-port (plain HTTP) and /metrics on --metrics-bind-address
(127.0.0.1 unless given a serving certificate, then HTTPS). Flags default from the environment the
Deployment sets (manifests/controller)."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags, with defaults from the Deployment's environment variables."""
    p = flags.parser("hyperplace-controller", DESCRIPTION)
    flags.add_kubeconfig(p)
    p.add_argument(
        "--health-port",
        dest="health_port",
        metavar="PORT",
        type=int,
        default=int(os.environ.get("HYPERPLACE_HEALTH_PORT") or 8080),
        help="port for /healthz and /readyz (every interface); 0 disables (env HYPERPLACE_HEALTH_PORT)",
    )
    p.add_argument(
        "--config-namespace",
        metavar="NAMESPACE",
        default=os.environ.get("KUBE_POD_NAMESPACE") or flags.pod_namespace(),
        help="namespace of Volcano's controller ConfigMap, which configures HyperNode discovery "
        "(env KUBE_POD_NAMESPACE, else POD_NAMESPACE)",
    )
    p.add_argument(
        "--config-map",
        metavar="NAME",
        default=os.environ.get("HYPERPLACE_CONTROLLER_CONFIGMAP") or "volcano-controller-configmap",
        help="name of that ConfigMap (env HYPERPLACE_CONTROLLER_CONFIGMAP)",
    )
    p.add_argument("--workers", metavar="N", type=int, default=4, help="reconciles run in parallel")
    p.add_argument(
        "--scheduler-name",
        dest="scheduler_names",
        action="append",
        metavar="NAME",
        help="pods naming this scheduler get a PodGroup when they have none (repeatable; default volcano)",
    )
    p.add_argument(
        "--inherit-owner-annotations",
        dest="inherit_owner_annotations",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="read group-min-member from, and copy volcano.sh/ annotations of, a pod's owner (Volcano's default)",
    )
    p.add_argument(
        "--pod-concurrency",
        metavar="N",
        type=int,
        default=64,
        help="pod creates/deletes of one Job in flight at once (1: one after the other)",
    )
    p.add_argument(
        "--command-key-file",
        metavar="FILE",
        default=os.environ.get("HYPERPLACE_COMMAND_KEY_FILE") or None,
        help="the key the admission webhook marks admitted queue Commands with (the same file it "
        "reads); queue Commands without a valid marker are deleted without effect "
        "(env HYPERPLACE_COMMAND_KEY_FILE)",
    )
    p.add_argument(
        "--accept-unadmitted-commands",
        action="store_true",
        default=os.environ.get("HYPERPLACE_ACCEPT_UNADMITTED_COMMANDS") == "true",
        help="obey every queue Command, as Volcano does (anyone who may create a Command may then "
        "open or close any queue; env HYPERPLACE_ACCEPT_UNADMITTED_COMMANDS=true)",
    )
    g = p.add_argument_group("node failure (a Volcano Job's pod lost with its node is evicted)")
    g.add_argument(
        "--node-not-ready-grace",
        metavar="DURATION",
        type=flags.duration,
        # A string default goes through ``type``: a bad environment value is a usage error.
        default=os.environ.get("HYPERPLACE_NODE_NOT_READY_GRACE")
        or flags.format_duration(DEFAULT_NOT_READY_GRACE),
        help="how long a node's Ready condition may be False or Unknown (and a missing Node stay "
        "missing) before the Volcano Job pods on it count as lost (env HYPERPLACE_NODE_NOT_READY_GRACE)",
    )
    g.add_argument(
        "--force-delete-unreachable-after",
        metavar="DURATION|off",
        type=flags.duration_or_off,
        default=os.environ.get("HYPERPLACE_FORCE_DELETE_UNREACHABLE_AFTER") or "off",
        help="force-delete (grace 0) a Volcano Job's pod still terminating this long after its grace "
        "period on a node that is gone or not Ready, so its replacement is not blocked; the "
        "apiserver then forgets a pod whose containers may still run on a partitioned node "
        "(env HYPERPLACE_FORCE_DELETE_UNREACHABLE_AFTER)",
    )
    g.add_argument(
        "--damaged-gang-restart-after",
        metavar="DURATION|off",
        type=flags.duration_or_off,
        default=os.environ.get("HYPERPLACE_DAMAGED_GANG_RESTART_AFTER")
        or flags.format_duration(DEFAULT_DAMAGED_RESTART_AFTER),
        help="restart a Volcano Job whole (RestartJob, counted against maxRetry) when its gang ran, lost "
        "pods and has been short of its minimum this long while its replacements wait for room in "
        "its domain; a Job with its own PodPending policy is left to it "
        "(env HYPERPLACE_DAMAGED_GANG_RESTART_AFTER)",
    )
    flags.add_log_level(p)
    flags.add_metrics_serving(p)
    flags.add_leader_election(p, "hyperplace-controller", "reconcile")
    args = p.parse_args(argv)
    flags.check_leader_election(p, args)
    check_metrics_serving(p, args)
    return args


def _command_key(args: argparse.Namespace) -> bytes | None:
    if not args.command_key_file:
        if not args.accept_unadmitted_commands:
            log.warning(
                "no --command-key-file: queue Commands are deleted without effect "
                "(--accept-unadmitted-commands obeys them all, as Volcano does)"
            )
        return None
    try:
        return load_key(Path(args.command_key_file).read_bytes())
    except FileNotFoundError:
        # The Deployment mounts the key's Secret as optional: not created yet.
        log.warning(
            "%s does not exist: queue Commands are deleted without effect until it does "
            "(create the Secret hyperplace-command-key; see manifests/README.md)",
            args.command_key_file,
        )
        return None
    except (OSError, ValueError) as exc:
        raise SystemExit(f"hyperplace-controller: --command-key-file: {exc}") from exc


def health_app(manager: ControllerManager, elector: LeaderElector | None) -> web.Application:
    """``/healthz`` and ``/readyz`` (``/metrics`` is served apart, see ``hyperplace.runtime.serving``)."""

    async def readyz(_: web.Request) -> web.Response:
        # A standby replica (not leading) has not started its informers yet: it is ready
        # to take over, which is what a readiness probe on a controller should mean.
        ok = manager.synced() or (elector is not None and not elector.is_leader)
        return web.Response(status=200 if ok else 503, text="ok" if ok else "caches not synced")

    return probes_app(elector, readyz)


async def run(args: argparse.Namespace, api: ApiClient | None = None) -> None:
    """Run the controllers until SIGTERM/SIGINT (or cancellation)."""
    raw: object = None
    if api is None:
        # lazy: only a process on a real API server loads kubernetes-asyncio (tests use an in-memory one)
        from hyperplace.runtime.kube import connect

        api, raw = await connect(args.kubeconfig)
    manager = ControllerManager(
        api,
        ManagerConfig(
            workers=args.workers,
            config_namespace=args.config_namespace,
            config_map=args.config_map,
            pod_concurrency=max(1, args.pod_concurrency),
            scheduler_names=tuple(args.scheduler_names or (DEFAULT_SCHEDULER_NAME,)),
            inherit_owner_annotations=args.inherit_owner_annotations,
            command_key=_command_key(args),
            accept_unadmitted_commands=args.accept_unadmitted_commands,
            not_ready_grace=args.node_not_ready_grace,
            force_delete_unreachable_after=args.force_delete_unreachable_after,
            damaged_restart_after=args.damaged_gang_restart_after,
        ),
    )
    elector = leader_elector(api, args, default_identity())
    await run_served(
        lambda: elector.run(manager.run) if elector else manager.run(),
        args,
        health_app(manager, elector),
        manager.registry,
        log,
        client=raw,
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
