"""The in-process simulator: admission, controllers, one scheduler session per cycle.

One **cycle** does what a real control plane does between two scheduler sessions:

1. (first cycle only: objects arrive) every input object goes through admission,
   mutating webhooks, then schema/CEL, then validating webhooks; refused objects are
   reported with the webhook's messages and left out;
2. the controllers reconcile to a fixed point: label discovery of HyperNodes (when a
   ConfigMap enables it), HyperNode status, and Job -> PodGroup + pods (pods the Job
   controller creates pass the pod webhooks too, as they would through the API server);
3. one scheduler session runs on a snapshot of the cluster; its bindings are applied
   (the pod gets ``spec.nodeName`` and phase Running), so they count in the next cycle,
   and the PodGroups get the status the scheduler reports.

The other components are imported lazily: each lives behind the seams described in
``docs/CONTRACTS.md``, and the simulator is only the glue that feeds them wire objects.

Time is simulated. Components that stamp times get ``now`` from a clock that advances
per cycle and round, and any wall-clock timestamp they produce anyway is replaced by
the simulated one, so two runs on the same input give the same output.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, cast

from pydantic import ValidationError

from hyperplace.api import HyperNode, Job, PodGroup, Queue, TypedObject, format_validation_error
from hyperplace.api.constants import (
    DEFAULT_SCHEDULER_NAME,
    GROUP_NAME_ANNOTATION,
    JOB_ALLOCATED_HYPERNODE_ANNOTATION,
    JOB_NAME_KEY,
)
from hyperplace.api.times import parse_rfc3339, rfc3339
from hyperplace.kube.members import MemberIndex, node_labels_of
from hyperplace.kube.objects import namespaced_key
from hyperplace.runtime.api import clone

from .loader import (
    CONTROLLER_CONF_KEY,
    SIM_EPOCH,
    InputObject,
    Inputs,
    deterministic_uid,
    kind_key,
    normalize,
    scheduler_conf_from_configmaps,
    sim_time,
)

Key = tuple[str, str, str]  # (kind, namespace or "", name)


class ObjectStore(dict[Key, dict[str, Any]]):
    """The simulated API server's objects, with keys indexed by kind (so listing one kind
    costs the objects of that kind, not every object: admission lists HyperNodes and Jobs
    after each of them, which was quadratic on large inputs). Iteration order is a dict's.

    Every store, replacement and removal is logged per kind, so a reader that keeps up with
    a kind (the admission caches, HyperNode status) reads only what changed since it last
    looked. Callers change stored objects in place only for status."""

    def __init__(self) -> None:
        super().__init__()
        self._by_kind: dict[str, dict[Key, None]] = {}
        self._changes: dict[str, list[Key]] = {}

    def _changed(self, key: Key) -> None:
        self._changes.setdefault(key[0], []).append(key)

    def __setitem__(self, key: Key, value: dict[str, Any]) -> None:
        if key not in self:
            self._by_kind.setdefault(key[0], {})[key] = None
        self._changed(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Key) -> None:
        super().__delitem__(key)
        self._by_kind[key[0]].pop(key, None)
        self._changed(key)

    def pop(self, key: Key, *default: Any) -> Any:
        """dict.pop, keeping the kind index."""
        if key in self:
            self._by_kind[key[0]].pop(key, None)
            self._changed(key)
        return super().pop(key, *default)

    def setdefault(self, key: Key, default: Any = None) -> Any:
        """dict.setdefault, keeping the kind index."""
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        """dict.update, keeping the kind index."""
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def popitem(self) -> Any:
        """Not used; refused rather than leaving the index stale."""
        raise NotImplementedError

    def clear(self) -> None:
        """dict.clear, with the index."""
        for key in self:
            self._changed(key)
        super().clear()
        self._by_kind.clear()

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Objects of one kind, in insertion order."""
        return [self[k] for k in self._by_kind.get(kind, ())]

    def version(self, kind: str) -> int:
        """How many times objects of ``kind`` were stored, replaced or removed: a kind whose
        version has not moved still holds the same objects."""
        return len(self._changes.get(kind, ()))

    def changed_since(self, kind: str, version: int) -> list[Key]:
        """Keys of ``kind`` stored, replaced or removed since :meth:`version` was ``version``,
        in order (a key once per change)."""
        return self._changes.get(kind, [])[version:]


M = TypeVar("M", bound=TypedObject)

# Keys whose values are timestamps; see the module docstring.
TIME_KEYS = frozenset(
    {"lastTransitionTime", "creationTimestamp", "lastUpdateTime", "lastProbeTime", "lastHeartbeatTime"}
)

DEFAULT_MAX_CYCLES = 10
MAX_CONTROLLER_ROUNDS = 25
# The simulated clock: cycle c, controller round r happen at BASE + c*CYCLE + r seconds.
CLOCK_BASE = 86_400
CLOCK_CYCLE = 600


# The PriorityClasses every cluster has (kube-apiserver creates them).
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


class SimulationError(Exception):
    """The simulation cannot run (for example an unreadable scheduler configuration)."""


class Progress(Protocol):
    """Where the engine reports progress (the CLI draws it with rich)."""

    def start(self, description: str, total: int | None) -> None: ...

    def advance(self, n: int = 1) -> None: ...


class _NoProgress:
    def start(self, description: str, total: int | None) -> None:
        return None

    def advance(self, n: int = 1) -> None:
        return None


