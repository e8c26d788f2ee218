"""Inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity filters them, for
gangs: the pods of one gang see each other as if bound one after another."""

from __future__ import annotations

from typing import Any

from tests.scheduler.builders import hypernode, job_pods, node, pod, podgroup, schedule

HOST = "kubernetes.io/hostname"
RACK = "example.com/rack"
ZONE = "topology.kubernetes.io/zone"


def term(key: str, **labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}}


def affine(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}}


def labelled(pods: list[dict[str, Any]], **labels: str) -> list[dict[str, Any]]:
    for p in pods:
        p["metadata"]["labels"].update(labels)
    return pods


def racks(n_racks: int, per_rack: int, cpu: int = 8) -> list[dict[str, Any]]:
    return [
        node(f"r{r}-n{i}", cpu=cpu, labels={RACK: f"r{r}", ZONE: f"z{r % 2}"})
        for r in range(n_racks)
        for i in range(per_rack)
    ]


def test_a_gang_with_hostname_anti_affinity_lands_on_distinct_nodes() -> None:
    # Each pod would fit four to a node by room; its anti-affinity against its own job keeps
    # one per node, so the 6-pod gang needs 6 of the 8 nodes.
    pods = labelled(job_pods("train", 6, cpu=1, extra_spec=anti(term(HOST, job="train"))), job="train")
    result, _ = schedule(racks(2, 4), pods, [], [podgroup("train", 6)])
    assert len(result.bindings) == 6
    assert len(set(result.bindings.values())) == 6


def test_a_64_pod_gang_with_anti_affinity_takes_64_distinct_nodes_inside_its_tier() -> None:
    nodes = racks(3, 40)
    tree = [hypernode(f"rack{r}", 1, nodes=[f"r{r}-n{i}" for i in range(40)]) for r in range(3)]
    tree.append(hypernode("spine", 2, children=["rack0", "rack1", "rack2"]))
    pods = labelled(job_pods("big", 64, cpu=1, extra_spec=anti(term(HOST, job="big"))), job="big")
    pg = podgroup("big", 64, topology={"mode": "hard", "highestTierAllowed": 2})
    result, _ = schedule(nodes, pods, tree, [pg])
    assert len(result.bindings) == 64
    assert len(set(result.bindings.values())) == 64
    # The fewest racks: two full ones are not needed when 40 + 24 do it.
    assert len({n.split("-")[0] for n in result.bindings.values()}) == 2


def test_a_gang_that_cannot_spread_over_enough_nodes_waits_whole_and_says_why() -> None:
    pods = labelled(job_pods("wide", 5, cpu=1, extra_spec=anti(term(HOST, job="wide"))), job="wide")
    result, _ = schedule(racks(1, 4), pods, [], [podgroup("wide", 5)])
    assert result.bindings == {}
    expl = result.jobs["default/wide"].explanation
    assert expl is not None
    # The pods placed first match its own anti-affinity (checked before theirs against it).
    assert "0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules" in (
        expl.predicates or ""
    )


def test_a_gang_required_to_share_a_rack_lands_in_one_rack_that_holds_it() -> None:
    # Rack r0 has 2 nodes, r1 has 4: the first pod could start anywhere, but only r1 holds all 4
    # pods of 6 cpu on 8-cpu nodes, so the whole gang goes there.
    nodes = [node(f"r0-n{i}", cpu=8, labels={RACK: "r0"}) for i in range(2)]
    nodes += [node(f"r1-n{i}", cpu=8, labels={RACK: "r1"}) for i in range(4)]
    pods = labelled(job_pods("co", 4, cpu=6, extra_spec=affine(term(RACK, job="co"))), job="co")
    result, _ = schedule(nodes, pods, [], [podgroup("co", 4)])
    assert len(result.bindings) == 4
    assert {n.split("-")[0] for n in result.bindings.values()} == {"r1"}


def test_affinity_to_pods_already_running_follows_them() -> None:
    running = pod("db-0", None, cpu=1, node_name="r1-n2")
    running["metadata"]["labels"]["app"] = "db"
    pods = job_pods("app", 2, cpu=1, extra_spec=affine(term(RACK, app="db")))
    result, _ = schedule(racks(2, 4), [running, *pods], [], [podgroup("app", 2)])
    assert len(result.bindings) == 2
    assert all(n.startswith("r1-") for n in result.bindings.values())


def test_an_affinity_no_running_pod_matches_keeps_the_pod_pending_with_kubes_words() -> None:
    pods = job_pods("lonely", 1, cpu=1, extra_spec=affine(term(RACK, app="nowhere")))
    result, _ = schedule(racks(1, 3), pods, [], [podgroup("lonely", 1)])
    assert result.bindings == {}
    expl = result.jobs["default/lonely"].explanation
    assert expl is not None
    assert "3 node(s) didn't match pod affinity rules" in (expl.predicates or "")


