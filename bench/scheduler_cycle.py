"""Cost of a whole scheduling cycle (state work + decision), incremental state vs full rebuild.

    python bench/scheduler_cycle.py            # 1k, 10k, 20k nodes
    python bench/scheduler_cycle.py --quick    # 1k and 10k nodes, fewer repetitions
    python bench/scheduler_cycle.py --sizes 2000
    python bench/scheduler_cycle.py --terms    # 10k nodes with and without inter-pod terms

Cluster: N nodes (8 GPUs, 96 cpu), 5 running pods per node (1 GPU each) in PodGroups of 50,
400 tier-1 HyperNodes (half select their nodes with a regexMatch on the name prefix, half
with a labelMatch), spines of 8 and superspines of 8 of those by exactMatch.

Scenarios, each timed from the moment the events are known to the end of the session:

(a) steady state: a cycle with no change since the previous one (every pod placed: the
    scheduler reuses the last session's result, ``run_session_reusing``);
(b) churn: 1 % of the running pods finished and 100 new pending pods (10 gangs of 10, hard
    tier 1);
(c) a gang of min(5000, N/2) pods x 2 GPUs (soft topology): the cycle that decides it,
    against the decision alone (``run_session`` on the same snapshot, masks cold);
(d) N/10 nodes added between two cycles (names interleaved with the existing ones, so the
    running pods' node indices move): the cycle after the adds, also against the state's
    earlier path for it (a whole re-layout), printed under the row.

"incremental" is :class:`scheduler_plugin.cache.cluster_state.ClusterState` fed with the events
(their cost is shown apart: a scheduler pays it as the watch delivers them, between cycles);
a cycle is what ``Scheduler.run_cycle`` computes before its binds go out: the view (the
re-read listings offered to the state, then ``snapshot()``) plus the session
(``run_session``); the fragmentation gauges, computed once the binds are under way, are
printed apart; "rebuild" is the path every cycle took before it, ``build_snapshot`` over
every object + the same session, run in the same process on the same objects. Both must decide the same
bindings (checked). Resident memory is the process's VmRSS with the state built (objects,
informer-like store and state), reported for 10k nodes / 50k pods.
"""

from __future__ import annotations

import argparse
import copy
import gc
import itertools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hyperplace.api import HyperNode, PodGroup
from hyperplace.api.constants import GROUP_NAME_ANNOTATION, TASK_INDEX_KEY, TASK_SPEC_KEY
from scheduler_plugin.algorithms.fragmentation import FragmentationConfig, snapshot_fragmentation
from scheduler_plugin.cache.cluster_state import ClusterState
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.storage import StorageListing
from scheduler_plugin.cache.verify import snapshot_differences
from scheduler_plugin.cycle import LastSession, SessionResult, run_session, run_session_reusing
from scheduler_plugin.model.snapshot import ClusterSnapshot

FRAGMENTATION = FragmentationConfig()
LEAVES = 400
PODS_PER_NODE = 5
JOB_SIZE = 50


