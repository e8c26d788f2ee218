"""Exclusive topology domains (Slurm's ``--exclusive=topo``), shared by webhook and scheduler.

The annotation ``hyperplace.io/exclusive-topology: "true"`` on a Volcano Job or PodGroup asks
for whole HyperNodes at the job's hard tier limit: the job is placed only in a HyperNode of that
tier where no pod of another job runs, and while any of its pods runs no pod of another job is
placed there. Pods that belong to no PodGroup (DaemonSets, system pods) do not count. Pure
functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXCLUSIVE_TOPOLOGY_ANNOTATION = "hyperplace.io/exclusive-topology"
EXCLUSIVE_FIELD = f"metadata.annotations[{EXCLUSIVE_TOPOLOGY_ANNOTATION}]"
# Set by the PodGroup controller on an exclusive PodGroup whose domain tier is the one label
# discovery builds from this node label key (one HyperNode per value of the label): its
# exclusive domains are then exactly the label's domains, so required pod affinity and
# anti-affinity of the LeaderWorkerSet exclusive shape with that topologyKey hold by placement.
EXCLUSIVE_LABEL_KEY_ANNOTATION = "hyperplace.io/exclusive-topology-key"


class ExclusiveError(ValueError):
    """A malformed or unusable exclusive annotation; the message names the field."""


def parse_exclusive(value: object) -> bool:
    """``"true"`` or ``"false"`` (as Kubernetes writes booleans in annotations)."""
    s = str(value)
    if s == "true":
        return True
    if s == "false":
        return False
    raise ExclusiveError(f'{EXCLUSIVE_FIELD}: must be "true" or "false", got {s!r}')


def exclusive_problems(
    annotations: Mapping[str, Any], network_topology: Mapping[str, Any] | None
) -> list[str]:
    """Refusal messages for the annotation on an object whose (job-level) ``networkTopology``
    is ``network_topology``: an exclusive job needs a hard tier limit to know its domain."""
    if EXCLUSIVE_TOPOLOGY_ANNOTATION not in annotations:
        return []
    try:
        on = parse_exclusive(annotations[EXCLUSIVE_TOPOLOGY_ANNOTATION])
    except ExclusiveError as err:
        return [str(err)]
    nt = network_topology or {}
    if on and not (
        nt.get("mode", "hard") == "hard" and (nt.get("highestTierAllowed") or nt.get("highestTierName"))
    ):
        return [
            f"{EXCLUSIVE_FIELD}: an exclusive job needs spec.networkTopology with mode hard and "
            "highestTierAllowed (or highestTierName): that tier is the domain it takes whole"
        ]
    return []


def is_exclusive(annotations: Mapping[str, Any] | None) -> bool:
    """Whether the annotation asks for exclusive domains (a malformed value: no)."""
    try:
        return parse_exclusive((annotations or {}).get(EXCLUSIVE_TOPOLOGY_ANNOTATION, "false"))
    except ExclusiveError:
        return False


def exclusive_label_key(annotations: Mapping[str, Any] | None) -> str | None:
    """The node label key whose domains an exclusive PodGroup's domains are (None: not
    exclusive, or no such key recorded)."""
    if not is_exclusive(annotations):
        return None
    key = (annotations or {}).get(EXCLUSIVE_LABEL_KEY_ANNOTATION)
    return str(key) if key else None


__all__ = [
    "EXCLUSIVE_FIELD",
    "EXCLUSIVE_LABEL_KEY_ANNOTATION",
    "EXCLUSIVE_TOPOLOGY_ANNOTATION",
    "ExclusiveError",
    "exclusive_label_key",
    "exclusive_problems",
    "is_exclusive",
    "parse_exclusive",
]
