"""Time-bounded topology relaxation (Slurm's ``--switches=N@T``), shared by webhook and scheduler.

The annotation ``hyperplace.io/relax-topology: "1@10m,2@30m"`` on a Job or PodGroup means: tier
limit 1 for the first 10 minutes, tier 2 until 30 minutes, then the job's own limit. Steps must
ascend in tier and in time; durations use Go's ``time.ParseDuration`` syntax. The job's Volcano
fields (``highestTierAllowed``/``highestTierName``) stay the hard ceiling: a step never allows
more than they do. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .times import parse_go_duration

RELAX_TOPOLOGY_ANNOTATION = "hyperplace.io/relax-topology"
RELAX_FIELD = f"metadata.annotations[{RELAX_TOPOLOGY_ANNOTATION}]"


class RelaxError(ValueError):
    """A malformed relaxation annotation; the message names the field."""


@dataclass(frozen=True)
class RelaxStep:
    """Tier limit ``tier`` until ``until`` seconds after the job started waiting."""

    tier: int
    until: float
    text: str  # the duration as written, for messages


def parse_relax(text: str) -> list[RelaxStep]:
    """Parse ``"1@10m,2@30m"`` into steps; :class:`RelaxError` naming the field when malformed.

    Each step is ``<tier>@<duration>``: tier a positive integer, duration a positive Go duration.
    Tiers and durations must both strictly ascend from one step to the next.
    """
    steps: list[RelaxStep] = []
    items = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in items):
        raise RelaxError(f'{RELAX_FIELD}: empty step in "{text}"; expected e.g. "1@10m,2@30m"')
    for item in items:
        tier_s, at, dur_s = item.partition("@")
        if not at:
            raise RelaxError(f'{RELAX_FIELD}: step "{item}" must be <tier>@<duration>, e.g. "1@10m"')
        if not tier_s.strip().isdigit() or int(tier_s) < 1:
            raise RelaxError(f'{RELAX_FIELD}: step "{item}": tier must be a positive integer')
        try:
            until = parse_go_duration(dur_s)
        except ValueError:
            raise RelaxError(
                f'{RELAX_FIELD}: step "{item}": "{dur_s.strip()}" is not a Go duration (e.g. 90s, 10m, 1h30m)'
            ) from None
        if until <= 0:
            raise RelaxError(f'{RELAX_FIELD}: step "{item}": duration must be positive')
        step = RelaxStep(int(tier_s), until, dur_s.strip())
        if steps and (step.tier <= steps[-1].tier or step.until <= steps[-1].until):
            raise RelaxError(
                f'{RELAX_FIELD}: step "{item}" must come after "{steps[-1].tier}@{steps[-1].text}" '
                "with a higher tier and a longer duration (steps ascend in tier and time)"
            )
        steps.append(step)
    return steps


def relax_steps(annotations: Mapping[str, str] | None) -> list[RelaxStep] | None:
    """The steps of an object's annotation, None when absent or malformed (the webhook refuses
    malformed values; an object that skipped it is scheduled by its own limit)."""
    text = (annotations or {}).get(RELAX_TOPOLOGY_ANNOTATION)
    if text is None:
        return None
    try:
        return parse_relax(text)
    except RelaxError:
        return None


@dataclass(frozen=True)
class RelaxState:
    """Where a job stands in its relaxation at one instant."""

    tier: int | None  # the tier limit in force; None once every step has passed (the job's own)
    next_deadline: float | None  # seconds since start when the limit next widens, None if final
    next_tier: int | None  # the limit after that deadline (None: the job's own limit)


def relax_state(steps: list[RelaxStep], elapsed: float, ceiling: int | None) -> RelaxState:
    """The relaxed tier limit ``elapsed`` seconds after the start, capped by ``ceiling``
    (the job's own hard limit, None for none). Step ``i`` holds while ``elapsed < until_i``."""
    for i, step in enumerate(steps):
        if elapsed < step.until:
            tier = step.tier if ceiling is None else min(step.tier, ceiling)
            nxt = steps[i + 1].tier if i + 1 < len(steps) else None
            if nxt is not None and ceiling is not None:
                nxt = min(nxt, ceiling)
            return RelaxState(tier, step.until, nxt)
    return RelaxState(None, None, None)
