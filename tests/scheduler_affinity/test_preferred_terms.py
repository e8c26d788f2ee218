"""Preferred inter-pod affinity and ScheduleAnyway topology spread score nodes as
kube-scheduler's InterPodAffinity and PodTopologySpread score them (through the nodeorder
plugin's ``podaffinity.weight`` and ``podtopologyspread.weight``, as in Volcano), and a gang's
pods see each other's placements in those scores too."""

from __future__ import annotations

from collections import Counter
from typing import Any

from scheduler_plugin.config.scheduler_conf import DEFAULT_CONFIG_TEXT, load_scheduler_config
from tests.scheduler.builders import hypernode, job_pods, node, pod, podgroup, schedule

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def term(key: str, **labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def preferred(kind: str, weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            kind: {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": t}]
            }
        }
    }


def soft_spread(key: str, **labels: str) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": labels},
            }
        ]
    }


def labelled(p: dict[str, Any], **labels: str) -> dict[str, Any]:
    p["metadata"]["labels"].update(labels)
    return p


def gang(name: str, n: int, cpu: int, extra: dict[str, Any] | None) -> list[dict[str, Any]]:
    pods = job_pods(name, n, cpu=cpu, extra_spec=extra)
    for p in pods:
        p["metadata"]["labels"]["job"] = name
    return pods


def one_leaf(names: list[str]) -> list[Any]:
    return [hypernode("leaf", 1, nodes=names)]


def hard_tier_1(name: str, n: int) -> Any:
    return podgroup(name, n, topology={"mode": "hard", "highestTierAllowed": 1})


def test_a_gang_that_prefers_distinct_hosts_gets_them_where_it_would_otherwise_pack() -> None:
    nodes = [node(f"n{i}", cpu=8) for i in range(4)]
    names = [f"n{i}" for i in range(4)]
    # Without the preference the topology path packs the four 1-cpu pods onto one node.
    packed, _ = schedule(nodes, gang("plain", 4, 1, None), one_leaf(names), [hard_tier_1("plain", 4)])
    assert len(packed.bindings) == 4 and len(set(packed.bindings.values())) == 1
    spec = preferred("podAntiAffinity", 100, term(HOST, job="apart"))
    result, _ = schedule(nodes, gang("apart", 4, 1, spec), one_leaf(names), [hard_tier_1("apart", 4)])
    assert len(result.bindings) == 4
    assert len(set(result.bindings.values())) == 4


def test_a_preference_to_be_apart_never_keeps_a_gang_from_starting() -> None:
    # Two nodes for six pods: the preference cannot be met, and the gang starts anyway.
    nodes = [node(f"n{i}", cpu=8) for i in range(2)]
    spec = preferred("podAntiAffinity", 100, term(HOST, job="many"))
    result, _ = schedule(nodes, gang("many", 6, 1, spec), one_leaf(["n0", "n1"]), [hard_tier_1("many", 6)])
    assert len(result.bindings) == 6
    assert sorted(Counter(result.bindings.values()).values()) == [3, 3]


def test_a_schedule_anyway_zone_spread_balances_a_gang_over_the_zones() -> None:
    nodes = [node(f"{z}-{i}", cpu=16, labels={ZONE: z}) for z in "abc" for i in range(2)]
    names = [n["metadata"]["name"] for n in nodes]
    packed, _ = schedule(nodes, gang("plain", 6, 1, None), one_leaf(names), [hard_tier_1("plain", 6)])
    assert len({packed.bindings[k].split("-")[0] for k in packed.bindings}) == 1
    spread = soft_spread(ZONE, job="even")
    result, _ = schedule(nodes, gang("even", 6, 1, spread), one_leaf(names), [hard_tier_1("even", 6)])
    assert Counter(n.split("-")[0] for n in result.bindings.values()) == {"a": 2, "b": 2, "c": 2}


def test_a_schedule_anyway_spread_yields_when_a_zone_is_full() -> None:
    nodes = [node(f"{z}-0", cpu=4 if z == "c" else 16, labels={ZONE: z}) for z in "abc"]
    busy = pod("busy", None, cpu=4, node_name="c-0")
    spread = soft_spread(ZONE, job="even")
    result, _ = schedule(
        nodes, [busy, *gang("even", 6, 1, spread)], one_leaf(["a-0", "b-0", "c-0"]), [hard_tier_1("even", 6)]
    )
    assert Counter(result.bindings.values()) == {"a-0": 3, "b-0": 3}


