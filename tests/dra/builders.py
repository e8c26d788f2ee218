"""Small DRA worlds in wire form for the core's stories: nodes, DeviceClasses, ResourceSlices,
claim specs, and the :class:`DraObjects` view made of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scheduler_plugin.filters.dra import (
    ClaimSpec,
    DeviceInfo,
    DraObjects,
    parse_claim,
    parse_claim_spec,
    parse_device_class,
    parse_slice,
)
from scheduler_plugin.filters.nodes import NodeStatic

DRIVER = "gpu.example.com"


def node(name: str, **labels: str) -> NodeStatic:
    return NodeStatic(name, labels, (), False, True, {})


def device_class(name: str = "gpu", *selectors: str, config: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if config:
        spec["config"] = config
    return {"metadata": {"name": name}, "spec": spec}


def dev(
    name: str, attrs: Mapping[str, Any] | None = None, caps: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A device; attribute values are typed by their Python type (a str starting with 'v' is a
    version)."""
    wire: dict[str, Any] = {}
    for k, v in (attrs or {}).items():
        if isinstance(v, bool):
            wire[k] = {"bool": v}
        elif isinstance(v, int):
            wire[k] = {"int": v}
        elif isinstance(v, str) and v.startswith("v"):
            wire[k] = {"version": v[1:]}
        else:
            wire[k] = {"string": v}
    out: dict[str, Any] = {"name": name, "attributes": wire}
    if caps:
        out["capacity"] = {k: {"value": q} for k, q in caps.items()}
    return out


def gpus(n: int, **attrs: Any) -> list[dict[str, Any]]:
    return [dev(f"gpu-{i}", {"index": i, **attrs}) for i in range(n)]


def rslice(
    name: str,
    devices: list[dict[str, Any]],
    *,
    node_name: str | None = None,
    selector: Mapping[str, Any] | None = None,
    all_nodes: bool = False,
    pool: str | None = None,
    generation: int = 1,
    count: int = 1,
    driver: str = DRIVER,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node_name or name, "generation": generation, "resourceSliceCount": count},
        "devices": devices,
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    if selector is not None:
        spec["nodeSelector"] = selector
    if all_nodes:
        spec["allNodes"] = True
    return {"metadata": {"name": name}, "spec": spec}


def labels_selector(key: str, *values: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]
    }


def exactly(
    name: str = "gpus",
    count: int = 1,
    cls: str = "gpu",
    *selectors: str,
    mode: str = "ExactCount",
    admin: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin:
        body["adminAccess"] = True
    return {"name": name, "exactly": body}


def spec(
    *requests: dict[str, Any], constraints: list[Any] | None = None, config: list[Any] | None = None
) -> ClaimSpec:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return parse_claim_spec({"devices": devices}, "resourceclaim default/c")


def world(
    classes: Iterable[Mapping[str, Any]] = (),
    slices: Iterable[Mapping[str, Any]] = (),
    claims: Iterable[Mapping[str, Any]] = (),
) -> DraObjects:
    cs = [parse_device_class(c) for c in classes]
    ss = [parse_slice(s) for s in slices]
    cl = [parse_claim(c) for c in claims]
    return DraObjects(
        classes={c.name: c for c in cs}, slices={s.name: s for s in ss}, claims={c.key: c for c in cl}
    )


def device(
    driver: str = DRIVER, attrs: Mapping[str, Any] | None = None, caps: Mapping[str, str] | None = None
) -> DeviceInfo:
    """A parsed device (through a slice, so names are qualified as the parser does)."""
    s = parse_slice(rslice("s", [dev("d", attrs, caps)], node_name="n", driver=driver))
    assert s.bad is None, s.bad
    return s.devices[0]