def rss_mib() -> float:
    """Resident set size of this process (Linux /proc), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def node_name(n: int, i: int) -> str:
    return f"node-{i * LEAVES // n:03d}-{i:05d}"


def make_cluster(n: int) -> tuple[list[dict[str, Any]], list[HyperNode]]:
    nodes = []
    for i in range(n):
        nm = node_name(n, i)
        alloc = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
        nodes.append(
            {
                "metadata": {
                    "name": nm,
                    "labels": {"kubernetes.io/hostname": nm, "bench/leaf": f"leaf-{i * LEAVES // n:03d}"},
                    "resourceVersion": "1",
                },
                "spec": {},
                "status": {
                    "allocatable": alloc,
                    "capacity": alloc,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    hns = []
    for leaf in range(LEAVES):
        if leaf % 2:
            sel: dict[str, Any] = {"regexMatch": {"pattern": f"^node-{leaf:03d}-"}}
        else:
            sel = {"labelMatch": {"matchLabels": {"bench/leaf": f"leaf-{leaf:03d}"}}}
        hns.append(_hn(f"leaf-{leaf:03d}", 1, [{"type": "Node", "selector": sel}]))
    spines = [f"spine-{s:02d}" for s in range(LEAVES // 8)]
    for s, nm in enumerate(spines):
        hns.append(_hn(nm, 2, [_child(f"leaf-{x:03d}") for x in range(s * 8, s * 8 + 8)]))
    for u in range(0, len(spines), 8):
        hns.append(_hn(f"super-{u // 8}", 3, [_child(c) for c in spines[u : u + 8]]))
    return nodes, hns


def _child(name: str) -> dict[str, Any]:
    return {"type": "HyperNode", "selector": {"exactMatch": {"name": name}}}


def _hn(name: str, tier: int, members: list[dict[str, Any]]) -> HyperNode:
    return HyperNode.model_validate({"metadata": {"name": name}, "spec": {"tier": tier, "members": members}})


def make_pod(job: str, i: int, gpus: int, node: str | None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{job}-worker-{i}",
            "namespace": "default",
            "labels": {TASK_SPEC_KEY: "worker", TASK_INDEX_KEY: str(i)},
            "annotations": {GROUP_NAME_ANNOTATION: job},
            "uid": f"{job}-{i}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "schedulerName": "volcano",
            **({"nodeName": node} if node else {}),
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": str(gpus * 4), "nvidia.com/gpu": str(gpus)}}}
            ],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


def make_pg(name: str, minimum: int, topology: dict[str, Any] | None = None) -> PodGroup:
    spec: dict[str, Any] = {"minMember": minimum}
    if topology:
        spec["networkTopology"] = topology
    return PodGroup.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec,
        }
    )


def running_pods(nodes: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[PodGroup]]:
    pods, pgs = [], []
    names = [nd["metadata"]["name"] for nd in nodes]
    total = len(names) * PODS_PER_NODE
    for j in range(total // JOB_SIZE):
        job = f"run-{j:05d}"
        pgs.append(make_pg(job, JOB_SIZE))
        for i in range(JOB_SIZE):
            k = j * JOB_SIZE + i
            pods.append(make_pod(job, i, 1, names[k // PODS_PER_NODE]))
    return pods, pgs


class World:
    """The objects an API server holds, the incremental state fed from their events."""

    def __init__(self, nodes: list[dict[str, Any]], hns: list[HyperNode]) -> None:
        self.nodes, self.hns = nodes, hns
        pods, self.pgs = running_pods(nodes)
        self.pods = {f"default/{p['metadata']['name']}": p for p in pods}
        self.state = ClusterState()
        t = time.perf_counter()
        self.state.replace_all(nodes, list(self.pods.values()), hns, self.pgs)
        self.state.snapshot()
        self.initial = time.perf_counter() - t

    def view(self) -> ClusterSnapshot:
        """What ``Scheduler.run_cycle`` does before its session: the listings of the kinds
        it re-reads every cycle offered to the state (unchanged ones are recognised), then
        the snapshot."""
        st = self.state
        st.replace_hypernodes(self.hns)
        st.replace_podgroups(self.pgs)
        st.replace_queues([])
        st.replace_priority_classes([])
        return st.snapshot()

    def rebuild(self) -> ClusterSnapshot:
        return build_snapshot(
            nodes=self.nodes, pods=list(self.pods.values()), hypernodes=self.hns, podgroups=self.pgs
        )

    def put_pod(self, p: dict[str, Any]) -> None:
        self.pods[f"default/{p['metadata']['name']}"] = p
        self.state.set_pod(p)

    def add_pg(self, pg: PodGroup) -> None:
        self.pgs.append(pg)
        self.state.set_podgroup(pg)

    def churn(self, done: list[str], rep: int, pod: Any = None) -> None:
        """The churn of scenario (b): the pods ``done`` finish and 10 gangs of 10 arrive
        (``new-<rep>-<g>``, hard tier 1), each pod made by ``pod(job, g, i)`` (plain by default)."""
        for k in done:
            p = copy.copy(self.pods[k])
            p["status"] = {"phase": "Succeeded"}
            self.put_pod(p)
        for g in range(10):
            job = f"new-{rep}-{g}"
            self.add_pg(make_pg(job, 10, {"mode": "hard", "highestTierAllowed": 1}))
            for i in range(10):
                self.put_pod(make_pod(job, i, 1, None) if pod is None else pod(job, g, i))

    def bind(self, result: SessionResult) -> None:
        """What the informer would show next: the decided pods bound."""
        for key, node in result.bindings.items():
            p = copy.copy(self.pods[key])
            p["spec"] = {**p["spec"], "nodeName": node}
            p["status"] = {"phase": "Running"}
            self.put_pod(p)


LAST = LastSession()  # the incremental path's last session, as the scheduler keeps it


def decide(snap: ClusterSnapshot, last: LastSession | None = None) -> SessionResult:
    """What ``Scheduler._decide`` does with a view: the session, or with ``last`` (the
    incremental path) the last session's result while nothing changed and nothing waits
    (``run_session_reusing``). The rebuild baseline runs every session, as it always did.
    (The fragmentation gauges are computed after the binds are sent, off the binding path:
    see :func:`gauges`.)"""
    return run_session(snap) if last is None else run_session_reusing(last, snap)


GAUGES: list[float] = []  # seconds of each cycle's fragmentation gauges (off the binding path)


def gauges(snap: ClusterSnapshot, result: SessionResult) -> None:
    """What ``Scheduler.run_cycle`` does once the binds are under way: the fragmentation
    gauges of the snapshot after the session's bindings (timed apart, into ``GAUGES``)."""
    t = time.perf_counter()
    snapshot_fragmentation(snap, FRAGMENTATION, result.bindings)
    GAUGES.append(time.perf_counter() - t)


