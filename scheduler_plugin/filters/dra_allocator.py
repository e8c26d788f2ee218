"""kube-scheduler's structured allocator (``k8s.io/dynamic-resource-allocation/structured``,
the stable one of v1.37), for the claims of one pod on one node.

Every request of every claim, in order, takes its devices one at a time from the pools that
reach the node (sorted by driver and pool), each device the first that is free (not held by
another claim, not taken earlier in this allocation), passes its class's and its request's
selectors, is not tainted NoSchedule/NoExecute without a toleration of the request, and keeps
every ``matchAttribute`` constraint; when the rest cannot be allocated the last choice is undone
and the next device tried (an exhaustive search that stops at the first full solution, as Go's
``allocateOne``). ``allocationMode: All`` takes every matching device of the node's pools (none
may be incomplete or invalid); ``firstAvailable`` tries its subrequests in order; ``adminAccess``
takes devices whether or not they are in use and holds none. The result is what Go writes: the
devices (with the request's tolerations), the configuration (the class's first, then the
claim's) and the node selector (the node's name for a node-local device, the slices' selectors
otherwise; a selector of several terms cannot be merged and fails, as in Go).

Errors are Go's, in its words: a missing class, a claim over 32 devices, an ``All`` request over
an incomplete or invalid pool, a constraint an ``All`` device breaks, and a CEL error. A CEL
runtime error on a device (e.g. a missing attribute: "no such key") fails the allocation with
``class X: selector #i on device D: CEL runtime error: ...`` as Go's allocator does; the
DynamicResources filter then refuses the node with it (kube-scheduler returns it as an error
status, which fails the pod's scheduling attempt). A selector that does not compile is refused
where the class or claim is read (:mod:`.dra`), naming the field.

Not allocated (kube-scheduler v1.37 turns these on by default and then uses its incubating or
experimental allocator, or they are alpha; here only the stable allocator's set is done):
partitionable devices (slices with shared counters or per-device node selection are not
gathered; devices that consume counters are not selectable), DeviceTaintRule objects (a device's
own taints are honoured), binding conditions (such devices are not selectable), consumable
capacity and devices allowing multiple allocations, derived attributes, list-typed attributes,
compatibility groups, extended resources backed by DRA (a DeviceClass's
``extendedResourceName``), node-allocatable resources, and claims of a PodGroup. Go's 10 s
allocation timeout is a budget of device choices (``SEARCH_BUDGET``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from .dra import (
    ALLOCATION_RESULTS_MAX,
    AllocationInfo,
    ClaimSpec,
    DeviceId,
    DeviceInfo,
    DraObjects,
    Pool,
    Request,
    ResultInfo,
    SliceInfo,
    node_selector_matcher,
    thaw,
)
from .nodes import NodeStatic
from .plugin import freeze

CANNOT_ALLOCATE = "cannot allocate all claims"
SEARCH_BUDGET = 200_000  # device choices tried per node before giving up (Go: a 10 s timeout)


@dataclass(frozen=True)
class ClaimAllocation:
    """A claim's allocation, by the claim's key (or the label the caller gave it)."""

    claim: str
    allocation: AllocationInfo


@dataclass(frozen=True)
class Allocated:
    """The allocations of the claims asked, and every device they hold."""

    claims: tuple[ClaimAllocation, ...]
    devices: frozenset[DeviceId]


class _Fail(Exception):
    """An error that refuses the node (Go's allocator error)."""


@dataclass
class _Req:
    """A request or subrequest as ``validateDeviceRequest`` prepares it."""

    req: Request
    base: str  # the request's name (the parent's for a subrequest)
    sub: str  # the subrequest's name, or ""
    class_selectors: tuple[str, ...]
    class_name: str
    num: int
    all_devices: list[tuple[DeviceInfo, SliceInfo]] | None = None


class _Search:
    def __init__(
        self,
        claims: Sequence[tuple[str, ClaimSpec]],
        node: NodeStatic,
        objects: DraObjects,
        in_use: Set[DeviceId],
    ) -> None:
        self.claims, self.node, self.objects, self.in_use = claims, node, objects, in_use
        self.pools: tuple[Pool, ...] = objects.pools(node)
        self.taking: dict[DeviceId, set[int]] = {}
        self.results: list[list[tuple[_Req, DeviceInfo, SliceInfo]]] = [[] for _ in claims]
        self.constraint_state: list[list[list[Any]]] = [
            [[None, 0] for _ in spec.constraints] for _, spec in claims
        ]
        self.chosen_sub: dict[tuple[int, int], int] = {}
        self.reqs: dict[tuple[int, int], list[_Req]] = {}
        self.steps = 0

    # ------------------------------------------------------------------ preparation
    def prepare(self) -> None:
        for ci, (key, spec) in enumerate(self.claims):
            if spec.bad is not None:
                raise _Fail(spec.bad)
            at_least = 0
            for ri, r in enumerate(spec.requests):
                alts = [self._validate(key, a, r.name, r.first_available) for a in r.alternatives]
                self.reqs[(ci, ri)] = alts
                fewest = min((a.num for a in alts), default=0)
                if fewest > ALLOCATION_RESULTS_MAX - at_least:
                    raise _Fail(
                        f"claim {key}, request {r.name}: adding {fewest} devices exceeds the claim limit "
                        f"of {ALLOCATION_RESULTS_MAX}, with {at_least} already accounted for"
                    )
                at_least += fewest

    def _validate(self, key: str, req: Request, base: str, is_sub: bool) -> _Req:
        cls = self.objects.classes.get(req.device_class)
        if cls is None:
            raise _Fail(
                f"claim {key}, request {req.name}: could not retrieve device class {req.device_class}: "
                f'deviceclass.resource.k8s.io "{req.device_class}" not found'
            )
        if cls.bad is not None:
            raise _Fail(cls.bad)
        sub = req.name.split("/", 1)[1] if is_sub else ""
        out = _Req(req, base, sub, cls.selectors, cls.name, req.count)
        if req.mode == "All":
            devices: list[tuple[DeviceInfo, SliceInfo]] = []
            for pool in self.pools:
                if pool.incomplete:
                    raise _Fail(
                        f"claim {key}, request {req.name}: asks for all devices, but resource pool "
                        f"{pool.driver}/{pool.name} is currently being updated"
                    )
                if pool.invalid is not None:
                    raise _Fail(
                        f"claim {key}, request {req.name}: asks for all devices, but resource pool "
                        f"{pool.driver}/{pool.name} is currently invalid"
                    )
                for s in pool.slices:
                    for d in s.devices:
                        if self._selectable(key, out, d):
                            devices.append((d, s))
            out.all_devices = devices
            out.num = len(devices)
        return out

    def _selectable(self, key: str, r: _Req, d: DeviceInfo) -> bool:
        if not d.selectable:
            return False
        for i, expr in enumerate(r.class_selectors):
            if not self._match(expr, d, f"class {r.class_name}: selector #{i}"):
                return False
        for i, expr in enumerate(r.req.selectors):
            if not self._match(expr, d, f"claim {key}: selector #{i}"):
                return False
        return True

    def _match(self, expr: str, d: DeviceInfo, where: str) -> bool:
        got = self.objects.match(expr, d)
        if isinstance(got, str):
            if got.startswith("CEL compile error"):
                raise _Fail(f"{where}: {got}")
            raise _Fail(f"{where} on device {'/'.join(d.id)}: {got}")
        return got

    # ------------------------------------------------------------------ search
    def in_use_now(self, dev: DeviceId) -> bool:
        return dev in self.in_use or bool(self.taking.get(dev))

    def candidates(self) -> Sequence[tuple[DeviceInfo, SliceInfo]]:
        return self.objects.devices_for(self.node)

    def _constraints_add(self, ci: int, r: _Req, d: DeviceInfo) -> int | None:
        """Add the device to the claim's constraints; how many were added (None: one refused,
        and the ones added before it are taken off again)."""
        _, spec = self.claims[ci]
        added = 0
        for k, c in enumerate(spec.constraints):
            if c.requests and not (r.base in c.requests or (r.sub and f"{r.base}/{r.sub}" in c.requests)):
                added += 1
                continue
            value = _lookup(d, c.attribute)
            st = self.constraint_state[ci][k]
            if value is None or (st[1] > 0 and (type(value) is not type(st[0]) or value != st[0])):
                self._constraints_remove(ci, r, added)
                return None
            if st[1] == 0:
                st[0] = value
            st[1] += 1
            added += 1
        return added

    def _constraints_remove(self, ci: int, r: _Req, count: int) -> None:
        _, spec = self.claims[ci]
        for k, c in enumerate(spec.constraints[:count]):
            if c.requests and not (r.base in c.requests or (r.sub and f"{r.base}/{r.sub}" in c.requests)):
                continue
            self.constraint_state[ci][k][1] -= 1

    def _take(self, ci: int, r: _Req, d: DeviceInfo, s: SliceInfo) -> bool:
        if r.req.admin_access:
            if ci in self.taking.get(d.id, ()):
                return False
        elif self.in_use_now(d.id):
            return False
        if d.taints and not all(r.req.tolerates(t) for t in d.taints):
            return False  # taintPreventsAllocation
        if self._constraints_add(ci, r, d) is None:
            return False
        self.taking.setdefault(d.id, set()).add(ci)
        self.results[ci].append((r, d, s))
        return True

    def _undo(self, ci: int, r: _Req, d: DeviceInfo) -> None:
        self.results[ci].pop()
        self.taking[d.id].discard(ci)
        self._constraints_remove(ci, r, len(self.claims[ci][1].constraints))

    def one(self, ci: int, ri: int, sub: int | None, di: int) -> bool:
        """``allocateOne``: the rest from claim ``ci``, request ``ri`` (subrequest ``sub``),
        device ``di`` on."""
        self.steps += 1
        if self.steps > SEARCH_BUDGET:
            raise _Fail(f"node {self.node.name}: timed out trying to allocate devices")
        if ci >= len(self.claims):
            return True
        key, spec = self.claims[ci]
        if ri >= len(spec.requests):
            return self.one(ci + 1, 0, None, 0)
        alts = self.reqs[(ci, ri)]
        if sub is None:
            if spec.requests[ri].first_available:
                for j in range(len(alts)):
                    if self.one(ci, ri, j, 0):
                        self.chosen_sub[(ci, ri)] = j
                        return True
                return False
            sub = 0
        r = alts[sub]
        if r.all_devices is not None and not r.all_devices:
            return False  # All of none: the request cannot be satisfied
        if di >= r.num:
            return self.one(ci, ri + 1, None, 0)
        if r.num - di > ALLOCATION_RESULTS_MAX - len(self.results[ci]):
            return False
        if r.all_devices is not None:
            d, s = r.all_devices[di]
            busy = ci in self.taking.get(d.id, ()) if r.req.admin_access else self.in_use_now(d.id)
            if busy or (d.taints and not all(r.req.tolerates(t) for t in d.taints)):
                return False
            if not self._take(ci, r, d, s):
                raise _Fail(
                    f"claim {key}, request {r.req.name}: cannot add device {'/'.join(d.id)} because a "
                    "claim constraint would not be satisfied"
                )
            if self.one(ci, ri, sub, di + 1):
                return True
            self._undo(ci, r, d)
            return False
        for d, s in self.candidates():
            if r.req.admin_access:
                if ci in self.taking.get(d.id, ()):
                    continue
            elif self.in_use_now(d.id):
                continue
            if not self._selectable(key, r, d):
                continue
            if not self._take(ci, r, d, s):
                continue
            if self.one(ci, ri, sub, di + 1):
                return True
            self._undo(ci, r, d)
        return False

    # ------------------------------------------------------------------ results
    def allocations(self) -> Allocated:
        out: list[ClaimAllocation] = []
        held: set[DeviceId] = set()
        for ci, (key, spec) in enumerate(self.claims):
            results = tuple(
                ResultInfo(r.req.name, d.driver, d.pool, d.name, r.req.admin_access, r.req.tolerations)
                for r, d, _s in self.results[ci]
            )
            held |= {(x.driver, x.pool, x.device) for x in results if not x.admin_access}
            try:
                selector = _node_selector(self.results[ci])
            except ValueError as exc:
                # Go names the claim by its name alone here.
                raise _Fail(f"create NodeSelector for claim {key.rpartition('/')[2]}: {exc}") from None
            out.append(ClaimAllocation(key, AllocationInfo(results, selector, self._config(ci, spec))))
        return Allocated(tuple(out), frozenset(held))

    def _config(self, ci: int, spec: ClaimSpec) -> tuple[Any, ...]:
        """Go's order: each class's configuration once (for every request of the class), then
        the claim's; a configuration that names every request names none."""
        chosen: list[_Req] = []
        for ri in range(len(spec.requests)):
            chosen.append(self.reqs[(ci, ri)][self.chosen_sub.get((ci, ri), 0)])
        entries: list[dict[str, Any]] = []
        by_class: dict[str, list[int]] = {}
        for r in chosen:
            if r.class_name in by_class:
                for i in by_class[r.class_name]:
                    entries[i]["requests"].append(r.req.name)
                continue
            cls = self.objects.classes[r.class_name]
            start = len(entries)
            for c in cls.config:
                conf = thaw(c)
                entries.append({"source": "FromClass", "requests": [r.req.name], **_device_config(conf)})
            by_class[r.class_name] = list(range(start, len(entries)))
        for c in spec.config:
            conf = thaw(c)
            reqs = list(conf.get("requests") or [])
            if not reqs or any(r.req.name in reqs or r.base in reqs for r in chosen):
                entries.append({"source": "FromClaim", "requests": reqs, **_device_config(conf)})
        names = {r.base for r in chosen}
        for e in entries:
            rs = set(e["requests"])
            if rs and all(r.base in rs or r.req.name in rs for r in chosen) and names:
                e["requests"] = []
        return tuple(freeze(e) for e in entries)


def _device_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in conf.items() if k not in ("requests", "source")}


