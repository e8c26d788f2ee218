"""The structured allocator against a brute-force enumerator, on seeded random small worlds: for
any claims on any node, ``allocate`` finds an allocation exactly when some assignment of devices
exists, and every allocation it returns is one (its devices exist, the node reaches them, they
match their class's and their request's selectors, no device twice, none already in use, every
matchAttribute holds, each request gets its count, or every matching device for All).

The enumerator knows nothing of the allocator: it reads the same wire objects with its own
Python predicates for the CEL selectors, gathers the pools as Go's ``GatherPools`` does, and
tries every choice of subrequest and every set of devices."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from scheduler_plugin.filters.dra import DraObjects, parse_claim_spec, parse_device_class, parse_slice
from scheduler_plugin.filters.dra_allocator import Allocated, allocate
from scheduler_plugin.filters.nodes import NodeStatic, node_static_from_dict

SEED = 20261128
WORLDS = 3000

A, B = "a.example.com", "b.example.com"
TOPO = "topo.example.com/numa"  # both drivers publish it
ZONE = "topology.kubernetes.io/zone"

Device = dict[str, Any]  # {"driver", "pool", "name", "attrs": {qualified: value}, "mem": GiB}
Predicate = Callable[[Device], bool]

# Selectors: the CEL text the allocator reads, and what it means to the enumerator. Every device
# of a driver has every attribute its selectors read (no CEL runtime error).
CLASS_SELECTORS: dict[str, list[tuple[str, Predicate]]] = {
    "ca": [(f"device.driver == '{A}'", lambda d: d["driver"] == A)],
    "cb": [(f"device.driver == '{B}'", lambda d: d["driver"] == B)],
    "ca-big": [
        (f"device.driver == '{A}'", lambda d: d["driver"] == A),
        (f"device.capacity['{A}'].mem.compareTo(quantity('2Gi')) >= 0", lambda d: d["mem"] >= 2),
    ],
}
CLASS_DRIVER = {"ca": A, "cb": B, "ca-big": A}
REQUEST_SELECTORS: dict[str, list[tuple[str, Predicate]]] = {
    A: [
        (f"device.attributes['{A}'].model == 'x'", lambda d: d["attrs"][f"{A}/model"] == "x"),
        (f"device.attributes['{A}'].ok", lambda d: d["attrs"][f"{A}/ok"] is True),
        (
            f"device.attributes['{A}'].ver.isGreaterThan(semver('1.5.0'))",
            lambda d: d["attrs"][f"{A}/ver"] == "2.0.0",
        ),
        (f"device.capacity['{A}'].mem.isLessThan(quantity('4Gi'))", lambda d: d["mem"] < 4),
    ],
    B: [
        (f"device.attributes['{B}'].speed >= 100", lambda d: d["attrs"][f"{B}/speed"] >= 100),
        ("device.attributes['topo.example.com'].numa == 0", lambda d: d["attrs"][TOPO] == 0),
    ],
}
CONSTRAINT_ATTRIBUTES = (TOPO, f"{A}/model", f"{A}/ok", f"{A}/ver")


NODE: NodeStatic = node_static_from_dict(
    {
        "metadata": {"name": "n0", "labels": {ZONE: "z1", "kubernetes.io/hostname": "n0"}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
    }
)
Alternative = tuple[str, str, list[Predicate], int | None]  # result name, class, predicates, count


@dataclass
class World:
    """Slices and claims in wire form, the devices in use, and what they mean to the enumerator."""

    slices: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)  # claim specs
    in_use: set[tuple[str, str, str]] = field(default_factory=set)
    # Per claim: its requests (name, alternatives; a firstAvailable request has several).
    requests: list[list[tuple[str, list[Alternative]]]] = field(default_factory=list)
    # Per claim: its matchAttribute constraints (request names, empty: all; attribute).
    constraints: list[list[tuple[frozenset[str], str]]] = field(default_factory=list)

    def objects(self) -> DraObjects:
        classes = {
            name: parse_device_class(
                {
                    "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": e}} for e, _ in sels]},
                }
            )
            for name, sels in CLASS_SELECTORS.items()
        }
        slices = {str(s["metadata"]["name"]): parse_slice(s) for s in self.slices}
        return DraObjects(classes=classes, slices=slices)


# ---------------------------------------------------------------------------------- worlds
def _device(r: random.Random, driver: str, pool: str, name: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {"topo.example.com/numa": {"int": r.randint(0, 1)}}
    capacity: dict[str, Any] = {}
    if driver == A:
        attrs["model"] = {"string": r.choice(("x", "y"))}
        attrs["ok"] = {"bool": r.random() < 0.7}
        attrs["ver"] = {"version": r.choice(("1.0.0", "2.0.0"))}
        capacity["mem"] = {"value": r.choice(("1Gi", "2Gi", "4Gi"))}
    else:
        attrs["speed"] = {"int": r.choice((10, 100))}
    return {"name": name, "attributes": attrs, **({"capacity": capacity} if capacity else {})}


def _slice(
    name: str,
    driver: str,
    pool: str,
    devices: list[dict[str, Any]],
    where: dict[str, Any],
    generation: int = 1,
    count: int = 1,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            **where,
            "devices": devices,
        },
    }


def world(r: random.Random) -> World:
    """A node n0 (zone z1) and the devices of up to 4 pools: its own, another node's, every
    node's, a zone's (its or another); split, incomplete, older generations, a name twice;
    some devices in use; 1-2 claims of 1-2 requests each, some with a matchAttribute."""
    w = World()
    places: list[dict[str, Any]] = [
        {"nodeName": "n0"},
        {"nodeName": "n0"},
        {"nodeName": "n1"},
        {"allNodes": True},
        {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": ZONE, "operator": "In", "values": [r.choice(("z1", "z2"))]}
                        ]
                    }
                ]
            }
        },
    ]
    for p in range(r.randint(1, 4)):
        driver = r.choice((A, A, B))
        pool = f"pool{p}"
        where = r.choice(places)
        devices = [_device(r, driver, pool, f"d{i}") for i in range(r.randint(1, 3))]
        generation = 1
        if r.random() < 0.15:
            generation = 2
            old_where = where if r.random() < 0.6 else r.choice(places)
            old = [_device(r, driver, pool, f"old{i}") for i in range(r.randint(1, 2))]
            w.slices.append(_slice(f"{pool}-old", driver, pool, old, old_where, 1))
        if len(devices) >= 2 and r.random() < 0.3:
            half = r.randint(1, len(devices) - 1)
            first, second = devices[:half], devices[half:]
            if r.random() < 0.15:
                second[0] = {**second[0], "name": first[0]["name"]}  # invalid pool
            w.slices.append(_slice(f"{pool}-0", driver, pool, first, where, generation, 2))
            if r.random() > 0.2:  # else incomplete
                w.slices.append(_slice(f"{pool}-1", driver, pool, second, where, generation, 2))
        else:
            w.slices.append(_slice(pool, driver, pool, devices, where, generation))
        for d in devices:
            if r.random() < 0.15:
                w.in_use.add((driver, pool, str(d["name"])))
    for _ in range(r.randint(1, 2)):
        _claim(r, w)
    return w


def _exactly(r: random.Random, all_devices: bool) -> tuple[dict[str, Any], str, list[Predicate], int | None]:
    cls = r.choice(sorted(CLASS_SELECTORS))
    raw: dict[str, Any] = {"deviceClassName": cls}
    count: int | None = None
    if all_devices:
        raw["allocationMode"] = "All"
    else:
        count = r.choice((1, 1, 2, 3))
        raw["count"] = count
    preds: list[Predicate] = []
    if r.random() < 0.4:
        expr, pred = r.choice(REQUEST_SELECTORS[CLASS_DRIVER[cls]])
        raw["selectors"] = [{"cel": {"expression": expr}}]
        preds.append(pred)
    return raw, cls, preds, count


def _claim(r: random.Random, w: World) -> None:
    requests: list[dict[str, Any]] = []
    meaning: list[tuple[str, list[Alternative]]] = []
    every: set[str] = set()
    for q in range(r.randint(1, 2)):
        name = f"r{q}"
        kind = r.choices(("exactly", "all", "first"), weights=(5, 1, 2))[0]
        if kind == "first":
            subs, alts = [], []
            for k in range(2):
                raw, cls, preds, count = _exactly(r, False)
                subs.append({"name": f"s{k}", **raw})
                alts.append((f"{name}/s{k}", cls, preds, count))
            requests.append({"name": name, "firstAvailable": subs})
            meaning.append((name, alts))
        else:
            raw, cls, preds, count = _exactly(r, kind == "all")
            requests.append({"name": name, "exactly": raw})
            meaning.append((name, [(name, cls, preds, count)]))
            if kind == "all":
                every.add(name)
    constraints: list[dict[str, Any]] = []
    meant: list[tuple[frozenset[str], str]] = []
    names = [n for n, _ in meaning if n not in every]
    if names and r.random() < 0.5:
        # Never over an All request: Go fails the claim (an error) when a constraint refuses one
        # of its devices, whatever the other choices.
        attribute = r.choice(CONSTRAINT_ATTRIBUTES)
        over = r.sample(names, r.randint(1, len(names))) if every or r.random() < 0.5 else []
        constraints.append({"matchAttribute": attribute, **({"requests": over} if over else {})})
        meant.append((frozenset(over), attribute))
    spec: dict[str, Any] = {"devices": {"requests": requests}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    w.claims.append(spec)
    w.requests.append(meaning)
    w.constraints.append(meant)


# ---------------------------------------------------------------------------------- the enumerator
def _value(raw: dict[str, Any]) -> Any:
    for kind in ("int", "bool", "string", "version"):
        if kind in raw:
            return (kind, raw[kind])
    raise AssertionError(raw)


def _qualify(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _reaches(spec: dict[str, Any]) -> bool:
    if spec.get("nodeName"):
        return bool(spec["nodeName"] == "n0")
    if spec.get("allNodes"):
        return True
    terms = spec["nodeSelector"]["nodeSelectorTerms"]
    return any(all(NODE.labels.get(e["key"]) in e["values"] for e in t["matchExpressions"]) for t in terms)


@dataclass
class Gathered:
    """The devices n0 can be given, and whether some pool it reaches is incomplete or invalid."""

    devices: dict[tuple[str, str, str], Device]
    unusable_pool: bool


def gather(slices: list[dict[str, Any]]) -> Gathered:
    """Go's ``GatherPools`` for n0, written out: per pool, the reaching slices of the highest
    generation among them; complete when they are as many as the pool says, else (when no
    newer generation exists anywhere) complete if all slices of that generation are; a device
    name twice makes the pool invalid."""
    by_pool: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in slices:
        spec = s["spec"]
        by_pool.setdefault((spec["driver"], spec["pool"]["name"]), []).append(spec)
    devices: dict[tuple[str, str, str], Device] = {}
    unusable = False
    for (driver, pool), every in by_pool.items():
        reaching = [s for s in every if _reaches(s)]
        if not reaching:
            continue
        gen = max(s["pool"]["generation"] for s in reaching)
        here = [s for s in reaching if s["pool"]["generation"] == gen]
        count = here[0]["pool"]["resourceSliceCount"]
        if len(here) != count:
            if any(s["pool"]["generation"] > gen for s in every):
                continue  # obsolete
            if len([s for s in every if s["pool"]["generation"] == gen]) != count:
                unusable = True  # incomplete
                continue
        names = [str(d["name"]) for s in here for d in s["devices"]]
        if len(names) != len(set(names)):
            unusable = True  # invalid
            continue
        for s in here:
            for d in s["devices"]:
                attrs = {_qualify(k, driver): _value(v) for k, v in d["attributes"].items()}
                plain = {k: v[1] for k, v in attrs.items()}
                mem = {"1Gi": 1, "2Gi": 2, "4Gi": 4}.get(
                    (d.get("capacity") or {}).get("mem", {}).get("value"), 0
                )
                dev_id = (driver, pool, str(d["name"]))
                devices[dev_id] = {
                    "driver": driver,
                    "pool": pool,
                    "name": d["name"],
                    "attrs": plain,
                    "typed": attrs,
                    "mem": mem,
                }
    return Gathered(devices, unusable)


def _matches(d: Device, cls: str, preds: list[Predicate]) -> bool:
    return all(p(d) for _, p in CLASS_SELECTORS[cls]) and all(p(d) for p in preds)


Assignment = list[dict[str, list[tuple[str, str, str]]]]  # per claim: result name -> devices


def assignments(w: World, g: Gathered) -> Iterator[Assignment]:
    """Every assignment of devices to the claims' requests that keeps every rule."""
    slots: list[tuple[int, str, list[Alternative]]] = [
        (ci, name, alts) for ci, reqs in enumerate(w.requests) for name, alts in reqs
    ]

    def go(k: int, used: frozenset[tuple[str, str, str]], got: Assignment) -> Iterator[Assignment]:
        if k == len(slots):
            if all(_constraints_hold(w, ci, got[ci], g) for ci in range(len(w.requests))):
                yield got
            return
        ci, _name, alts = slots[k]
        for result_name, cls, preds, count in alts:
            fits = [i for i, d in sorted(g.devices.items()) if _matches(d, cls, preds)]
            if count is None:
                if g.unusable_pool or not fits or any(i in used or i in w.in_use for i in fits):
                    continue
                choices: Iterator[tuple[tuple[str, str, str], ...]] = iter([tuple(fits)])
            else:
                free = [i for i in fits if i not in used and i not in w.in_use]
                choices = itertools.combinations(free, count)
            for pick in choices:
                nxt = [dict(c) for c in got]
                nxt[ci][result_name] = list(pick)
                yield from go(k + 1, used | set(pick), nxt)

    yield from go(0, frozenset(), [{} for _ in w.requests])


