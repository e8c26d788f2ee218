"""Wires the controllers of ``hyperplace-controller`` to shared informers and runs their workers.

Each controller is a package of a pure reconcile and a thin sync module that owns its work
queue, its event handlers and its writes (client-go's informer + work-queue style):

==================== =============================================== ======================
controller           sync (I/O)                                      pure reconcile
==================== =============================================== ======================
Volcano Job          :mod:`controller.job.sync`                      ``job.reconcile``
PodGroup (any owner) :mod:`controller.podgroup.sync`                 ``podgroup.build``
HyperNode status     :mod:`controller.hypernode.sync`                ``hypernode.status``
HyperNode discovery  :mod:`controller.hypernode.discovery_sync`      ``hypernode.discovery``
Queue status         :mod:`controller.queue.sync`                    ``queue.status``
Queue Commands       :mod:`controller.queue.command_sync`            ``queue.command``
Job Commands         :mod:`controller.job.sync`                      ``job.lifecycle``
==================== =============================================== ======================

What they share (writes, metrics, the worker loop) is :mod:`controller.kube_io`. This module
only builds the informers they read, builds the controllers on them, and starts, runs and
drains the workers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from controller.hypernode.discovery import CONFIGMAP_NAME
from controller.hypernode.discovery_sync import RETRYABLE, DiscoveryController
from controller.hypernode.sync import HyperNodeController
from controller.job.node_failure import DEFAULT_DAMAGED_RESTART_AFTER, DEFAULT_NOT_READY_GRACE
from controller.job.sync import JobController
from controller.kube_io import KubeIO, Metrics, worker
from controller.podgroup.sync import PodGroupController
from controller.queue.command_sync import CommandController
from controller.queue.sync import QueueController
from hyperplace.api.constants import DEFAULT_SCHEDULER_NAME
from hyperplace.api.times import rfc3339
from hyperplace.runtime.api import (
    COMMANDS,
    CONFIGMAPS,
    HYPERNODES,
    JOBS,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    ApiClient,
)
from hyperplace.runtime.informer import Informer, wait_for_sync
from hyperplace.runtime.status_writer import StatusWriter
from hyperplace.runtime.workqueue import WorkQueue

log = logging.getLogger(__name__)


@dataclass
class ManagerConfig:
    workers: int = 4
    # Pod creates (and deletes) of one Job in flight at once, over the one connection pool
    # (Volcano's job controller creates a job's pods in parallel too).
    pod_concurrency: int = 64
    # Where Volcano's controller ConfigMap lives (Volcano: $KUBE_POD_NAMESPACE).
    config_namespace: str = "volcano-system"
    config_map: str = CONFIGMAP_NAME
    # Seeds discovery's random HyperNode name suffixes (None: from the OS).
    seed: int | None = None
    # Pods naming one of these get a PodGroup when they have none (Volcano: --scheduler-name).
    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    # Copy the owner's volcano.sh/ annotations and read its group-min-member (Volcano's default).
    inherit_owner_annotations: bool = True
    # Queue Commands are obeyed only with a valid admission marker made with this key
    # (hyperplace.pki.commandmark); without a key none is, unless unadmitted ones are accepted
    # (Volcano's behaviour).
    command_key: bytes | None = None
    accept_unadmitted_commands: bool = False
    # A Volcano Job's pod on a node not Ready (or missing) this long is lost with it; a pod stuck
    # terminating on such a node this long past its grace period is force-deleted (None: never).
    not_ready_grace: float = DEFAULT_NOT_READY_GRACE
    force_delete_unreachable_after: float | None = None
    # A gang that lost pods and has waited this long for its replacements restarts whole (None: never).
    damaged_restart_after: float | None = DEFAULT_DAMAGED_RESTART_AFTER


class ControllerManager:
    """Owns the informers and the workers of every controller; see the module docstring."""

    def __init__(
        self,
        api: ApiClient,
        config: ManagerConfig | None = None,
        *,
        registry: CollectorRegistry | None = None,
        now: Callable[[], str] = rfc3339,
    ) -> None:
        self.api = api
        self.status_writer = StatusWriter(api)
        self.config = config or ManagerConfig()
        self.registry = registry or CollectorRegistry()
        self.metrics = Metrics(self.registry)
        io = KubeIO(api, self.status_writer, self.metrics)

        self.jobs = Informer(api, JOBS)
        self.pods = Informer(api, PODS)
        self.podgroups = Informer(api, PODGROUPS)
        self.hypernodes = Informer(api, HYPERNODES)
        self.nodes = Informer(api, NODES)
        self.priority_classes = Informer(api, PRIORITY_CLASSES)
        self.configmaps = Informer(api, CONFIGMAPS, self.config.config_namespace)
        self.queue_objs = Informer(api, QUEUES)
        self.commands = Informer(api, COMMANDS)
        self.informers = [
            self.jobs,
            self.pods,
            self.podgroups,
            self.hypernodes,
            self.nodes,
            self.priority_classes,
            self.configmaps,
            self.queue_objs,
            self.commands,
        ]

        # Each controller registers its handlers as it is built; on an informer two share,
        # they run in the order the controllers are built here.
        self.hypernode_ctl = HyperNodeController(io, self.hypernodes, self.nodes, now=now)
        self.discovery_ctl = DiscoveryController(
            io,
            self.nodes,
            self.hypernodes,
            self.configmaps,
            self.hypernode_ctl,
            config_map=self.config.config_map,
            config_namespace=self.config.config_namespace,
            seed=self.config.seed,
        )
        # PodGroups for pods of any owner (controller.podgroup); its owner informers are
        # optional: without them (RBAC) PodGroups are still made, with minMember 1.
        self.podgroup_ctl = PodGroupController(
            api,
            self.pods,
            self.podgroups,
            self.status_writer,
            scheduler_names=self.config.scheduler_names,
            inherit_owner_annotations=self.config.inherit_owner_annotations,
            now=now,
            on_write=io.wrote,
            tier_of_label=self.discovery_ctl.tier_of_label,
        )
        self.job_ctl = JobController(
            io,
            self.jobs,
            self.pods,
            self.podgroups,
            self.priority_classes,
            pod_concurrency=self.config.pod_concurrency,
            now=now,
            commands=self.commands,
            nodes=self.nodes,
            not_ready_grace=self.config.not_ready_grace,
            force_delete_after=self.config.force_delete_unreachable_after,
            damaged_restart_after=self.config.damaged_restart_after,
        )
        self.queue_ctl = QueueController(io, self.queue_objs, self.podgroups)
        self.command_ctl = CommandController(
            io,
            self.commands,
            self.queue_ctl,
            command_key=self.config.command_key,
            accept_unadmitted_commands=self.config.accept_unadmitted_commands,
        )

        self.informers += self.podgroup_ctl.informers
        # PriorityClasses only refine minResources' task order; a cluster whose RBAC does
        # not grant them must not keep the controllers from starting. Nor must a cluster whose
        # Command CRD is not installed yet: queue Commands are then served once it is.
        optional = (self.priority_classes, self.commands, *self.podgroup_ctl.informers)
        self.required_informers = [i for i in self.informers if i not in optional]

        self.queues: list[WorkQueue[str]] = [
            self.job_ctl.queue,
            self.hypernode_ctl.queue,
            self.discovery_ctl.queue,
            self.queue_ctl.queue,
            self.command_ctl.queue,
            self.job_ctl.command_queue,
            self.podgroup_ctl.queue,
        ]
        for q in self.queues:
            self.metrics.depth.labels(q.name).set_function(q.__len__)

    # -- workers ----------------------------------------------------------------------------

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.required_informers)

    async def start_informers(self) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(i.run(), name=f"informer-{i.res.plural}") for i in self.informers]

    async def run(self, informer_tasks: list[asyncio.Task[None]] | None = None) -> None:
        """Run until cancelled: informers (unless given), wait for sync, then workers.

        On cancellation the queues stop taking keys, in-flight reconciles finish (up to
        10 s), and informers stop.
        """
        own = informer_tasks is None
        tasks = informer_tasks if informer_tasks is not None else await self.start_informers()
        workers: list[asyncio.Task[None]] = []
        ufm: asyncio.Task[None] | None = None
        m = self.metrics
        try:
            await wait_for_sync(self.required_informers)
            log.info("controller manager: caches synced, starting workers")
            for i in range(self.config.workers):
                workers.append(
                    asyncio.create_task(worker(self.job_ctl.queue, "job", self.job_ctl.reconcile, m))
                )
                workers.append(
                    asyncio.create_task(
                        worker(self.hypernode_ctl.queue, "hypernode", self.hypernode_ctl.reconcile, m)
                    )
                )
                workers.append(
                    asyncio.create_task(worker(self.queue_ctl.queue, "queue", self.queue_ctl.reconcile, m))
                )
                workers.append(
                    asyncio.create_task(
                        worker(self.podgroup_ctl.queue, "podgroup", self.podgroup_ctl.reconcile, m)
                    )
                )
                if i == 0:  # one discovery at a time; Commands in the order they came
                    workers.append(
                        asyncio.create_task(
                            worker(self.command_ctl.queue, "command", self.command_ctl.reconcile, m)
                        )
                    )
                    workers.append(
                        asyncio.create_task(
                            worker(self.job_ctl.command_queue, "job-command", self.job_ctl.serve_command, m)
                        )
                    )
                    workers.append(
                        asyncio.create_task(
                            worker(
                                self.discovery_ctl.queue,
                                "discovery",
                                self.discovery_ctl.reconcile,
                                m,
                                retryable=RETRYABLE,
                            )
                        )
                    )
            # Not a worker: nothing to drain.
            ufm = asyncio.create_task(self.discovery_ctl.ufm_loop(), name="ufm-discovery")
            # asyncio.wait, not gather: cancelling run() must not cancel the workers
            # mid-reconcile; they finish their key once the queues shut down.
            await asyncio.wait(workers)
        finally:
            if ufm is not None:
                ufm.cancel()
                await asyncio.gather(ufm, return_exceptions=True)
            for q in self.queues:
                q.shutdown()
            if workers:
                await asyncio.wait(workers, timeout=10)
            for t in workers:
                t.cancel()
            if own:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    async def wait_idle(self, timeout: float = 5.0) -> bool:
        """Test helper: every queue drained (keys neither queued nor in flight)."""
        results = await asyncio.gather(*(q.drain(timeout) for q in self.queues))
        return all(results)
