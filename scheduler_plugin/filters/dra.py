"""Dynamic Resource Allocation (``resource.k8s.io/v1``) as the DynamicResources filter reads it:
DeviceClasses, ResourceSlices, ResourceClaims and their templates in wire form, each parsed once
into frozen records (a ``bad`` message names the field of what cannot be read), the claims a pod
names, and :class:`DraObjects`, the cycle's view of them: the pools gathered as kube-scheduler's
structured allocator gathers them (``GatherPools``: the newest generation of a pool; a pool with
fewer slices than ``resourceSliceCount`` is incomplete; duplicate device names make it invalid),
the devices each node reaches, and the devices allocated claims hold.

Attribute and capacity names are kept fully qualified (``domain/name``): a name without a domain
is the slice's driver's, as Go qualifies it. Capacities are milli-units (integers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from hyperplace.kube.quantity import QuantityError, milli_value

from .dra_cel import Version, compile_selector, parse_semver
from .dra_cel import selector_matches as cel_selector_matches
from .node_affinity import node_selector_term_matches_node
from .nodes import NodeStatic
from .plugin import freeze

DeviceId = tuple[str, str, str]  # (driver, pool, device)
ALLOCATION_RESULTS_MAX = 32  # resourceapi.AllocationResultsMaxSize


def qualify(name: str, driver: str) -> str:
    """A fully qualified attribute or capacity name (the driver's domain when it has none)."""
    return name if "/" in name else f"{driver}/{name}"


# ---------------------------------------------------------------------------------- devices
@dataclass(frozen=True)
class DeviceInfo:
    """One device of a ResourceSlice."""

    name: str
    driver: str
    pool: str
    attributes: Mapping[str, object] = field(hash=False, compare=False, default_factory=dict)
    capacity: Mapping[str, int] = field(hash=False, compare=False, default_factory=dict)  # milli-units
    selectable: bool = True  # False: a feature this scheduler does not allocate (counters, binding)
    # (key, value, effect) of the taints that keep a device from being allocated
    # (NoSchedule, NoExecute); other effects are ignored, as in Go.
    taints: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)

    @property
    def id(self) -> DeviceId:
        return (self.driver, self.pool, self.name)


@dataclass(frozen=True)
class SliceInfo:
    """A ResourceSlice: its pool, which nodes it serves, and its devices."""

    name: str
    driver: str = ""
    pool: str = ""
    generation: int = 0
    slice_count: int = 1
    node_name: str | None = None
    node_selector: Any = None  # frozen wire NodeSelector
    all_nodes: bool = False
    devices: tuple[DeviceInfo, ...] = ()
    ignored: bool = False  # per-device node selection or shared counters: not gathered
    bad: str | None = None

    def reaches(self, node: NodeStatic) -> bool:
        """``NodeMatches``: the slice's devices are usable from ``node``."""
        if self.node_name is not None:
            return node.name == self.node_name
        if self.all_nodes:
            return True
        if self.node_selector is not None:
            return selector_matches(self.node_selector, node)
        return False


def selector_matches(selector: Any, node: NodeStatic) -> bool:
    """A wire (or frozen) NodeSelector: any term matches."""
    return node_selector_matcher(selector)(node)


def node_selector_matcher(selector: Any) -> Callable[[NodeStatic], bool]:
    """:func:`selector_matches` with the selector read once, to judge many nodes."""
    sel = thaw(selector)
    terms = (sel.get("nodeSelectorTerms") if isinstance(sel, Mapping) else None) or []
    return lambda node: any(node_selector_term_matches_node(t, node.name, node.labels) for t in terms)


def thaw(value: Any) -> Any:
    """The JSON-like value :func:`.plugin.freeze` made hashable (maps were sorted pairs)."""
    if isinstance(value, tuple):
        if value and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in value):
            return {k: thaw(v) for k, v in value}
        return [thaw(v) for v in value]
    return value


