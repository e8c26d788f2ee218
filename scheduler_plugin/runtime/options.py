"""The scheduler process's settings (its flags); the scheduling policy itself is the
configuration file (``volcano-scheduler.conf``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hyperplace.api.constants import DEFAULT_SCHEDULER_NAME
from hyperplace.runtime.flags import SYSTEM_NAMESPACE
from scheduler_plugin.algorithms.fragmentation import FragmentationConfig

COMPONENT = "hyperplace-scheduler"


def configmap_name(lease: str) -> str:
    """The ConfigMap a scheduler leading Lease ``lease`` keeps its learned run times in
    (``history_store.py``): named after the Lease, so schedulers with Leases of their own keep
    apart."""
    return f"{lease}-runtime-history"


DEFAULT_HISTORY_CONFIGMAP = configmap_name(COMPONENT)  # the default Lease's


@dataclass
class SchedulerOptions:
    """Process settings (flags); the scheduling policy itself is the configuration file."""

    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    schedule_period: float = 1.0  # Volcano's --schedule-period
    bind_concurrency: int = 64
    api_qps: float = 2000.0  # Volcano's --kube-api-qps / --kube-api-burst defaults
    api_burst: int = 2000
    status_workers: int = 16
    # Status writes (pod conditions, PodGroup and Queue status) keep to their own rate, below
    # api_qps and apart from the binds' (the lower of the two is used).
    status_qps: float = 50.0
    status_burst: int = 100
    # At most one count update per Event per interval (client-go's spam filter refills one
    # write per 5 minutes per object), and Event writes at most event_qps (burst event_burst).
    event_interval: float = 300.0
    event_qps: float = 50.0
    event_burst: int = 100
    # A PodGroup's status is written at once when its phase or a condition's status or reason
    # changes; when only numbers moved (pod counts, what the best domain lacks), at most once
    # per this many seconds.
    podgroup_status_interval: float = 60.0
    # Seconds a PodGroup's change of phase or condition is held (a gang placed meanwhile is
    # written once, Running; one that went Running waits for its pods to be reported running).
    podgroup_settle: float = 5.0
    # A Queue's status.allocated (sums that move with every bind) at most once per interval.
    queue_status_interval: float = 10.0
    # False: write no status and no Event, only binds (a benchmark's floor; --no-status-writes).
    status_writes: bool = True
    # Binds in flight when the loop stops (SIGTERM, lost Lease) may finish within this.
    # Below lease_duration - renew_deadline (15 s - 10 s), so a successor cannot be
    # deciding while our last binds land.
    bind_drain_timeout: float = 4.0
    bind_backoff: tuple[float, float] = (1.0, 10.0)  # per-PodGroup requeue delay after a failed bind
    # How long a gang's claims may take to be bound by the PersistentVolume controller after
    # PreBind's writes before the gang is given up (kube-scheduler's volume bindTimeoutSeconds).
    volume_bind_timeout: float = 600.0
    # A gang short of pods whose pod count changed this recently is still being created by
    # its Job controller: its "not enough pods" is not reported yet (0: report at once).
    gang_creation_grace: float = 10.0
    identity: str = COMPONENT
    # Keep the cluster state from watch events (False: rebuild the snapshot every cycle).
    incremental_state: bool = True
    # Debug: after every snapshot, rebuild one from scratch and fail the cycle loudly on a
    # difference (HYPERPLACE_VERIFY_STATE=1 turns it on; the test suite does).
    verify_state: bool = field(default_factory=lambda: os.environ.get("HYPERPLACE_VERIFY_STATE") == "1")
    # The ConfigMap (in this namespace) that keeps the learned run times of the queues that opt
    # in across restarts and leaders; None: memory only (--runtime-history-configmap "").
    runtime_history_configmap: str | None = DEFAULT_HISTORY_CONFIGMAP
    runtime_history_namespace: str = SYSTEM_NAMESPACE
    # Pod shapes of the fragmentation gauges (--fragmentation-shapes and friends).
    fragmentation: FragmentationConfig = field(default_factory=FragmentationConfig)
