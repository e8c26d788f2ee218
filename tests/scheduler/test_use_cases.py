"""Design use cases (000) and behaviours users rely on: binpack, determinism, bounded explanations."""

from __future__ import annotations

from scheduler_plugin.config.scheduler_conf import SchedulerConfig, load_scheduler_config

from .builders import hypernode, job_pods, node, partition_policy, pod, podgroup, schedule


def gpu_cluster(leaves: int = 4, per_leaf: int = 4, per_spine: int = 2) -> tuple[list, list]:
    nodes = [node(f"n{i:02d}", cpu=64, gpu=8) for i in range(leaves * per_leaf)]
    hns = []
    for li in range(leaves):
        hns.append(
            hypernode(f"leaf{li}", 1, nodes=[f"n{i:02d}" for i in range(li * per_leaf, (li + 1) * per_leaf)])
        )
    for si in range(0, leaves, per_spine):
        hns.append(
            hypernode(f"spine{si // per_spine}", 2, children=[f"leaf{x}" for x in range(si, si + per_spine)])
        )
    return nodes, hns


def leaf_of(name: str, per_leaf: int = 4) -> int:
    return int(name[1:]) // per_leaf


def test_use_case_1_prefers_one_tier1_zone_then_one_tier2_zone() -> None:
    nodes, hns = gpu_cluster()
    # Fits a leaf: all four 8-GPU pods in one tier-1 zone.
    result, _ = schedule(
        nodes, job_pods("small", 4, cpu=8, gpu=8), hns, [podgroup("small", 4, topology={"mode": "soft"})]
    )
    assert len({leaf_of(n) for n in result.bindings.values()}) == 1
    # Too big for a leaf: one tier-2 zone (two leaves of the same spine), never across spines.
    result, _ = schedule(
        nodes, job_pods("big", 6, cpu=8, gpu=8), hns, [podgroup("big", 6, topology={"mode": "soft"})]
    )
    leaves = {leaf_of(n) for n in result.bindings.values()}
    assert len(result.bindings) == 6 and leaves in ({0, 1}, {2, 3})
    assert result.jobs["default/big"].allocated_hypernode in ("spine0", "spine1")


def test_use_case_2_groups_stay_in_one_hccs_zone_and_the_job_as_low_as_possible() -> None:
    nodes, hns = gpu_cluster(leaves=4, per_leaf=2)
    pods = job_pods("llm", 6, cpu=8, gpu=8, partition_size=2)
    pg = podgroup("llm", 6, topology={"mode": "soft"}, sub_groups=[partition_policy("t0", 2, tier=1)])
    result, _ = schedule(nodes, pods, hns, [pg])
    assert len(result.bindings) == 6
    for p in range(3):
        assert len({leaf_of(result.bindings[f"default/llm-t0-{i}"], 2) for i in (2 * p, 2 * p + 1)}) == 1
    # Three groups of two nodes need three leaves: more than a spine holds, so tier 3 (the root).
    assert result.jobs["default/llm"].allocated_hypernode == "<cluster-top-hypernode>"


def test_node_level_binpack_fills_the_partly_used_node_first() -> None:
    conf = load_scheduler_config(
        """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 5
  - name: network-topology-aware
"""
    )
    nodes = [node("a", cpu=16, gpu=8), node("b", cpu=16, gpu=8)]
    hns = [hypernode("leaf", 1, nodes=["a", "b"])]
    busy = [pod("busy", None, cpu=1, gpu=4, node_name="b")]
    pg = podgroup("j", 1, topology={"mode": "hard", "highestTierAllowed": 1})
    result, _ = schedule(nodes, [*busy, *job_pods("j", 1, cpu=1, gpu=4)], hns, [pg], config=conf)
    assert result.bindings == {"default/j-t0-0": "b"}