def timed(fn: Any) -> tuple[float, Any]:
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def cold(snap: ClusterSnapshot) -> None:
    snap._sig_masks = {}
    snap.memo.clear()
    for sh in snap.shapes:
        sh._mask = None


ZONES = 8
TERMS_SHARE = 0.3  # of the jobs (and so of the pods) carrying inter-pod terms


def dataset(job: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bound ReadWriteMany claim a job's pods mount (its dataset) and its volume."""
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": f"data-{job}",
            "namespace": "default",
            "uid": f"pvc-{job}",
            # Bound as kube-controller-manager leaves a claim (kube-scheduler's isPVCFullyBound).
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "1Ti"}},
            "storageClassName": "shared",
            "volumeName": f"pv-{job}",
        },
        "status": {"phase": "Bound"},
    }
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pv-{job}"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "capacity": {"storage": "1Ti"},
            "storageClassName": "shared",
            "claimRef": {"namespace": "default", "name": f"data-{job}", "uid": f"pvc-{job}"},
            "nfs": {"server": "nfs.example", "path": f"/{job}"},
        },
        "status": {"phase": "Bound"},
    }
    return claim, volume


def with_terms(p: dict[str, Any], job: str, terms: bool) -> dict[str, Any]:
    """A bench pod labelled with its job; with ``terms``, one per node (hostname anti-affinity
    against its own job), spread over the zones (maxSkew 1) and mounting its job's dataset claim
    (:func:`dataset`)."""
    p["metadata"]["labels"]["bench/job"] = job
    if terms:
        p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{job}"}}]
        sel = {"matchLabels": {"bench/job": job}}
        p["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": sel, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
        p["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": sel,
            }
        ]
    return p


def _terms_world(n: int, reps: int, terms: bool) -> tuple[World, LastSession]:
    """The cluster of :func:`terms_variant`, synced and decided once."""
    nodes, hns = make_cluster(n)
    for i, nd in enumerate(nodes):
        nd["metadata"]["labels"]["topology.kubernetes.io/zone"] = f"zone-{i % ZONES}"
    names = [nd["metadata"]["name"] for nd in nodes]
    world = World.__new__(World)
    world.nodes, world.hns, world.pgs = nodes, hns, []
    world.pods = {}
    n_jobs = n * PODS_PER_NODE // JOB_SIZE
    for j in range(n_jobs):
        job = f"run-{j:05d}"
        marked = terms and j % 10 < TERMS_SHARE * 10
        world.pgs.append(make_pg(job, JOB_SIZE))
        for i in range(JOB_SIZE):
            node = names[(j * JOB_SIZE + i * 7) % n]  # a job's pods on distinct nodes
            p = with_terms(make_pod(job, i, 1, node), job, marked)
            world.pods[f"default/{p['metadata']['name']}"] = p
    # Every job's dataset claim (the jobs with terms mount theirs), and those of the jobs to come.
    claims, volumes = zip(
        *(
            dataset(j)
            for j in [f"run-{j:05d}" for j in range(n_jobs)]
            + [f"new-{r}-{g}" for r in range(reps) for g in range(10)]
            + [f"big-{r}" for r in range(reps)]
        ),
        strict=True,
    )
    storage = StorageListing(claims=list(claims), volumes=list(volumes))
    world.state = ClusterState()
    t = time.perf_counter()
    world.state.replace_all(nodes, list(world.pods.values()), hns, world.pgs, storage=storage)
    world.state.snapshot()
    world.initial = time.perf_counter() - t
    last = LastSession()
    decide(world.view(), last)
    gc.collect()
    return world, last


