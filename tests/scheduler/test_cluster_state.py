"""The incremental cluster state gives the snapshot (and so the decisions) a rebuild gives.

A scheduler keeps its state from watch events instead of re-reading the cluster every
cycle; these tests drive random sequences of node, pod, PodGroup, HyperNode and
PriorityClass events through both and compare after each step.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperplace.api import HyperNode, PodGroup
from scheduler_plugin.cache.cluster_state import ClusterState
from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.cache.verify import StateDriftError, snapshot_differences, verify_snapshot
from scheduler_plugin.cycle import run_session
from scheduler_plugin.cycle.carried import carried_differences
from scheduler_plugin.model.snapshot import ClusterSnapshot

from .builders import hypernode, node, pod, podgroup

# Names that sort before, between and after the others: a node arriving shifts the indices
# of every node after it, which the state must carry into the jobs it keeps.
NODES = [*(f"n{i}" for i in range(6)), "m1", "n10", "o1"]
PODS = [f"p{i}" for i in range(10)]
GROUPS = ["g0", "g1"]


class World:
    """The objects an API server would hold, next to the state fed with their events."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.hns: dict[str, HyperNode] = {}
        self.pgs: dict[str, PodGroup] = {}
        self.pcs: list[dict[str, Any]] = []

    def rebuild(self) -> ClusterSnapshot:
        return build_snapshot(
            nodes=list(self.nodes.values()),
            pods=list(self.pods.values()),
            hypernodes=list(self.hns.values()),
            podgroups=list(self.pgs.values()),
            priority_classes=self.pcs,
        )

    def apply(self, ev: tuple[Any, ...]) -> None:
        kind = ev[0]
        st_ = self.state
        if kind == "node":
            _, name, cpu, switch, ready = ev
            self.nodes[name] = node(name, cpu=cpu, labels={"switch": switch}, ready=ready)
            st_.set_node(copy.deepcopy(self.nodes[name]))
        elif kind == "gpu-node":
            _, name = ev
            self.nodes[name] = node(name, cpu=8, gpu=4)
            st_.set_node(copy.deepcopy(self.nodes[name]))
        elif kind == "rm-node":
            self.nodes.pop(ev[1], None)
            st_.remove_node(ev[1])
        elif kind == "pod":
            _, name, group, cpu, gpu, ports, other = ev
            extra = (
                {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}],
                                 "resources": {"requests": {"cpu": str(cpu)}}}]}
                if ports
                else None
            )  # fmt: skip
            p = pod(
                name, group, cpu=cpu, gpu=gpu, scheduler="other" if other else "volcano", extra_spec=extra
            )
            self.pods[f"default/{name}"] = p
            st_.set_pod(copy.deepcopy(p))
        elif kind == "bind":
            _, name, target = ev
            current = self.pods.get(f"default/{name}")
            if current is not None and target in self.nodes:
                bound = copy.deepcopy(current)
                bound["spec"]["nodeName"] = target
                bound["status"]["phase"] = "Running"
                self.pods[f"default/{name}"] = bound
                st_.set_pod(copy.deepcopy(bound))
        elif kind == "finish":
            current = self.pods.get(f"default/{ev[1]}")
            if current is not None:
                done = copy.deepcopy(current)
                done["status"]["phase"] = "Succeeded"
                self.pods[f"default/{ev[1]}"] = done
                st_.set_pod(copy.deepcopy(done))
        elif kind == "touch":  # our own condition patch: nothing the state reads changes
            current = self.pods.get(f"default/{ev[1]}")
            if current is not None:
                touched = copy.deepcopy(current)
                touched["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
                touched["metadata"]["resourceVersion"] = str(len(self.pods))
                self.pods[f"default/{ev[1]}"] = touched
                st_.set_pod(copy.deepcopy(touched))
        elif kind == "rm-pod":
            self.pods.pop(f"default/{ev[1]}", None)
            st_.remove_pod(f"default/{ev[1]}")
        elif kind == "pg":
            _, name, minimum, mode, *rest = ev
            queue, min_cpu, phase = rest if rest else (None, None, None)
            topo = {
                None: None,
                "hard": {"mode": "hard", "highestTierAllowed": 1},
                "soft": {"mode": "soft"},
                "named": {"mode": "hard", "highestTierName": "spine"},
            }[mode]
            pg = podgroup(name, minimum, topology=topo, queue=queue)
            if min_cpu is not None:
                pg.spec.min_resources = {"cpu": str(min_cpu)}
            if phase is not None:
                pg = PodGroup.model_validate({**pg.to_dict(), "status": {"phase": phase}})
            self.pgs[f"default/{name}"] = pg
            st_.set_podgroup(pg)
        elif kind == "rm-pg":
            self.pgs.pop(f"default/{ev[1]}", None)
            st_.remove_podgroup(f"default/{ev[1]}")
        elif kind == "hn":
            _, name, how = ev
            if how == "regex":
                hn = hypernode(name, 1, regex="n[0-2]$")
            elif how == "label":
                hn = HyperNode.model_validate(
                    {"metadata": {"name": name}, "spec": {"tier": 1, "tierName": "leaf", "members": [
                        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"switch": "s1"}}}}]}}
                )  # fmt: skip
            elif how == "exact":
                hn = hypernode(name, 1, nodes=["n3", "n4", "ghost"])
            else:
                hn = hypernode(name, 2, children=["h0", "h1"], tier_name="spine")
            self.hns[name] = hn
            st_.set_hypernode(hn)
        elif kind == "rm-hn":
            self.hns.pop(ev[1], None)
            st_.remove_hypernode(ev[1])
        elif kind == "pc":
            self.pcs = [{"metadata": {"name": "high"}, "value": ev[1], "globalDefault": True}]
            st_.replace_priority_classes(copy.deepcopy(self.pcs))


events = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NODES), st.sampled_from([2, 4]), st.sampled_from(["s0", "s1"]), st.booleans()),
    st.tuples(st.just("gpu-node"), st.sampled_from(NODES)),
    st.tuples(st.just("rm-node"), st.sampled_from(NODES)),
    st.tuples(st.just("pod"), st.sampled_from(PODS), st.sampled_from([*GROUPS, None]), st.sampled_from([1, 2]),
              st.sampled_from([0, 0, 1]), st.booleans(), st.sampled_from([False, False, False, True])),
    st.tuples(st.just("bind"), st.sampled_from(PODS), st.sampled_from(NODES)),
    st.tuples(st.just("finish"), st.sampled_from(PODS)),
    st.tuples(st.just("rm-pod"), st.sampled_from(PODS)),
    st.tuples(st.just("touch"), st.sampled_from(PODS)),
    st.tuples(st.just("pg"), st.sampled_from(GROUPS), st.integers(1, 3), st.sampled_from([None, "hard", "soft", "named"])),
    # A queue the cluster has or not, minResources, the phase the controller wrote: what the
    # queue sums carried between snapshots depend on.
    st.tuples(st.just("pg"), st.sampled_from(GROUPS), st.integers(1, 3), st.just(None),
              st.sampled_from([None, "default", "nowhere"]), st.sampled_from([None, 1, 3]),
              st.sampled_from([None, "Inqueue", "Running"])),
    st.tuples(st.just("rm-pg"), st.sampled_from(GROUPS)),
    st.tuples(st.just("hn"), st.sampled_from(["h0", "h1", "h2"]), st.sampled_from(["regex", "label", "exact", "spine"])),
    st.tuples(st.just("rm-hn"), st.sampled_from(["h0", "h1", "h2"])),
    st.tuples(st.just("pc"), st.integers(0, 2)),
    st.just(("cycle",)),
    st.just(("cycle",)),
    st.just(("cycle",)),
)  # fmt: skip