def _lookup(d: DeviceInfo, name: str) -> object | None:
    """``lookupAttribute``: the attribute by its fully qualified name."""
    return d.attributes.get(name)


def _node_selector(results: Sequence[tuple[_Req, DeviceInfo, SliceInfo]]) -> Any:
    """``createNodeSelector``: the node's name for a node-local device; else the slices'
    selectors' requirements together; None when every device reaches every node. A slice's
    selector of several terms cannot be merged: ValueError, as Go refuses it."""
    fields: list[Any] = []
    exprs: list[Any] = []
    for _r, _d, s in results:
        if s.node_name is not None:
            return freeze(
                {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [s.node_name]}]}
                    ]
                }
            )
        if s.node_selector is not None:
            terms = thaw(s.node_selector).get("nodeSelectorTerms") or []
            if len(terms) > 1:
                raise ValueError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
            if len(terms) == 1:
                for req in terms[0].get("matchFields") or []:
                    if req not in fields:
                        fields.append(req)
                for req in terms[0].get("matchExpressions") or []:
                    if req not in exprs:
                        exprs.append(req)
    if not fields and not exprs:
        return None
    term: dict[str, Any] = {}
    if fields:
        term["matchFields"] = fields
    if exprs:
        term["matchExpressions"] = exprs
    return freeze({"nodeSelectorTerms": [term]})