def _attribute(raw: Any) -> object:
    if not isinstance(raw, Mapping):
        raise ValueError("must be an object")
    for kind in ("int", "bool", "string", "version"):
        if kind in raw and raw[kind] is not None:
            v = raw[kind]
            if kind == "int":
                if isinstance(v, bool) or not isinstance(v, int):
                    raise ValueError("int: must be an integer")
                return v
            if kind == "bool":
                if not isinstance(v, bool):
                    raise ValueError("bool: must be a boolean")
                return v
            if kind == "string":
                return str(v)
            key = parse_semver(str(v))
            if key is None:
                raise ValueError(f"version: {v!r} is not a semantic version")
            return Version(str(v), key)
    raise ValueError("exactly one of int, bool, string or version is required")


def parse_slice(obj: Mapping[str, Any]) -> SliceInfo:
    """A ResourceSlice in wire form."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    spec = obj.get("spec") or {}
    owner = f"resourceslice {name}"
    driver = str(spec.get("driver") or "")
    pool = spec.get("pool") or {}
    base = SliceInfo(
        name=name,
        driver=driver,
        pool=str(pool.get("name") or ""),
        generation=int(pool.get("generation") or 0),
        slice_count=int(pool.get("resourceSliceCount") or 1),
        node_name=str(spec["nodeName"]) if spec.get("nodeName") else None,
        node_selector=freeze(spec["nodeSelector"]) if spec.get("nodeSelector") else None,
        all_nodes=bool(spec.get("allNodes")),
        ignored=bool(spec.get("perDeviceNodeSelection")) or bool(spec.get("sharedCounters")),
    )
    devices: list[DeviceInfo] = []
    for i, d in enumerate(spec.get("devices") or []):
        where = f"{owner}: spec.devices[{i}]"
        if not isinstance(d, Mapping) or not d.get("name"):
            return SliceInfo(**{**base.__dict__, "bad": f"{where}.name: required"})
        attrs: dict[str, object] = {}
        for k, v in (d.get("attributes") or {}).items():
            try:
                attrs[qualify(str(k), driver)] = _attribute(v)
            except ValueError as exc:
                return SliceInfo(**{**base.__dict__, "bad": f"{where}.attributes[{k}]: {exc}"})
        caps: dict[str, int] = {}
        for k, v in (d.get("capacity") or {}).items():
            try:
                caps[qualify(str(k), driver)] = milli_value((v or {}).get("value", 0))
            except (QuantityError, AttributeError, TypeError) as exc:
                return SliceInfo(**{**base.__dict__, "bad": f"{where}.capacity[{k}].value: {exc}"})
        selectable = not d.get("consumesCounters") and not d.get("bindingConditions")
        taints = tuple(
            (str(t.get("key") or ""), str(t.get("value") or ""), str(t["effect"]))
            for t in d.get("taints") or []
            if isinstance(t, Mapping) and t.get("effect") in ("NoSchedule", "NoExecute")
        )
        devices.append(DeviceInfo(str(d["name"]), driver, base.pool, attrs, caps, selectable, taints))
    return SliceInfo(**{**base.__dict__, "devices": tuple(devices)})


# ---------------------------------------------------------------------------------- taint rules
TAINT_EFFECTS = ("NoSchedule", "NoExecute")  # the effects that keep a device from allocation


@dataclass(frozen=True)
class TaintRule:
    """A DeviceTaintRule (``resource.k8s.io/v1``): its taint on the devices its selector picks
    (an unset driver, pool or device name picks every one; no selector picks none)."""

    name: str
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    taint: tuple[str, str, str] | None = None  # (key, value, effect); None: picks nothing
    bad: str | None = None


def parse_taint_rule(obj: Mapping[str, Any]) -> TaintRule:
    """A DeviceTaintRule in wire form."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    spec = obj.get("spec") or {}
    sel = spec.get("deviceSelector")
    taint = spec.get("taint") or {}
    if not isinstance(sel, Mapping) or not isinstance(taint, Mapping):
        return TaintRule(name)  # no selector: no device (as the scheduler's slice tracker reads it)
    if not taint.get("key") or not taint.get("effect"):
        return TaintRule(
            name, bad=f"devicetaintrule {name}: spec.taint.key and spec.taint.effect are required"
        )

    def opt(k: str) -> str | None:
        v = sel.get(k)
        return None if v is None else str(v)

    t = (str(taint["key"]), str(taint.get("value") or ""), str(taint["effect"]))
    return TaintRule(name, opt("driver"), opt("pool"), opt("device"), t)


