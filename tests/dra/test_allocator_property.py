"""The allocator against a brute-force enumerator on random small worlds: it finds devices for a
pod's claims on a node exactly when some assignment exists, and what it returns is valid."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler_plugin.filters.dra import ClaimSpec, DeviceId, DeviceInfo, DraObjects, Request, ResultInfo
from scheduler_plugin.filters.dra_allocator import CANNOT_ALLOCATE, Allocated, allocate
from scheduler_plugin.filters.dra_cel import selector_matches
from scheduler_plugin.filters.nodes import NodeStatic

from .builders import DRIVER, dev, device_class, labels_selector, node, rslice, spec, world

NODES = [node("n1", rack="r1"), node("n2", rack="r2")]
MEM = f"device.attributes['{DRIVER}'].mem"
CLASSES = [device_class("gpu", f"device.driver == '{DRIVER}'"), device_class("big", f"{MEM} == 80")]
CLIQUE = f"{DRIVER}/clique"
# Go stops the search with an error here even when another choice would do.
GO_ABORTS = "because a claim constraint would not be satisfied"


@dataclass
class Case:
    objects: DraObjects
    claims: list[tuple[str, ClaimSpec]]
    node: NodeStatic
    in_use: set[DeviceId]
    wire: Any  # for the failure message


def random_case(rng: random.Random) -> Case:
    slices: list[dict[str, Any]] = []
    n = 0
    has_incomplete = False
    for i in range(rng.randint(1, 3)):
        devs = []
        for _ in range(rng.randint(1, 3)):
            attrs: dict[str, Any] = {"mem": rng.choice([40, 80])}
            if rng.random() < 0.8:
                attrs["clique"] = rng.choice("ab")
            d = dev(f"d{n}", attrs)
            if rng.random() < 0.15:
                d["taints"] = [{"key": "k", "value": rng.choice("xy"), "effect": "NoSchedule"}]
            devs.append(d)
            n += 1
        where: dict[str, Any] = rng.choice(
            [
                {"node_name": "n1"},
                {"node_name": "n2"},
                {"all_nodes": True},
                {"selector": labels_selector("rack", "r1")},
            ]
        )
        count = 1
        if rng.random() < 0.15:
            count, has_incomplete = 2, True
        slices.append(rslice(f"s{i}", devs, pool=f"p{i}", count=count, **where))
    requests: list[list[dict[str, Any]]] = []
    for _ in range(rng.randint(1, 2)):
        reqs: list[dict[str, Any]] = []
        for r in range(rng.randint(1, 2)):
            reqs.append(random_request(rng, f"r{r}", all_ok=not has_incomplete))
        requests.append(reqs)
    claims = []
    for c, reqs in enumerate(requests):
        cons = []
        if rng.random() < 0.4:
            names = [r["name"] for r in reqs]
            cons.append({"requests": rng.sample(names, rng.randint(0, len(names))), "matchAttribute": CLIQUE})
        claims.append((f"default/c{c}", spec(*reqs, constraints=cons)))
    objs = world(CLASSES, slices)
    every = [d.id for s in objs.slices.values() for d in s.devices]
    in_use = {d for d in every if rng.random() < 0.2}
    return Case(objs, claims, rng.choice(NODES), in_use, (slices, requests))


def random_request(rng: random.Random, name: str, all_ok: bool) -> dict[str, Any]:
    def body() -> dict[str, Any]:
        b: dict[str, Any] = {"deviceClassName": rng.choice(["gpu", "gpu", "big"])}
        if all_ok and rng.random() < 0.15:
            b["allocationMode"] = "All"
        else:
            b["count"] = rng.randint(1, 2)
        if rng.random() < 0.3:
            b["selectors"] = [{"cel": {"expression": f"{MEM} == {rng.choice([40, 80])}"}}]
        if rng.random() < 0.1:
            b["adminAccess"] = True
        if rng.random() < 0.2:
            b["tolerations"] = [{"key": "k", "value": "x", "effect": "NoSchedule"}]
        return b

    if rng.random() < 0.3:
        return {"name": name, "firstAvailable": [{"name": f"s{j}", **body()} for j in range(2)]}
    return {"name": name, "exactly": body()}


# ------------------------------------------------------------------------- the oracle
def reachable(case: Case) -> list[tuple[DeviceInfo, Any]]:
    """Devices of complete pools whose slice serves the node, in Go's order."""
    out: list[tuple[DeviceInfo, Any]] = []
    for pool in case.objects.pools(case.node):
        if pool.incomplete or pool.invalid:
            continue
        for s in pool.slices:
            out.extend((d, s) for d in s.devices)
    return out