def test_results_are_deterministic_across_runs_and_seeds() -> None:
    from scheduler_plugin.cycle import run_session

    nodes, hns = gpu_cluster()
    pods = job_pods("a", 5, cpu=8, gpu=4) + job_pods("b", 6, cpu=8, gpu=8, partition_size=2)
    pgs = [
        podgroup("a", 5),
        podgroup(
            "b",
            6,
            topology={"mode": "hard", "highestTierAllowed": 2},
            sub_groups=[partition_policy("t0", 2, tier=1)],
        ),
    ]
    first, snap = schedule(nodes, pods, hns, pgs)
    assert first.bindings and first.bindings == run_session(snap).bindings == run_session(snap).bindings


def test_explanations_stay_short_on_large_clusters() -> None:
    nodes, hns = gpu_cluster(leaves=64, per_leaf=4, per_spine=8)
    result, _ = schedule(
        nodes,
        job_pods("huge", 9, cpu=8, gpu=8),
        hns,
        [podgroup("huge", 9, topology={"mode": "hard", "highestTierAllowed": 1})],
    )
    expl = result.jobs["default/huge"].explanation
    assert expl is not None
    assert expl.lines() == [
        "cannot place 9 pods within tier <= 1",
        "tier 1: best leaf0 fits 4 of 9 pods, short 40 nvidia.com/gpu on 5 nodes",
    ]
    assert len(expl.message()) < 300


def test_hypernode_binpack_weights_from_the_configuration_steer_the_domain_choice() -> None:
    # leafA is busy on cpu, leafB on GPUs. A job asking for both goes where the weighted
    # utilisation (the user guide's plugin arguments) is highest.
    nodes = [node(f"a{i}", cpu=16, gpu=8) for i in range(2)] + [
        node(f"b{i}", cpu=16, gpu=8) for i in range(2)
    ]
    hns = [hypernode("leafA", 1, nodes=["a0", "a1"]), hypernode("leafB", 1, nodes=["b0", "b1"])]
    busy = [pod("cpu-hog", None, cpu=12, node_name="a0"), pod("gpu-hog", None, cpu=1, gpu=6, node_name="b0")]
    pods = job_pods("j", 1, cpu=2, gpu=2)
    pg = podgroup("j", 1, topology={"mode": "hard", "highestTierAllowed": 1})

    def conf(cpu: int, gpu: int) -> SchedulerConfig:
        return load_scheduler_config(
            f"""
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: network-topology-aware
    arguments:
      hypernode.binpack.cpu: {cpu}
      hypernode.binpack.memory: 0
      hypernode.binpack.resources: nvidia.com/gpu
      hypernode.binpack.resources.nvidia.com/gpu: {gpu}
"""
        )

    result, _ = schedule(nodes, [*busy, *pods], hns, [pg], config=conf(5, 1))
    assert result.jobs["default/j"].allocated_hypernode == "leafA"
    result, _ = schedule(nodes, [*busy, *pods], hns, [pg], config=conf(1, 5))
    assert result.jobs["default/j"].allocated_hypernode == "leafB"


def test_plugin_switches_from_the_configuration_are_honoured() -> None:
    # priority's job order switched off: the older job wins although the newer one has priority.
    conf = load_scheduler_config(
        """
actions: "allocate"
tiers:
- plugins:
  - name: priority
    enableJobOrder: false
  - name: gang
  - name: predicates
"""
    )
    pcs = [{"metadata": {"name": "high"}, "value": 1000}]
    pods = job_pods("old", 1, cpu=4, created="2026-01-01T00:00:00Z") + job_pods(
        "new", 1, cpu=4, created="2026-01-02T00:00:00Z"
    )
    pgs = [
        podgroup("old", 1, created="2026-01-01T00:00:00Z"),
        podgroup("new", 1, priority_class="high", created="2026-01-02T00:00:00Z"),
    ]
    result, _ = schedule([node("n0", cpu=4)], pods, [], pgs, priority_classes=pcs, config=conf)
    assert result.bindings == {"default/old-t0-0": "n0"}
    on = load_scheduler_config("actions: allocate\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n")
    result, _ = schedule([node("n0", cpu=4)], pods, [], pgs, priority_classes=pcs, config=on)
    assert result.bindings == {"default/new-t0-0": "n0"}
