"""DRA devices in queue sums: ``deviceclass/<class>`` as a resource, as Volcano v1.15 names it.

Volcano's capacity plugin counts the devices a pod's ResourceClaims ask for, per DeviceClass,
against a queue's ``capability`` entries named ``deviceclass/<class>`` (and shows them in the
queue status' ``allocated``), so a queue's GPU limit holds whether its GPUs come as
``nvidia.com/gpu`` or as claims. Here the count is one more scalar dimension of a task's
request, so every queue plugin (capacity, proportion, drf), admission, the queue status and the
eviction actions count devices the way they count any extended resource; the cluster's total
(the denominator of proportion and drf, and the real capability of a queue) holds the devices
each class selects in the published ResourceSlices.

What a pod counts, per claim (the pod's own claims, made from templates, and claims it shares
by name): every ``exactly`` request in ``ExactCount`` mode counts its ``count``; a
``firstAvailable`` request counts the fewest devices any of its subrequests asks for when they
all name one class (Volcano skips it); ``allocationMode: All`` and ``adminAccess`` requests
count nothing (the number is not known before allocation; an admin never holds a device). A
claim shared by name counts for every pod of the queue that uses it (Volcano counts it once per
queue once allocated): a shared claim never lets a queue exceed its limit, but may hold it
below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..filters.dra import ClaimSpec, DeviceClassInfo, DeviceInfo, DraObjects, PodClaims, ref_spec
from ..filters.nodes import NodeStatic
from ..model.resources import Res

DEVICE_CLASS_PREFIX = "deviceclass/"


def device_dimension(device_class: str) -> str:
    """The resource name a queue's limits use for a DeviceClass's devices."""
    return DEVICE_CLASS_PREFIX + device_class


def claim_devices(spec: ClaimSpec) -> dict[str, int]:
    """Devices per class one claim asks for (see the module docstring)."""
    out: dict[str, int] = {}
    if spec.bad is not None:
        return out
    for r in spec.requests:
        alts = [a for a in r.alternatives if a.mode == "ExactCount" and not a.admin_access]
        if not alts or len(alts) != len(r.alternatives):
            continue
        classes = {a.device_class for a in alts}
        if len(classes) != 1:
            continue
        (cls,) = classes
        out[cls] = out.get(cls, 0) + min(a.count for a in alts)
    return out


def pod_devices(claims: PodClaims, objects: DraObjects) -> dict[str, int]:
    """Devices per class a pod's claims ask for, each claim's spec as :func:`ref_spec` finds it."""
    out: dict[str, int] = {}
    for ref in claims.refs:
        if ref.no_claim:
            continue
        spec = ref_spec(claims, ref, objects)
        if spec is None and ref.template is not None and ref.claim_name is not None:
            # The template is gone, the claim made from it is not.
            c = objects.claims.get(claims.key(ref))
            spec = c.spec if c is not None else None
        if spec is None:
            continue
        for cls, n in claim_devices(spec).items():
            out[cls] = out.get(cls, 0) + n
    return out


def devices_res(counts: Mapping[str, int]) -> Res:
    """Device counts as a request (scalars in milli-units, as every extended resource)."""
    r = Res()
    for cls, n in sorted(counts.items()):
        if n > 0:
            r.add_scalar(device_dimension(cls), n * 1000)
    return r


def _in_class(objects: DraObjects, cls: DeviceClassInfo, device: DeviceInfo) -> bool:
    if not device.selectable:
        return False
    return all(objects.match(expr, device) is True for expr in cls.selectors)


def class_totals(objects: DraObjects, ready: Sequence[NodeStatic]) -> dict[str, int]:
    """Devices each DeviceClass selects among the published devices: those of node-local slices
    of ``ready`` nodes, and every device of slices not bound to one node; a pool counts at its
    newest generation only. A device two classes select counts in both (each class is its own
    dimension, as in Volcano)."""
    names = {n.name for n in ready}
    classes = [c for c in objects.classes.values() if c.bad is None]
    if not classes:
        return {}
    out: dict[str, int] = {}
    newest: dict[tuple[str, str], int] = {}
    live = [s for s in objects.slices.values() if s.bad is None and not s.ignored]
    for s in live:
        key = (s.driver, s.pool)
        newest[key] = max(newest.get(key, s.generation), s.generation)
    for s in sorted(live, key=lambda s: s.name):
        if s.generation != newest[(s.driver, s.pool)]:
            continue
        if s.node_name is not None and s.node_name not in names:
            continue
        for d in s.devices:
            for c in classes:
                if _in_class(objects, c, d):
                    out[c.name] = out.get(c.name, 0) + 1
    return out


def used_devices(objects: DraObjects) -> dict[str, int]:
    """Devices per class the allocated claims hold (adminAccess results hold none), each
    result counted under the class of the request (or subrequest) it answers."""
    out: dict[str, int] = {}
    for c in objects.claims.values():
        if c.allocation is None:
            continue
        by_request = dict(c.spec.classes)
        for r in c.allocation.results:
            if r.admin_access:
                continue
            cls = by_request.get(r.request)
            if cls is not None:
                out[cls] = out.get(cls, 0) + 1
    return out