def _cycle(world: World, last: LastSession) -> tuple[float, float, SessionResult]:
    """One cycle (view + session): (wall seconds, CPU seconds of this process, result). The
    CPU time is what the cycle costs whatever else the machine runs meanwhile."""
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    snap = world.view()
    res = decide(snap, last)
    return time.perf_counter() - t, time.process_time() - c, res


def _terms_churn(world: World, last: LastSession, rep: int, terms: bool) -> tuple[float, float, int]:
    """Cycle (b) of :func:`terms_variant`: (wall seconds, CPU seconds, pods placed)."""
    running = [k for k, p in world.pods.items() if p["spec"].get("nodeName")]
    done = running[rep * len(running) // 100 : (rep + 1) * len(running) // 100]
    world.churn(done, rep, lambda job, g, i: with_terms(make_pod(job, i, 1, None), job, terms and g < 3))
    wall, cpu, res = _cycle(world, last)
    world.bind(res)
    return wall, cpu, len(res.bindings)


def _terms_big(world: World, last: LastSession, rep: int, terms: bool) -> tuple[float, float, int]:
    """Cycle (c) of :func:`terms_variant`: (wall seconds, CPU seconds, pods of the gang placed). The gang is
    taken away again afterwards (not bound), so every repetition meets the same cluster."""
    job = f"big-{rep}"
    pg = make_pg(job, 2000, {"mode": "soft"})
    world.add_pg(pg)
    keys = []
    for i in range(2000):
        p = with_terms(make_pod(job, i, 1, None), job, terms)
        keys.append(f"default/{p['metadata']['name']}")
        world.put_pod(p)
    wall, cpu, res = _cycle(world, last)
    on = [res.bindings[k] for k in keys if k in res.bindings]
    if terms:
        assert len(set(on)) == len(on), "the anti-affine gang shares a node"
    for k in keys:
        del world.pods[k]
        world.state.remove_pod(k)
    world.pgs.remove(pg)
    world.state.remove_podgroup(f"default/{job}")
    return wall, cpu, len(on)


def terms_variant(n: int, reps: int) -> None:
    """The same cluster and job stream twice, without and with inter-pod terms and a dataset claim
    on 30 % of the jobs: N nodes in 8 zones (a zone is every 8th node, so each leaf spans all zones), 5 running
    pods per node, each of a 50-pod job spread one per node; cycles of (b) 1 % done + 100 new
    pending pods (10 gangs of 10, hard tier 1) and (c) a 2,000-pod gang (soft topology).
    Both clusters are held at once and their cycles alternate, so a machine that gets busier
    or quieter during the run weighs on both alike.
    Prints each cycle (view + session, median; wall and this process's CPU time, which other
    load on the machine does not inflate) and the ratio with terms / without."""
    worlds = {terms: _terms_world(n, reps, terms) for terms in (False, True)}
    gc.collect()
    gc.freeze()  # long-lived objects, as the main scenarios have them
    # Per cycle kind and variant: (wall seconds, CPU seconds) of each repetition.
    times: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    placed: dict[tuple[str, bool], int] = {}
    for kind, cycle in (("churn", _terms_churn), ("big", _terms_big)):
        for rep in range(reps):
            for terms, (world, last) in worlds.items():
                wall, cpu, placed[kind, terms] = cycle(world, last, rep, terms)
                times.setdefault((kind, terms), []).append((wall, cpu))
    sync = {terms: world.initial for terms, (world, _) in worlds.items()}
    del worlds
    gc.collect()
    fmt = "{:<44} {:>14} {:>14} {:>7}"
    print(
        f"{n} nodes, {n * PODS_PER_NODE} running pods; anti-affinity, zone spread and a dataset claim "
        f"on {TERMS_SHARE:.0%} of the jobs; medians of {reps} cycles, the two clusters alternating"
    )
    print(fmt.format("cycle (view + session)", "without ms", "with terms ms", "ratio"))
    for kind, what in (
        ("churn", "(b) 1% done + 100 new (30 with terms)"),
        ("big", "(c) gang of 2000 (with terms: all)"),
    ):
        for col, clock in ((0, "wall"), (1, "CPU")):
            a, b = (statistics.median(x[col] for x in times[kind, t]) * 1000 for t in (False, True))
            print(fmt.format(f"{what}, {clock}", f"{a:.1f}", f"{b:.1f}", f"{b / a:.2f}x"))
    a, b = sync[False] * 1000, sync[True] * 1000
    print(fmt.format("initial sync of the state, wall", f"{a:.1f}", f"{b:.1f}", f"{b / a:.2f}x"))
    print(
        f"placed: churn {placed['churn', False]} / {placed['churn', True]} pods per cycle, "
        f"big gang {placed['big', False]} / {placed['big', True]}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1k and 10k nodes, 3 repetitions")
    ap.add_argument("--sizes", type=str, default=None, help="comma-separated node counts")
    ap.add_argument(
        "--terms",
        action="store_true",
        help="the variant with hostname anti-affinity, zone spread and a dataset claim on 30%% of the jobs (10k nodes)",
    )
    args = ap.parse_args()
    if args.terms:
        for n in [int(x) for x in args.sizes.split(",")] if args.sizes else [10000]:
            terms_variant(n, 3 if args.quick else 5)
        return
    sizes = [1000, 10000] if args.quick else [1000, 10000, 20000]
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    reps = 3 if args.quick else 5

    rows: list[tuple[Any, ...]] = []
    prev_rows: dict[int, float] = {}
    memory: list[str] = []
    gauge_ms: dict[int, float] = {}
    for n in sizes:
        base_rss = rss_mib()
        nodes, hns = make_cluster(n)
        world = World(nodes, hns)
        gc.collect()
        gc.freeze()  # long-lived objects, as in a scheduler process
        mem = rss_mib()
        memory.append(
            f"{n} nodes, {len(world.pods)} pods, {len(world.pgs)} PodGroups, {len(hns)} HyperNodes: "
            f"VmRSS {mem:.0f} MiB ({mem - base_rss:+.0f} MiB for this cluster's objects and state); "
            f"initial sync {world.initial:.2f} s"
        )
        st = world.state

        # (a) steady state: no change since the previous cycle.
        # The cycles back to back, as a scheduler runs them; the rebuilds after them (a rebuild
        # walks the whole heap and would leave the next cycle's caches cold).
        inc_a, reb_a = [], []
        for _ in range(reps):
            dt, snap = timed(world.view)
            dts, res = timed(lambda s=snap: decide(s, LAST))
            gauges(snap, res)
            inc_a.append((0.0, dt, dts))
        for _ in range(reps):
            dt2, rsnap = timed(world.rebuild)
            dts2, rres = timed(lambda s=rsnap: decide(s))
            reb_a.append(dt2 + dts2)
            assert res.bindings == rres.bindings
            del rsnap, rres  # a scheduler holds one view: the baseline's must not burden the next timing
        rows.append((n, "(a) no change", inc_a, reb_a, None))

        # (b) 1 % of running pods finished and 100 new pending pods (10 gangs of 10).
        inc_b, reb_b = [], []
        running = [
            k
            for k, p in world.pods.items()
            if p["spec"].get("nodeName") and p["status"]["phase"] == "Running"
        ]
        for rep in range(reps):
            done = running[rep * len(running) // 100 : (rep + 1) * len(running) // 100]
            t = time.perf_counter()
            world.churn(done, rep)
            events = time.perf_counter() - t
            dt, snap = timed(world.view)
            dts, res = timed(lambda s=snap: decide(s, LAST))
            gauges(snap, res)
            inc_b.append((events, dt, dts))
            dt2, rsnap = timed(world.rebuild)
            dts2, rres = timed(lambda s=rsnap: decide(s))
            reb_b.append(dt2 + dts2)
            assert res.bindings == rres.bindings, "incremental and rebuilt decisions differ"
            assert snapshot_differences(snap, rsnap) == []
            del rsnap, rres
            world.bind(res)
        rows.append((n, "(b) 1% done + 100 new", inc_b, reb_b, None))

        # (d) nodes arriving: n/10 new nodes (names between the existing ones, in the same
        # HyperNodes) between two cycles. "prev" is the state's earlier path for it: a whole
        # re-layout (every pod re-accounted, every job rebuilt).
        inc_d, reb_d, prev_d = [], [], []
        fresh = []
        for nd in world.nodes[5::10][: n // 10]:
            nm = nd["metadata"]["name"] + "x"
            fresh.append(
                {
                    **nd,
                    "metadata": {
                        **nd["metadata"],
                        "name": nm,
                        "labels": {**nd["metadata"]["labels"], "kubernetes.io/hostname": nm},
                    },
                }
            )
        t = time.perf_counter()
        for nd in fresh:
            world.nodes.append(nd)
            st.set_node(nd)
        events = time.perf_counter() - t
        dt, snap = timed(world.view)
        dts, res = timed(lambda s=snap: decide(s, LAST))
        gauges(snap, res)
        inc_d.append((events, dt, dts))
        dt2, rsnap = timed(world.rebuild)
        dts2, rres = timed(lambda s=rsnap: decide(s))
        reb_d.append(dt2 + dts2)
        assert res.bindings == rres.bindings, "incremental and rebuilt decisions differ"
        assert snapshot_differences(snap, rsnap) == []
        del rsnap, rres
        st._layout_dirty, st.changes = True, st.changes + 1
        dtp, psnap = timed(world.view)
        prev_d.append(dtp + dts)
        # A cycle on the re-laid-out view (untimed), as the scheduler would run next: its jobs
        # were all rebuilt, and (c) is to see a steady cluster, not their first session.
        decide(psnap, LAST)
        del psnap
        rows.append((n, f"(d) {len(fresh)} nodes added", inc_d, reb_d, None))
        prev_rows[n] = statistics.median(prev_d)

        # (c) a big gang: the cycle that decides it vs the decision alone.
        size = min(5000, n // 2)
        job = "big"
        t = time.perf_counter()
        world.add_pg(make_pg(job, size, {"mode": "soft"}))
        for i in range(size):
            world.put_pod(make_pod(job, i, 2, None))
        events = time.perf_counter() - t
        dt, snap = timed(world.view)
        dts, res = timed(lambda s=snap: decide(s, LAST))
        gauges(snap, res)
        decision = []
        for _ in range(reps):
            cold(snap)
            decision.append(timed(lambda s=snap: run_session(s))[0])
        dt2, rsnap = timed(world.rebuild)
        dts2, rres = timed(lambda s=rsnap: decide(s))
        assert res.bindings == rres.bindings, "incremental and rebuilt decisions differ"
        del rsnap, rres
        placed = sum(1 for k in res.bindings if k.startswith("default/big-"))
        rows.append(
            (
                n,
                f"(c) gang {size} x 2 GPU ({placed} placed)",
                [(events, dt, dts)],
                [dt2 + dts2],
                statistics.median(decision),
            )
        )
        gauge_ms[n] = statistics.median(GAUGES) * 1000
        GAUGES.clear()
        LAST.snapshot = LAST.result = None
        gc.unfreeze()
        del world, st, snap
        gc.collect()
        print(f"  done {n} nodes", file=sys.stderr)

    fmt = "{:>6} {:<34} {:>9} {:>8} {:>10} {:>9} {:>11} {:>11} {:>8}"
    print(
        fmt.format(
            "nodes",
            "scenario",
            "events ms",
            "view ms",
            "session ms",
            "cycle ms",
            "rebuild ms",
            "decision ms",
            "speedup",
        )
    )
    p50: dict[tuple[str, int], float] = {}
    for n, what, inc, reb, decision in rows:
        ev = statistics.median(e for e, _, _ in inc) * 1000
        view = statistics.median(v for _, v, _ in inc) * 1000
        sess = statistics.median(x for _, _, x in inc) * 1000
        cyc = statistics.median(v + x for _, v, x in inc) * 1000
        rb = statistics.median(reb) * 1000
        p50[(what[:3], n)] = cyc
        dec = f"{decision * 1000:.1f}" if decision is not None else "-"
        print(
            fmt.format(
                n,
                what,
                f"{ev:.1f}",
                f"{view:.1f}",
                f"{sess:.1f}",
                f"{cyc:.1f}",
                f"{rb:.1f}",
                dec,
                f"{rb / cyc:.1f}x",
            )
        )
        if decision is not None:
            print(f"{'':>6} {'':<34} cycle / decision alone = {cyc / (decision * 1000):.2f}x")
        if what.startswith("(d)") and n in prev_rows:
            print(f"{'':>6} {'':<34} earlier state path (full re-layout): {prev_rows[n] * 1000:.1f} ms")
    print(
        "events: applying the watch events to the state (paid as they arrive, between cycles); "
        "cycle = view (snapshot) + session; rebuild = build_snapshot + run_session"
    )
    for n, ms in gauge_ms.items():
        print(
            f"fragmentation gauges at {n} nodes: {ms:.1f} ms per cycle (median), computed after the binds are sent"
        )
    print()
    for sc in ("(a)", "(b)", "(c)", "(d)"):
        xs = [n for n in sizes if (sc, n) in p50]
        for a, b in itertools.pairwise(xs):
            print(f"{sc}: cycle growth {a} -> {b} nodes = {p50[(sc, b)] / p50[(sc, a)]:.2f}x")
    print()
    for m in memory:
        print("memory:", m)


if __name__ == "__main__":
    main()