def _constraints_hold(w: World, ci: int, got: dict[str, list[tuple[str, str, str]]], g: Gathered) -> bool:
    for over, attribute in w.constraints[ci]:
        values = set()
        for result_name, devices in got.items():
            base = result_name.split("/")[0]
            if over and base not in over and result_name not in over:
                continue
            for i in devices:
                typed = g.devices[i]["typed"]
                if attribute not in typed:
                    return False
                values.add(typed[attribute])
        if len(values) > 1:
            return False
    return True


# ---------------------------------------------------------------------------------- the property
def _as_assignment(w: World, got: Allocated) -> Assignment:
    out: Assignment = []
    for ca in got.claims:
        by: dict[str, list[tuple[str, str, str]]] = {}
        for res in ca.allocation.results:
            by.setdefault(res.request, []).append((res.driver, res.pool, res.device))
        out.append(by)
    return out


def _valid(w: World, g: Gathered, a: Assignment) -> str | None:
    """Why an allocation breaks a rule, or None."""
    seen: set[tuple[str, str, str]] = set()
    for ci, by in enumerate(a):
        reqs = w.requests[ci]
        if len(by) != len(reqs):
            return f"claim {ci}: results for {sorted(by)}, requests {[n for n, _ in reqs]}"
        for name, alts in reqs:
            chosen = [alt for alt in alts if alt[0] in by]
            if len(chosen) != 1:
                return f"claim {ci}, request {name}: results for {sorted(by)}"
            result_name, cls, preds, count = chosen[0]
            devices = by[result_name]
            for i in devices:
                if i not in g.devices:
                    return f"{i}: no such device that n0 reaches in a usable pool"
                if not _matches(g.devices[i], cls, preds):
                    return f"{i}: does not match class {cls} and the request's selectors"
                if i in w.in_use:
                    return f"{i}: already in use"
                if i in seen:
                    return f"{i}: given twice"
                seen.add(i)
            if count is None:
                want = sorted(i for i, d in g.devices.items() if _matches(d, cls, preds))
                if sorted(devices) != want:
                    return f"claim {ci}, request {name}: All got {sorted(devices)}, matching {want}"
            elif len(devices) != count:
                return f"claim {ci}, request {name}: {len(devices)} devices, not {count}"
        if not _constraints_hold(w, ci, by, g):
            return f"claim {ci}: a matchAttribute does not hold"
    return None


def test_the_allocator_finds_an_allocation_exactly_when_one_exists_and_every_one_it_finds_is_valid() -> None:
    rng = random.Random(SEED)
    found = refused = 0
    for n in range(WORLDS):
        w = world(rng)
        g = gather(w.slices)
        claims = [(f"c{i}", parse_claim_spec(spec, f"c{i}")) for i, spec in enumerate(w.claims)]
        got = allocate(claims, NODE, w.objects(), frozenset(w.in_use))
        some = next(assignments(w, g), None)
        context = f"world {n} (seed {SEED}): slices {w.slices}, in use {sorted(w.in_use)}, claims {w.claims}"
        if isinstance(got, str):
            assert some is None, f"the allocator said {got!r}, yet {some} keeps every rule; {context}"
            refused += 1
        else:
            why = _valid(w, g, _as_assignment(w, got))
            assert why is None, f"the allocator gave {_as_assignment(w, got)}: {why}; {context}"
            found += 1
    # Worth something only if both verdicts are common.
    assert found >= WORLDS // 10 and refused >= WORLDS // 10, (found, refused)
