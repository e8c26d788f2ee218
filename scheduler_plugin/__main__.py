"""``hyperplace-scheduler``: the topology-aware gang scheduler as a Kubernetes process.

Flags default from the environment the Deployment sets (``manifests/scheduler``), so the
manifest needs no arguments. Informers run from the start (a standby is warm); only the
holder of the Lease schedules. Serves ``/healthz`` (alive and, when leading, the lease is
fresh) and ``/readyz`` (informers synced, or standing by) on the health port, and ``/metrics``
on localhost, or over HTTPS with a serving certificate (``hyperplace.runtime.serving``). On SIGTERM/SIGINT:
stop scheduling, let in-flight binds finish (bounded), release the Lease.

How binding stays safe across cycles and restarts: ``scheduler_plugin.runtime.scheduler``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Sequence

from aiohttp import web

from hyperplace.api.constants import DEFAULT_SCHEDULER_NAME
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

from .algorithms.fragmentation import DEFAULT_ACCELERATOR, DEFAULT_SHAPES, DEFAULT_SHARE, FragmentationConfig
from .runtime.config_source import ConfigSource
from .runtime.options import configmap_name
from .runtime.scheduler import Scheduler, SchedulerOptions

log = logging.getLogger("hyperplace.scheduler")


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


DESCRIPTION = """hyperplace-scheduler: the topology-aware gang scheduler.

Binds the pods of PodGroups whose spec.schedulerName it serves, all-or-nothing and inside the
HyperNode tiers their networkTopology allows. Informers run from the start (a standby is warm);
only the holder of the Lease schedules. Serves /healthz and /readyz on --health-port and /metrics
on --metrics-bind-address (127.0.0.1 unless given a serving certificate). Flags default
from the environment the Deployment sets (manifests/scheduler)."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags, with defaults from the Deployment's environment variables."""
    p = flags.parser("hyperplace-scheduler", DESCRIPTION)
    flags.add_kubeconfig(p)
    env_names = _add_scheduling_flags(p)
    _add_fragmentation_flags(p)
    flags.add_log_level(p)
    flags.add_metrics_serving(p)
    flags.add_leader_election(p, "hyperplace-scheduler", "schedule")
    args = p.parse_args(argv)
    flags.check_leader_election(p, args)
    check_metrics_serving(p, args)
    names = args.scheduler_name or env_names or [DEFAULT_SCHEDULER_NAME]
    args.scheduler_name = list(dict.fromkeys(names))
    try:
        args.config_source = ConfigSource.parse(args.scheduler_conf)
        args.fragmentation = FragmentationConfig.parse(
            args.fragmentation_shapes, args.fragmentation_resource, args.fragmentation_share
        )
    except ValueError as exc:
        p.error(str(exc))
    return args


def _add_scheduling_flags(p: argparse.ArgumentParser) -> list[str]:
    """What to schedule, how often and how fast; returns the scheduler names the environment
    gives (the default of --scheduler-name)."""
    p.add_argument(
        "--scheduler-conf",
        metavar="FILE|NAMESPACE/NAME",
        default=os.environ.get("HYPERPLACE_SCHEDULER_CONF") or "",
        help="volcano-scheduler.conf: a file (re-read when it changes) or a ConfigMap "
        "namespace/name (watched); empty means the built-in configuration "
        "(env HYPERPLACE_SCHEDULER_CONF)",
    )
    env_names = [
        n.strip() for n in (os.environ.get("HYPERPLACE_SCHEDULER_NAME") or "").split(",") if n.strip()
    ]
    p.add_argument(
        "--scheduler-name",
        metavar="NAME",
        action="append",
        default=None,
        help="schedule pods with this spec.schedulerName; repeatable "
        f"(default: {', '.join(env_names or [DEFAULT_SCHEDULER_NAME])}; env HYPERPLACE_SCHEDULER_NAME, "
        "comma-separated)",
    )
    p.add_argument(
        "--schedule-period",
        metavar="DURATION",
        type=flags.duration,
        default=1.0,
        help="time between cycles when nothing happens (Volcano's --schedule-period)",
    )
    p.add_argument(
        "--health-port",
        metavar="PORT",
        type=int,
        default=int(os.environ.get("HYPERPLACE_HEALTH_PORT") or 8080),
        help="port for /healthz and /readyz (every interface); 0 disables (env HYPERPLACE_HEALTH_PORT)",
    )
    p.add_argument(
        "--bind-concurrency",
        metavar="N",
        type=_positive_int,
        default=64,
        help="binding requests in flight",
    )
    p.add_argument(
        "--volume-bind-timeout",
        metavar="SECONDS",
        type=float,
        default=SchedulerOptions.volume_bind_timeout,
        help="how long a gang's claims may take to be bound after the scheduler chose their "
        "volumes before the gang is given up and its claims given back (kube-scheduler's "
        "VolumeBinding bindTimeoutSeconds)",
    )
    p.add_argument(
        "--kube-api-qps",
        metavar="QPS",
        type=float,
        default=2000.0,
        help="client-side write rate limit; 0 means unlimited",
    )
    p.add_argument(
        "--kube-api-burst", metavar="N", type=int, default=2000, help="writes allowed above the rate"
    )
    p.add_argument(
        "--status-qps",
        metavar="QPS",
        type=float,
        default=SchedulerOptions.status_qps,
        help="rate of status writes (pod conditions, PodGroup and Queue status), apart from binds "
        "and never above --kube-api-qps",
    )
    p.add_argument(
        "--event-qps",
        metavar="QPS",
        type=float,
        default=SchedulerOptions.event_qps,
        help="rate of Event writes",
    )
    p.add_argument(
        "--event-interval",
        metavar="SECONDS",
        type=float,
        default=SchedulerOptions.event_interval,
        help="at most one count update per Event per interval (repeats are folded)",
    )
    p.add_argument(
        "--podgroup-status-interval",
        metavar="SECONDS",
        type=float,
        default=SchedulerOptions.podgroup_status_interval,
        help="a waiting PodGroup's status is rewritten at most this often when only its numbers moved "
        "(a change of phase, or of a condition's status or reason, is written at once; a Running "
        "one's moving counts ride on its Completed write)",
    )
    p.add_argument(
        "--no-status-writes",
        action="store_true",
        help="benchmarks: write no status and no Event, only binds (the floor a run is measured against)",
    )
    p.add_argument(
        "--gang-creation-grace",
        metavar="SECONDS",
        type=float,
        default=10.0,
        help="how long a gang whose pods are still being created (its pod count still changing) "
        "is left unreported before 'not enough valid tasks' is said",
    )
    p.add_argument(
        "--identity",
        metavar="ID",
        default=None,
        help="leader-election identity and Event reportingInstance (default: $POD_NAME_<pid>)",
    )
    p.add_argument(
        "--verify-state",
        action="store_true",
        default=os.environ.get("HYPERPLACE_VERIFY_STATE") == "1",
        help="debug: rebuild the cluster state from scratch every cycle and stop on a difference",
    )
    p.add_argument(
        "--full-rebuild", action="store_true", help="rebuild the snapshot every cycle (no incremental state)"
    )
    p.add_argument(
        "--runtime-history-configmap",
        metavar="NAME",
        default=None,
        help="ConfigMap in the Lease's namespace keeping the run times learned for queues annotated "
        "hyperplace.io/runtime-estimate: history, across restarts and leaders (default: <lease name>-runtime-history; "
        "'' keeps them in memory only)",
    )
    return env_names