def apply_taint_rules(
    slices: Mapping[str, SliceInfo], rules: Mapping[str, TaintRule]
) -> dict[str, SliceInfo]:
    """The slices with the taints of the rules added to the devices they pick, as
    kube-scheduler's slice tracker patches them (only the effects that keep a device from
    allocation matter here); slices no rule touches are the same objects."""
    live = [
        r
        for _, r in sorted(rules.items())
        if r.taint is not None and r.bad is None and r.taint[2] in TAINT_EFFECTS
    ]
    if not live:
        return dict(slices)
    out: dict[str, SliceInfo] = {}
    for key, s in slices.items():
        mine = [
            r
            for r in live
            if (r.driver is None or r.driver == s.driver) and (r.pool is None or r.pool == s.pool)
        ]
        if not mine or not s.devices:
            out[key] = s
            continue
        devices = []
        for d in s.devices:
            extra = tuple(
                r.taint for r in mine if r.taint is not None and (r.device is None or r.device == d.name)
            )
            devices.append(replace(d, taints=d.taints + extra) if extra else d)
        out[key] = replace(s, devices=tuple(devices))
    return out


# ---------------------------------------------------------------------------------- classes
@dataclass(frozen=True)
class DeviceClassInfo:
    """A DeviceClass: the selectors every device of it passes, and its configuration."""

    name: str
    selectors: tuple[str, ...] = ()
    config: tuple[Any, ...] = ()  # frozen wire DeviceClassConfiguration entries
    bad: str | None = None
    # spec.extendedResourceName: pods asking this extended resource may be given the class's
    # devices (Kubernetes 1.37's DRAExtendedResource; not allocated here, see the notes).
    extended_resource: str | None = None


def _selectors(raw: Any, where: str) -> tuple[tuple[str, ...], str | None]:
    """The CEL expressions of ``selectors``, each compiled here once so that one that does not
    compile is named by its field (the API server refuses it; kube-scheduler's allocator would
    report ``CEL compile error`` for it)."""
    out: list[str] = []
    for i, s in enumerate(raw or []):
        expr = ((s or {}).get("cel") or {}).get("expression") if isinstance(s, Mapping) else None
        if not expr:
            return (), f"{where}[{i}].cel.expression: required (CEL is the only selector)"
        compiled = compile_selector(str(expr))
        if isinstance(compiled, str):
            return (), f"{where}[{i}].cel.expression: {compiled}"
        out.append(str(expr))
    return tuple(out), None


def parse_device_class(obj: Mapping[str, Any]) -> DeviceClassInfo:
    """A DeviceClass in wire form."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    spec = obj.get("spec") or {}
    sels, bad = _selectors(spec.get("selectors"), f"deviceclass {name}: spec.selectors")
    ext = spec.get("extendedResourceName")
    return DeviceClassInfo(
        name, sels, tuple(freeze(c) for c in spec.get("config") or []), bad, str(ext) if ext else None
    )


# ---------------------------------------------------------------------------------- claims
@dataclass(frozen=True)
class Request:
    """A request, or one subrequest of ``firstAvailable`` (``name`` then ``<request>/<sub>``)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = "ExactCount"  # or "All"
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[Any, ...] = ()  # frozen wire DeviceTolerations

    def tolerates(self, taint: tuple[str, str, str]) -> bool:
        """Some toleration tolerates the taint (``resourceclaim.ToleratesTaint``)."""
        key, value, effect = taint
        for t in self.tolerations:
            tol = thaw(t)
            if tol.get("effect") and tol["effect"] != effect:
                continue
            if tol.get("key") and tol["key"] != key:
                continue
            op = tol.get("operator") or "Equal"
            if op == "Exists" or (op == "Equal" and (tol.get("value") or "") == value):
                return True
        return False


