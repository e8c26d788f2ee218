"""What admission may know besides the object under review, and what it answers.

Pure data: no I/O, no aiohttp, so the simulator and ``hyperplace validate`` share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperplace.api import HyperNode, Job, Queue


@dataclass(frozen=True)
class AdmissionContext:
    """Caches the webhooks consult; every field is optional.

    * ``hypernodes``: name -> HyperNode, the cluster's HyperNodes *before* this request.
      With it, a HyperNode change is checked against the tree (cycles, second parents,
      tier order) and a job's ``highestTierName`` against the tier names in use.
    * ``known_tier_names``: tierName -> tier known without HyperNode objects (for
      example from a discovery configuration); merged with those of ``hypernodes``.
    * ``jobs``: ``"namespace/name"`` -> Job, for the pod webhook's partition size.
    * ``queues``: name -> Queue, for the Job webhook's queue checks (missing, not Open, not a
      leaf), as Volcano's job validation makes them.
    * ``regex_verdicts``: pattern -> Go's error (or None when valid), judged beforehand
      (the server judges a request's patterns in a worker process, within a budget, so
      compiling never blocks it); patterns not listed are compiled in-process.
    * ``command_access``, ``command_key``, ``now``, ``status_writers``: see
      ``webhooks.command``.

    Without a cache, the checks that need it are skipped, never guessed.
    """

    hypernodes: Mapping[str, HyperNode] | None = None
    known_tier_names: Mapping[str, int] | None = None
    jobs: Mapping[str, Job] | None = None
    queues: Mapping[str, Queue] | None = None
    regex_verdicts: Mapping[str, str | None] | None = None
    # Queue Commands: the SubjectAccessReview's answer for this request, (allowed, reason),
    # asked by the server beforehand; None when authorization is off. The key that marks an
    # admitted Command and the time to stamp (hyperplace.pki.commandmark).
    command_access: tuple[bool, str] | None = None
    command_key: bytes | None = None
    now: float | None = None
    # PodGroup status: the users allowed to change it (None: anyone, Volcano's way).
    status_writers: frozenset[str] | None = None

    def tier_names(self) -> dict[str, int] | None:
        """tierName -> tier over everything known, or None when nothing is known.

        An empty dict (HyperNodes known, none naming its tier) still means "known":
        a job naming a tier is then naming one that does not exist.
        """
        if self.hypernodes is None and self.known_tier_names is None:
            return None
        out: dict[str, int] = dict(self.known_tier_names or {})
        # Sorted by name so that, when two tiers share a tierName, the winner does not
        # depend on dict order (Volcano keeps the last one it sees, in no fixed order).
        for name in sorted(self.hypernodes or {}):
            hn = (self.hypernodes or {})[name]
            if hn.spec.tier_name:
                out[hn.spec.tier_name] = hn.spec.tier
        return out


@dataclass
class Verdict:
    """What one webhook says: refusals (each naming its field) and warnings."""

    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        """Allowed when nothing was refused."""
        return not self.messages


def as_int(value: Any) -> int | None:
    """``value`` if it is a JSON integer (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty dict (the schema reports the type)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty list (the schema reports the type)."""
    return value if isinstance(value, list) else []