def test_a_pod_that_prefers_its_cache_lands_beside_it_though_the_node_is_busier() -> None:
    nodes = [node(f"n{i}", cpu=8) for i in range(3)]
    cache = labelled(pod("cache", None, cpu=4, node_name="n1"), app="cache")
    plain, _ = schedule(nodes, [cache, *gang("plain", 1, 1, None)], [], [podgroup("plain", 1)])
    assert plain.bindings["default/plain-t0-0"] != "n1"  # the emptier nodes win on resources
    spec = preferred("podAffinity", 100, term(HOST, app="cache"))
    result, _ = schedule(nodes, [cache, *gang("near", 1, 1, spec)], [], [podgroup("near", 1)])
    assert result.bindings == {"default/near-t0-0": "n1"}


def test_a_pod_that_prefers_to_avoid_a_noisy_neighbour_goes_elsewhere() -> None:
    nodes = [node(f"n{i}", cpu=8) for i in range(2)]
    noisy = labelled(pod("noisy", None, cpu=1, node_name="n0"), app="noisy")
    filler = pod("filler", None, cpu=4, node_name="n1")
    plain, _ = schedule(nodes, [noisy, filler, *gang("plain", 1, 1, None)], [], [podgroup("plain", 1)])
    assert plain.bindings == {"default/plain-t0-0": "n0"}
    spec = preferred("podAntiAffinity", 100, term(HOST, app="noisy"))
    result, _ = schedule(nodes, [noisy, filler, *gang("quiet", 1, 1, spec)], [], [podgroup("quiet", 1)])
    assert result.bindings == {"default/quiet-t0-0": "n1"}


def test_with_no_weight_for_them_the_notes_say_preferred_terms_do_not_score() -> None:
    text = DEFAULT_CONFIG_TEXT.replace(
        "  - name: nodeorder\n",
        "  - name: nodeorder\n    arguments:\n      podaffinity.weight: 0\n      podtopologyspread.weight: 0\n",
    )
    config = load_scheduler_config(text, source="<test>")
    spec = preferred("podAffinity", 50, term(ZONE, app="db"))
    result, _ = schedule(
        [node("n0", cpu=8)], gang("soft", 1, 1, spec), [], [podgroup("soft", 1)], config=config
    )
    assert len(result.bindings) == 1
    assert any(
        "preferred podAffinity/podAntiAffinity terms are accepted without effect on node scores" in n
        for n in result.notes
    )
    default, _ = schedule([node("n0", cpu=8)], gang("soft", 1, 1, spec), [], [podgroup("soft", 1)])
    assert not any("without effect on node scores" in n for n in default.notes)


def test_a_running_pods_preference_draws_the_pod_it_prefers_to_its_host() -> None:
    # kube scores both ways: the web pod already on n1 prefers a cache beside it, so the
    # incoming cache pod, which has no term of its own, goes to n1 though n1 is busier.
    nodes = [node(f"n{i}", cpu=8) for i in range(3)]
    web = pod(
        "web", None, cpu=4, node_name="n1", extra_spec=preferred("podAffinity", 100, term(HOST, app="cache"))
    )
    cache = [labelled(p, app="cache") for p in gang("cache", 1, 1, None)]
    result, _ = schedule(nodes, [web, *cache], [], [podgroup("cache", 1)])
    assert result.bindings == {"default/cache-t0-0": "n1"}
    other = [labelled(p, app="other") for p in gang("other", 1, 1, None)]
    result, _ = schedule(nodes, [web, *other], [], [podgroup("other", 1)])
    assert result.bindings["default/other-t0-0"] != "n1"


def test_a_running_pods_required_affinity_also_draws_the_pods_it_needs() -> None:
    # A running pod's required affinity scores the pods it matches (kube's hardPodAffinityWeight).
    nodes = [node(f"n{i}", cpu=8) for i in range(3)]
    need = {
        "affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST, app="db")]}
        }
    }
    client = pod("client", None, cpu=4, node_name="n2", extra_spec=need)
    db = [labelled(p, app="db") for p in gang("db", 1, 1, None)]
    result, _ = schedule(nodes, [client, *db], [], [podgroup("db", 1)])
    assert result.bindings == {"default/db-t0-0": "n2"}


def test_a_running_pods_preference_to_be_apart_pushes_the_pod_away() -> None:
    nodes = [node(f"n{i}", cpu=8) for i in range(2)]
    loner = pod(
        "loner",
        None,
        cpu=1,
        node_name="n0",
        extra_spec=preferred("podAntiAffinity", 100, term(HOST, app="noisy")),
    )
    filler = pod("filler", None, cpu=4, node_name="n1")
    noisy = [labelled(p, app="noisy") for p in gang("noisy", 1, 1, None)]
    result, _ = schedule(nodes, [loner, filler, *noisy], [], [podgroup("noisy", 1)])
    assert result.bindings == {"default/noisy-t0-0": "n1"}
    calm = gang("calm", 1, 1, None)
    result, _ = schedule(nodes, [loner, filler, *calm], [], [podgroup("calm", 1)])
    assert result.bindings == {"default/calm-t0-0": "n0"}
