"""The incremental state and the full rebuild agree on Kubernetes' own PodGroups as nodes are
relabelled and PodGroups come and go (the topology key's virtual tier moves with them)."""

from __future__ import annotations

import copy
from typing import Any

from hyperplace.api.workload import UpstreamPodGroup, as_volcano_podgroup
from scheduler_plugin.cache.cluster_state import ClusterState
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cycle.carried import verify_state
from scheduler_plugin.model.snapshot import ClusterSnapshot

from .test_simulated import RACK, gang, node, pods


def _pods() -> list[dict[str, Any]]:
    out = pods("g", 2)
    for p in out:
        p["status"] = {"phase": "Pending"}
    return out


def check(
    state: ClusterState, nodes: list[dict[str, Any]], pgs: list[Any], ps: list[dict[str, Any]]
) -> ClusterSnapshot:
    state.replace_all(nodes, ps, [], pgs, [], [], [], [], [])
    snap = state.snapshot()
    rebuilt = build_snapshot(nodes=nodes, pods=ps, podgroups=pgs)
    verify_state(state, snap, rebuilt)
    return snap


def test_the_virtual_tier_follows_labels_and_podgroups_alike_in_both_builds() -> None:
    nodes = [node(f"r{r}-n{i}", f"rack-{r}") for r in range(2) for i in range(2)]
    job = as_volcano_podgroup(UpstreamPodGroup.model_validate(gang("g", 2)))
    ps = _pods()
    state = ClusterState(detach=True)

    snap = check(state, nodes, [job], ps)
    assert snap.tree.tier_names == {RACK: 1}
    assert sorted(snap.tree.names[:-1]) == [f"{RACK}=rack-0", f"{RACK}=rack-1"]
    assert snap.jobs["train/g"].topology is not None and snap.jobs["train/g"].topology.limit == 1
    assert snap.jobs["train/g"].min_member == 2

    # A node moves to a third rack: the tree is rebuilt from the new labels.
    nodes = copy.deepcopy(nodes)
    nodes[0]["metadata"]["labels"][RACK] = "rack-2"
    snap = check(state, nodes, [job], ps)
    assert len(snap.tree.names) == 4  # three racks and the root

    # The PodGroup goes: no key, no virtual tier; its pods wait for it.
    snap = check(state, nodes, [], ps)
    assert snap.tree.tier_names == {} and len(snap.tree.names) == 1
    assert snap.orphan_pods["train/g-0"] == "PodGroup train/g not found"

    # Back, now basic: no key, no tree either.
    basic = as_volcano_podgroup(
        UpstreamPodGroup.model_validate({**gang("g", 2), "spec": {"schedulingPolicy": {"basic": {}}}})
    )
    snap = check(state, nodes, [basic], ps)
    assert snap.jobs["train/g"].min_member == 1 and snap.jobs["train/g"].topology is None
