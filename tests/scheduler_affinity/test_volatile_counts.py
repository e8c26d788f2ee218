"""The counts the session keeps for pods with inter-pod affinity or spread terms are brought up
to date from what each placement changed; after any sequence of placements and undos they
must equal counts made from scratch (randomized)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler_plugin.cache.rebuild import build_snapshot
from scheduler_plugin.framework.alloc_state import AllocState
from tests.scheduler.builders import node, pod, podgroup

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
HOST = "kubernetes.io/hostname"


def _terms(rng: random.Random, app: str) -> dict[str, Any]:
    key = rng.choice([HOST, ZONE, RACK])
    sel = {"matchLabels": {"app": rng.choice(["a", "b", app])}}
    spec: dict[str, Any] = {}
    kind = rng.choice(["anti", "aff", "spread", "both"])
    if kind in ("anti", "both"):
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": sel, "topologyKey": key}]
            }
        }
    if kind == "aff":
        spec["affinity"] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": sel, "topologyKey": key}]
            }
        }
    if kind in ("spread", "both"):
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": rng.randint(1, 2),
                "topologyKey": rng.choice([HOST, ZONE, RACK]),
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": rng.choice(["a", "b"])}},
                **({"minDomains": 3} if rng.random() < 0.2 else {}),
            }
        ]
    return spec


@pytest.mark.parametrize("seed", range(12))
def test_kept_counts_equal_fresh_counts_after_any_placements(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [
        node(f"n{i}", cpu=rng.choice([2, 4, 8]), labels={ZONE: f"z{i % 3}", RACK: f"r{i // 4}"})
        for i in range(rng.randint(6, 14))
    ]
    pods, pgs = [], []
    for j in range(6):
        app = rng.choice(["a", "b", "c"])
        p = pod(f"p{j}", f"g{j}", cpu=1, extra_spec=_terms(rng, app))
        p["metadata"]["labels"]["app"] = app
        pods.append(p)
        pgs.append(podgroup(f"g{j}", 1))
    for j in range(rng.randint(0, 8)):
        b = pod(f"run{j}", None, cpu=1, node_name=rng.choice(nodes)["metadata"]["name"])
        b["metadata"]["labels"]["app"] = rng.choice(["a", "b"])
        pods.append(b)
    snap = build_snapshot(nodes=nodes, pods=pods, podgroups=pgs)
    state = AllocState(snap)
    volatile = [sh for sh in snap.shapes if state.volatile(sh)]
    assert volatile
    placed: list[tuple[int, int]] = []
    for _ in range(25):
        for sh in volatile:
            assert np.array_equal(state.node_counts(sh), state.compute_counts(sh)), f"shape {sh.id}"
            assert np.array_equal(state.dom_counts(sh), snap.tree.domain_sums(state.compute_counts(sh)))
        if placed and rng.random() < 0.3:
            sid, n = placed.pop(rng.randrange(len(placed)))
            state.apply([sid], [n], -1)
        else:
            sh = rng.choice(snap.shapes)
            cand = np.flatnonzero(state.node_counts(sh) > 0)
            if len(cand):
                n = int(rng.choice(cand.tolist()))
                state.apply([sh.id], [n], +1)
                placed.append((sh.id, n))


@pytest.mark.parametrize("seed", range(12))
def test_what_a_session_places_in_steps_is_valid_one_pod_after_another(seed: int) -> None:
    """Pods placed several per step (distinct domains of each interacting key) must each be
    allowed in the order they were placed, replayed one by one from the same snapshot."""
    rng = random.Random(1000 + seed)
    nodes = [
        node(f"n{i}", cpu=rng.choice([2, 4, 8]), labels={ZONE: f"z{i % 3}", RACK: f"r{i // 4}"})
        for i in range(rng.randint(6, 16))
    ]
    pods, pgs = [], []
    for j in range(4):
        app = rng.choice(["a", "b"])
        terms = _terms(rng, app)
        size = rng.randint(1, 6)
        for i in range(size):
            p = pod(f"g{j}-{i}", f"g{j}", cpu=1, extra_spec=terms, index=i)
            p["metadata"]["labels"]["app"] = app
            pods.append(p)
        pgs.append(podgroup(f"g{j}", size))
    from scheduler_plugin.cycle import run_session

    snap = build_snapshot(nodes=nodes, pods=pods, podgroups=pgs)
    result = run_session(snap)
    replay = AllocState(snap)
    shape_of = {t.key: t.shape for job in snap.jobs.values() for t in job.tasks}
    index = {n: i for i, n in enumerate(snap.node_names)}
    for key, name in result.bindings.items():
        sh = snap.shapes[shape_of[key]]
        n = index[name]
        assert replay.node_counts(sh)[n] > 0, f"{key} on {name} is not allowed after the pods before it"
        replay.apply([sh.id], [n], +1)