def decisions(snap: ClusterSnapshot) -> tuple[Any, ...]:
    r = run_session(snap)
    jobs = {k: (o.phase, o.allocated_hypernode, o.subgroups) for k, o in r.jobs.items()}
    return r.bindings, jobs, r.unschedulable


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(events, min_size=1, max_size=40))
def test_random_event_sequences_keep_the_incremental_state_equal_to_a_rebuild(evs: list[Any]) -> None:
    world = World()
    snaps = []
    for ev in [*evs, ("cycle",)]:
        if ev[0] != "cycle":
            world.apply(ev)
            continue
        snap = world.state.snapshot()
        rebuilt = world.rebuild()
        assert snapshot_differences(snap, rebuilt) == []
        # The per-queue and per-job sums carried from the previous snapshot, patched by the
        # jobs that changed, are what adding them up afresh gives.
        assert carried_differences(snap) == []
        assert decisions(snap) == decisions(rebuilt)
        snaps.append((snap, copy.deepcopy(snap.used), list(snap.node_names), task_nodes(snap)))
    # A snapshot handed out earlier never changed under later events (copy-on-write), nor
    # did the tasks of its jobs (nodes arriving later renumber the nodes of new views only).
    for snap, used, names, nodes in snaps:
        assert (snap.used == used).all() and snap.node_names == names
        assert task_nodes(snap) == nodes


def task_nodes(snap: ClusterSnapshot) -> dict[str, int]:
    return {t.key: t.node for j in snap.jobs.values() for t in j.tasks}


def test_a_cycle_with_no_change_reuses_the_previous_view() -> None:
    world = World()
    for i in range(4):
        world.apply(("node", f"n{i}", 4, "s0", True))
    world.apply(("pg", "g0", 2, None))
    world.apply(("pod", "p0", "g0", 1, 0, False, False))
    first = world.state.snapshot()
    assert world.state.snapshot() is first
    world.apply(("bind", "p0", "n1"))
    second = world.state.snapshot()
    assert second is not first
    assert first.used[1].sum() == 0, "the earlier view must not see the later bind"
    assert snapshot_differences(second, world.rebuild()) == []


def test_verify_names_what_drifted() -> None:
    world = World()
    world.apply(("node", "n0", 4, "s0", True))
    world.apply(("pod", "p0", None, 1, 0, False, False))
    world.apply(("bind", "p0", "n0"))
    snap = world.state.snapshot()
    rebuilt = world.rebuild()
    rebuilt.used[0, 0] += 1000  # what a missed event would look like
    with pytest.raises(StateDriftError, match="used"):
        verify_snapshot(world.state, snap, rebuilt)


def test_a_node_deleted_under_a_running_gang_pod_leaves_the_pod_counted_as_a_rebuild_does() -> None:
    world = World()
    for i in range(3):
        world.apply(("node", f"n{i}", 4, "s0", True))
    world.apply(("pg", "g0", 2, None))
    world.apply(("pod", "p0", "g0", 1, 0, False, False))
    world.apply(("pod", "p1", "g0", 1, 0, False, False))
    world.apply(("bind", "p0", "n1"))
    world.state.snapshot()
    world.apply(("rm-node", "n1"))
    snap = world.state.snapshot()
    # The pod still runs for its gang (Volcano reads the pod, not the node), with no room.
    assert snapshot_differences(snap, world.rebuild()) == []
    p0 = next(t for t in snap.jobs["default/g0"].tasks if t.key == "default/p0")
    assert (p0.running, p0.node) == (True, -1)
    assert snap.missing_node_pods == {"default/p0": "n1"}
    assert decisions(snap) == decisions(world.rebuild())
    # The Node comes back: the pod is on it again, and nothing is missing any more.
    world.apply(("node", "n1", 4, "s0", True))
    back = world.state.snapshot()
    assert snapshot_differences(back, world.rebuild()) == []
    assert back.missing_node_pods == {}
    assert next(t for t in back.jobs["default/g0"].tasks if t.key == "default/p0").node == 1


def test_a_relist_rebuilds_once_and_then_goes_on_incrementally() -> None:
    world = World()
    for i in range(4):
        world.apply(("node", f"n{i}", 4, "s0", True))
    world.apply(("pg", "g0", 1, None))
    world.apply(("pod", "p0", "g0", 1, 0, False, False))
    world.state.snapshot()
    # Meanwhile (a watch gap): a node went, a pod was bound elsewhere.
    del world.nodes["n3"]
    p = copy.deepcopy(world.pods["default/p0"])
    p["spec"]["nodeName"] = "n2"
    world.pods["default/p0"] = p
    world.state.replace_all(
        copy.deepcopy(list(world.nodes.values())), copy.deepcopy(list(world.pods.values())),
        [], list(world.pgs.values()),
    )  # fmt: skip
    assert snapshot_differences(world.state.snapshot(), world.rebuild()) == []
    world.apply(("finish", "p0"))
    assert world.state.changes == 1
    assert snapshot_differences(world.state.snapshot(), world.rebuild()) == []


