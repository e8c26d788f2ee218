"""Admission on the simulated API server: what ``kubectl apply`` of an object, or a
controller's create, goes through before the object is stored.

The webhooks (mutating, CRD schema and CEL, validating; ``webhooks.admission``) see the
caches a webhook server would hold (:class:`AdmissionCaches`), and pods then pass the
apiserver's Priority admission. A refused object is recorded as a :class:`Rejection`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from hyperplace.api import HyperNode, Job, Queue, TypedObject, format_validation_error
from hyperplace.api.workload import UpstreamPodGroup, Workload, is_upstream
from hyperplace.runtime.api import object_key

from .loader import Inputs, controller_conf_configmap
from .result import Rejection
from .store import Key, ObjectStore, key_of

M = TypeVar("M", bound=TypedObject)

# The PriorityClasses every cluster has (kube-apiserver creates them).
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


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

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._spec_models: dict[Key, tuple[dict[str, Any], TypedObject]] = {}
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

    def spec_model(self, obj: dict[str, Any], model: type[M]) -> M | None:
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
            m = self.spec_model(obj, model) if obj is not None else None
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
    cm = controller_conf_configmap(store.of_kind("ConfigMap"))
    if cm is None:
        return None
    # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
    from controller.hypernode.discovery import (
        DiscoveryConfigError,
        discovered_tier_names,
        parse_discovery_config,
    )

    try:
        source = parse_discovery_config(cm).enabled("label")
    except DiscoveryConfigError:
        return None
    if source is None:
        return None
    return discovered_tier_names(source.config)


class Admission:
    """Admission in front of the store: the webhooks with their caches, then, for pods, the
    apiserver's Priority admission. What it refuses is kept in :attr:`rejected` (each refusal
    once, in order); what it warns about goes to ``warn``."""

    def __init__(self, store: ObjectStore, inputs: Inputs, warn: Callable[[str], None]) -> None:
        """``inputs``: the simulation's input (PriorityClasses defined later in it already
        count for a pod, as ``kubectl apply`` of the files would make them exist)."""
        self._store = store
        self._inputs = inputs
        self._warn = warn
        self.caches = AdmissionCaches(store)
        self.rejected: list[Rejection] = []
        self._rejected_seen: set[tuple[str, str, str, str]] = set()

    def admit(self, obj: dict[str, Any], source: str | None) -> dict[str, Any] | None:
        """The object after admission of its CREATE, or None (and a Rejection) when refused."""
        # lazy: 'hyperplace --help' and 'validate' load neither numpy nor the other components
        from webhooks.admission import admit

        schema = upstream_schema_refusals(obj)
        if schema:
            self._reject(obj, schema, source)
            return None
        out = admit(obj, operation="CREATE", old=None, ctx=self.caches.context())
        for w in out.warnings:
            self._warn(f"{obj.get('kind')} {object_key(obj)}: {w}")
        if not out.allowed:
            self._reject(obj, out.messages, source)
            return None
        if obj.get("kind") == "Pod":
            refused = self._priority_admission(out.object)
            if refused:
                self._reject(obj, [refused], source)
                return None
        return out.object  # admit() returns a copy (the apiserver's view), never the input

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

    def _priority_admission(self, pod: dict[str, Any]) -> str | None:
        """The apiserver's Priority admission: a pod gets its PriorityClass's value as
        ``spec.priority`` and its ``preemptionPolicy`` (the cluster's globalDefault class, or
        priority 0 and PreemptLowerPriority, when it names none); a pod whose own value differs
        from the class's is refused with the apiserver's message. A class the input does not
        define is left unresolved with a warning (the apiserver would refuse the pod)."""
        spec = pod.setdefault("spec", {})
        classes = {str(pc["metadata"]["name"]): pc for pc in self._store.of_kind("PriorityClass")}
        for io in self._inputs.of_kind("PriorityClass"):  # defined later in the input
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
            self._warn(
                f"Pod {object_key(pod)}: no PriorityClass with name {name} was found; "
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


def upstream_schema_refusals(obj: dict[str, Any]) -> list[str]:
    """What kube-apiserver 1.37's validation says of a ``scheduling.k8s.io/v1beta1`` PodGroup or
    Workload (built-in kinds, no webhook of ours), each naming the field; [] for other kinds."""
    if not is_upstream(obj) or obj.get("kind") not in ("PodGroup", "Workload"):
        return []
    model = UpstreamPodGroup if obj.get("kind") == "PodGroup" else Workload
    try:
        model.model_validate(obj)
    except ValidationError as exc:
        return format_validation_error(exc)
    return []
