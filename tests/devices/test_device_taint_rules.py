"""An administrator takes a faulty GPU out of service with a DeviceTaintRule
(``resource.k8s.io/v1``, on by default since Kubernetes 1.37): no new claim gets it, unless the
claim's request tolerates the taint, as kube-scheduler's slice tracker and allocator have it."""

from __future__ import annotations

from typing import Any

from scheduler_plugin.cache.storage import StorageState
from scheduler_plugin.filters.dra import apply_taint_rules, parse_slice, parse_taint_rule
from tests.scheduler.builders import node, pod
from tests.scheduler.builders import schedule_verified as schedule

from .builders import DRIVER, claim_spec, device_class, dra_listing, gpu_slice, template, template_claims


def rule(
    name: str,
    *,
    driver: str | None = DRIVER,
    pool: str | None = None,
    device: str | None = None,
    effect: str = "NoSchedule",
    selector: bool = True,
) -> dict[str, Any]:
    sel: dict[str, Any] = {}
    if driver is not None:
        sel["driver"] = driver
    if pool is not None:
        sel["pool"] = pool
    if device is not None:
        sel["device"] = device
    spec: dict[str, Any] = {"taint": {"key": "example.com/faulty", "value": "ecc", "effect": effect}}
    if selector:
        spec["deviceSelector"] = sel
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": spec,
    }


def tainted(slice_obj: dict[str, Any], *rules: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    s = parse_slice(slice_obj)
    out = apply_taint_rules({s.name: s}, {r["metadata"]["name"]: parse_taint_rule(r) for r in rules})
    return {d.name: d.taints for d in out[s.name].devices}


def test_a_rule_taints_the_devices_its_selector_picks() -> None:
    one = gpu_slice("n0", 2)
    assert tainted(one, rule("gpu-1", pool="n0", device="gpu-1")) == {
        "gpu-0": (),
        "gpu-1": (("example.com/faulty", "ecc", "NoSchedule"),),
    }
    assert all(tainted(one, rule("whole-driver")).values())  # no pool, no device: all of them
    assert not any(tainted(one, rule("other-pool", pool="n9")).values())
    assert not any(tainted(one, rule("no-selector", selector=False)).values())  # picks none
    assert not any(tainted(one, rule("only-noted", effect="None")).values())  # no scheduling effect


def gpu_pod(name: str, tolerate: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    spec = claim_spec(1)
    if tolerate:
        spec["devices"]["requests"][0]["exactly"]["tolerations"] = [
            {"key": "example.com/faulty", "operator": "Exists", "effect": "NoSchedule"}
        ]
    p = pod(name, None, cpu=1)
    return p, [template(f"{name}-t", spec), *template_claims([p], f"{name}-t", spec)]


def test_a_tainted_gpu_is_not_allocated_and_the_pod_goes_to_a_healthy_one() -> None:
    nodes = [node("n0", cpu=8), node("n1", cpu=8)]
    p, objs = gpu_pod("trainer")
    listing = dra_listing(
        device_class(), gpu_slice("n0", 1), gpu_slice("n1", 1), rule("bad-n0", pool="n0"), *objs
    )
    result = schedule(nodes, [p], listing)
    assert result.bindings == {"default/trainer": "n1"}


def test_with_every_gpu_tainted_the_pod_waits_unless_its_request_tolerates_the_taint() -> None:
    nodes = [node("n0", cpu=8)]
    p, objs = gpu_pod("trainer")
    listing = dra_listing(device_class(), gpu_slice("n0", 1), rule("all"), *objs)
    result = schedule(nodes, [p], listing)
    assert result.bindings == {}
    assert "cannot allocate all claims" in result.unschedulable["default/trainer"]
    q, qobjs = gpu_pod("burn-in", tolerate=True)
    result = schedule(nodes, [q], dra_listing(device_class(), gpu_slice("n0", 1), rule("all"), *qobjs))
    assert result.bindings == {"default/burn-in": "n0"}


def test_a_rule_removed_gives_the_device_back() -> None:
    st = StorageState()
    st.replace(dra_listing(device_class(), gpu_slice("n0", 1), rule("bad")))
    assert st.dra_view().slices[f"n0-{DRIVER}"].devices[0].taints
    st.device_taint_rules.remove("bad")
    assert not st.dra_view().slices[f"n0-{DRIVER}"].devices[0].taints