@dataclass(frozen=True)
class RequestSpec:
    """One entry of ``spec.devices.requests``: exactly one request, or the alternatives."""

    name: str
    alternatives: tuple[Request, ...]  # one for ``exactly``; the subrequests in order otherwise
    first_available: bool = False


@dataclass(frozen=True)
class Constraint:
    """``matchAttribute`` over some requests (empty: all of the claim's)."""

    requests: frozenset[str]
    attribute: str


@dataclass(frozen=True)
class ClaimSpec:
    """A claim's ``spec.devices``, hashable: claims of one template have equal specs."""

    requests: tuple[RequestSpec, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    config: tuple[Any, ...] = ()  # frozen wire DeviceClaimConfiguration entries
    bad: str | None = None

    @property
    def signature(self) -> ClaimSpec:
        """The spec itself (frozen and hashable)."""
        return self

    @property
    def classes(self) -> tuple[tuple[str, str], ...]:
        """(request name as kube-scheduler's PreFilter names it, device class) of every request."""
        out: list[tuple[str, str]] = []
        for r in self.requests:
            for a in r.alternatives:
                out.append((a.name, a.device_class))
        return tuple(out)


def _request(raw: Mapping[str, Any], name: str, where: str) -> Request | str:
    mode = str(raw.get("allocationMode") or "ExactCount")
    if mode not in ("ExactCount", "All"):
        return f"{where}.allocationMode: unsupported value {mode!r}"
    count = raw.get("count", 1) if mode == "ExactCount" else 0
    if mode == "ExactCount" and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        return f"{where}.count: must be a positive integer"
    sels, bad = _selectors(raw.get("selectors"), f"{where}.selectors")
    if bad is not None:
        return bad
    if not raw.get("deviceClassName"):
        return f"request {name}: unsupported request type"
    tolerations = tuple(freeze(t) for t in raw.get("tolerations") or [] if isinstance(t, Mapping))
    return Request(
        name,
        str(raw["deviceClassName"]),
        sels,
        mode,
        int(count or 0),
        bool(raw.get("adminAccess")),
        tolerations,
    )


def parse_claim_spec(spec: Mapping[str, Any], owner: str) -> ClaimSpec:
    """``spec`` of a ResourceClaim (or ``spec.spec`` of a template); ``owner`` names it in errors."""
    devices = spec.get("devices") or {}
    reqs: list[RequestSpec] = []
    for i, r in enumerate(devices.get("requests") or []):
        where = f"{owner}: spec.devices.requests[{i}]"
        if not isinstance(r, Mapping) or not r.get("name"):
            return ClaimSpec(bad=f"{where}.name: required")
        name = str(r["name"])
        if isinstance(r.get("exactly"), Mapping):
            got = _request(r["exactly"], name, f"{where}.exactly")
            if isinstance(got, str):
                return ClaimSpec(bad=got)
            reqs.append(RequestSpec(name, (got,)))
        elif r.get("firstAvailable"):
            subs: list[Request] = []
            for j, s in enumerate(r["firstAvailable"]):
                if not isinstance(s, Mapping) or not s.get("name"):
                    return ClaimSpec(bad=f"{where}.firstAvailable[{j}].name: required")
                got = _request(s, f"{name}/{s['name']}", f"{where}.firstAvailable[{j}]")
                if isinstance(got, str):
                    return ClaimSpec(bad=got)
                subs.append(got)
            reqs.append(RequestSpec(name, tuple(subs), first_available=True))
        else:
            return ClaimSpec(bad=f"resource claim {owner}, request {name}: unknown request type")
    cons: list[Constraint] = []
    for i, c in enumerate(devices.get("constraints") or []):
        attr = c.get("matchAttribute") if isinstance(c, Mapping) else None
        if not attr:
            return ClaimSpec(bad=f"{owner}: spec.devices.constraints[{i}].matchAttribute: required")
        cons.append(Constraint(frozenset(str(x) for x in c.get("requests") or []), str(attr)))
    config = tuple(freeze(c) for c in devices.get("config") or [])
    return ClaimSpec(tuple(reqs), tuple(cons), config)


@dataclass(frozen=True)
class ResultInfo:
    """One allocated device (``status.allocation.devices.results[]``)."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    tolerations: tuple[Any, ...] = ()  # frozen wire: the request's, as Go copies them


@dataclass(frozen=True)
class AllocationInfo:
    """A claim's ``status.allocation``."""

    results: tuple[ResultInfo, ...]
    node_selector: Any = None  # frozen wire NodeSelector; None: every node
    config: tuple[Any, ...] = ()  # frozen wire DeviceAllocationConfiguration entries


@dataclass(frozen=True)
class ClaimInfo:
    """A ResourceClaim: its spec, allocation and consumers."""

    namespace: str
    name: str
    uid: str = ""
    spec: ClaimSpec = ClaimSpec()
    allocation: AllocationInfo | None = None
    reserved_for: tuple[tuple[str, str, str], ...] = ()  # (resource, name, uid)
    deleting: bool = False
    owner_pod_uid: str | None = None  # the uid of its controlling Pod
    bad: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_allocation(raw: Mapping[str, Any]) -> AllocationInfo:
    """``status.allocation`` in wire form."""
    devices = raw.get("devices") or {}
    results = tuple(
        ResultInfo(
            str(r.get("request") or ""),
            str(r.get("driver") or ""),
            str(r.get("pool") or ""),
            str(r.get("device") or ""),
            bool(r.get("adminAccess")),
            tuple(freeze(t) for t in r.get("tolerations") or []),
        )
        for r in devices.get("results") or []
        if isinstance(r, Mapping)
    )
    sel = raw.get("nodeSelector")
    return AllocationInfo(
        results, freeze(sel) if sel else None, tuple(freeze(c) for c in devices.get("config") or [])
    )


def parse_claim(obj: Mapping[str, Any]) -> ClaimInfo:
    """A ResourceClaim in wire form."""
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    status = obj.get("status") or {}
    owner = next(
        (
            str(o.get("uid") or "")
            for o in meta.get("ownerReferences") or []
            if isinstance(o, Mapping) and o.get("kind") == "Pod" and o.get("controller")
        ),
        None,
    )
    alloc = status.get("allocation")
    spec = parse_claim_spec(obj.get("spec") or {}, f"resourceclaim {ns}/{name}")
    return ClaimInfo(
        namespace=ns,
        name=name,
        uid=str(meta.get("uid") or ""),
        spec=spec,
        allocation=parse_allocation(alloc) if isinstance(alloc, Mapping) else None,
        reserved_for=tuple(
            (str(r.get("resource") or ""), str(r.get("name") or ""), str(r.get("uid") or ""))
            for r in status.get("reservedFor") or []
            if isinstance(r, Mapping)
        ),
        deleting=bool(meta.get("deletionTimestamp")),
        owner_pod_uid=owner,
    )


@dataclass(frozen=True)
class TemplateInfo:
    """A ResourceClaimTemplate: the spec of the claims made from it."""

    namespace: str
    name: str
    spec: ClaimSpec = ClaimSpec()
    bad: str | None = None


def parse_claim_template(obj: Mapping[str, Any]) -> TemplateInfo:
    """A ResourceClaimTemplate in wire form (``spec.spec`` is the claim spec)."""
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    spec = parse_claim_spec((obj.get("spec") or {}).get("spec") or {}, f"resourceclaimtemplate {ns}/{name}")
    return TemplateInfo(ns, name, spec, spec.bad)


# ---------------------------------------------------------------------------------- pods
@dataclass(frozen=True)
class PodClaimRef:
    """One entry of a pod's ``spec.resourceClaims``, resolved as ``resourceclaim.Name`` does."""

    name: str
    claim_name: str | None  # the claim's name; None: not made yet (a template's)
    template: str | None = None
    no_claim: bool = False  # the controller recorded that no claim is needed


@dataclass(frozen=True)
class PodClaims:
    """The ResourceClaims a pod uses, compiled once."""

    namespace: str = ""
    pod: str = ""
    uid: str = ""
    refs: tuple[PodClaimRef, ...] = ()
    bad: str | None = None

    def key(self, ref: PodClaimRef) -> str:
        """The claim's ``namespace/name``."""
        return f"{self.namespace}/{ref.claim_name}"

    @cached_property
    def signature(self) -> tuple[Any, ...]:
        """What the pod's claims are, apart from the pod: the templates (and whether the
        claims were made) or the claims shared by name."""
        return (
            self.namespace,
            tuple(
                ("template", r.template, r.claim_name is not None, r.no_claim)
                if r.template is not None
                else ("claim", r.claim_name)
                for r in self.refs
            ),
            self.bad,
        )


NO_CLAIMS = PodClaims()


def compile_pod_claims(pod: Mapping[str, Any]) -> PodClaims:
    """The claims of a pod's ``spec.resourceClaims``, in order."""
    spec = pod.get("spec") or {}
    raw = spec.get("resourceClaims")
    if not raw or not isinstance(raw, list):
        return NO_CLAIMS
    meta = pod.get("metadata") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    made: dict[str, Mapping[str, Any]] = {
        str(s.get("name")): s
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if isinstance(s, Mapping)
    }
    refs: list[PodClaimRef] = []
    bad = None
    for i, r in enumerate(raw):
        if not isinstance(r, Mapping):
            continue
        rname = str(r.get("name") or "")
        direct, tmpl = r.get("resourceClaimName"), r.get("resourceClaimTemplateName")
        if bool(direct) == bool(tmpl):
            if bad is None:
                bad = (
                    f'pod "{ns}/{name}", spec.resourceClaims[{i}] ({rname!r}): exactly one of '
                    "resourceClaimName and resourceClaimTemplateName is required"
                )
            continue
        if direct:
            refs.append(PodClaimRef(rname, str(direct)))
            continue
        st = made.get(rname)
        if st is None:
            refs.append(PodClaimRef(rname, None, str(tmpl)))
        elif not st.get("resourceClaimName"):
            refs.append(PodClaimRef(rname, None, str(tmpl), no_claim=True))
        else:
            refs.append(PodClaimRef(rname, str(st["resourceClaimName"]), str(tmpl)))
    return PodClaims(ns, name, str(meta.get("uid") or ""), tuple(refs), bad)


# ---------------------------------------------------------------------------------- the view
@dataclass(frozen=True)
class Pool:
    """A pool as ``GatherPools`` leaves it for one node."""

    driver: str
    name: str
    slices: tuple[SliceInfo, ...] = ()  # the newest generation's slices that reach the node
    incomplete: bool = False
    invalid: str | None = None


@dataclass(eq=False)
class DraObjects:
    """The DRA objects as one cycle reads them; never changed once made (the cache hands out a
    new one when anything changed)."""

    classes: Mapping[str, DeviceClassInfo] = field(default_factory=dict)
    slices: Mapping[str, SliceInfo] = field(default_factory=dict)
    claims: Mapping[str, ClaimInfo] = field(default_factory=dict)
    templates: Mapping[str, TemplateInfo] = field(default_factory=dict)
    _pools: dict[str, tuple[Pool, ...]] = field(default_factory=dict, repr=False)
    _by_pool: dict[tuple[str, str], list[SliceInfo]] | None = field(default=None, repr=False)
    # Pools by the node their node-local slices name, and the pools with any other slice: a
    # node looks only at its own and those (1,024 node-local pools are not scanned per node).
    _local: dict[str, list[tuple[str, str]]] = field(default_factory=dict, repr=False)
    _general: list[tuple[str, str]] = field(default_factory=list, repr=False)
    _devices: dict[str, tuple[tuple[DeviceInfo, SliceInfo], ...]] = field(default_factory=dict, repr=False)
    _allocated: frozenset[DeviceId] | None = field(default=None, repr=False)
    _compute_domains: frozenset[str] | None = field(default=None, repr=False)
    # Selector verdicts per (expression, device object): devices do not change within a view.
    # Not per device id: an older generation of a pool still serving some nodes may hold a
    # device of the same name with other attributes.
    matches: dict[tuple[str, int], bool | str] = field(default_factory=dict, repr=False)
    # What else the slices and classes alone give (devices per class): see :meth:`carry_from`.
    derived: dict[Any, Any] = field(default_factory=dict, repr=False)

    def match(self, expression: str, device: DeviceInfo) -> bool | str:
        """A CEL selector's verdict on a device (an error's text when it fails), once per view
        and device (the view keeps its slices, and so its devices, alive)."""
        k = (expression, id(device))
        got = self.matches.get(k)
        if got is None:
            got = self.matches[k] = cel_selector_matches(expression, device)
        return got

    def derive(self, kind: str, key: Any, make: Callable[[], Any]) -> Any:
        """What ``make`` gives for ``key``: computed once and kept per ``kind`` (its newest key
        only), across views with the same slices and classes."""
        got = self.derived.get(kind)
        if got is not None and got[0] == key:
            return got[1]
        value = make()
        self.derived[kind] = (key, value)
        return value

    def carry_from(self, prev: DraObjects) -> None:
        """Take over what ``prev`` computed from slices and classes (pools, devices per node,
        selector verdicts), when this view has the same slices and classes: a view made
        because a claim changed then costs no CEL evaluation."""
        self._pools, self._by_pool = prev._pools, prev._by_pool
        self._local, self._general = prev._local, prev._general
        self._devices, self.matches, self.derived = prev._devices, prev.matches, prev.derived

    @property
    def empty(self) -> bool:
        """No DRA object at all."""
        return not (self.classes or self.slices or self.claims or self.templates)

    def content(self) -> tuple[Any, ...]:
        """Everything the filter reads, comparable (``--verify-state``)."""
        return (dict(self.classes), dict(self.slices), dict(self.claims), dict(self.templates))

    def _all_by_pool(self) -> dict[tuple[str, str], list[SliceInfo]]:
        if self._by_pool is None:
            by: dict[tuple[str, str], list[SliceInfo]] = {}
            for s in sorted(self.slices.values(), key=lambda s: s.name):
                # Ignored slices stay: they count when a pool's generation and size are checked.
                if s.bad is None:
                    by.setdefault((s.driver, s.pool), []).append(s)
            self._by_pool = by
            for key, every in sorted(by.items()):
                names = {x.node_name for x in every if not x.ignored}
                for n in sorted(x for x in names if x is not None):
                    self._local.setdefault(n, []).append(key)
                if None in names:
                    self._general.append(key)
        return self._by_pool

    def pools(self, node: NodeStatic) -> tuple[Pool, ...]:
        """``GatherPools`` for ``node``: each pool with slices reaching it, at the newest
        generation among those (when they are as many as the pool has, they are used even if a
        newer generation serves other nodes; else a newer generation anywhere makes the pool
        obsolete, and it is incomplete unless every slice of its generation is there), valid
        or not; sorted by driver and name."""
        got = self._pools.get(node.name)
        if got is not None:
            return got
        out: list[Pool] = []
        by = self._all_by_pool()
        for driver, name in sorted({*self._local.get(node.name, ()), *self._general}):
            every = by[(driver, name)]
            reaching = [s for s in every if not s.ignored and s.reaches(node)]
            if not reaching:
                continue
            newest_here = max(s.generation for s in reaching)
            here = [s for s in reaching if s.generation == newest_here]
            if len(here) != here[0].slice_count:
                # Go looks further only when the slices reaching the node are not all of them:
                # complete as they are, they are used even if a newer generation serves other
                # nodes.
                if any(s.generation > newest_here for s in every):
                    continue  # obsolete: a newer generation is being published
                total = [s for s in every if s.generation == newest_here]
                if len(total) != here[0].slice_count:
                    out.append(Pool(driver, name, (), incomplete=True))
                    continue
            seen: set[str] = set()
            invalid = None
            for s in here:
                for d in s.devices:
                    if d.name in seen:
                        invalid = f"duplicate device name {d.name}"
                    seen.add(d.name)
            out.append(Pool(driver, name, tuple(here), invalid=invalid))
        self._pools[node.name] = got = tuple(out)
        return got

    def devices_for(self, node: NodeStatic) -> tuple[tuple[DeviceInfo, SliceInfo], ...]:
        """The devices ``node`` can be given, each with its slice, in the allocator's order:
        those of its complete, valid pools."""
        got = self._devices.get(node.name)
        if got is None:
            got = self._devices[node.name] = tuple(
                (d, s)
                for p in self.pools(node)
                if not p.incomplete and p.invalid is None
                for s in p.slices
                for d in s.devices
            )
        return got

    def allocated(self) -> frozenset[DeviceId]:
        """The devices allocated claims hold (an adminAccess result holds none)."""
        if self._allocated is None:
            self._allocated = frozenset(
                (r.driver, r.pool, r.device)
                for c in self.claims.values()
                if c.allocation is not None
                for r in c.allocation.results
                if not r.admin_access
            )
        return self._allocated


# ---------------------------------------------------------------------------------- ComputeDomains
# NVIDIA's DRA driver: a ComputeDomain's workload pods claim an IMEX channel of this DeviceClass
# through the ResourceClaimTemplate its controller makes; multi-node NVLink holds only inside
# one NVLink clique, which the GPU Operator labels on each node.
COMPUTE_DOMAIN_CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
CLIQUE_LABEL = "nvidia.com/gpu.clique"


def claims_compute_domain_channel(spec: ClaimSpec) -> bool:
    """The claim asks for a ComputeDomain's IMEX channel."""
    return any(cls == COMPUTE_DOMAIN_CHANNEL_CLASS for _req, cls in spec.classes)


def ref_spec(claims: PodClaims, ref: PodClaimRef, objects: DraObjects) -> ClaimSpec | None:
    """What one of a pod's claims asks for: its template's spec for a claim made from a template
    (the claim has the same, and the pod asks it before the claim is made), the named claim's
    own for a claim shared by name; None while that object is not known."""
    if ref.template is not None:
        t = objects.templates.get(f"{claims.namespace}/{ref.template}")
        return t.spec if t is not None else None
    if ref.claim_name is not None:
        c = objects.claims.get(claims.key(ref))
        return c.spec if c is not None else None
    return None


def uses_compute_domain(claims: PodClaims, objects: DraObjects) -> bool:
    """The pod claims a ComputeDomain channel (through its template, or a claim by name)."""
    for ref in claims.refs:
        spec = ref_spec(claims, ref, objects)
        if spec is not None and claims_compute_domain_channel(spec):
            return True
    return False


def compute_domain_templates(objects: DraObjects) -> frozenset[str]:
    """The templates and claims (``namespace/name``) that ask for a ComputeDomain channel: while
    any exists, the clique label is a topology key of the tree. Once per view (the cache asks
    every cycle)."""
    got = objects._compute_domains
    if got is None:
        got = objects._compute_domains = frozenset(
            [k for k, t in objects.templates.items() if claims_compute_domain_channel(t.spec)]
            + [k for k, c in objects.claims.items() if claims_compute_domain_channel(c.spec)]
        )
    return got
