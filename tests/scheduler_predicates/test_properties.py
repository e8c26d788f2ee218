"""Property tests: pod_requests invariants and taint/toleration matching."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperplace.kube.requests import pod_requests
from hyperplace.kube.tolerations import tolerates_taint as toleration_tolerates_taint
from scheduler_plugin.filters.node_resources_fit import insufficient_resources
from scheduler_plugin.filters.nodes import node_static_from_dict
from scheduler_plugin.filters.pod_constraints import compile_pod_constraints, static_feasibility_mask

from .helpers import make_node

RESOURCES = ["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"]

# Quantities as the API sees them: integers, milli strings and binary suffixes.
quantity = st.one_of(
    st.integers(0, 64),
    st.integers(0, 64_000).map(lambda m: f"{m}m"),
    st.integers(0, 512).map(lambda g: f"{g}Gi"),
)
resource_list = st.dictionaries(st.sampled_from(RESOURCES), quantity, max_size=4)


@st.composite
def containers(draw: st.DrawFn, sidecar: bool | None = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "resources": {"requests": draw(resource_list)}}
    if draw(st.booleans()):
        c["resources"]["limits"] = draw(resource_list)
    if sidecar is None:
        sidecar = draw(st.booleans())
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(st.lists(containers(), min_size=1, max_size=4))}
    inits = draw(st.lists(containers(sidecar=None), max_size=4))
    if inits:
        spec["initContainers"] = inits
    if draw(st.booleans()):
        spec["overhead"] = draw(resource_list)
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def alone(container: dict[str, Any]) -> dict[str, int]:
    """Requests of a pod holding only this container, minus the pod slot."""
    out = pod_requests(
        {"spec": {"containers": [{k: v for k, v in container.items() if k != "restartPolicy"}]}}
    )
    del out["pods"]
    return out


@given(pods())
def test_every_pod_takes_exactly_one_pod_slot(pod: dict[str, Any]) -> None:
    assert pod_requests(pod)["pods"] == 1000


@given(pods())
def test_requests_cover_every_single_container(pod: dict[str, Any]) -> None:
    total = pod_requests(pod)
    for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
        for name, milli in alone(c).items():
            assert total.get(name, 0) >= milli


@given(pods(), containers())
def test_adding_a_container_never_lowers_a_request(pod: dict[str, Any], extra: dict[str, Any]) -> None:
    before = pod_requests(pod)
    pod["spec"]["containers"].append(extra)
    after = pod_requests(pod)
    assert all(after.get(k, 0) >= v for k, v in before.items())
    # ... and raises it by exactly the new container's requests when there are no init
    # containers to dominate
    if not pod["spec"].get("initContainers"):
        for name, milli in alone(extra).items():
            assert after.get(name, 0) == before.get(name, 0) + milli


@given(st.lists(containers(), min_size=1, max_size=5), st.randoms())
def test_container_order_does_not_matter(cs: list[dict[str, Any]], rnd: Any) -> None:
    shuffled = list(cs)
    rnd.shuffle(shuffled)
    assert pod_requests({"spec": {"containers": cs}}) == pod_requests({"spec": {"containers": shuffled}})


@given(st.lists(containers(), min_size=1, max_size=4))
def test_without_init_containers_requests_are_the_container_sum(cs: list[dict[str, Any]]) -> None:
    expected: dict[str, int] = {}
    for c in cs:
        for name, milli in alone(c).items():
            expected[name] = expected.get(name, 0) + milli
    expected["pods"] = 1000
    assert pod_requests({"spec": {"containers": cs}}) == expected


@given(pods(), resource_list)
def test_overhead_adds_exactly(pod: dict[str, Any], overhead: dict[str, Any]) -> None:
    pod["spec"].pop("overhead", None)
    base = pod_requests(pod)
    pod["spec"]["overhead"] = overhead
    with_overhead = pod_requests(pod)
    extra = alone({"resources": {"requests": overhead}})
    for name in set(base) | set(with_overhead):
        assert with_overhead.get(name, 0) == base.get(name, 0) + extra.get(name, 0)


@given(resource_list)
def test_limits_only_is_the_same_as_requests_equal_to_limits(limits: dict[str, Any]) -> None:
    only_limits = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    both = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits, "requests": limits}}]}}
    assert pod_requests(only_limits) == pod_requests(both)


@given(pods())
def test_a_pod_always_fits_free_space_equal_to_its_requests(pod: dict[str, Any]) -> None:
    req = pod_requests(pod)
    assert insufficient_resources(req, req) == []
    for name, milli in req.items():
        if milli > 0:
            short = dict(req, **{name: milli - 1})
            expected = "Too many pods" if name == "pods" else f"Insufficient {name}"
            assert insufficient_resources(req, short) == [expected]


# --- taints and tolerations ----------------------------------------------------------------

keys = st.sampled_from(["a", "b", "nvidia.com/gpu", "node.kubernetes.io/unschedulable"])
values = st.sampled_from(["", "x", "y"])
effects = st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])
taints = st.builds(lambda k, v, e: {"key": k, "value": v, "effect": e}, keys, values, effects)
tolerations = st.one_of(
    st.builds(
        lambda k, v, e: {"key": k, "operator": "Equal", "value": v, "effect": e}, keys, values, effects
    ),
    st.builds(
        lambda k, e: {"key": k, "operator": "Exists", "effect": e}, keys, st.sampled_from(["", "NoSchedule"])
    ),
    st.builds(lambda e: {"operator": "Exists", "effect": e}, st.sampled_from(["", "NoExecute"])),
)


def exact_toleration(taint: dict[str, str]) -> dict[str, str]:
    return {"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": taint["effect"]}


def fits(tols: list[dict[str, Any]], node_taints: list[dict[str, str]]) -> bool:
    pod = {"spec": {"containers": [{"name": "c"}], "tolerations": tols}}
    node = node_static_from_dict(make_node(taints=node_taints))
    return compile_pod_constraints(pod).node_reason(node) is None


@given(taints)
def test_a_toleration_copied_from_a_taint_tolerates_it(taint: dict[str, str]) -> None:
    assert toleration_tolerates_taint(exact_toleration(taint), taint)
    exists = {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
    assert toleration_tolerates_taint(exists, taint)
    assert toleration_tolerates_taint({"operator": "Exists"}, taint)


@given(taints, taints)
def test_equal_tolerations_match_taints_symmetrically(t1: dict[str, str], t2: dict[str, str]) -> None:
    # With every field spelt out, "tol(t1) tolerates t2" is plain equality of the taints,
    # so it holds exactly when "tol(t2) tolerates t1".
    forward = toleration_tolerates_taint(exact_toleration(t1), t2)
    assert forward == toleration_tolerates_taint(exact_toleration(t2), t1)
    assert forward == (t1 == t2)


@given(st.lists(taints, max_size=4))
def test_tolerating_every_taint_fits_and_dropping_one_blocking_toleration_does_not(
    node_taints: list[dict[str, str]],
) -> None:
    tols = [exact_toleration(t) for t in node_taints]
    assert fits(tols, node_taints)
    for i, t in enumerate(node_taints):
        others = tols[:i] + tols[i + 1 :]
        still_tolerated = any(toleration_tolerates_taint(o, t) for o in others)
        blocking = t["effect"] != "PreferNoSchedule"
        # every other taint keeps its own toleration, so only taint i can block
        assert fits(others, node_taints) == (still_tolerated or not blocking)


@given(st.lists(tolerations, max_size=4), st.lists(taints, max_size=4), st.randoms())
def test_order_of_tolerations_does_not_matter(
    tols: list[dict[str, Any]], node_taints: list[dict[str, str]], rnd: Any
) -> None:
    shuffled = list(tols)
    rnd.shuffle(shuffled)
    assert fits(tols, node_taints) == fits(shuffled, node_taints)
    a = compile_pod_constraints({"spec": {"tolerations": tols}})
    b = compile_pod_constraints({"spec": {"tolerations": shuffled}})
    assert a.signature == b.signature


@settings(max_examples=200)
@given(st.lists(tolerations, max_size=4), st.lists(taints, max_size=4))
def test_fit_is_exactly_every_blocking_taint_tolerated(
    tols: list[dict[str, Any]], node_taints: list[dict[str, str]]
) -> None:
    blocking = [t for t in node_taints if t["effect"] in ("NoSchedule", "NoExecute")]
    expected = all(any(toleration_tolerates_taint(o, t) for o in tols) for t in blocking)
    assert fits(tols, node_taints) == expected


# --- signatures ------------------------------------------------------------------------------

label_keys = st.sampled_from(["zone", "gpu", "rack"])
label_values = st.sampled_from(["a", "b", "4", "8"])
requirements = st.one_of(
    st.builds(
        lambda k, op, vs: {"key": k, "operator": op, "values": vs},
        label_keys,
        st.sampled_from(["In", "NotIn"]),
        st.lists(label_values, min_size=1, max_size=2),
    ),
    st.builds(
        lambda k, op: {"key": k, "operator": op}, label_keys, st.sampled_from(["Exists", "DoesNotExist"])
    ),
    st.builds(
        lambda k, op, v: {"key": k, "operator": op, "values": [v]},
        label_keys,
        st.sampled_from(["Gt", "Lt"]),
        st.sampled_from(["4", "6"]),
    ),
)
terms = st.builds(lambda exprs: {"matchExpressions": exprs}, st.lists(requirements, min_size=1, max_size=2))


@st.composite
def constrained_pods(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(st.dictionaries(label_keys, label_values, max_size=2))
    if draw(st.booleans()):
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": draw(st.lists(terms, min_size=1, max_size=2))
                }
            }
        }
    spec["tolerations"] = draw(st.lists(tolerations, max_size=3))
    return {"metadata": {"name": "p"}, "spec": spec}


@st.composite
def nodes(draw: st.DrawFn) -> list[Any]:
    out = []
    for i in range(draw(st.integers(0, 6))):
        node = make_node(
            f"n{i}",
            labels=draw(st.dictionaries(label_keys, label_values, max_size=3)),
            taints=draw(st.lists(taints, max_size=2)),
            unschedulable=draw(st.booleans()),
            ready=draw(st.sampled_from(["True", "True", "False", None])),
        )
        out.append(node_static_from_dict(node))
    return out


def with_irrelevant_changes(pod: dict[str, Any], rnd: Any) -> dict[str, Any]:
    """The same scheduling constraints, written differently: another name and requests,
    shuffled and duplicated tolerations with tolerationSeconds, a preferred affinity."""
    spec = dict(pod["spec"])
    tols = [dict(t, tolerationSeconds=rnd.randint(0, 600)) for t in spec["tolerations"]]
    tols += tols[:1]
    rnd.shuffle(tols)
    spec["tolerations"] = tols
    spec["containers"] = [{"name": "other", "resources": {"requests": {"cpu": str(rnd.randint(1, 8))}}}]
    affinity = dict(spec.get("affinity") or {})
    affinity["nodeAffinity"] = dict(affinity.get("nodeAffinity") or {})
    affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}
    ]
    spec["affinity"] = affinity
    return {"metadata": {"name": "q"}, "spec": spec}


@given(constrained_pods(), nodes(), st.randoms())
def test_equal_signatures_mean_equal_masks(pod: dict[str, Any], ns: list[Any], rnd: Any) -> None:
    a = compile_pod_constraints(pod)
    b = compile_pod_constraints(with_irrelevant_changes(pod, rnd))
    assert a.signature == b.signature
    assert static_feasibility_mask(a, ns).tolist() == static_feasibility_mask(b, ns).tolist()
    assert [a.node_reason(n) for n in ns] == [b.node_reason(n) for n in ns]


@given(constrained_pods(), constrained_pods(), nodes())
def test_different_masks_mean_different_signatures(
    p1: dict[str, Any], p2: dict[str, Any], ns: list[Any]
) -> None:
    a, b = compile_pod_constraints(p1), compile_pod_constraints(p2)
    if static_feasibility_mask(a, ns).tolist() != static_feasibility_mask(b, ns).tolist():
        assert a.signature != b.signature