def allocate(
    claims: Sequence[tuple[str, ClaimSpec]], node: NodeStatic, objects: DraObjects, in_use: Set[DeviceId]
) -> Allocated | str:
    """Allocate the claims together on ``node`` from the devices not ``in_use``, or say why
    not in kube-scheduler's words (see the module docstring)."""
    search = _Search(claims, node, objects, in_use)
    try:
        search.prepare()
        done = search.one(0, 0, None, 0)
        if done:
            return search.allocations()
    except _Fail as exc:
        return str(exc)
    if any(p.invalid is not None for p in search.pools):
        return "invalid resource pools were encountered"
    return CANNOT_ALLOCATE


def allocation_fits(allocation: AllocationInfo, node: NodeStatic) -> bool:
    """An allocated claim's node selector admits ``node`` (no selector admits every node)."""
    return allocation_admits(allocation)(node)


def allocation_admits(allocation: AllocationInfo) -> Callable[[NodeStatic], bool]:
    """:func:`allocation_fits` with the selector read once, to judge many nodes; the one-node
    selector :func:`_node_selector` writes for node-local devices is answered by name."""
    if allocation.node_selector is None:
        return lambda _node: True
    named = _pinned_node(thaw(allocation.node_selector))
    if named is not None:
        return lambda node: node.name == named
    return node_selector_matcher(allocation.node_selector)