def test_a_running_pods_anti_affinity_keeps_matching_pods_out_of_its_zone() -> None:
    # The noisy pod repels every pod labelled tier=batch from its zone, though the batch pods
    # have no term of their own.
    noisy = pod("noisy", None, cpu=1, node_name="r0-n0", extra_spec=anti(term(ZONE, tier="batch")))
    pods = labelled(job_pods("batch", 3, cpu=1), tier="batch")
    result, _ = schedule(racks(2, 4), [noisy, *pods], [], [podgroup("batch", 3)])
    assert len(result.bindings) == 3
    # Racks r0 is zone z0: the batch pods all land in zone z1 (rack r1).
    assert all(n.startswith("r1-") for n in result.bindings.values())


def test_a_pod_other_labels_are_not_kept_out() -> None:
    noisy = pod("noisy", None, cpu=1, node_name="r0-n0", extra_spec=anti(term(ZONE, tier="batch")))
    result, _ = schedule(racks(1, 1), [noisy, *job_pods("web", 1, cpu=1)], [], [podgroup("web", 1)])
    assert result.bindings == {"default/web-t0-0": "r0-n0"}


def test_namespaces_limit_a_term_to_the_pods_it_names() -> None:
    other = pod("other-ns", None, cpu=1, node_name="r0-n0", ns="team-b")
    other["metadata"]["labels"]["app"] = "x"
    # The term means the pod's own namespace (default): the pod in team-b does not repel it...
    pods = job_pods("a", 1, cpu=1, extra_spec=anti(term(HOST, app="x")))
    result, _ = schedule(racks(1, 1), [other, *pods], [], [podgroup("a", 1)])
    assert result.bindings == {"default/a-t0-0": "r0-n0"}
    # ...unless the term lists team-b.
    t = {**term(HOST, app="x"), "namespaces": ["team-b"]}
    pods = job_pods("b", 1, cpu=1, extra_spec=anti(t))
    result, _ = schedule(racks(1, 1), [other, *pods], [], [podgroup("b", 1)])
    assert result.bindings == {}


def test_a_malformed_selector_keeps_the_pod_waiting_with_the_field_named() -> None:
    bad = {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Sideways"}]},
        "topologyKey": HOST,
    }
    result, _ = schedule(racks(1, 2), job_pods("bad", 1, extra_spec=anti(bad)), [], [podgroup("bad", 1)])
    assert result.bindings == {}
    why = result.unschedulable["default/bad-t0-0"]
    assert "labelSelector.matchExpressions[0].operator" in why and "Sideways" in why


def test_a_gang_whose_tier_is_too_small_to_spread_says_how_many_it_fits() -> None:
    nodes = racks(2, 4)
    tree = [hypernode(f"rack{r}", 1, nodes=[f"r{r}-n{i}" for i in range(4)]) for r in range(2)]
    pods = labelled(job_pods("tight", 5, cpu=1, extra_spec=anti(term(HOST, job="tight"))), job="tight")
    pg = podgroup("tight", 5, topology={"mode": "hard", "highestTierAllowed": 1})
    result, _ = schedule(nodes, pods, tree, [pg])
    assert result.bindings == {}
    expl = result.jobs["default/tight"].explanation
    assert expl is not None
    (tier,) = expl.tiers
    assert (tier.fits, tier.needed) == (4, 5)


def test_a_zone_anti_affinity_gang_in_a_tier_sees_the_zones_it_has_taken() -> None:
    # Racks span both zones here: a rack holds at most two pods that repel each other by zone.
    nodes = [
        node(f"r{r}-n{i}", cpu=8, labels={RACK: f"r{r}", ZONE: f"z{i % 2}"})
        for r in range(2)
        for i in range(4)
    ]
    tree = [hypernode(f"rack{r}", 1, nodes=[f"r{r}-n{i}" for i in range(4)]) for r in range(2)]
    pods = labelled(job_pods("z", 3, cpu=1, extra_spec=anti(term(ZONE, job="z"))), job="z")
    pg = podgroup("z", 3, topology={"mode": "hard", "highestTierAllowed": 1})
    result, _ = schedule(nodes, pods, tree, [pg])
    assert result.bindings == {}
    expl = result.jobs["default/z"].explanation
    assert expl is not None
    assert "didn't match pod anti-affinity rules" in (expl.predicates or "")


def test_a_running_pods_anti_affinity_is_named_as_kube_names_it() -> None:
    noisy = pod("noisy", None, cpu=1, node_name="r0-n0", extra_spec=anti(term(ZONE, tier="batch")))
    pods = labelled(job_pods("batch", 1, cpu=1), tier="batch")
    result, _ = schedule(racks(1, 3), [noisy, *pods], [], [podgroup("batch", 1)])
    assert result.bindings == {}
    expl = result.jobs["default/batch"].explanation
    assert expl is not None
    assert "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules" in (
        expl.predicates or ""
    )
