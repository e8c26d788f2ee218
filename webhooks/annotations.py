"""hyperplace's own scheduling annotations on Jobs and PodGroups, checked at admission.

``hyperplace.io/relax-topology`` must parse (:func:`hyperplace.api.relax.parse_relax`: steps
ascending in tier and time, Go durations); ``hyperplace.io/exclusive-topology`` must be
``"true"``/``"false"``, and true only with a hard tier limit (:mod:`hyperplace.api.exclusive`). The scheduler ignores a malformed value it meets
anyway (an object admitted before this webhook), so refusing here is what tells the user.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperplace.api.exclusive import exclusive_problems
from hyperplace.api.relax import RELAX_TOPOLOGY_ANNOTATION, RelaxError, parse_relax

from .context import as_dict


def annotation_problems(obj: Mapping[str, Any]) -> list[str]:
    """Refusal messages (each starting with the field path) for our annotations on ``obj``."""
    annotations = as_dict(as_dict(obj.get("metadata")).get("annotations"))
    out: list[str] = []
    relax = annotations.get(RELAX_TOPOLOGY_ANNOTATION)
    if relax is not None:
        try:
            parse_relax(str(relax))
        except RelaxError as err:
            out.append(str(err))
    spec = as_dict(obj.get("spec"))
    out += exclusive_problems(annotations, as_dict(spec.get("networkTopology")) or None)
    return out