@dataclass
class Rejection:
    """An object admission refused."""

    kind: str
    namespace: str | None
    name: str
    message: str
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``rejected[]`` entry of the JSON output."""
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "message": self.message}

    def line(self) -> str:
        """``<Kind> [<namespace>/]<name>: <message>`` (the validate format)."""
        ref = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {ref}: {self.message}"


@dataclass
class SimResult:
    """Everything the outputs need after the last cycle."""

    objects: dict[Key, dict[str, Any]]
    bindings: dict[str, str]  # "ns/pod" -> node, this run only, in binding order
    bound_in_cycle: dict[str, int]
    evictions: list[str]
    rejected: list[Rejection]
    warnings: list[str]
    created: list[Key]
    updated: list[Key]
    outcomes: dict[str, Any]  # "ns/podgroup" -> the scheduler's last JobOutcome for it
    unschedulable: dict[str, str]  # "ns/pod" -> reason, from the last session that tried it
    cycles: int
    scheduler_ran: bool
    notes: list[str] = field(default_factory=list)  # what the scheduler said about its configuration
    # preempt/reclaim: every eviction of the run (victim, node, preemptor, reason) in order, and
    # per preemptor job why its domain and victims were chosen.
    preemptions: list[Any] = field(default_factory=list)
    preemption_reasons: dict[str, str] = field(default_factory=dict)
    snapshot: Any = None  # the last ClusterSnapshot (its .tree is the scheduler's view)
    session: Any = None  # the last SessionResult
    # The HyperNodes' models as the run left them (specs; parsed once per spec in the run), in
    # object order; None when not given, and readers parse ``objects`` themselves.
    hypernodes: list[Any] | None = None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for k, o in self.objects.items() if k[0] == kind]

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace or "", name))


def key_of(obj: dict[str, Any]) -> Key:
    """``(kind, namespace or "", name)`` of a wire object."""
    meta = obj.get("metadata") or {}
    return (kind_key(obj), str(meta.get("namespace") or ""), str(meta.get("name", "")))


def _strip_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_times(v) for k, v in value.items() if k not in TIME_KEYS}
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


class AdmissionCaches:
    """The caches the webhooks consult (``webhooks.context.AdmissionContext``): the HyperNodes,
    Volcano Jobs and Queues the simulated API server holds now, and the tier names discovery
    will create.

    Kept current from the store's change log: an object is parsed once per stored version,
    and a context is made again only after one of those kinds or a ConfigMap changed. (Made
    from every object for each arriving one, admission was quadratic on large inputs.) The
    context's maps are read-only views of the live maps: an older context a caller still
    holds reads the store as it is now, which is what every caller asks for.
    """

    def __init__(self, store: ObjectStore, spec_model: Callable[[dict[str, Any], type[Any]], Any]) -> None:
        self._store = store
        self._spec_model = spec_model
        # kind -> (model type, the webhooks' key of a model)
        self._kinds: dict[str, tuple[type[TypedObject], Callable[[Any], str]]] = {
            "HyperNode": (HyperNode, lambda m: m.name),
            "Job": (Job, lambda m: m.key),
            "Queue": (Queue, lambda m: m.name),
        }
        self._maps: dict[str, dict[str, Any]] = {kind: {} for kind in self._kinds}
        self._views = {kind: MappingProxyType(m) for kind, m in self._maps.items()}
        self._names: dict[str, dict[Key, str]] = {kind: {} for kind in self._kinds}  # store key -> map key
        self._seen: dict[str, int] = dict.fromkeys((*self._kinds, "ConfigMap"), 0)
        self._tier_names: dict[str, int] | None = None
        self._context: Any = None

    def _sync(self, kind: str) -> bool:
        version = self._store.version(kind)
        if version == self._seen[kind]:
            return False
        changed = self._store.changed_since(kind, self._seen[kind])
        self._seen[kind] = version
        if kind == "ConfigMap":
            self._tier_names = discovery_tier_names(self._store)
            return True
        model, name_of = self._kinds[kind]
        entries, names = self._maps[kind], self._names[kind]
        for k in changed:
            old = names.pop(k, None)
            if old is not None:
                del entries[old]
            obj = self._store.get(k)
            m = self._spec_model(obj, model) if obj is not None else None
            if m is not None:
                names[k] = name_of(m)
                entries[names[k]] = m
        return True

    def tier_names(self) -> dict[str, int] | None:
        """tierName -> tier that label discovery will create (see :func:`discovery_tier_names`)."""
        self._sync("ConfigMap")
        return self._tier_names

    def context(self) -> Any:
        """AdmissionContext with the HyperNodes and Jobs the API server would hold now."""
        changed = False
        for kind in self._seen:
            changed = self._sync(kind) or changed
        if changed or self._context is None:
            # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
            from webhooks.context import AdmissionContext

            self._context = AdmissionContext(
                hypernodes=self._views["HyperNode"],
                jobs=self._views["Job"],
                queues=self._views["Queue"],
                known_tier_names=self._tier_names,
            )
        return self._context


def discovery_tier_names(store: ObjectStore) -> dict[str, int] | None:
    """tierName -> tier that label discovery will create (the label keys), so a job naming
    a discovered tier is not warned about before discovery has run."""
    cms = [
        o
        for o in store.of_kind("ConfigMap")
        if isinstance((o.get("data") or {}).get(CONTROLLER_CONF_KEY), str)
    ]
    if not cms:
        return None
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from controller.hypernode.discovery import (
        DiscoveryConfigError,
        discovered_tier_names,
        parse_discovery_config,
    )

    try:
        source = parse_discovery_config(cms[0]).enabled("label")
    except DiscoveryConfigError:
        return None
    if source is None:
        return None
    return discovered_tier_names(source.config)


class Simulation:
    """Holds the cluster state between cycles; :meth:`run` drives it."""

    def __init__(
        self,
        inputs: Inputs,
        *,
        scheduler_conf: str | None = None,
        scheduler_conf_source: str = "--scheduler-config",
        seed: int = 0,
        progress: Progress | None = None,
        verify_state: bool | None = None,
        elapsed: float = 0.0,
        now: str | None = None,
    ) -> None:
        """``elapsed``: seconds added to the simulated clock the scheduler sees, to preview
        time-bounded topology relaxations as they will stand that much later.
        ``verify_state``: rebuild the scheduler's snapshot from scratch every cycle and fail
        on a difference (default: the ``HYPERPLACE_VERIFY_STATE=1`` environment variable).
        ``now``: the time (RFC 3339) the scheduler's clock reads in cycle 1, advancing with the
        simulated clock (10 minutes a cycle). Jobs wait from their PodGroup's creationTimestamp
        (inputs without one are stamped from 2025-01-01T00:00:00Z on), and a head-of-queue gang
        that waited past its threshold gets a domain held. Without it, reservations are off
        (every multi-cycle run would otherwise reserve after its first cycle)."""
        if verify_state is None:
            verify_state = os.environ.get("HYPERPLACE_VERIFY_STATE") == "1"
        self.inputs = inputs
        self.seed = seed
        self.elapsed = elapsed
        self.rng = random.Random(seed)
        self.progress: Progress = progress or _NoProgress()
        self.objects: ObjectStore = ObjectStore()
        self.original: dict[Key, dict[str, Any]] = {}  # input objects as given (normalized)
        self.input_order: list[Key] = []
        self.created: dict[Key, None] = {}  # in creation order (a dict: membership in O(1))
        self.bindings: dict[str, str] = {}
        self.bound_in_cycle: dict[str, int] = {}
        self.evictions: list[str] = []
        self.preemptions: list[Any] = []  # Eviction records, in order
        self.preemption_reasons: dict[str, str] = {}  # preemptor job key -> why that domain
        self.nominations: dict[str, Any] = {}  # held for the next session, as the scheduler does
        self.reservations: dict[str, Any] = {}  # head-of-queue holds, kept across cycles too
        self.history: Any = None  # run times of finished gangs (made on first use)
        self._clock_shift: float | None = None  # None: the scheduler runs without a clock
        if now is not None:
            t = parse_rfc3339(now)
            if t is None:
                raise SimulationError(f"--now: not an RFC 3339 time: {now!r}")
            self._clock_shift = t - (SIM_EPOCH.timestamp() + CLOCK_BASE + CLOCK_CYCLE)
        self.rejected: list[Rejection] = []
        self._rejected_seen: set[tuple[str, str, str, str]] = set()
        self.warnings: list[str] = list(inputs.warnings)
        self.outcomes: dict[str, Any] = {}
        self.unschedulable: dict[str, str] = {}
        self.cycle = 0
        self.round = 0
        self.known_times: set[str] = set()
        self.snapshot: Any = None
        self.session: Any = None
        self.scheduler_ran = False
        self._scheduler_conf_text = scheduler_conf
        self._scheduler_conf_source = scheduler_conf_source
        self.config: Any = None
        self._hn_status_signature: str | None = None
        self._node_labels: tuple[int, dict[str, dict[str, str]]] | None = None
        self._spec_models: dict[Key, tuple[dict[str, Any], TypedObject]] = {}
        self.admission = AdmissionCaches(self.objects, self._spec_model)
        # HyperNode members, resolved once and then only where nodes or HyperNodes changed;
        # shared by the HyperNode status pass and every scheduler cycle.
        self.members = MemberIndex()
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from scheduler_plugin.cache.cluster_state import ClusterState

        # The scheduler's cluster state (its own MemberIndex), kept across cycles.
        self.state = ClusterState(detach=True, members=self.members)
        self.verify_state = verify_state

    # --- clock ---------------------------------------------------------------------------

    @property
    def now(self) -> str:
        t = sim_time(CLOCK_BASE + self.cycle * CLOCK_CYCLE + self.round)
        self.known_times.add(t)
        return t

    def _runtime_history(self) -> Any:
        """The run times of finished gangs the scheduler learns, kept across cycles as its
        process keeps them."""
        if self.history is None:
            # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
            from scheduler_plugin.model.runtime_history import RuntimeHistory

            self.history = RuntimeHistory()
        return self.history

    def scheduler_clock(self) -> float:
        """The session's time in epoch seconds: the simulated now, shifted by ``--now`` and
        ``elapsed``."""
        shift = (self._clock_shift or 0.0) + self.elapsed
        return SIM_EPOCH.timestamp() + CLOCK_BASE + self.cycle * CLOCK_CYCLE + self.round + shift

    def _freeze_times(self, value: Any) -> Any:
        """Replace wall-clock timestamps another component produced by the simulated now."""
        if isinstance(value, dict):
            for k, v in value.items():
                if k in TIME_KEYS and isinstance(v, str) and v not in self.known_times:
                    value[k] = self.now
                else:
                    self._freeze_times(v)
        elif isinstance(value, list):
            for v in value:
                self._freeze_times(v)
        return value

    def _collect_times(self, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k in TIME_KEYS and isinstance(v, str):
                    self.known_times.add(v)
                else:
                    self._collect_times(v)
        elif isinstance(value, list):
            for v in value:
                self._collect_times(v)

    # --- state helpers ---------------------------------------------------------------------

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return self.objects.of_kind(kind)

    def models(self, model: type[M]) -> list[tuple[dict[str, Any], M]]:
        """(wire object, model) of every object of the model's kind.

        Admitted objects always parse; objects read from a live cluster skipped admission,
        so one that does not parse is left out with a warning instead of stopping the run.
        """
        kind = str(model.model_fields["kind"].default)
        out: list[tuple[dict[str, Any], M]] = []
        for o in self.of_kind(kind):
            try:
                out.append((o, model.model_validate(o)))
            except ValidationError as exc:
                lines = format_validation_error(exc)
                self._warn_once(f"{kind} {_ref(o)} is invalid and ignored: {'; '.join(lines[:3])}")
        return out

    def _spec_model(self, obj: dict[str, Any], model: type[M]) -> M | None:
        """The model of ``obj`` for admission caches, parsed once per object.

        Only the spec matters there (tree checks, partition sizes), and a spec change always
        replaces the dict, while status updates mutate it in place; so a model cached for
        this very dict stays right for admission. Parsing every HyperNode again for each
        of thousands of arriving objects would make admission quadratic.
        """
        k = key_of(obj)
        cached = self._spec_models.get(k)
        if cached is not None and cached[0] is obj:
            return cast(M, cached[1])
        try:
            m = model.model_validate(obj)
        except ValidationError:
            return None
        self._spec_models[k] = (obj, m)
        return m

    def _reject(self, obj: dict[str, Any], messages: Iterable[str], source: str | None) -> None:
        meta = obj.get("metadata") or {}
        r = Rejection(
            kind=str(obj.get("kind", "")),
            namespace=meta.get("namespace") or None,
            name=str(meta.get("name", "")),
            message="; ".join(messages) or "refused by admission",
            source=source,
        )
        ident = (r.kind, r.namespace or "", r.name, r.message)
        if ident not in self._rejected_seen:
            self._rejected_seen.add(ident)
            self.rejected.append(r)

    def _admission_context(self) -> Any:
        """AdmissionContext with the HyperNodes and Jobs the API server would hold now."""
        return self.admission.context()

    def _admit(
        self,
        obj: dict[str, Any],
        source: str | None,
        ctx: Any,
        operation: str = "CREATE",
        old: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The object after admission, or None (and a Rejection) when refused."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from webhooks.admission import admit

        out = admit(obj, operation=operation, old=old, ctx=ctx)
        for w in out.warnings:
            self._warn_once(f"{obj.get('kind')} {_ref(obj)}: {w}")
        if not out.allowed:
            self._reject(obj, out.messages, source)
            return None
        if obj.get("kind") == "Pod" and operation == "CREATE":
            refused = self._priority_admission(out.object)
            if refused:
                self._reject(obj, [refused], source)
                return None
        return out.object  # admit() returns a copy (the apiserver's view), never the input

    def _priority_admission(self, pod: dict[str, Any]) -> str | None:
        """The apiserver's Priority admission: a pod gets its PriorityClass's value as
        ``spec.priority`` and its ``preemptionPolicy`` (the cluster's globalDefault class, or
        priority 0 and PreemptLowerPriority, when it names none); a pod whose own value differs
        from the class's is refused with the apiserver's message. A class the input does not
        define is left unresolved with a warning (the apiserver would refuse the pod)."""
        spec = pod.setdefault("spec", {})
        classes = {str(pc["metadata"]["name"]): pc for pc in self.of_kind("PriorityClass")}
        for io in self.inputs.of_kind("PriorityClass"):  # defined later in the input
            classes.setdefault(str(io.obj["metadata"]["name"]), io.obj)
        name = spec.get("priorityClassName")
        policy: str | None = "PreemptLowerPriority"
        if not name:
            default = [pc for pc in classes.values() if pc.get("globalDefault")]
            value = int(default[-1].get("value") or 0) if default else 0
            if default:
                spec["priorityClassName"] = default[-1]["metadata"]["name"]
                policy = default[-1].get("preemptionPolicy") or policy
        elif name in classes:
            value = int(classes[name].get("value") or 0)
            policy = classes[name].get("preemptionPolicy") or policy
        elif name in BUILTIN_PRIORITY_CLASSES:
            value = BUILTIN_PRIORITY_CLASSES[name]
        else:
            self._warn_once(
                f"Pod {_ref(pod)}: no PriorityClass with name {name} was found; "
                "a cluster's apiserver would refuse the pod"
            )
            return None
        given = spec.get("priority")
        if given is not None and int(given) != value:
            return (
                f"spec.priority: the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name"
            )
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            return (
                f"spec.preemptionPolicy: the string value of PreemptionPolicy ({given_policy}) must not be "
                f"provided in pod spec; priority admission controller computed {policy} from the given "
                "PriorityClass name"
            )
        spec["priority"] = value
        spec["preemptionPolicy"] = policy
        return None

    def _add(self, obj: dict[str, Any], *, created: bool) -> None:
        k = key_of(obj)
        self.objects[k] = obj
        if created and k not in self.created and k not in self.original:
            self.created[k] = None

    # --- phases --------------------------------------------------------------------------------

    def admit_inputs(self) -> None:
        """Objects arrive: admission in input order, as ``kubectl apply`` of the files would."""
        objs: list[InputObject] = self.inputs.objects
        self.progress.start("admission", len(objs))
        ctx = None
        for io in objs:
            k = key_of(io.obj)
            # The input as given: read only from here on (the stored object is a copy).
            self.original[k] = io.obj
            self._collect_times(io.obj)
            if io.existing:
                self.objects[k] = clone(io.obj)
                self.input_order.append(k)
                self.progress.advance()
                if io.kind in ("HyperNode", "Job", "ConfigMap", "Queue"):
                    ctx = None  # the webhooks' caches must see it
                continue
            if ctx is None:
                ctx = self._admission_context()
            admitted = self._admit(io.obj, str(io.source), ctx)
            if admitted is not None:
                self.objects[k] = admitted
                self.input_order.append(k)
                if io.kind in ("HyperNode", "Job", "ConfigMap", "Queue"):
                    # The webhooks' caches: HyperNodes (tree checks), Jobs (pod webhook) and
                    # the discovery ConfigMap (tier names discovery will create).
                    ctx = None
            self.progress.advance()

    def _load_config(self) -> Any:
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG, ConfigError, load_scheduler_config

        text = self._scheduler_conf_text
        source = self._scheduler_conf_source
        if text is None and self.inputs.scheduler_conf is not None:
            text, source = self.inputs.scheduler_conf, self.inputs.scheduler_conf_source or "scheduler.conf"
        if text is None:
            from_cm = scheduler_conf_from_configmaps(self.inputs.objects)
            if from_cm is not None:
                text, source = from_cm
        if text is None:
            return DEFAULT_CONFIG
        try:
            return load_scheduler_config(text, source=source)
        except ConfigError as exc:  # its message names the source, the field and the line
            raise SimulationError(f"invalid scheduler configuration: {exc}") from None

    def _discovery(self) -> bool:
        """Label and (offline) UFM discovery, when a controller ConfigMap enables them."""
        cms = [
            o
            for o in self.of_kind("ConfigMap")
            if isinstance((o.get("data") or {}).get(CONTROLLER_CONF_KEY), str)
        ]
        if not cms:
            return False
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.hypernode.discovery import (
            DiscoveryConfigError,
            DiscoveryError,
            discover_offline,
            parse_discovery_config,
        )

        try:
            config = parse_discovery_config(cms[0])
        except DiscoveryConfigError as exc:
            self._warn_once(f"ConfigMap {namespaced_key(cms[0])}: {exc}")
            return False
        if config.enabled("label") is None and config.enabled("ufm") is None:
            return False
        existing = [hn for _, hn in self.models(HyperNode)]
        try:
            # Label discovery, and UFM discovery from a saved answer (endpoint file://PATH).
            result = discover_offline(config, self.of_kind("Node"), existing, self.rng)
        except DiscoveryError as exc:
            self._warn_once(f"HyperNode discovery: {exc}")
            return False
        for w in result.warnings:
            self._warn_once(f"HyperNode discovery: {w}")
        changed = False
        for name in result.delete:
            if self.objects.pop(("HyperNode", "", name), None) is not None:
                changed = True
        ctx = None
        for hn in result.create:
            obj = normalize(hn.to_dict(), namespaced=False)
            obj["metadata"].setdefault("creationTimestamp", self.now)
            ctx = ctx or self._admission_context()
            admitted = self._admit(obj, "HyperNode discovery", ctx)
            if admitted is not None:
                self._add(admitted, created=True)
                changed = True
                ctx = None
        for hn in result.update:
            obj = hn.to_dict()
            k = key_of(obj)
            if self.objects.get(k) != obj:
                self.objects[k] = obj
                changed = True
        return changed

    def _warn_once(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def _hypernode_status(self) -> bool:
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.hypernode.status import compute_all

        # Nodes are stored whole (never changed in place): their labels are read again only
        # when a Node was stored or removed since.
        node_writes = self.objects.version("Node")
        if self._node_labels is None or self._node_labels[0] != node_writes:
            self._node_labels = (node_writes, node_labels_of(self.of_kind("Node")))
        labels = self._node_labels[1]
        hn_objs = self.of_kind("HyperNode")

        # The controller reacts to Node and HyperNode changes; when neither the nodes nor any
        # HyperNode changed since the last pass, the status cannot change (resolving regex
        # members over thousands of nodes is the costly part).
        def signature() -> str:
            hns = [[o["metadata"]["name"], o.get("spec"), o.get("status")] for o in hn_objs]
            return json.dumps([node_writes, hns], sort_keys=True, default=str)

        if signature() == self._hn_status_signature:
            return False
        models = {hn.name: hn for _, hn in self.models(HyperNode)}
        changed = False
        # One shared index for the whole tree: members are resolved once, not once per ancestor.
        self.members.sync_nodes(labels)
        self.members.sync_hypernodes(models.values())
        statuses = compute_all(models, labels, now=self.now, members=self.members)
        for name, st in statuses.items():
            status = st.to_dict()
            obj = self.objects.get(("HyperNode", "", name))
            if obj is None:
                continue
            self._freeze_times(status)
            if obj.get("status") != status:
                obj["status"] = status
                changed = True
        self._hn_status_signature = signature()  # with the statuses just written
        return changed

    def _podgroup_named(self, ns: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(("PodGroup", ns, name))

    def _jobs(self) -> bool:
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.job.reconcile import find_podgroup, reconcile_job

        priority_classes = {
            str(pc["metadata"]["name"]): int(pc.get("value") or 0) for pc in self.of_kind("PriorityClass")
        }
        # A Job's pods name it in their controller ownerReference or job-name label (the
        # controller needs one of them to claim a pod), so hand each Job only those:
        # passing every pod of the namespace to every Job is quadratic on big inputs.
        pods_by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for p in self.of_kind("Pod"):
            meta = p["metadata"]
            ns = meta.get("namespace") or "default"
            names = {str(o.get("name")) for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"}
            label = (meta.get("labels") or {}).get(JOB_NAME_KEY)
            if label:
                names.add(str(label))
            for n in names:
                pods_by_job.setdefault((ns, n), []).append(p)
        changed = False
        ctx = None
        for jobj, job in self.models(Job):
            ns = job.namespace or "default"
            # <job>-<uid>, or a PodGroup under the legacy name (the job's own), as Volcano finds it.
            found = find_podgroup(job, functools.partial(self._podgroup_named, ns))
            pg_obj = cast("dict[str, Any] | None", found)
            pg_name = (
                str(pg_obj["metadata"]["name"])
                if pg_obj is not None
                else f"{job.name}-{job.metadata.uid or ''}"
            )
            try:
                pg = PodGroup.model_validate(pg_obj) if pg_obj is not None else None
            except ValidationError:
                self._warn_once(f"PodGroup {ns}/{pg_name} is invalid; the Job controller leaves it alone")
                continue
            r = reconcile_job(
                job, pg, pods_by_job.get((ns, job.name), []), now=self.now, priority_classes=priority_classes
            )
            desired = r.podgroup.to_dict()
            self._freeze_times(desired)
            if pg_obj is None:
                desired = normalize(desired, namespaced=True)
                desired["metadata"].setdefault("creationTimestamp", self.now)
                ctx = ctx or self._admission_context()
                admitted = self._admit(desired, f"Job {ns}/{job.name}", ctx)
                if admitted is not None:
                    self._add(admitted, created=True)
                    changed = True
            elif r.podgroup_changed and desired != pg_obj:
                self.objects[key_of(desired)] = desired
                changed = True
            for name in r.delete_pods:
                if self.objects.pop(("Pod", ns, name), None) is not None:
                    self.evictions.append(f"{ns}/{name}")
                    changed = True
            for pod in r.create_pods:
                pod = normalize(pod, namespaced=True)
                pod["metadata"].setdefault("creationTimestamp", self.now)
                ctx = ctx or self._admission_context()
                admitted = self._admit(pod, f"Job {ns}/{job.name}", ctx)
                if admitted is not None:
                    admitted.setdefault("status", {}).setdefault("phase", "Pending")
                    self._add(admitted, created=True)
                    pods_by_job.setdefault((ns, job.name), []).append(admitted)
                    changed = True
            status = r.status.to_dict()
            self._freeze_times(status)
            if jobj.get("status") != status:
                jobj["status"] = status
                changed = True
        return changed

    def _create_pod(self, pod: dict[str, Any], source: str) -> bool:
        """A pod a controller creates, through the pod webhooks as on an API server."""
        pod = normalize(pod, namespaced=True)
        pod["metadata"].setdefault("creationTimestamp", self.now)
        admitted = self._admit(pod, source, self._admission_context())
        if admitted is None:
            return False
        admitted.setdefault("status", {}).setdefault("phase", "Pending")
        self._add(admitted, created=True)
        return True

    def _workloads(self) -> bool:
        """Kubernetes' Job and StatefulSet controllers: the pods they would create (the
        PodGroup controller then groups them)."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from .workloads import (
            BATCH_JOB,
            JOBSET,
            LEADERWORKERSET,
            PYTORCHJOB,
            STATEFULSET,
            job_pods,
            jobset_jobs,
            lws_pods,
            pytorchjob_objects,
            statefulset_pods,
            statefulset_revision,
        )

        changed = False
        for js in self.of_kind(JOBSET):
            for job in jobset_jobs(js):
                if key_of(job) not in self.objects:
                    job = normalize(job, namespaced=True)
                    job["metadata"].setdefault("creationTimestamp", self.now)
                    self._add(job, created=True)
                    changed = True
        for lws in self.of_kind(LEADERWORKERSET):
            for pod in lws_pods(lws):
                if key_of(pod) not in self.objects:
                    changed = self._create_pod(pod, f"LeaderWorkerSet {_ref(lws)}") or changed
        for ptj in self.of_kind(PYTORCHJOB):
            pg, pods = pytorchjob_objects(ptj)
            if key_of(pg) not in self.objects:
                body = normalize(pg, namespaced=True)
                body["metadata"].setdefault("creationTimestamp", self.now)
                admitted = self._admit(body, f"PyTorchJob {_ref(ptj)}", self._admission_context())
                if admitted is not None:
                    self._add(admitted, created=True)
                    changed = True
            for pod in pods:
                if key_of(pod) not in self.objects:
                    changed = self._create_pod(pod, f"PyTorchJob {_ref(ptj)}") or changed
        for job in self.of_kind(BATCH_JOB):
            for pod in job_pods(job):
                ns = pod["metadata"]["namespace"]
                if ("Pod", ns, pod["metadata"]["name"]) not in self.objects:
                    changed = self._create_pod(pod, f"Job {_ref(job)}") or changed
        for sts in self.of_kind(STATEFULSET):
            ns = sts["metadata"].get("namespace") or "default"
            status = sts.setdefault("status", {})
            if status.get("updateRevision") != (rev := statefulset_revision(sts)):
                status["updateRevision"] = rev
                changed = True
            bound = {}
            for i in range(int((sts.get("spec") or {}).get("replicas", 1) or 0)):
                p = self.objects.get(("Pod", ns, f"{sts['metadata']['name']}-{i}"))
                bound[i] = bool(p and (p.get("spec") or {}).get("nodeName"))
            for pod in statefulset_pods(sts, bound):
                if ("Pod", ns, pod["metadata"]["name"]) not in self.objects:
                    changed = self._create_pod(pod, f"StatefulSet {_ref(sts)}") or changed
        return changed

    def _podgroups(self) -> bool:
        """The PodGroup controller for pods of any controlling owner (controller.podgroup): one
        PodGroup per owner, per JobSet or per LeaderWorkerSet group, the pods annotated with it;
        a training operator's PodGroup gets its networkTopology from its annotations. A bare pod
        keeps the scheduler's one-pod gang, as without the controller."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.podgroup.build import (
            LwsInfo,
            Owner,
            controller_ref,
            desired_podgroup,
            jobset_podgroup,
            lws_podgroup,
            operator_topology,
        )
        from hyperplace.kube.workloads import JOBSET_UID, controlled_podgroup_name, lws_group

        from .workloads import BATCH_JOB, LEADERWORKERSET, STATEFULSET

        changed = False
        for pg in self.of_kind("PodGroup"):
            # A training operator's PodGroup reads its topology annotations as its networkTopology
            # (hyperplace.api.topology_annotations); what could not be used is said here.
            _, problems = operator_topology(pg)
            for problem in problems:
                self._warn_once(f"PodGroup {_ref(pg)}: {problem.message}")
        tiers = self.admission.tier_names() or {}
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for p in self.of_kind("Pod"):
            meta = p["metadata"]
            if (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION) or controller_ref(p) is None:
                continue
            if (p.get("spec") or {}).get("schedulerName", DEFAULT_SCHEDULER_NAME) != DEFAULT_SCHEDULER_NAME:
                continue
            groups.setdefault(
                (meta.get("namespace") or "default", str(controlled_podgroup_name(p))), []
            ).append(p)
        kinds = {"Job": BATCH_JOB, "StatefulSet": STATEFULSET}
        for (ns, name), pods in groups.items():
            pod = max(
                pods, key=lambda p: (str(p["metadata"].get("creationTimestamp") or ""), p["metadata"]["name"])
            )
            labels = pod["metadata"].get("labels") or {}
            lws_of = lws_group(labels)
            if labels.get(JOBSET_UID):
                uid = labels[JOBSET_UID]
                jobs = [
                    j
                    for j in self.of_kind(BATCH_JOB)
                    if (j["metadata"].get("labels") or {}).get(JOBSET_UID) == uid
                ]
                special = jobset_podgroup(pod, jobs)
                if special is not None:
                    changed = self._store_podgroup(ns, special, pods, f"JobSet {ns}/{name}") or changed
                continue
            if lws_of is not None:
                lws_obj = self.objects.get((LEADERWORKERSET, ns, lws_of[0]))
                if lws_obj is not None:
                    lm = lws_obj["metadata"]
                    info = LwsInfo(
                        lws_of[0],
                        str(lm.get("uid")),
                        {str(k): str(v) for k, v in (lm.get("annotations") or {}).items()},
                        (lws_obj.get("spec") or {}).get("startupPolicy"),
                    )
                    special = lws_podgroup(pods, info, tiers.get)
                    if special is not None:
                        changed = (
                            self._store_podgroup(ns, special, pods, f"LeaderWorkerSet {ns}/{lws_of[0]}")
                            or changed
                        )
                continue
            ref = controller_ref(pod) or {}
            kind = (
                kinds.get(str(ref.get("kind")))
                if str(ref.get("apiVersion", "")).split("/")[0] in ("batch", "apps")
                else None
            )
            owner_obj = self.objects.get((kind, ns, str(ref.get("name")))) if kind else None
            owner = Owner(str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid")))
            if owner_obj is not None:
                spec = owner_obj.get("spec") or {}
                if kind == BATCH_JOB:
                    n = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
                    replicas = n if spec.get("completions") is None else min(n, int(spec["completions"]))
                else:
                    replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
                ann = {
                    str(k): str(v)
                    for k, v in ((owner_obj.get("metadata") or {}).get("annotations") or {}).items()
                }
                owner = Owner(owner.kind, owner.name, owner.uid, ann, replicas)
            want = desired_podgroup(pod, owner)
            changed = self._store_podgroup(ns, want, pods, f"{owner.kind} {ns}/{owner.name}") or changed
        return changed

    def _store_podgroup(self, ns: str, want: Any, pods: list[dict[str, Any]], source: str) -> bool:
        """Create or update the PodGroup the PodGroup controller wants and name it on its pods;
        an annotation it could not use is a warning and the PodGroup's InvalidAnnotation condition."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.podgroup.build import invalid_condition, needs_update, updated, with_condition

        for problem in want.problems:
            self._warn_once(f"Pod {ns}/{pods[0]['metadata']['name']}: {problem.message}")
        cond = invalid_condition(want.problems, self.now)
        existing = self.objects.get(("PodGroup", ns, want.name))
        if existing is None:
            body = normalize({**want.podgroup, "status": with_condition(None, cond)}, namespaced=True)
            body["metadata"].setdefault("creationTimestamp", self.now)
            admitted = self._admit(body, source, self._admission_context())
            if admitted is None:
                return False
            admitted.setdefault("status", with_condition(None, cond))
            self._add(admitted, created=True)
        elif needs_update(existing, want):
            new = updated(existing, want)
            new["status"] = with_condition(existing.get("status"), cond)
            self.objects[key_of(new)] = new
        for p in pods:
            p["metadata"].setdefault("annotations", {})[GROUP_NAME_ANNOTATION] = want.name
        return True

    def _queues(self) -> bool:
        """The queue controller: state and PodGroup counts of every Queue."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from controller.queue.status import owned_part, podgroup_queue, queue_status

        by_queue: dict[str, list[dict[str, Any]]] = {}
        for pg in self.of_kind("PodGroup"):
            by_queue.setdefault(podgroup_queue(pg), []).append(pg)
        changed = False
        for q in self.of_kind("Queue"):
            name = str((q.get("metadata") or {}).get("name"))
            want = queue_status(q, by_queue.get(name, []))
            if owned_part(q.get("status")) != want:
                q["status"] = {**(q.get("status") or {}), **want}
                changed = True
        return changed

    def reconcile(self) -> bool:
        """Controllers, round after round, until none of them changes anything.

        Returns whether anything changed.
        """
        self.progress.start(f"cycle {self.cycle}: controllers", None)
        any_change = False
        for self.round in range(MAX_CONTROLLER_ROUNDS):
            changed = self._discovery()
            changed = self._hypernode_status() or changed
            changed = self._jobs() or changed
            changed = self._workloads() or changed
            changed = self._podgroups() or changed
            changed = self._queues() or changed
            self.progress.advance()
            if not changed:
                return any_change
            any_change = True
        self._warn_once(f"controllers did not settle within {MAX_CONTROLLER_ROUNDS} rounds")
        return any_change

    def _session_can_change_anything(self) -> bool:
        """False when no pod is pending and every PodGroup already has the scheduler's
        verdict: a session then binds nothing and reports what it reported before, so the
        (costly, on big clusters) snapshot is not rebuilt."""
        for p in self.of_kind("Pod"):
            if (
                not (p.get("spec") or {}).get("nodeName")
                and (p.get("status") or {}).get("phase") == "Pending"
            ):
                return True
        return any(namespaced_key(pg) not in self.outcomes for pg in self.of_kind("PodGroup"))

    def schedule(self) -> bool:
        """One scheduler session; returns whether it changed anything (bindings, PodGroups)."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from scheduler_plugin.cache.rebuild import build_snapshot
        from scheduler_plugin.cycle import run_session
        from scheduler_plugin.cycle.carried import verify_state

        if self.config is None:
            self.config = self._load_config()
        pods = self.of_kind("Pod")
        self.progress.start(f"cycle {self.cycle}: scheduling {len(pods)} pods", None)
        # The scheduler's state is kept across cycles and brought up to date with what changed
        # (the simulator edits objects in place, so the state compares contents).
        nodes, hns = self.of_kind("Node"), [m for _, m in self.models(HyperNode)]
        pgs, queues = [m for _, m in self.models(PodGroup)], [m for _, m in self.models(Queue)]
        pcs = self.of_kind("PriorityClass")
        pdbs, quotas = self.of_kind("PodDisruptionBudget"), self.of_kind("ResourceQuota")
        self.state.replace_all(nodes, pods, hns, pgs, queues, pcs, pdbs, quotas)
        snap = self.state.snapshot()
        if self.verify_state:
            rebuilt = build_snapshot(
                nodes=nodes,
                pods=pods,
                hypernodes=hns,
                podgroups=pgs,
                queues=queues,
                priority_classes=pcs,
                pdbs=pdbs,
                quotas=quotas,
            )
            verify_state(self.state, snap, rebuilt)
        # Candidates are recorded for ``explain`` (bounded per tier; the decisions are the same).
        result = run_session(
            snap,
            config=self.config,
            nominations=self.nominations,
            record_candidates=True,
            now=self.scheduler_clock(),
            reserve=self._clock_shift is not None,
            reservations=self.reservations,
            history=self._runtime_history(),
        )
        self.reservations = dict(result.reservations)
        self.snapshot, self.session, self.scheduler_ran = snap, result, True
        # Victims are evicted at once (the simulator has no grace period): their room is free in
        # the next cycle, where the preemptor binds on its nominated nodes; a Job's controller
        # recreates its evicted pods, pending.
        self.nominations = dict(result.nominations)
        for ev in result.evictions:
            ns, _, name = ev.victim.partition("/")
            if self.objects.pop(("Pod", ns, name), None) is not None:
                self.evictions.append(ev.victim)
                self.preemptions.append(ev)
                self.bindings.pop(ev.victim, None)
        for jkey, nom in result.nominations.items():
            self.preemption_reasons[jkey] = nom.reason
        before = {namespaced_key(pg): _strip_times(pg) for pg in self.of_kind("PodGroup")}
        bound = 0
        for pod_key, node in result.bindings.items():
            ns, _, name = pod_key.partition("/")
            pod = self.objects.get(("Pod", ns, name))
            if pod is None or (pod.get("spec") or {}).get("nodeName"):
                continue
            pod.setdefault("spec", {})["nodeName"] = node
            status = pod.setdefault("status", {})
            status["phase"] = "Running"
            # As the apiserver's binding does: PodScheduled True from now (the cooldown of
            # volcano.sh/cooldown-time counts from it), and the kubelet's start time.
            since = rfc3339(self.scheduler_clock())
            status["conditions"] = [
                *(c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"),
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": since},
            ]
            status.setdefault("startTime", since)
            self.bindings[pod_key] = node
            self.bound_in_cycle[pod_key] = self.cycle
            self.unschedulable.pop(pod_key, None)
            bound += 1
        for pod_key, reason in result.unschedulable.items():
            if pod_key not in self.bindings:
                self.unschedulable[pod_key] = reason
        for pg_key, outcome in result.jobs.items():
            prev = self.outcomes.get(pg_key)
            earlier = prev.candidates if prev is not None and prev.phase == "Running" else None
            if outcome.candidates is not None:
                # More pods of a running job: the search that chose its domain came earlier.
                found = outcome.candidates
                outcome = result.own_job(pg_key)
                outcome.candidates = found.after(earlier)
            elif outcome.phase == "Running":
                # Settled since: the domain search that placed it was an earlier cycle's.
                outcome = result.own_job(pg_key)
                outcome.candidates = earlier
            self.outcomes[pg_key] = outcome
            ns, _, name = pg_key.partition("/")
            pg = self.objects.get(("PodGroup", ns, name))
            if pg is None:
                continue
            status = pg.setdefault("status", {})
            if outcome.pg_phase or outcome.phase:
                status["phase"] = outcome.pg_phase or outcome.phase
            if outcome.conditions is not None:
                # The PodGroup controller's condition stays (the reporter keeps it too).
                kept = [c for c in status.get("conditions") or [] if c.get("type") == "InvalidAnnotation"]
                conds = self._freeze_times(copy.deepcopy(list(outcome.conditions)))
                status["conditions"] = [*kept, *conds] or None
                if status["conditions"] is None:
                    del status["conditions"]
            if outcome.allocated_hypernode:
                pg.setdefault("metadata", {}).setdefault("annotations", {})[
                    JOB_ALLOCATED_HYPERNODE_ANNOTATION
                ] = outcome.allocated_hypernode
        # The scheduler's part of Queue status.
        for q in self.of_kind("Queue"):
            qo = result.queues.get(str((q.get("metadata") or {}).get("name")))
            if qo is not None:
                q.setdefault("status", {})["allocated"] = qo.to_dict()["allocated"]
        after = {namespaced_key(pg): _strip_times(pg) for pg in self.of_kind("PodGroup")}
        return bound > 0 or before != after or bool(result.evictions)

    def run(self, cycles: int | None = None) -> SimResult:
        """Run ``cycles`` cycles, or until a cycle changes nothing (at most 10)."""
        self.admit_inputs()
        limit = cycles if cycles is not None else DEFAULT_MAX_CYCLES
        ran = 0
        for c in range(1, limit + 1):
            self.cycle, self.round = c, 0
            changed = self.reconcile()
            if c == 1 or self._session_can_change_anything():
                changed = self.schedule() or changed
            ran = c
            if cycles is None and not changed:
                break
        # A last controller pass so Job status reflects the final bindings.
        self.cycle, self.round = ran + 1, 0
        self.reconcile()
        return self.result(ran)

    def result(self, cycles: int) -> SimResult:
        """The SimResult after ``cycles`` cycles."""
        updated = [
            k for k in self.input_order if k in self.objects and self.objects[k] != self.original.get(k)
        ]
        return SimResult(
            objects=self.objects,
            bindings=self.bindings,
            bound_in_cycle=self.bound_in_cycle,
            evictions=self.evictions,
            rejected=self.rejected,
            warnings=self.warnings,
            created=[k for k in self.created if k in self.objects],
            updated=updated,
            outcomes=self.outcomes,
            unschedulable={
                k: v for k, v in self.unschedulable.items() if ("Pod", *k.split("/", 1)) in self.objects
            },
            cycles=cycles,
            scheduler_ran=self.scheduler_ran,
            notes=list(getattr(self.session, "notes", None) or []),
            preemptions=list(self.preemptions),
            preemption_reasons=dict(self.preemption_reasons),
            snapshot=self.snapshot,
            session=self.session,
            hypernodes=[
                m for o in self.of_kind("HyperNode") if (m := self._spec_model(o, HyperNode)) is not None
            ],
        )


def _ref(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def simulate(
    inputs: Inputs,
    *,
    cycles: int | None = None,
    seed: int = 0,
    scheduler_conf: str | None = None,
    scheduler_conf_source: str = "--scheduler-config",
    progress: Progress | None = None,
    elapsed: float = 0.0,
    now: str | None = None,
) -> SimResult:
    """Run a simulation of ``inputs`` (see the module docstring)."""
    sim = Simulation(
        inputs,
        scheduler_conf=scheduler_conf,
        scheduler_conf_source=scheduler_conf_source,
        seed=seed,
        progress=progress,
        elapsed=elapsed,
        now=now,
    )
    return sim.run(cycles)


__all__ = [
    "DEFAULT_MAX_CYCLES",
    "Rejection",
    "SimResult",
    "Simulation",
    "SimulationError",
    "deterministic_uid",
    "simulate",
]
