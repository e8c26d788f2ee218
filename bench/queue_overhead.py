"""What queues cost a scheduling session: the default configuration (enqueue, drf, proportion)
against the same tiers without the queue plugins, on the same snapshot, in the same run.

    python bench/queue_overhead.py            # 1k and 10k nodes
    python bench/queue_overhead.py --quick    # 1k and 5k nodes, fewer repetitions

Cluster: the one of ``bench/scheduler_cycle.py`` (N nodes of 8 GPUs, 5 running pods per node in
PodGroups of 50, 400 tier-1 HyperNodes under spines), its running PodGroups spread over 4 queues,
plus 40 pending gangs of 10 (1 GPU each, minResources set, hard tier 1) over the same queues.

"first" is the first session on a fresh snapshot (per-job queue sums computed); "steady" the
median of the next sessions on the same snapshot (sums reused, as the incremental state reuses
unchanged jobs). Both configurations must bind the same number of pods (checked: the queues are
sized so no queue limit binds here).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scheduler_cycle import make_cluster, make_pg, make_pod, running_pods
from hyperplace.api import Queue
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG, load_scheduler_config
from scheduler_plugin.cycle import run_session
from scheduler_plugin.model.snapshot import ClusterSnapshot

QUEUES = ("q0", "q1", "q2", "q3")
BASELINE = load_scheduler_config(
    """
actions: "allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""
)


def world(n: int) -> ClusterSnapshot:
    nodes, hns = make_cluster(n)
    pods, pgs = running_pods(nodes)
    for i, pg in enumerate(pgs):
        pg.spec.queue = QUEUES[i % len(QUEUES)]
    # Room for the pending gangs: the last 10 % of the nodes are left empty.
    keep = {nd["metadata"]["name"] for nd in nodes[: int(n * 0.9)]}
    pods = [p for p in pods if p["spec"].get("nodeName") in keep]
    for j in range(40):
        name = f"new-{j:03d}"
        pg = make_pg(name, 10, {"mode": "hard", "highestTierAllowed": 1})
        pg.spec.queue = QUEUES[j % len(QUEUES)]
        pg.spec.min_resources = {"cpu": "40", "nvidia.com/gpu": "10"}
        pgs.append(pg)
        pods += [make_pod(name, i, 1, None) for i in range(10)]
    queues = [Queue.model_validate({"metadata": {"name": q}, "spec": {"weight": 1}}) for q in QUEUES]
    return build_snapshot(nodes=nodes, pods=pods, hypernodes=hns, podgroups=pgs, queues=queues)


def measure(n: int, reps: int) -> None:
    rows = []
    bound = {}
    for label, conf in (
        ("queues off (baseline)", BASELINE),
        ("default (enqueue, drf, proportion)", DEFAULT_CONFIG),
    ):
        snap = world(n)
        t = time.perf_counter()
        first = run_session(snap, conf)
        t_first = time.perf_counter() - t
        steady = []
        for _ in range(reps):
            t = time.perf_counter()
            run_session(snap, conf)
            steady.append(time.perf_counter() - t)
        bound[label] = len(first.bindings)
        rows.append((label, t_first, statistics.median(steady), len(first.bindings)))
    assert len(set(bound.values())) == 1, bound
    jobs = len(snap.jobs)
    print(
        f"\n{n} nodes, {jobs} PodGroups in {len(QUEUES)} queues, {len(snap.jobs) * 0 + sum(len(j.tasks) for j in snap.jobs.values())} pods"
    )
    print(f"  {'configuration':38} {'first':>9} {'steady':>9} {'bound':>6}")
    for label, f, s, b in rows:
        print(f"  {label:38} {f * 1000:8.1f}ms {s * 1000:8.1f}ms {b:6d}")
    print(f"  queue overhead, steady: {(rows[1][2] - rows[0][2]) * 1000:+.1f} ms per session")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1k and 5k nodes, 3 repetitions")
    args = ap.parse_args()
    sizes = [1000, 5000] if args.quick else [1000, 10000]
    for n in sizes:
        measure(n, 3 if args.quick else 5)


if __name__ == "__main__":
    main()
