"""kube-scheduler's NodeResourcesFit filter, in its words.

Whether pods fit by their requests is decided in bulk by the per-shape fit counts
(``model.snapshot.pods_fitting``, kept by the session's allocation state); this module says why
a node is short, as kube-scheduler reports it."""

from __future__ import annotations

from collections.abc import Mapping

from hyperplace.kube.requests import PODS

REASON_TOO_MANY_PODS = "Too many pods"
# Resources kube-scheduler always checks first, in this order; the rest follow sorted.
_FIRST_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def insufficient_resources(requests: Mapping[str, int], free: Mapping[str, int]) -> list[str]:
    """NodeResourcesFit reasons: ``"Too many pods"``, ``"Insufficient cpu"``, ...

    ``free`` is allocatable minus what is already requested on the node, in milli-units
    (``free["pods"]`` is the number of free pod slots x 1000). A zero request never fails,
    so a node without a GPU still fits a pod that asks for none. Order: pods, cpu, memory,
    ephemeral-storage, then the other resources sorted by name.
    """
    reasons: list[str] = []
    pods = requests.get(PODS, 0)
    if pods > 0 and pods > free.get(PODS, 0):
        reasons.append(REASON_TOO_MANY_PODS)
    others = sorted(r for r in requests if r != PODS and r not in _FIRST_RESOURCES)
    for name in (*_FIRST_RESOURCES, *others):
        want = requests.get(name, 0)
        if want > 0 and want > free.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons
