"""What the cache reads of one Node, one Pod and the PriorityClasses, parsed once per version.

The from-scratch build (:mod:`.rebuild`) and the incremental state (:mod:`.cluster_state`)
read objects only through these, so they cannot disagree on what an object means; what they
still compute apart (accounting, layout, jobs) is what ``--verify-state`` compares.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hyperplace.api.constants import (
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER_NAME,
    GROUP_NAME_ANNOTATION,
    REPLACES_NODE_ANNOTATION,
    TASK_SPEC_KEY,
)
from hyperplace.api.podgroup import PodGroup, Queue
from hyperplace.api.times import parse_rfc3339
from hyperplace.api.workload import pod_group_name, upstream_priority, volcano_intent
from hyperplace.kube.gang_damage import running_since
from hyperplace.kube.objects import TERMINAL_PHASES
from hyperplace.kube.requests import ResourceError, pod_requests
from hyperplace.kube.workloads import controlled_podgroup_name, rank_index

from ..filters.node_ports import pod_host_ports
from ..filters.nodes import NodeStatic, node_static_from_dict
from ..filters.pod_constraints import PodConstraints, compile_pod_constraints
from ..filters.pod_terms import NO_TERMS, PodTerms
from ..filters.taint_toleration import SCHEDULING_EFFECTS
from ..model.jobs import TaskInfo, cooldown_mark, order_keys, preemptable_mark, rank_key
from ..model.snapshot import HostPort
from .pod_classes import terms_of

I64 = npt.NDArray[np.int64]
log = logging.getLogger(__name__)
# deletionTimestamp: PodTopologySpread does not count a pod being deleted.
_META_READ = ("name", "namespace", "uid", "labels", "annotations", "creationTimestamp", "deletionTimestamp")


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name`` of an object."""
    return str((obj.get("metadata") or {}).get("name", ""))


def namespace_labels(objs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Each Namespace's labels, by name: what a pod affinity term's namespaceSelector reads."""
    return {
        name_of(o): {str(k): str(v) for k, v in ((o.get("metadata") or {}).get("labels") or {}).items()}
        for o in objs
    }


def detached(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy that in-place changes of the original's top-level sections do not reach."""
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in obj.items()}


@dataclass(slots=True)
class NodeRecord:
    """What the scheduler reads of a Node."""

    static: NodeStatic
    alloc: dict[str, int]  # milli, what the matrices hold
    plain: bool  # ready, schedulable, no NoSchedule/NoExecute taint: no predicate to ask


def parse_node(obj: Mapping[str, Any]) -> NodeRecord:
    """A Node as the scheduler reads it. ``NodeStatic`` falls back to capacity when allocatable
    is absent; the matrices do not (a node without allocatable offers nothing). A node whose
    allocatable names no ``pods`` has no pod slot, as in kube-scheduler (every kubelet reports
    them; only hand-written nodes lack them)."""
    st = node_static_from_dict(obj)
    alloc: dict[str, int] = dict(st.allocatable) if (obj.get("status") or {}).get("allocatable") else {}
    plain = bool(
        st.ready
        and not st.unschedulable
        and not any(t.get("effect") in SCHEDULING_EFFECTS for t in st.taints)
    )
    return NodeRecord(st, alloc, plain)


@dataclass(slots=True)
class TaskFields:
    """What a TaskInfo of a pod holds that depends on the pod alone."""

    uid: str
    role: str
    index: int | None
    labels: dict[str, str]
    priority_class: str | None
    preempt_never: bool
    preemptable: bool | None  # the pod's own volcano.sh/preemptable (None: unset)
    bad_mark: str | None  # why that mark could not be read
    cooldown: float | None  # the pod's volcano.sh/cooldown-time, seconds
    bad_cooldown: str | None
    scheduled_at: float | None  # PodScheduled True since, else status.startTime
    deadline: float | None  # spec.activeDeadlineSeconds (None: unset or not a positive number)
    started_at: float | None  # status.startTime (the kubelet counts the deadline from it)
    replaces_node: str | None  # hyperplace.io/replaces-node: where its lost predecessor ran
    releasing: bool  # being deleted (deletionTimestamp): Volcano's Releasing
    priority: Any
    creation: str
    best_effort: bool
    sig: Any  # the shape signature: requests, static constraints, host ports, claims


@dataclass(slots=True)
class PodRecord:
    """What the scheduler needs of one pod, parsed once per pod version."""

    obj: dict[str, Any]
    key: str
    ns: str
    name: str
    node: str | None
    terminal: bool
    owned: bool  # names one of the scheduler's names
    group: str | None  # Volcano's group-name annotation
    requests: dict[str, int] | None  # None: the API server would refuse them
    bad: str | None  # why requests are invalid
    job: str | None  # the job this pod feeds (its PodGroup, or the one made for it)
    ports: frozenset[HostPort]  # host ports it holds on its node when bound
    terms: PodTerms = NO_TERMS  # inter-pod affinity and spread terms (of any non-terminal pod)
    _cons: PodConstraints | None = None
    _fields: TaskFields | None = None
    # Shape id and request vector, valid while the state's layout generation is shape_gen.
    shape_gen: int = -1
    sid: int = -1
    vec: I64 | None = None
    # A pending TaskInfo's fields (a new task is a copy of them), valid for base_gen: the
    # layout and priority generations they were made under.
    base: dict[str, Any] | None = None
    base_gen: tuple[int, int] = (-1, -1)

    @property
    def cons(self) -> PodConstraints:
        """The pod's static constraints, compiled once."""
        if self._cons is None:
            self._cons = compile_pod_constraints(self.obj)
        return self._cons

    def task_fields(self) -> TaskFields:
        """What a TaskInfo of this pod holds that depends on the pod alone (parsed once)."""
        if self._fields is None:
            meta = self.obj.get("metadata") or {}
            spec = self.obj.get("spec") or {}
            assert self.requests is not None
            cons = self.cons
            labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
            annotations = meta.get("annotations") or {}
            tindex = rank_index(labels, annotations)  # the index the pod's workload stamped
            preemptable, bad = preemptable_mark(annotations, labels)
            if bad:
                log.warning("pod %s: %s", self.key, bad)  # Volcano logs it and reads false
            cooldown, bad_cooldown = cooldown_mark(annotations, labels)
            if bad_cooldown:
                log.warning("pod %s: %s", self.key, bad_cooldown)  # cdp logs it and ignores it
            self._fields = TaskFields(
                uid=str(meta.get("uid") or self.key),
                role=str(annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or ""),
                index=tindex,
                labels=labels,
                priority_class=spec.get("priorityClassName"),
                preempt_never=spec.get("preemptionPolicy") == "Never",
                preemptable=preemptable,
                bad_mark=f"pod {self.key}: {bad}" if bad else None,
                cooldown=cooldown,
                bad_cooldown=f"pod {self.key}: {bad_cooldown}" if bad_cooldown else None,
                scheduled_at=running_since(self.obj),
                deadline=active_deadline(spec),
                started_at=parse_rfc3339((self.obj.get("status") or {}).get("startTime")),
                replaces_node=str(annotations[REPLACES_NODE_ANNOTATION])
                if annotations.get(REPLACES_NODE_ANNOTATION)
                else None,
                releasing=bool(meta.get("deletionTimestamp")),
                priority=spec.get("priority"),
                creation=str(meta.get("creationTimestamp") or ""),
                # Requests are never negative: best effort when only the pod slot is asked.
                best_effort=sum(self.requests.values()) == self.requests.get("pods", 0),
                sig=(
                    tuple(sorted(self.requests.items())),
                    cons.signature,
                    tuple(sorted(cons.host_ports)),
                    cons.terms,
                    cons.volumes.signature,  # the claims: per-pod claims make pods distinct
                    # ResourceClaims by name: a pod's own claims (from a template) make it
                    # distinct, as its volume claims do; pods sharing one claim share a shape.
                    (cons.claims.namespace, cons.claims.refs, cons.claims.bad) if cons.claims.refs else (),
                    cons.score_signature,
                ),
            )
        return self._fields

    def refusal(self) -> str | None:
        """Why a pending pod of ours is not placed whatever the room: scheduling gates, terms
        that cannot be evaluated, or a constraint no filter evaluates (placing it could
        violate that)."""
        if self.cons.gated:
            return "pod has scheduling gates"
        if self.cons.error is not None:
            return f"invalid pod: {self.cons.error}"
        unsupported = self.cons.unsupported
        if unsupported:
            return "unsupported constraints: " + ", ".join(unsupported)
        return None

    def standalone_podgroup(self) -> PodGroup:
        """The one-member PodGroup Volcano gives a pod of no PodGroup (``podgroup-<pod>``)."""
        meta = self.obj.get("metadata") or {}
        spec = self.obj.get("spec") or {}
        return PodGroup.model_validate(
            {
                "metadata": {
                    "name": f"podgroup-{self.name}",
                    "namespace": self.ns,
                    "creationTimestamp": meta.get("creationTimestamp"),
                },
                "spec": {"minMember": 1, "priorityClassName": spec.get("priorityClassName")},
            }
        )

    def task(self, shape: int, vec: I64, priority: int) -> TaskInfo:
        """A pending TaskInfo of this pod (shape ``shape`` with request vector ``vec``)."""
        f = self._fields or self.task_fields()
        task = TaskInfo(
            key=self.key,
            name=self.name,
            namespace=self.ns,
            uid=f.uid,
            role=f.role,
            index=f.index,
            labels=f.labels,
            requests=vec,
            shape=shape,
            priority=priority,
            creation=f.creation,
            best_effort=f.best_effort,
            priority_class=f.priority_class,
            preempt_never=f.preempt_never,
            preemptable=f.preemptable,
            bad_mark=f.bad_mark,
            cooldown=f.cooldown,
            scheduled_at=f.scheduled_at,
            bad_cooldown=f.bad_cooldown,
            deadline=f.deadline,
            started_at=f.started_at,
            replaces_node=f.replaces_node,
            releasing=f.releasing,
        )
        task.prio_order_key, task.order_key = order_keys(task)
        task.rank = rank_key(task)
        return task


def active_deadline(spec: Mapping[str, Any]) -> float | None:
    """A pod's ``spec.activeDeadlineSeconds`` (the API server accepts only a positive
    integer); None when unset or unreadable."""
    raw = spec.get("activeDeadlineSeconds")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
        return None
    return float(raw)


def owned_by(pod: Mapping[str, Any], scheduler_names: Sequence[str]) -> bool:
    """The pod names one of ``scheduler_names`` (Kubernetes' default scheduler when unset)."""
    return (pod.get("spec") or {}).get("schedulerName", DEFAULT_SCHEDULER_NAME) in scheduler_names


def parse_pod(obj: dict[str, Any], scheduler_names: Sequence[str]) -> PodRecord:
    """A pod as the scheduler reads it (``scheduler_names``: the names it schedules for)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name", ""))
    key = f"{ns}/{name}"
    node = spec.get("nodeName") or None
    terminal = status.get("phase", "Pending") in TERMINAL_PHASES
    owned = owned_by(obj, scheduler_names)
    # Volcano's annotation first (a PodGroup made for this pod on purpose), else Kubernetes' own
    # field (kube-scheduler 1.37 reads only it); the one rule is hyperplace.kube.objects'.
    group = (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION) or (
        None if volcano_intent(obj) else pod_group_name(obj)  # written for Volcano: its group is ours to make
    )
    bad: str | None = None
    try:
        rq: dict[str, int] | None = pod_requests(obj)
    except ResourceError as exc:
        rq, bad = None, str(exc)
    rec = PodRecord(obj, key, ns, name, node, terminal, owned, group, rq, bad, None, frozenset())
    if terminal:
        return rec
    rec.terms = terms_of(obj)  # a bound pod's terms matter to every pod placed near it
    if rq is None:
        return rec
    if group is None and owned:
        # A pod of a controlling owner belongs to the PodGroup the podgroup controller makes
        # for that owner, and waits for it as Volcano's does: a one-pod shadow gang would start
        # an indexed Job or a StatefulSet a pod at a time before its PodGroup exists.
        group = rec.group = controlled_podgroup_name(obj)
    if group is not None:
        rec.job = f"{ns}/{group}"
    elif not node and owned:
        rec.job = f"{ns}/podgroup-{name}"
    if node:
        # A bound pod of no job (most of a busy cluster) only uses room: its host ports are
        # all we need, not its full constraints.
        rec.ports = pod_host_ports_of(rec)
    return rec


def job_task_verdict(rec: PodRecord, podgroup: PodGroup | None) -> tuple[bool, str | None]:
    """Whether a pod of a job (``rec.job`` set, valid requests) becomes one of its tasks, and
    else why it waits (None: the pod is not this scheduler's to report). The one rule of the
    from-scratch build and the incremental state; a group-less pod's one-member PodGroup is
    the caller's to make (``podgroup``, the job's PodGroup object, does not apply to it)."""
    if not rec.node and not rec.owned:
        return False, None  # another scheduler's pod
    if rec.group is not None and podgroup is None:
        return False, None if rec.node else f"PodGroup {rec.job} not found"
    if not rec.node:
        refusal = rec.refusal()
        if refusal is not None:
            return False, refusal
    return True, None


def bind_task(task: TaskInfo, node: str, index: int | None) -> bool:
    """Make ``task`` the running task of a pod bound to ``node`` (``index``: the node's row,
    None when no Node object has that name). True when the node is missing: Volcano still
    counts such a pod for its gang (its status, not its node, makes it ready), with no room
    or topology to add."""
    task.running = True
    task.node = -1 if index is None else index
    return index is None


def pod_host_ports_of(rec: PodRecord) -> frozenset[HostPort]:
    """Host ports a bound pod holds on its node."""
    return pod_host_ports(rec.obj) if rec.group is None else frozenset(rec.cons.host_ports)


def same_for_scheduling(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when ``new`` differs from ``old`` only where the cache does not look (it reads the
    spec, the phase, since when a running pod runs, its start time, the ResourceClaims made for it
    and a few metadata fields). An object changed in place (the same dict)
    cannot be compared and counts as changed."""
    if old is new or old.get("spec") != new.get("spec"):
        return False
    if (old.get("status") or {}).get("phase") != (new.get("status") or {}).get("phase"):
        return False
    if running_since(old) != running_since(new):
        return False  # the cooldown (cdp) counts from it
    if (old.get("status") or {}).get("startTime") != (new.get("status") or {}).get("startTime"):
        return False  # a time limit (activeDeadlineSeconds) counts from it
    if (old.get("status") or {}).get("resourceClaimStatuses") != (new.get("status") or {}).get(
        "resourceClaimStatuses"
    ):
        return False  # the claims the resourceclaim controller made for the pod
    mo, mn = old.get("metadata") or {}, new.get("metadata") or {}
    return all(mo.get(k) == mn.get(k) for k in _META_READ)


class Priorities:
    """PriorityClass values by name, and the cluster's default (the last ``globalDefault``)."""

    def __init__(self, priority_classes: Iterable[Mapping[str, Any]] = ()) -> None:
        self.by_name = {name_of(pc): pc for pc in priority_classes}
        self.default = 0
        for pc in self.by_name.values():
            if pc.get("globalDefault"):
                self.default = int(pc.get("value", 0))

    def of_podgroup(self, pg: PodGroup) -> int:
        """A job's priority: an upstream PodGroup's own ``priority``, else its class's value,
        else the default."""
        return self.of(pg.spec.priority_class_name, upstream_priority(pg))

    def of(self, name: str | None, explicit: Any = None) -> int:
        """A pod's priority: its own ``spec.priority``, else its class's value, else the default."""
        if explicit is not None:
            return int(explicit)
        if name and name in self.by_name:
            return int(self.by_name[name].get("value", 0))
        return self.default

    def key(self) -> tuple[Any, ...]:
        """What decides every priority: changes when a job must be re-prioritised."""
        return tuple(
            sorted((n, pc.get("value"), bool(pc.get("globalDefault"))) for n, pc in self.by_name.items())
        )


def with_default_queue(queues: Iterable[Queue]) -> dict[str, Queue]:
    """Queues by name, with Volcano's ``default`` queue when the cluster has none."""
    out = {q.name: q for q in queues}
    if DEFAULT_QUEUE not in out:
        out[DEFAULT_QUEUE] = Queue.model_validate({"metadata": {"name": DEFAULT_QUEUE}})
    return out