def _add_fragmentation_flags(p: argparse.ArgumentParser) -> None:
    """The pod shapes of the fragmentation gauges."""
    p.add_argument(
        "--fragmentation-shapes",
        metavar="N,N,...",
        default=",".join(str(g) for g in DEFAULT_SHAPES),
        help="pod shapes of the fragmentation gauges: accelerators per pod (with proportional cpu/memory)",
    )
    p.add_argument(
        "--fragmentation-resource",
        metavar="NAME",
        default=DEFAULT_ACCELERATOR,
        help="the accelerator resource those shapes ask for",
    )
    p.add_argument(
        "--fragmentation-share",
        metavar="F",
        type=float,
        default=DEFAULT_SHARE,
        help="share (0-1) of an accelerator's cpu and memory a shape asks along with it",
    )


def history_configmap(args: argparse.Namespace) -> str | None:
    """The ConfigMap the learned run times are kept in: the flag's, else named after the Lease;
    None (memory only) for an empty flag."""
    if args.runtime_history_configmap is None:
        return configmap_name(args.lease_name)
    return str(args.runtime_history_configmap) or None


def health_app(scheduler: Scheduler, elector: LeaderElector | None) -> web.Application:
    """``/healthz`` and ``/readyz`` (``/metrics`` is served apart, see ``hyperplace.runtime.serving``)."""

    async def readyz(_: web.Request) -> web.Response:
        if not scheduler.synced():
            return web.Response(status=503, text="caches not synced")
        role = "leader" if elector is None or elector.is_leader else "standby"
        # Still ready on a refused configuration (the last good one runs), but say so.
        detail = scheduler.readiness_detail()
        return web.Response(status=200, text=f"ok ({role})" + (f"; {detail}" if detail else ""))

    return probes_app(elector, readyz)


async def run(
    args: argparse.Namespace, api: ApiClient | None = None, stop: asyncio.Event | None = None
) -> None:
    """Run until SIGTERM/SIGINT, ``stop`` being set, or cancellation."""
    raw: object = None
    if api is None:
        # lazy: only a process on a real API server loads kubernetes-asyncio (tests use an in-memory one)
        from hyperplace.runtime.kube import connect

        # One pool for everything: the binds in flight, the status workers, and a margin for
        # the watches (one per informer), the Lease, events and the final flush.
        api, raw = await connect(
            args.kubeconfig, pool_size=args.bind_concurrency + SchedulerOptions.status_workers + 32
        )
    identity = args.identity or default_identity()
    scheduler = Scheduler(
        api,
        SchedulerOptions(
            scheduler_names=tuple(args.scheduler_name),
            schedule_period=args.schedule_period,
            bind_concurrency=args.bind_concurrency,
            volume_bind_timeout=args.volume_bind_timeout,
            api_qps=args.kube_api_qps,
            api_burst=args.kube_api_burst,
            gang_creation_grace=args.gang_creation_grace,
            status_qps=args.status_qps,
            event_qps=args.event_qps,
            event_interval=args.event_interval,
            podgroup_status_interval=args.podgroup_status_interval,
            status_writes=not args.no_status_writes,
            identity=identity,
            incremental_state=not args.full_rebuild,
            verify_state=args.verify_state,
            fragmentation=args.fragmentation,
            runtime_history_configmap=history_configmap(args),
            runtime_history_namespace=args.lease_namespace,
        ),
        args.config_source,
    )
    log.info("scheduler configuration: %s", args.config_source.describe())
    elector = leader_elector(api, args, identity)

    async def work() -> None:
        informers = await scheduler.start_informers()
        try:
            # Cancelling the elector cancels schedule(): binds not sent are dropped, those in
            # flight finish (bounded), and only then is the Lease released.
            await (elector.run(scheduler.schedule) if elector else scheduler.schedule())
        finally:
            for t in informers:
                t.cancel()
            await asyncio.gather(*informers, return_exceptions=True)

    await run_served(
        work, args, health_app(scheduler, elector), scheduler.registry, log, client=raw, stop=stop
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point."""
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
