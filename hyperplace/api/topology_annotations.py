"""``networkTopology`` asked for by annotations rather than by the spec (Volcano >= 1.13).

Volcano's podgroup controller reads ``volcano.sh/network-topology-mode`` (``hard`` unless
``soft``) and ``volcano.sh/network-topology-highest-tier`` (a tier number) from a pod of no
PodGroup; the PodGroup controller here reads them from the pod, else its owner. A training
operator's PodGroup (PyTorchJob, MPIJob, ...) carries its job's annotations but the operator's
Volcano client knows no ``networkTopology`` field and rewrites the PodGroup without one on every
reconcile, so for those PodGroups the annotations stand for the field wherever the PodGroup is
read (:class:`hyperplace.api.PodGroup`), instead of being written into a spec the operator would
erase. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

TOPOLOGY_MODE_ANNOTATION: Final = "volcano.sh/network-topology-mode"
TOPOLOGY_TIER_ANNOTATION: Final = "volcano.sh/network-topology-highest-tier"
# The Kubeflow training operator's job kinds (it makes their PodGroups itself).
TRAINING_KINDS: Final = frozenset(
    {"PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "MXJob", "JAXJob"}
)


def topology_from_annotations(
    annotations: Mapping[str, Any],
) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
    """Volcano's ``parseNetworkTopologyFromPod``: the ``networkTopology`` the annotations ask for
    (None when neither is set) and ``(annotation, message)`` for each value that could not be used
    (mode falls back to ``hard``, a bad tier to no tier)."""
    if TOPOLOGY_MODE_ANNOTATION not in annotations and TOPOLOGY_TIER_ANNOTATION not in annotations:
        return None, []
    problems: list[tuple[str, str]] = []
    nt: dict[str, Any] = {"mode": "hard"}
    if TOPOLOGY_MODE_ANNOTATION in annotations:
        raw = str(annotations[TOPOLOGY_MODE_ANNOTATION])
        mode = raw.strip().lower()
        if mode in ("hard", "soft"):
            nt["mode"] = mode
        else:
            problems.append(
                (
                    TOPOLOGY_MODE_ANNOTATION,
                    f'annotation {TOPOLOGY_MODE_ANNOTATION}={raw!r} is neither "hard" nor "soft"; mode hard is used',
                )
            )
    if TOPOLOGY_TIER_ANNOTATION in annotations:
        raw = str(annotations[TOPOLOGY_TIER_ANNOTATION])
        try:
            tier = int(raw.strip())
        except ValueError:
            tier = -1
        if tier >= 0:
            nt["highestTierAllowed"] = tier
        else:
            problems.append(
                (
                    TOPOLOGY_TIER_ANNOTATION,
                    f"annotation {TOPOLOGY_TIER_ANNOTATION}={raw!r} is not a tier (a non-negative integer); "
                    "no tier limit is set",
                )
            )
    return nt, problems


def operator_podgroup_topology(pg: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
    """For a training operator's PodGroup without ``networkTopology``: what its annotations ask
    for (see the module docstring); (None, []) for any other PodGroup."""
    spec = pg.get("spec")
    if isinstance(spec, Mapping) and spec.get("networkTopology"):
        return None, []
    meta = pg.get("metadata")
    if not isinstance(meta, Mapping):
        return None, []
    ref = next(
        (r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping) and r.get("controller")), None
    )
    if (
        ref is None
        or ref.get("kind") not in TRAINING_KINDS
        or not str(ref.get("apiVersion", "")).startswith("kubeflow.org/")
    ):
        return None, []
    ann = meta.get("annotations")
    return topology_from_annotations(ann if isinstance(ann, Mapping) else {})