def test_a_relist_of_the_objects_already_held_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # A harness (or a resync) that hands back the very objects it fed costs no re-parsing
    # and no new view; a relist with fresh copies of changed nodes is still read.
    import scheduler_plugin.cache.cluster_state as cs

    parsed: list[str] = []
    real = cs.parse_node
    monkeypatch.setattr(cs, "parse_node", lambda obj: parsed.append(obj["metadata"]["name"]) or real(obj))
    world = World()
    nodes = [node(f"n{i}", cpu=4) for i in range(3)]
    world.state.replace_all(nodes, [], [], [])
    first = world.state.snapshot()
    parsed.clear()
    world.state.replace_all(nodes, [], [], [])
    assert parsed == []
    assert world.state.changes == 0
    assert world.state.snapshot() is first
    relabelled = copy.deepcopy(nodes)
    relabelled[1]["metadata"]["labels"] = {"switch": "s9"}
    world.state.replace_all(relabelled, [], [], [])
    assert world.state.changes == 1
    assert snapshot_differences(world.state.snapshot(), build_snapshot(nodes=relabelled, pods=[])) == []


def test_a_job_naming_a_tier_is_re_read_when_the_tier_appears() -> None:
    world = World()
    for i in range(3):
        world.apply(("node", f"n{i}", 4, "s0", True))
    world.apply(("pg", "g0", 1, "named"))
    world.apply(("pod", "p0", "g0", 1, 0, False, False))
    # No tier is called "spine" yet: placed without a tier limit, with a warning (as Volcano).
    assert world.state.snapshot().jobs["default/g0"].warnings
    world.apply(("hn", "h0", "regex"))
    world.apply(("hn", "h2", "spine"))
    snap = world.state.snapshot()
    assert not snap.jobs["default/g0"].warnings and not snap.jobs["default/g0"].problems
    assert snapshot_differences(snap, world.rebuild()) == []


def test_nodes_arriving_and_leaving_are_merged_into_the_layout_without_a_rebuild(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A cluster scaling up: nodes join between (and around) the ones already running pods,
    # and one leaves. The next view moves the running tasks' node indices along and gives
    # what a rebuild gives, without re-laying out the whole state.
    world = World()
    for name in ("n1", "n3", "n5"):
        world.apply(("node", name, 4, "s0", True))
    world.apply(("hn", "h0", "regex"))
    world.apply(("pg", "g0", 2, None))
    world.apply(("pod", "p0", "g0", 1, 0, True, False))
    world.apply(("pod", "p1", "g0", 1, 0, False, False))
    world.apply(("bind", "p0", "n3"))
    world.apply(("bind", "p1", "n5"))
    world.apply(("pod", "p2", "g1", 1, 0, False, False))
    world.apply(("pg", "g1", 1, "hard"))
    before = world.state.snapshot()
    monkeypatch.setattr(ClusterState, "_relayout", lambda self: pytest.fail("full re-layout"))
    for name in ("m1", "n0", "n2", "n4", "o1"):
        world.apply(("node", name, 2, "s1", True))
    world.apply(("rm-node", "n1"))
    world.apply(("bind", "p2", "n0"))  # a pod bound to a node that arrived in the same cycle
    after = world.state.snapshot()
    assert after.node_names == ["m1", "n0", "n2", "n3", "n4", "n5", "o1"]
    assert snapshot_differences(after, world.rebuild()) == []
    assert decisions(after) == decisions(world.rebuild())
    assert {t.key: t.node for t in after.jobs["default/g0"].tasks} == {"default/p0": 3, "default/p1": 5}
    assert {t.key: t.node for t in before.jobs["default/g0"].tasks} == {"default/p0": 1, "default/p1": 2}
    assert before.used[1].sum() > 0 and after.used[3].tolist() == before.used[1].tolist()