def selects(case: Case, req: Request, d: DeviceInfo) -> bool:
    """The device passes the request's class and selectors."""
    exprs = (*case.objects.classes[req.device_class].selectors, *req.selectors)
    return all(selector_matches(e, d) is True for e in exprs)


def allowed(req: Request, d: DeviceInfo) -> bool:
    """The request may have the device: untainted, or its only taint ``k=x`` tolerated."""
    return not d.taints or (bool(req.tolerations) and d.taints == (("k", "x", "NoSchedule"),))


Pick = tuple[int, str, str, bool, DeviceInfo]  # claim, request name, base name, admin, device


def valid(case: Case, picks: Sequence[Pick]) -> bool:
    """Go's rules for one set of picks, in allocation order."""
    for i, (ci, _, _, admin, d) in enumerate(picks):
        if not admin and d.id in case.in_use:
            return False
        for cj, _, _, _, e in picks[:i]:
            if e.id == d.id and (ci == cj or not admin):
                return False
    for ci, (_, cs) in enumerate(case.claims):
        for con in cs.constraints:
            vals = [
                d.attributes.get(con.attribute)
                for cj, name, base, _, d in picks
                if cj == ci and (not con.requests or base in con.requests or name in con.requests)
            ]
            if any(v is None for v in vals) or len({(type(v), v) for v in vals}) > 1:
                return False
    return True


def assignments(case: Case) -> Iterator[list[Pick]]:
    """Every way to give each request (each subrequest choice) its devices."""
    slots: list[list[list[Pick]]] = []  # per request: the candidate pick lists
    reach = [d for d, _ in reachable(case)]
    for ci, (_, cs) in enumerate(case.claims):
        for r in cs.requests:
            options: list[list[Pick]] = []
            for alt in r.alternatives:
                fit = [d for d in reach if selects(case, alt, d)]
                if alt.mode == "All":
                    # Every device the selectors pass, so a tainted one makes it impossible.
                    groups = [tuple(fit)] if fit and all(allowed(alt, d) for d in fit) else []
                else:
                    usable = [d for d in fit if allowed(alt, d)]
                    groups = list(itertools.combinations(usable, alt.count))
                options += [[(ci, alt.name, r.name, alt.admin_access, d) for d in g] for g in groups]
            slots.append(options)
    for choice in itertools.product(*slots):
        yield [p for group in choice for p in group]


def exists(case: Case) -> bool:
    return any(valid(case, picks) for picks in assignments(case))


def check_result(case: Case, got: Allocated) -> None:
    reach = {d.id: d for d, _ in reachable(case)}
    picks: list[Pick] = []
    held: set[DeviceId] = set()
    for (key, cs), ca in zip(case.claims, got.claims, strict=True):
        assert ca.claim == key
        results = ca.allocation.results
        ci = [k for k, _ in case.claims].index(key)
        for r in cs.requests:
            mine = [x for x in results if x.request == r.name or x.request.startswith(f"{r.name}/")]
            assert len({x.request for x in mine}) == 1, "one subrequest per request"
            alt = next(a for a in r.alternatives if a.name == mine[0].request)
            for x in mine:
                d = reach[(x.driver, x.pool, x.device)]
                assert selects(case, alt, d) and allowed(alt, d)
                assert x == ResultInfo(alt.name, d.driver, d.pool, d.name, alt.admin_access, alt.tolerations)
                picks.append((ci, alt.name, r.name, alt.admin_access, d))
                if not alt.admin_access:
                    held.add(d.id)
            if alt.mode == "All":
                assert {(x.driver, x.pool, x.device) for x in mine} == {
                    i for i, d in reach.items() if selects(case, alt, d)
                }
            else:
                assert len(mine) == alt.count
        assert len(results) == sum(1 for p in picks if p[0] == ci)
    assert valid(case, picks)
    assert got.devices == held


@pytest.mark.parametrize("seed", range(400))
def test_the_allocator_finds_devices_exactly_when_some_assignment_exists(seed: int) -> None:
    case = random_case(random.Random(seed))
    got = allocate(case.claims, case.node, case.objects, case.in_use)
    possible = exists(case)
    if isinstance(got, str):
        if GO_ABORTS in got:
            return  # Go's error, whatever the other choices
        assert got == CANNOT_ALLOCATE, got
        assert not possible, f"an assignment exists: {case.wire}"
    else:
        assert possible
        check_result(case, got)
