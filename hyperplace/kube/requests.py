"""A pod's effective resource requests, as kube-scheduler and the quota evaluator count them.

One computation for every component: the scheduler charges nodes and queues with it, the Job
controller sums it into a PodGroup's ``minResources``, and the simulator shows node occupancy
with it, so the three never disagree about what a pod takes (sidecars included).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .objects import namespaced_key
from .quantity import QuantityError, milli_value

PODS = "pods"
# Pod-level resources (spec.resources, KEP-2837) override the container sum for these only.
_POD_LEVEL_RESOURCES = ("cpu", "memory")


class ResourceError(ValueError):
    """A quantity the API server would refuse; the message names the object and the field."""


def resource_list(owner: str, path: str, values: Any) -> dict[str, int]:
    """A ResourceList (``owner``'s field ``path``) as milli-units; an invalid or negative
    quantity raises :class:`ResourceError` naming ``owner`` and the field."""
    return _Reader(owner, False).resource_list(path, values)


class _Reader:
    """Reads ResourceLists of one pod, raising :class:`ResourceError` or, with ``skip``,
    leaving out what does not parse (a controller must not stop on one bad object)."""

    def __init__(self, owner: str, skip: bool) -> None:
        self.owner, self.skip = owner, skip

    def resource_list(self, path: str, values: Any) -> dict[str, int]:
        """A ResourceList as milli-units; invalid or negative quantities are refused."""
        if values is None:
            return {}
        if not isinstance(values, Mapping):
            if self.skip:
                return {}
            raise ResourceError(f"{self.owner}: {path}: must be a map of resource name to quantity")
        out: dict[str, int] = {}
        for name, q in values.items():
            try:
                milli = milli_value(q)
            except QuantityError as exc:
                if self.skip:
                    continue
                raise ResourceError(f"{self.owner}: {path}.{name}: {exc}") from None
            if milli < 0:
                # The API server refuses negative requests; a negative value here would let a
                # pod "free" capacity on the node.
                if self.skip:
                    continue
                raise ResourceError(f"{self.owner}: {path}.{name}: must be greater than or equal to 0")
            out[str(name)] = milli
        return out

    def effective(self, path: str, resources: Any) -> dict[str, int]:
        """requests, with each limits-only resource defaulted to its limit (API defaulting)."""
        resources = resources or {}
        if not isinstance(resources, Mapping):
            if self.skip:
                return {}
            raise ResourceError(f"{self.owner}: {path}: must be an object")
        requests = self.resource_list(f"{path}.requests", resources.get("requests"))
        for name, milli in self.resource_list(f"{path}.limits", resources.get("limits")).items():
            requests.setdefault(name, milli)
        return requests


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max_into(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def pod_requests(pod: Mapping[str, Any], *, skip_invalid: bool = False) -> dict[str, int]:
    """The pod's effective requests in milli-units, as kube-scheduler computes them.

    ``max(sum(containers) + sum(sidecars), max over init containers)`` per resource, where a
    regular init container runs next to the sidecars started before it, then pod-level
    ``spec.resources`` requests replace cpu/memory, then ``spec.overhead`` is added. The
    result always holds ``"pods": 1000`` (one pod slot). A quantity the API server would
    refuse raises :class:`ResourceError` naming the pod and field, or is left out with
    ``skip_invalid``. ``pod`` may be a pod template (``{"spec": ...}``).
    """
    read = _Reader(f"pod {namespaced_key(pod)}", skip_invalid)
    spec = pod.get("spec") or {}
    reqs: dict[str, int] = {}
    for i, c in enumerate(spec.get("containers") or []):
        _add(reqs, read.effective(f"spec.containers[{i}].resources", c.get("resources")))

    # k8s.io/component-helpers/resource.PodRequests: sidecars (restartPolicy Always) run
    # for the pod's whole life, so they add to the sum, and every later init container
    # runs alongside the sidecars started before it.
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(spec.get("initContainers") or []):
        r = read.effective(f"spec.initContainers[{i}].resources", c.get("resources"))
        if c.get("restartPolicy") == "Always":
            _add(reqs, r)
            _add(sidecars, r)
            step = dict(sidecars)
        else:
            step = dict(r)
            _add(step, sidecars)
        _max_into(init_peak, step)
    _max_into(reqs, init_peak)

    pod_level = read.effective("spec.resources", spec.get("resources"))
    for name in _POD_LEVEL_RESOURCES:
        if name in pod_level:
            reqs[name] = pod_level[name]

    _add(reqs, read.resource_list("spec.overhead", spec.get("overhead")))
    reqs[PODS] = 1000
    return reqs