def _pinned_node(sel: Any) -> str | None:
    """The node a NodeSelector names when it is one term of one ``metadata.name In [node]``
    field requirement (what :func:`_node_selector` writes for a node-local device), else None."""
    terms = sel.get("nodeSelectorTerms") if isinstance(sel, Mapping) else None
    if not isinstance(terms, list) or len(terms) != 1 or not isinstance(terms[0], Mapping):
        return None
    t = terms[0]
    fields = t.get("matchFields") or []
    if t.get("matchExpressions") or len(fields) != 1 or not isinstance(fields[0], Mapping):
        return None
    f = fields[0]
    values = f.get("values") or []
    if f.get("key") != "metadata.name" or f.get("operator") != "In" or len(values) != 1:
        return None
    return str(values[0])


def allocation_to_wire(a: AllocationInfo) -> dict[str, Any]:
    """``status.allocation`` as the API takes it."""
    results = []
    for r in a.results:
        entry: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
        if r.admin_access:
            entry["adminAccess"] = True
        if r.tolerations:
            entry["tolerations"] = [thaw(t) for t in r.tolerations]
        results.append(entry)
    devices: dict[str, Any] = {"results": results}
    if a.config:
        devices["config"] = [{k: v for k, v in thaw(c).items() if k != "requests" or v} for c in a.config]
    out: dict[str, Any] = {"devices": devices}
    if a.node_selector is not None:
        out["nodeSelector"] = thaw(a.node_selector)
    return out
