"""What an operator sees of the plugins' scores before a session decides (``explain --output
json``'s ``scores``): the parsed arguments, each plugin's node score per task and HyperNode
score per SubJob, as the session itself computes and sums them."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.config.scheduler_conf import load_scheduler_config
from scheduler_plugin.cycle.run import open_session
from scheduler_plugin.cycle.scores import session_scores

from .builders import hypernode, node, pod, podgroup

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: binpack
    arguments: {binpack.weight: 10, binpack.cpu: 2, binpack.memory: 1}
  - name: network-topology-aware
    arguments: {weight: 3}
"""


def snapshot():
    nodes = [node("n0", cpu=4), node("n1", cpu=8), node("n2", cpu=8)]
    pods = [
        pod("busy", None, cpu=6, node_name="n1", phase="Running"),
        pod("w-0", "train", cpu=2),
        pod("w-1", "train", cpu=2),
    ]
    return build_snapshot(
        nodes=nodes,
        pods=pods,
        hypernodes=[hypernode("rack0", 1, nodes=["n0", "n1"]), hypernode("rack1", 1, nodes=["n2"])],
        podgroups=[podgroup("train", 2)],
        queues=[],
        priority_classes=[],
    )


def test_an_operator_sees_each_plugins_part_of_the_node_scores_the_session_sums() -> None:
    config = load_scheduler_config(CONF, source="test")
    snap = snapshot()
    got = session_scores(snap, config, jobs={"default/train"}, clock=0.0)

    # binpack prefers the busier node: on n1 a 2-cpu pod makes it full, on n2 a quarter.
    scores = got.node_scores["default/w-0"]
    assert scores["n1"]["binpack"] > scores["n0"]["binpack"] > scores["n2"]["binpack"]
    assert set(scores["n0"]) == {"binpack", "network-topology-aware"}
    assert "default/busy" not in got.node_scores  # only the job asked for
    # w-1 is of the same SubJob and shape: scored once, for both.
    assert "default/w-1" not in got.node_scores and got.same_as == {"default/w-1": "default/w-0"}
    assert got.scores_of("default/w-1") == scores

    # The parts add up to what the session's domain search ranks nodes by.
    ssn = open_session(snap, config, 0.0)
    job = snap.jobs["default/train"]
    sj = next(iter(job.subjobs.values()))
    task = next(t for t in sj.tasks if t.key == "default/w-0")
    summed = ssn.node_scores(task, sj, np.arange(3, dtype=np.int64))
    for i, n in enumerate(snap.node_names):
        assert sum(scores[n].values()) == pytest.approx(summed[i])

    # The parsed arguments, defaults filled in.
    assert got.arguments["binpack"]["weight"] == 10
    assert got.arguments["network-topology-aware"]["weight"] == 3

    # No plugin of this configuration fences nodes off.
    assert got.node_fences == {}

    # HyperNode scores of the job's SubJob for its two pending pods (4 cpu): rack0 packs tighter.
    hn = got.hypernode_scores[sj.id]
    assert hn["rack0"]["network-topology-aware"] > hn["rack1"]["network-topology-aware"]
