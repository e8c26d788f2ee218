"""Property tests against an independent oracle on small random clusters (<= 16 nodes, <= 3 tiers).

The oracle computes, in plain Python and from the generator's own tree description, how many
pods of the job's shape every node can take (by repeated subtraction), and from that which
domains can host the job (or its partitions). The scheduler must then place a hard job iff a
feasible domain within its limit exists, always at the lowest feasible tier, never over-commit
a node, never place a gang partly, and keep every partition inside a domain within its limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .builders import hypernode, job_pods, node, partition_policy, pod, podgroup, schedule


@dataclass
class World:
    nodes: list[dict[str, Any]]
    busy: list[dict[str, Any]]
    hns: list[Any]
    domains: dict[str, tuple[int, frozenset[str]]]  # name -> (tier, node names), root included
    free: dict[str, dict[str, int]]
    alloc: dict[str, dict[str, int]]
    top: int


@st.composite
def worlds(draw: st.DrawFn) -> World:
    n = draw(st.integers(2, 16))
    tiers = draw(st.integers(1, 3))
    names = [f"n{i:02d}" for i in range(n)]
    nodes, busy, free, alloc = [], [], {}, {}
    for nm in names:
        cpu = draw(st.sampled_from([2, 4, 8]))
        gpu = draw(st.sampled_from([0, 2, 4]))
        nodes.append(node(nm, cpu=cpu, gpu=gpu))
        ucpu = draw(st.integers(0, cpu))
        ugpu = draw(st.integers(0, gpu))
        if ucpu or ugpu:
            busy.append(pod(f"busy-{nm}", None, cpu=ucpu, gpu=ugpu, node_name=nm))
        free[nm] = {"cpu": cpu - ucpu, "gpu": gpu - ugpu, "pods": 110 - (1 if ucpu or ugpu else 0)}
        alloc[nm] = {"cpu": cpu, "gpu": gpu}
    # Leaves: consecutive runs of nodes; a few nodes may stay outside every leaf.
    hns, domains = [], {}
    level: list[tuple[str, frozenset[str]]] = []
    i = 0
    while i < n:
        size = draw(st.integers(1, 4))
        members = names[i : i + size]
        i += size
        if draw(st.integers(0, 9)) == 0:
            continue  # nodes attached to no HyperNode
        nm = f"l{len(level)}"
        hns.append(hypernode(nm, 1, nodes=members))
        domains[nm] = (1, frozenset(members))
        level.append((nm, frozenset(members)))
    for t in range(2, tiers + 1):
        if len(level) <= 1:
            break
        k = draw(st.integers(2, 3))
        nxt = []
        for gi in range(0, len(level), k):
            grp = level[gi : gi + k]
            nm = f"t{t}-{gi // k}"
            members = frozenset().union(*(g[1] for g in grp))
            hns.append(hypernode(nm, t, children=[g[0] for g in grp]))
            domains[nm] = (t, members)
            nxt.append((nm, members))
        level = nxt
    top = max((d[0] for d in domains.values()), default=0) + 1
    domains["<cluster-top-hypernode>"] = (top, frozenset(names))
    return World(nodes, busy, hns, domains, free, alloc, top)


def capacity(free: dict[str, int], cpu: int, gpu: int) -> int:
    """Pods of (cpu, gpu) one node can take, by repeated subtraction (independent of the scheduler)."""
    c = {"cpu": free["cpu"], "gpu": free["gpu"], "pods": free["pods"]}
    k = 0
    while c["cpu"] >= cpu and c["gpu"] >= gpu and c["pods"] >= 1:
        c["cpu"] -= cpu
        c["gpu"] -= gpu
        c["pods"] -= 1
        k += 1
    return k


def lowest_domain_tier(w: World, nodes: set[str]) -> int:
    return min(t for t, members in w.domains.values() if nodes <= members)


def check_no_overcommit(w: World, bindings: dict[str, str], cpu: int, gpu: int) -> None:
    for nm in w.free:
        k = sum(1 for v in bindings.values() if v == nm)
        assert k * cpu <= w.free[nm]["cpu"] and k * gpu <= w.free[nm]["gpu"], nm


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(worlds(), st.integers(1, 8), st.integers(1, 3), st.integers(0, 2), st.integers(1, 4))
def test_hard_job_is_placed_iff_a_domain_within_its_limit_fits_and_at_the_lowest_feasible_tier(
    w: World, replicas: int, cpu: int, gpu: int, limit: int
) -> None:
    limit = min(limit, w.top)
    cap = {nm: capacity(f, cpu, gpu) for nm, f in w.free.items()}
    feasible = [
        t for t, members in w.domains.values() if t <= limit and sum(cap[m] for m in members) >= replicas
    ]
    pg = podgroup("j", replicas, topology={"mode": "hard", "highestTierAllowed": limit})
    result, _ = schedule(w.nodes, w.busy + job_pods("j", replicas, cpu=cpu, gpu=gpu), w.hns, [pg])
    bound = {k: v for k, v in result.bindings.items() if k.startswith("default/j-")}
    check_no_overcommit(w, bound, cpu, gpu)
    if feasible:
        assert len(bound) == replicas
        assert lowest_domain_tier(w, set(bound.values())) == min(feasible)
        assert result.jobs["default/j"].phase == "Running"
    else:
        assert bound == {}  # never partly placed
        assert result.jobs["default/j"].phase == "Pending"
        assert result.jobs["default/j"].explanation is not None


@SETTINGS
@given(
    worlds(),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(0, 2),
    st.integers(1, 3),
    st.integers(0, 2),
)
def test_partitions_each_fit_in_a_domain_within_their_limit_and_the_gang_is_all_or_nothing(
    w: World, parts: int, size: int, cpu: int, gpu: int, plimit: int, extra: int
) -> None:
    plimit = min(plimit, w.top)
    jlimit = min(plimit + extra, w.top)
    cap = {nm: capacity(f, cpu, gpu) for nm, f in w.free.items()}

    def partitions_in(h_members: frozenset[str]) -> int:
        # Maximal domains within H whose tier <= plimit; partitions cannot straddle them.
        inner = [m for t, m in w.domains.values() if t <= plimit and m <= h_members]
        maximal = [m for m in inner if not any(m < o for o in inner)]
        seen: set[frozenset[str]] = set()
        total = 0
        for m in maximal:
            if m in seen:
                continue
            seen.add(m)
            total += sum(cap[x] for x in m) // size
        return total

    feasible = [t for t, members in w.domains.values() if t <= jlimit and partitions_in(members) >= parts]
    pg = podgroup(
        "j",
        parts * size,
        topology={"mode": "hard", "highestTierAllowed": jlimit},
        sub_groups=[partition_policy("t0", size, tier=plimit)],
    )
    pods = job_pods("j", parts * size, cpu=cpu, gpu=gpu, partition_size=size)
    result, _ = schedule(w.nodes, w.busy + pods, w.hns, [pg])
    bound = {k: v for k, v in result.bindings.items() if k.startswith("default/j-")}
    check_no_overcommit(w, bound, cpu, gpu)
    if not feasible:
        assert bound == {}
        return
    assert len(bound) == parts * size
    assert lowest_domain_tier(w, set(bound.values())) == min(feasible)
    for p in range(parts):
        members = {bound[f"default/j-t0-{i}"] for i in range(p * size, (p + 1) * size)}
        assert lowest_domain_tier(w, members) <= plimit, (p, members)


@SETTINGS
@given(
    worlds(),
    st.lists(
        st.tuples(st.integers(1, 5), st.integers(1, 3), st.integers(0, 2), st.integers(0, 3)),
        min_size=1,
        max_size=4,
    ),
)
def test_several_jobs_never_overcommit_and_each_gang_is_whole_or_absent(
    w: World, jobs: list[tuple[int, int, int, int]]
) -> None:
    pods: list[dict[str, Any]] = []
    pgs = []
    need: dict[str, int] = {}
    for j, (replicas, cpu, gpu, kind) in enumerate(jobs):
        name = f"j{j}"
        pods += job_pods(name, replicas, cpu=cpu, gpu=gpu, partition_size=1 if kind == 3 else None)
        if kind == 0:
            pgs.append(podgroup(name, replicas))
        elif kind == 1:
            pgs.append(podgroup(name, replicas, topology={"mode": "hard", "highestTierAllowed": 1}))
        elif kind == 2:
            pgs.append(podgroup(name, replicas, topology={"mode": "soft"}))
        else:
            pgs.append(podgroup(name, replicas, sub_groups=[partition_policy("t0", 1, tier=1)]))
        need[name] = replicas
    result, _ = schedule(w.nodes, w.busy + pods, w.hns, pgs)
    # No node over-committed on any resource, counting every pod bound by this session.
    req = {p["metadata"]["name"]: p for p in pods}
    for nm in w.free:
        mine = [k.split("/", 1)[1] for k, v in result.bindings.items() if v == nm]
        cpu_used = sum(
            int(req[m]["spec"]["containers"][0]["resources"]["requests"].get("cpu", 0)) for m in mine
        )
        gpu_used = sum(
            int(req[m]["spec"]["containers"][0]["resources"]["requests"].get("nvidia.com/gpu", 0))
            for m in mine
        )
        assert cpu_used <= w.free[nm]["cpu"] and gpu_used <= w.free[nm]["gpu"], (nm, mine)
    for name, replicas in need.items():
        placed = sum(1 for k in result.bindings if k.startswith(f"default/{name}-"))
        assert placed in (0, replicas)
        assert (result.jobs[f"default/{name}"].phase == "Running") == (placed == replicas)
